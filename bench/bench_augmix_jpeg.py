"""AugMix and the JPEG round trip per output: their cost beside a reference in the same run.

    python3 bench/bench_augmix_jpeg.py [--outputs 24] [--side 224] [--json out.json]

On the active backend (``MILLIPYDE_BACKEND``), over ``side`` x ``side`` crops of the six
scikit-image photographs of bench_recipes: each row runs its ``outputs`` twice and times the
second pass (the first compiles the kernels the outputs draw; its CPU time is printed too):

- ``AugMix()`` (severity 3, width 3, depth 1-3) per output, beside ``RandAugment(2, 9)`` per
  output (method calls, no batch: AugMix runs per output) and one of its chains' worth of
  work: CPU seconds (``time.process_time``: every thread of this process) and wall seconds per
  output;
- ``jpeg(75)`` per output beside Pillow's encode + decode of the same image at quality 75 (its
  libjpeg-turbo, one thread).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import millipyde as mp  # noqa: E402
from bench.bench_recipes import _photos  # noqa: E402


def _crops(side: int) -> list[np.ndarray]:
    out = []
    for p in _photos():
        out.append(np.ascontiguousarray(p[:side, :side]))
    return out


def _per_output(imgs: list[np.ndarray], run, outputs: int) -> tuple[float, float, float]:
    """CPU and wall seconds per output of the outputs' second pass (the first compiles what
    they draw), and the first pass's CPU seconds per output."""
    c0 = time.process_time()
    for k in range(outputs):
        run(imgs[k % len(imgs)], k)
    first = (time.process_time() - c0) / outputs
    c0, t0 = time.process_time(), time.perf_counter()
    for k in range(outputs):
        run(imgs[k % len(imgs)], k)
    return ((time.process_time() - c0) / outputs, (time.perf_counter() - t0) / outputs, first)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outputs", type=int, default=24)
    ap.add_argument("--side", type=int, default=224)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    imgs = _crops(args.side)
    augmix, randaug = mp.AugMix(), mp.RandAugment(2, 9)

    def policy(op):
        def run(img, k):
            g = mp.gpuimage(img)
            op.apply(g, 0, k, 0)
            np.asarray(g)
        return run

    def jpeg(img, k):
        g = mp.gpuimage(img)
        g.jpeg(75)
        np.asarray(g)

    def pillow(img, k):
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=75)
        buf.seek(0)
        np.asarray(Image.open(buf))

    rows = {"AugMix()": policy(augmix), "RandAugment(2, 9)": policy(randaug),
            "jpeg(75)": jpeg, "Pillow JPEG q75 encode+decode": pillow}
    res = {}
    for name, run in rows.items():
        cpu, wall, first = _per_output(imgs, run, args.outputs)
        res[name] = {"cpu_ms": 1e3 * cpu, "wall_ms": 1e3 * wall, "first_cpu_ms": 1e3 * first}
    print(f"backend {mp.backend()}, {args.side}x{args.side} RGB, {args.outputs} outputs")
    print(f"{'per output':32s} {'CPU ms':>9s} {'wall ms':>9s} {'1st pass CPU ms':>16s}")
    for name, r in res.items():
        print(f"{name:32s} {r['cpu_ms']:9.1f} {r['wall_ms']:9.1f} {r['first_cpu_ms']:16.1f}")
    mix = res["AugMix()"]["cpu_ms"] / res["RandAugment(2, 9)"]["cpu_ms"]
    codec = res["jpeg(75)"]["cpu_ms"] / res["Pillow JPEG q75 encode+decode"]["cpu_ms"]
    print(f"AugMix / RandAugment CPU: {mix:.1f}x; jpeg / Pillow CPU: {codec:.1f}x")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
