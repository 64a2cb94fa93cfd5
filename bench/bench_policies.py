"""Augmentation policies in an ImageNet training recipe (issue 31: RandAugment(2, 9) >= 100k img/s
on one H100; MixUp / CutMix add <= 5% to a batch's time).

    python3 bench/bench_policies.py [--size 256] [--batches 20] [--tv 512] [--json out.json]

millipyde: a Generator over the six scikit-image photographs of bench_recipes (in memory, at
their own sizes) with ``random_resized_crop(224)``, a flip (p=0.5) and the policy, into float32
NCHW batches of ``size`` with ImageNet's mean and std, each taken as a torch tensor
(zero-copy) and dropped. Rows per policy (RandAugment(2, 9), TrivialAugmentWide):

- ``img/s``: ``batches`` batches in a row after three warm-up batches (compiles, arena upload);
- ``route``: how one batch is recorded (arena launches, their stages, the reductions, the
  outputs left per output);
- ``+ MixUp`` / ``+ CutMix``: the same with the mixer applied to each batch in the loop
  (``num_classes=1000``, labels the inputs' indices), and its share of the batch's time.

Beside it, in the same run where they import: kornia's ``AugmentationSequential``
(RandomResizedCrop 224, flip, ``kornia.augmentation.auto.RandAugment(n=2, m=9)``, Normalize) on
float32 batches of ``size`` made from 512x512 copies of the photographs (kornia needs one
size), and torchvision v2's ``RandAugment(2, 9)`` recipe applied per image to the photographs
as uint8 GPU tensors (``--tv`` images).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import millipyde as mp  # noqa: E402
from bench.bench_recipes import MEAN, STD, _photos, _square  # noqa: E402


def _recipe(policy: object, hw: int) -> list:
    return [mp.Operation("random_resized_crop", hw, hw), mp.Operation("fliplr", p=0.5), policy]


def _route(gen: object, size: int) -> dict:
    from millipyde.training.batches import arena_recorder

    rec = arena_recorder(gen._state)
    if rec is None:
        return {"arena": False}
    launches, left = rec.record(list(range(size)))
    return {"arena": True, "launches": len(launches),
            "stages": sum(len(L.stages) for L in launches),
            "reductions": sum(len(L.prefixes) + sum(len(s.prefixes) for s in L.stages)
                              for L in launches),
            "per_output": len(left)}


def millipyde_rate(hosts: list, policy: object, size: int, batches: int, hw: int,
                   mix: object | None = None) -> tuple[float, dict]:
    """img/s of the recipe into batches (with ``mix`` applied to each), and its route."""
    from bench.bench_batches import _sync, _tensor

    imgs = [mp.gpuimage(h) for h in hosts]
    gen = mp.Generator(imgs, _recipe(policy, hw), seed=0)
    with gen.batches(size, dtype="float32", layout="NCHW", mean=MEAN, std=STD,
                     with_indices=True) as bs:
        for step in range(3):  # compile, arena upload, workers started
            b, _, inputs = next(bs)
            if mix is not None:
                mix(b, inputs.astype(np.int64), step=step)
            _tensor(b)
        _sync()
        t0 = time.perf_counter()
        for step in range(batches):
            b, _, inputs = next(bs)
            if mix is not None:
                b, soft = mix(b, inputs.astype(np.int64), step=step)
            _tensor(b)
        _sync()
        dt = time.perf_counter() - t0
    return batches * size / dt, _route(gen, size)


def kornia_rate(hosts: list, size: int, batches: int, hw: int) -> float | str:
    try:
        import kornia.augmentation as K
        import torch
        from kornia.augmentation.auto import RandAugment
    except ImportError as exc:
        return f"skipped: {exc}"
    dev = torch.device("cuda")
    xs = torch.stack([torch.from_numpy(h).permute(2, 0, 1) for h in _square(hosts)]).to(dev)
    aug = K.AugmentationSequential(
        K.RandomResizedCrop((hw, hw)), K.RandomHorizontalFlip(p=0.5), RandAugment(n=2, m=9),
        K.Normalize(torch.tensor(MEAN), torch.tensor(STD)))
    idx = torch.arange(size, device=dev) % xs.shape[0]
    with torch.no_grad():
        for _ in range(2):
            aug(xs[idx].float() / 255)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(batches):
            aug(xs[idx].float() / 255)
        torch.cuda.synchronize()
    return batches * size / (time.perf_counter() - t0)


def torchvision_rate(hosts: list, n: int, hw: int) -> float | str:
    try:
        import torch
        from torchvision.transforms import v2
    except ImportError as exc:
        return f"skipped: {exc}"
    from bench.bench_augment import per_image_rate

    dev = torch.device("cuda")
    xs = [torch.from_numpy(h).permute(2, 0, 1).contiguous().to(dev) for h in hosts]
    t = v2.Compose([v2.RandomResizedCrop(hw, antialias=False), v2.RandomHorizontalFlip(),
                    v2.RandAugment(2, 9), v2.ToDtype(torch.float32, scale=True),
                    v2.Normalize(MEAN, STD)])
    return per_image_rate(t, xs, n, warm=32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--tv", type=int, default=512, help="torchvision images (0: skip)")
    ap.add_argument("--only-millipyde", action="store_true")
    ap.add_argument("--no-mix", action="store_true", help="skip the MixUp / CutMix rows")
    ap.add_argument("--no-trivial", action="store_true", help="skip TrivialAugmentWide")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    hosts = _photos()
    res: dict = {"backend": mp.backend(), "size": args.size, "batches": args.batches}
    mixers = {"MixUp": lambda: mp.MixUp(num_classes=1000, seed=0),
              "CutMix": lambda: mp.CutMix(num_classes=1000, seed=0)}
    policies = [("RandAugment(2, 9)", lambda: mp.RandAugment(2, 9))]
    if not args.no_trivial:
        policies.append(("TrivialAugmentWide", mp.TrivialAugmentWide))
    for name, make in policies:
        # an untimed pass first: every structure's kernels compiled (a policy's structures
        # appear as they are drawn, not all in the first batches)
        millipyde_rate(hosts, make(), args.size, args.batches, args.hw)
        rate, route = millipyde_rate(hosts, make(), args.size, args.batches, args.hw)
        row = {"img_s": rate, "route": route}
        for mname, mk in ({} if args.no_mix else mixers).items():
            mrate, _ = millipyde_rate(hosts, make(), args.size, args.batches, args.hw, mk())
            row[f"+{mname} img_s"] = mrate
            row[f"+{mname} added"] = rate / mrate - 1.0
        res[name] = row
        print(name, json.dumps(row), flush=True)
    if not args.only_millipyde and mp.backend() in ("cuda", "hip"):
        res["kornia RandAugment(2, 9) 512x512 img_s"] = kornia_rate(hosts, args.size,
                                                                   args.batches, args.hw)
        if args.tv:
            res["torchvision v2 RandAugment(2, 9) per image img_s"] = torchvision_rate(
                hosts, args.tv, args.hw)
    text = json.dumps(res, indent=2)
    print(text)
    ra = res["RandAugment(2, 9)"]
    k = res.get("kornia RandAugment(2, 9) 512x512 img_s")
    print(f"\n{'row':40s} {'img/s':>10s}")
    print(f"{'millipyde RandAugment(2, 9) recipe':40s} {ra['img_s']:10.0f}")
    for m in ({} if args.no_mix else mixers):
        print(f"{'  + ' + m + ' (added)':40s} {ra[f'+{m} img_s']:10.0f} "
              f"({100 * ra[f'+{m} added']:+.1f}%)")
    ta = res.get("TrivialAugmentWide")
    if ta is not None:
        print(f"{'millipyde TrivialAugmentWide recipe':40s} {ta['img_s']:10.0f}")
    if isinstance(k, float):
        print(f"{'kornia RandAugment(2, 9), 512x512':40s} {k:10.0f}  "
              f"(millipyde {ra['img_s'] / k:.1f}x)")
    tv = res.get("torchvision v2 RandAugment(2, 9) per image img_s")
    if isinstance(tv, float):
        print(f"{'torchvision v2 per image':40s} {tv:10.0f}  (millipyde {ra['img_s'] / tv:.1f}x)")
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
