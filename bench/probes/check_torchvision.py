"""Check millipyde's colour ops against torchvision v2 itself (where torch is installed).

CI has no torchvision: its tests compare with NumPy transcriptions (tests/reference_aug.py).
This runs the real functions on astronaut/chelsea/coffee (RGB and RGBA, alpha untouched) and
prints, per op and factor, the largest difference and the share of values that differ.

    python -m bench.probes.check_torchvision
"""

from __future__ import annotations

import json

import numpy as np

import millipyde as mp

CALLS = {
    "adjust_contrast": [0.0, 0.6, 1.7],
    "adjust_saturation": [0.0, 0.5, 2.3],
    "adjust_hue": [-0.5, -0.12, 0.3],
}


def main() -> int:
    try:
        import torch
        from torchvision.transforms.v2 import functional as F
    except ImportError:
        print("torchvision is not installed: nothing to check")
        return 0
    import skimage.data

    rows = []
    for name in ("astronaut", "chelsea", "coffee"):
        rgb = np.ascontiguousarray(getattr(skimage.data, name)())
        rgba = np.dstack([rgb, np.full(rgb.shape[:2], 200, np.uint8)])
        for op, values in CALLS.items():
            for v in values:
                for img in (rgb, rgba):
                    g = mp.gpuimage(img)
                    getattr(g, op)(v)
                    ours = np.asarray(g)
                    t = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)
                    theirs = getattr(F, op)(t, v).permute(1, 2, 0).numpy()
                    d = np.abs(ours[..., :3].astype(int) - theirs.astype(int))
                    alpha_kept = img.shape[2] == 3 or np.array_equal(ours[..., 3], img[..., 3])
                    rows.append({"photo": name, "op": op, "value": v, "channels": img.shape[2],
                                 "max_diff": int(d.max()), "share_diff": float((d > 0).mean()),
                                 "alpha_untouched": bool(alpha_kept)})
    print(json.dumps(rows, indent=1))
    worst = max(r["max_diff"] for r in rows)
    print(f"largest difference: {worst} (the issue asks <= 1)")
    return 0 if worst <= 1 and all(r["alpha_untouched"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
