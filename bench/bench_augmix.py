"""AugMix in an ImageNet training recipe: batched (a fork of the arena gather, one mix launch a
batch) against the per-output path, and torchvision v2's AugMix in the same run.

    python3 bench/bench_augmix.py [--size 256] [--batches 10] [--per-output 2] [--tv 256]
                                  [--json out.json]

millipyde: a Generator over the six scikit-image photographs of bench_recipes (in memory, at
their own sizes) with ``random_resized_crop(224)``, a flip (p=0.5) and ``AugMix()`` (severity
3, width 3, depth 1-3, all ops), into float32 NCHW batches of ``size`` with ImageNet's mean and
std, each taken as a tensor (zero-copy: torch's on GPUs, NumPy's on the cpu) and dropped. Rows:

- ``batched``: ``batches`` batches in a row after an untimed pass (every structure's kernels
  compiled) and three warm-up batches; ``route``: one batch's arena launches, their kernel
  launches (gathers, reductions, mixes), the distinct kernels, the outputs left per output;
- ``per output``: the same Generator with ``batches.RECORD_AT_ONCE = False`` (the path every
  AugMix batch took before: its samples made one by one), ``--per-output`` batches.

Beside it, where they import (GPU backends): torchvision v2's ``AugMix()`` in the same recipe
(``RandomResizedCrop(224)``, flip, AugMix, ToDtype, Normalize) applied per image to the
photographs as uint8 GPU tensors (``--tv`` images; torchvision's own semantics: each image its
own chains), and torchvision's AugMix on whole uint8 batches of 224x224 crops (one draw of each
chain's ops per batch, weights per image: not the per-sample AugMix, shown as torchvision's
batched form). kornia has no AugMix (its ``augmentation.auto`` has AutoAugment, RandAugment and
TrivialAugment): the row says so where it imports.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import millipyde as mp  # noqa: E402
from bench.bench_batches import _sync, _tensor  # noqa: E402
from bench.bench_recipes import MEAN, STD, _photos  # noqa: E402


def _recipe(hw: int) -> list:
    return [mp.Operation("random_resized_crop", hw, hw), mp.Operation("fliplr", p=0.5),
            mp.AugMix()]


def _route(gen: object, size: int) -> dict:
    from millipyde.training import batch_arena
    from millipyde.training.batches import arena_recorder

    rec = arena_recorder(gen._state)
    if rec is None:
        return {"arena": False}
    launches, left = rec.record(list(range(size)))
    kl = batch_arena.kernel_launches(launches)
    return {"arena": True, "launches": len(launches), "kernel_launches": len(kl),
            "gathers": sum(k[0] == "gather" for k in kl),
            "reductions": sum(1 if k[0] == "stat" else len(k[1]) for k in kl
                              if k[0] in ("stat", "stats")),
            "reduction_launches": sum(k[0] in ("stat", "stats") for k in kl),
            "mixes": kl.count(("mix",)),
            "distinct_kernels": len(set(kl)), "per_output": len(left)}


def millipyde_rate(hosts: list, size: int, batches: int, hw: int,
                   at_once: bool) -> tuple[float, dict, float]:
    """img/s of the recipe into batches (``at_once``: recorded at once, else per output), its
    route, and the CPU seconds of the process per image while timed."""
    from millipyde.training import batches as batches_mod

    imgs = [mp.gpuimage(h) for h in hosts]
    batches_mod.RECORD_AT_ONCE = at_once
    try:
        gen = mp.Generator(imgs, _recipe(hw), seed=0)
        with gen.batches(size, dtype="float32", layout="NCHW", mean=MEAN, std=STD) as bs:
            for _ in range(3 if at_once else 1):  # compile, arena upload, workers started
                _tensor(next(bs))
            _sync()
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(batches):
                _tensor(next(bs))
            _sync()
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
        route = _route(gen, size) if at_once else {"arena": False}
    finally:
        batches_mod.RECORD_AT_ONCE = True
    return batches * size / dt, route, dc / (batches * size)


def torchvision_rates(hosts: list, n: int, size: int, batches: int,
                      hw: int) -> tuple[float | str, float | str]:
    """torchvision v2 AugMix per image (the recipe, uint8 GPU tensors) and on whole batches."""
    try:
        import torch
        from torchvision.transforms import v2
    except ImportError as exc:
        return f"skipped: {exc}", f"skipped: {exc}"
    from bench.bench_augment import per_image_rate

    dev = torch.device("cuda")
    xs = [torch.from_numpy(h).permute(2, 0, 1).contiguous().to(dev) for h in hosts]
    t = v2.Compose([v2.RandomResizedCrop(hw, antialias=False), v2.RandomHorizontalFlip(),
                    v2.AugMix(), v2.ToDtype(torch.float32, scale=True),
                    v2.Normalize(MEAN, STD)])
    per_image = per_image_rate(t, xs, n, warm=16)
    crop = v2.RandomResizedCrop(hw, antialias=False)
    batch = torch.stack([crop(xs[i % len(xs)]) for i in range(size)])
    tail = v2.Compose([v2.RandomHorizontalFlip(), v2.AugMix(),
                       v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    with torch.no_grad():
        for _ in range(2):
            tail(batch)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(batches):
            tail(batch)
        torch.cuda.synchronize()
    return per_image, batches * size / (time.perf_counter() - t0)


def kornia_row() -> str:
    try:
        import kornia.augmentation.auto as auto
    except ImportError as exc:
        return f"skipped: {exc}"
    return "kornia has no AugMix" if not hasattr(auto, "AugMix") else "not measured here"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--per-output", type=int, default=2, help="per-output batches (0: skip)")
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--tv", type=int, default=256, help="torchvision images (0: skip)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    hosts = _photos()
    res: dict = {"backend": mp.backend(), "size": args.size, "batches": args.batches}
    # an untimed pass first: every structure's kernels compiled
    millipyde_rate(hosts, args.size, 2, args.hw, True)
    rate, route, cpu = millipyde_rate(hosts, args.size, args.batches, args.hw, True)
    res["batched"] = {"img_s": rate, "cpu_ms_per_img": 1e3 * cpu, "route": route}
    print("batched", json.dumps(res["batched"]), flush=True)
    if args.per_output:
        prate, _, pcpu = millipyde_rate(hosts, args.size, args.per_output, args.hw, False)
        res["per_output"] = {"img_s": prate, "cpu_ms_per_img": 1e3 * pcpu}
        print("per output", json.dumps(res["per_output"]), flush=True)
    if mp.backend() in ("cuda", "hip"):
        if args.tv:
            tv1, tvb = torchvision_rates(hosts, args.tv, args.size, args.batches, args.hw)
            res["torchvision v2 AugMix per image img_s"] = tv1
            res["torchvision v2 AugMix whole batch img_s"] = tvb
        res["kornia"] = kornia_row()
    text = json.dumps(res, indent=2)
    print(text)
    print(f"\n{'row':44s} {'img/s':>10s} {'CPU ms/img':>11s}")
    b = res["batched"]
    print(f"{'millipyde AugMix recipe, batched':44s} {b['img_s']:10.1f} "
          f"{b['cpu_ms_per_img']:11.2f}")
    p = res.get("per_output")
    if p is not None:
        print(f"{'millipyde AugMix recipe, per output':44s} {p['img_s']:10.1f} "
              f"{p['cpu_ms_per_img']:11.2f}  (batched {b['img_s'] / p['img_s']:.1f}x)")
    for key in ("torchvision v2 AugMix per image img_s", "torchvision v2 AugMix whole batch img_s"):
        v = res.get(key)
        if isinstance(v, float):
            print(f"{key[:-6]:44s} {v:10.1f} {'':11s}  (millipyde {b['img_s'] / v:.1f}x)")
        elif v is not None:
            print(f"{key[:-6]:44s} {v}")
    if "kornia" in res:
        print(f"{'kornia':44s} {res['kornia']}")
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
