"""ImageNet-style recipe throughput and per-op timings of the issue-15 augmentations.

millipyde: a ``Generator`` over the six scikit-image colour photographs at their own (mixed)
sizes with ``recipes.operations("imagenet")`` (random resized crop 224, flip p=0.5,
brightness/contrast/saturation 0.4 and hue 0.1 with p=0.8), outputs kept on the device; then
the row "imagenet into batches(256, float32, NCHW, ImageNet mean/std) consumed as torch
tensors" (``millipyde_batches``: recorded as arena gathers, with its fraction of the memory
floor; a 224x224 float32 sample is 0.6 MB). kornia (same-size
512x512 inputs, which its AugmentationSequential needs) and torchvision v2 (per image) run
their equivalents where importable. Per-op timings: each op alone on a 512x512 RGB image,
materialized, synchronised, median of ``--repeat``.

    python -m bench.bench_recipes --outputs 4096 [--batch-outputs 51200] --json bench/recipes.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import millipyde as mp
from millipyde.training import recipes

PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
          "immunohistochemistry")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def _photos() -> list[np.ndarray]:
    import skimage.data

    return [np.ascontiguousarray(getattr(skimage.data, n)()[..., :3]) for n in PHOTOS]


def _square(hosts: list[np.ndarray], size: int = 512) -> list[np.ndarray]:
    from skimage.transform import resize

    return [np.clip(np.rint(resize(h, (size, size, 3), preserve_range=True)), 0, 255)
            .astype(np.uint8) for h in hosts]


def millipyde_recipe(hosts: list[np.ndarray], n: int) -> dict:
    imgs = [mp.gpuimage(h) for h in hosts]
    ops = recipes.operations("imagenet")
    for _ in mp.Generator(imgs, ops, outputs=256, seed=1):  # compile and warm up
        pass
    gen = mp.Generator(imgs, ops, outputs=n, seed=0)
    t0 = time.perf_counter()
    outs = list(gen)
    for out in outs[-8:]:
        out._materialize()
    mp.synchronize()
    result = {"outputs_img_s": n / (time.perf_counter() - t0)}
    return result


def millipyde_batches(hosts: list[np.ndarray], n: int, size: int = 256) -> dict:
    """The recipe into ``batches(size, float32, NCHW, ImageNet mean/std)``, each batch taken
    as a torch tensor (zero-copy) and dropped: img/s, launches recorded per batch, and the
    fraction of the memory floor (``bench_batches.copy_bandwidth`` over the bytes a sample
    must move: its 224 x 224 x 3 float32 output written; the crop it reads stays in L2)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.bench_batches import _sync, _tensor, copy_bandwidth
    from millipyde.training.batches import arena_recorder

    imgs = [mp.gpuimage(h) for h in hosts]
    ops = recipes.operations("imagenet")
    gen = mp.Generator(imgs, ops, seed=0)
    nb = max(1, n // size)
    with gen.batches(size, dtype="float32", layout="NCHW", mean=MEAN, std=STD) as bs:
        for _ in range(3):  # compile, arena upload, workers started
            _tensor(next(bs))
        _sync()
        t0 = time.perf_counter()
        for _ in range(nb):
            _tensor(next(bs))
        _sync()
        dt = time.perf_counter() - t0
    rec = arena_recorder(gen._state)
    launches = None
    if rec is not None:
        got, left = rec.record(list(range(size)))
        launches = {"arena_gathers": len(got), "per_output": len(left),
                    "reductions": sum(len(L.prefixes) for L in got)}
    per = 224 * 224 * 3 * 4
    floor = copy_bandwidth() / per
    rate = nb * size / dt
    return {"img_s": rate, "batches": nb, "batch": size, "recorded": launches,
            "floor_img_s": floor, "fraction_of_floor": rate / floor}


def per_op(repeat: int) -> dict[str, float]:
    import skimage.data

    host = np.ascontiguousarray(skimage.data.astronaut())
    calls = {
        "resize 224": ("resize", 224, 224), "crop": ("crop", 10, 20, 400, 300),
        "pad": ("pad", 8, 8, 8, 8, 0), "warp_affine": ("warp_affine", [[0.9, 0.1, 5],
                                                                        [-0.1, 0.9, 3]]),
        "random_resized_crop 224": ("random_resized_crop", 224, 224),
        "adjust_contrast": ("adjust_contrast", 1.3), "adjust_saturation":
            ("adjust_saturation", 1.3), "adjust_hue": ("adjust_hue", 0.1),
        "gaussian_noise": ("gaussian_noise", 0.05), "erase": ("erase", 10, 10, 100, 100, 0),
    }
    out = {}
    src = mp.gpuimage(host)
    src._materialize()
    for label, (name, *args) in calls.items():
        times = []
        for _ in range(repeat + 1):
            g = src.clone()
            g._materialize()
            mp.synchronize()
            t0 = time.perf_counter()
            getattr(g, name)(*args)
            g._materialize()
            mp.synchronize()
            times.append(time.perf_counter() - t0)
        out[label] = statistics.median(times[1:]) * 1e3
    return out


def kornia_recipe(hosts: list[np.ndarray], n: int, batch: int = 256) -> float | None:
    try:
        import kornia.augmentation as K
        import torch
    except ImportError:
        return None
    dev = torch.device("cuda")
    xs = torch.stack([torch.from_numpy(h).permute(2, 0, 1) for h in _square(hosts)]).to(dev)
    aug = K.AugmentationSequential(
        K.RandomResizedCrop((224, 224), scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
        K.RandomHorizontalFlip(p=0.5),
        K.ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8),
        K.Normalize(torch.tensor(MEAN), torch.tensor(STD)),
    )
    idx = torch.arange(batch, device=dev) % xs.shape[0]
    with torch.no_grad():
        aug(xs[idx].float() / 255)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(max(1, n // batch)):
            aug(xs[idx].float() / 255)
        torch.cuda.synchronize()
    return max(1, n // batch) * batch / (time.perf_counter() - t0)


def torchvision_recipe(hosts: list[np.ndarray], n: int) -> float | None:
    try:
        import torch
        from torchvision.transforms import v2
    except ImportError:
        return None
    dev = torch.device("cuda")
    xs = [torch.from_numpy(h).permute(2, 0, 1).contiguous().to(dev) for h in hosts]
    t = v2.Compose([v2.RandomResizedCrop(224, antialias=False), v2.RandomHorizontalFlip(),
                    v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                    v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    from bench.bench_augment import per_image_rate

    return per_image_rate(t, xs, n, warm=64)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outputs", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--batch-outputs", type=int, default=51200,
                    help="outputs of the batches row (batches of 256)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    hosts = _photos()
    res = {"backend": mp.backend(), "devices": [d.name for d in mp.devices.DEVICES],
           "millipyde": millipyde_recipe(hosts, args.outputs),
           "millipyde_batches_256_f32_nchw": millipyde_batches(hosts, args.batch_outputs),
           "per_op_ms_512": per_op(args.repeat),
           "kornia_img_s_512": kornia_recipe(hosts, args.outputs),
           "torchvision_img_s": torchvision_recipe(hosts, min(args.outputs, 2048))}
    text = json.dumps(res, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
