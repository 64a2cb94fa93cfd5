"""Thesis figure 5.1 augmentation throughput: millipyde's Generator vs torchvision and kornia.

millipyde: ``Generator`` over six 512x512 RGB inputs with the figure-5.1 operations, outputs
kept on the device, images/s over ``--outputs`` after a warm-up; and
``Generator.batches(--batch)`` float32 NCHW taken as torch tensors (``bench_batches``, with
``random_colorize`` as a method: the inputs are all colour). torchvision v2 (one image at a
time) and kornia (batches of ``--batch``) run the nearest equivalent pipelines on the GPU
(flip, transpose, brightness, Gaussian blur, per-channel gains, greyscale, rotation, with the
same probabilities), where installed. The equivalents are close, not identical: the ratio
compares throughput of the same kind of work, not bit-equal outputs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import millipyde as mp
from millipyde.cli import figure_5_1_operations


def _inputs(n: int = 6, size: int = 512) -> list[np.ndarray]:
    import skimage.data
    from skimage.transform import resize

    names = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
             "immunohistochemistry"]
    out = []
    for name in names[:n]:
        img = getattr(skimage.data, name)()
        img = resize(img, (size, size, 3), preserve_range=True, anti_aliasing=False)
        out.append(np.clip(np.rint(img), 0, 255).astype(np.uint8))
    return out


def _millipyde(hosts: list[np.ndarray], n: int) -> float:
    imgs = [mp.gpuimage(h) for h in hosts]
    warm = mp.Generator(imgs, figure_5_1_operations(), outputs=512, seed=1)
    for _ in warm:
        pass
    g = mp.Generator(imgs, figure_5_1_operations(), outputs=n, seed=0)
    t0 = time.perf_counter()
    outs = list(g)
    for out in outs[-4:]:
        out._materialize()
    mp.synchronize()
    return n / (time.perf_counter() - t0)


def _millipyde_batches(hosts: list[np.ndarray], n: int, batch: int) -> float:
    """``Generator.batches(batch)`` (float32 NCHW) taken as torch tensors (bench_batches)."""
    from bench.bench_batches import rate

    imgs = [mp.gpuimage(h) for h in hosts]
    rate(imgs, batch, 4, 0, seed=1)  # warm
    return rate(imgs, batch, max(1, n // batch), 0)


def _torchvision(hosts: list[np.ndarray], n: int) -> float:
    import torch
    from torchvision.transforms import v2

    dev = torch.device("cuda")
    xs = [torch.from_numpy(h).permute(2, 0, 1).contiguous().to(dev) for h in hosts]
    t = v2.Compose([
        v2.RandomApply([v2.Lambda(lambda x: x.transpose(-1, -2))], p=0.2),
        v2.RandomHorizontalFlip(p=0.2),
        v2.ColorJitter(brightness=(0.8, 2.0)),
        v2.GaussianBlur(kernel_size=33, sigma=(0.01, 2.0)),
        v2.RandomApply([v2.ColorJitter(saturation=(0.5, 1.5))], p=0.3),
        v2.RandomGrayscale(p=0.3),
        v2.RandomApply([v2.RandomRotation((0, 120))], p=0.5),
    ])
    return per_image_rate(t, xs, n, warm=20)


def per_image_rate(t, xs: list, n: int, warm: int) -> float:
    """img/s of torchvision transform ``t`` applied to ``n`` images of ``xs`` in turn, one by
    one, after ``warm`` calls (CUDA synchronised at both ends)."""
    import torch

    for i in range(warm):
        t(xs[i % len(xs)])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(n):
        t(xs[i % len(xs)])
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def _kornia(hosts: list[np.ndarray], n: int, batch: int) -> float:
    import kornia.augmentation as K
    import torch

    dev = torch.device("cuda")
    base = torch.stack([torch.from_numpy(h).permute(2, 0, 1) for h in hosts]).to(dev).float()
    x = base.repeat((batch + len(hosts) - 1) // len(hosts), 1, 1, 1)[:batch] / 255.0
    aug = K.AugmentationSequential(
        K.RandomHorizontalFlip(p=0.2),
        K.ColorJiggle(brightness=(0.8, 2.0), p=1.0),
        K.RandomGaussianBlur((33, 33), (0.01, 2.0), p=1.0),
        K.ColorJiggle(saturation=(0.5, 1.5), p=0.3),
        K.RandomGrayscale(p=0.3),
        K.RandomRotation(degrees=(0.0, 120.0), p=0.5),
    ).to(dev)
    aug(x)
    torch.cuda.synchronize()
    batches = max(1, n // batch)
    t0 = time.perf_counter()
    for _ in range(batches):
        aug(x)
    torch.cuda.synchronize()
    return batches * batch / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench augment", description=__doc__)
    ap.add_argument("--outputs", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    hosts = _inputs(size=args.size)
    rows = {"millipyde": _millipyde(hosts, args.outputs)}
    for name, fn in (("millipyde_batches_torch",
                      lambda: _millipyde_batches(hosts, args.outputs, args.batch)),
                     ("torchvision_per_image", lambda: _torchvision(hosts, args.outputs)),
                     ("kornia_batched", lambda: _kornia(hosts, args.outputs, args.batch))):
        try:
            rows[name] = fn()
        except Exception as exc:
            print(f"{name}: skipped ({type(exc).__name__}: {exc})")
    print(f"backend {mp.backend()}, {args.size}x{args.size} RGB, {args.outputs} outputs")
    for name, rate in rows.items():
        print(f"{name:22s} {rate:10.1f} img/s   millipyde/{name}: "
              f"{rows['millipyde'] / rate:6.2f}x")
    out = Path(args.out or f"bench/results/augment_{mp.backend()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "size": args.size,
                               "date": time.strftime("%Y-%m-%d")}, indent=1))
    return 0
