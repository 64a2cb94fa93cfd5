"""MixUp / CutMix's share of a training batch's time (issue 31: at most 5%).

    MILLIPYDE_BACKEND=cpu python3 bench/bench_mix.py [--size 64] [--hw 224] [--batches 8]

A Generator over the six scikit-image photographs of bench_recipes (in memory, their own
sizes) with RandomResizedCrop(hw) and a flip makes float32 NCHW batches of ``size``. Rows:

- ``batch``: the Generator's rate alone, ``batches`` batches taken in a row (each synced),
  per batch;
- ``MixUp`` / ``CutMix``: one mixer call on a made batch, in place (``num_classes=1000``,
  labels the inputs' indices; the soft labels stored), per call;
- ``... in the loop``: the Generator's batches taken with the mixer applied to each (the
  consumer's work beside the workers'), per batch; its share is what it adds to ``batch``;
- ``batch with labels``: the Generator's batches with their labels (``with_labels=True``);
- ``... in batches``: the same with ``batches(mix=)`` (each batch mixed by its worker, behind
  its kernels); its share is what it adds to ``batch with labels``.

The rows are measured in ``rounds`` interleaved rounds (the machine's load moves under all of
them alike); medians. Shares are of ``batch``. On GPU backends every time ends with a sync:
with ``--sync batch`` (default) each batch's, the time a consumer waits for each batch alone;
with ``--sync end`` only the run's last (batches taken one after another as a training loop
takes them, the workers ahead: the time a batch adds to a run). ``--chain imagenet``:
millipyde.training.recipes' ImageNet chain instead of the crop and flip; ``--chain
randaugment``: the crop and flip, then ``RandAugment(2, 9)`` (bench_policies' recipe).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402


def _photos() -> list:
    from skimage import data

    from bench.bench_recipes import PHOTOS as names
    return [mp.gpuimage(np.ascontiguousarray(getattr(data, n)()[..., :3])) for n in names]


def _run_labelled(gen_args: tuple, size: int, batches: int, mix: object | None,
                  sync_each: bool) -> float:
    """Seconds per batch of a fresh labelled Generator's ``batches(with_labels=True,
    mix=mix)`` taken in a row."""
    imgs, ops = gen_args
    gen = mp.Generator(imgs, ops, seed=0, labels=list(range(len(imgs))))
    with gen.batches(size, with_labels=True, mix=mix) as bs:
        it = iter(bs)
        next(it)  # warm-up: compiles, workers started
        t0 = time.perf_counter()
        for _ in range(batches):
            batch, labels = next(it)
            labels._materialize()
            batch._materialize()
            if sync_each:
                runtime.synchronize(batch.device)
        runtime.synchronize(batch.device)
        return (time.perf_counter() - t0) / batches


def _run(gen_args: tuple, size: int, batches: int, mix: object | None,
         sync_each: bool) -> float:
    """Seconds per batch of a fresh Generator's ``batches`` taken in a row."""
    imgs, ops = gen_args
    gen = mp.Generator(imgs, ops, seed=0)
    with gen.batches(size, with_indices=True) as bs:
        it = iter(bs)
        next(it)  # warm-up: compiles, workers started
        t0 = time.perf_counter()
        for step in range(batches):
            batch, _, inputs = next(it)
            if mix is not None:
                batch, soft = mix(batch, inputs.astype(np.int64), step=step)
                soft._materialize()
            batch._materialize()
            if sync_each:
                runtime.synchronize(batch.device)
        runtime.synchronize(batch.device)
        return (time.perf_counter() - t0) / batches


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chain", choices=("crop", "imagenet", "randaugment"), default="crop",
                    help="crop: RandomResizedCrop + flip; imagenet: training.recipes' chain; "
                         "randaugment: the crop and flip, then RandAugment(2, 9)")
    ap.add_argument("--sync", choices=("batch", "end"), default="batch",
                    help="synchronise after each batch, or after a run's last")
    args = ap.parse_args(argv)
    each = args.sync == "batch"
    imgs = _photos()
    if args.chain in ("crop", "randaugment"):
        ops = [mp.Operation("random_resized_crop", args.hw, args.hw),
               mp.Operation("fliplr", p=0.5)]
        if args.chain == "randaugment":
            ops.append(mp.RandAugment(2, 9))
    else:
        from millipyde.training import recipes

        ops = recipes.operations("imagenet", size=args.hw)
    mixers = {"MixUp": mp.MixUp(num_classes=1000, seed=0),
              "CutMix": mp.CutMix(num_classes=1000, seed=0)}
    gen = mp.Generator(imgs, ops, seed=0)
    with gen.batches(args.size, with_indices=True) as bs:
        batch, _, inputs = next(iter(bs))
        runtime.synchronize(batch.device)
    labels = inputs.astype(np.int64)
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):  # interleaved: the machine's load changes under every row
        rows.setdefault("batch", []).append(_run((imgs, ops), args.size, args.batches, None, each))
        rows.setdefault("batch with labels", []).append(
            _run_labelled((imgs, ops), args.size, args.batches, None, each))
        for name, mix in mixers.items():
            for step in range(args.batches + 1):
                t0 = time.perf_counter()
                out, soft = mix(batch, labels, step=step)
                out._materialize()
                soft._materialize()
                runtime.synchronize(batch.device)
                if step:
                    rows.setdefault(name, []).append(time.perf_counter() - t0)
            rows.setdefault(f"{name} in the loop", []).append(
                _run((imgs, ops), args.size, args.batches, mix, each))
            rows.setdefault(f"{name} in batches", []).append(
                _run_labelled((imgs, ops), args.size, args.batches, mix, each))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"backend {mp.backend()}, chain {args.chain}, batches of {args.size} x 3 x "
          f"{args.hw} x {args.hw} float32; {args.batches} batches a run, {args.rounds} rounds, "
          f"sync after each {'batch' if each else 'run'}")
    print(f"{'what':18s} {'ms':>9s} {'of a batch':>11s}")
    for name, v in med.items():
        base = med["batch with labels" if "in batches" in name else "batch"]
        extra = v - base if "loop" in name or "in batches" in name else v
        share = "" if name.startswith("batch") else f"{100 * extra / base:10.1f}%"
        print(f"{name:18s} {v * 1e3:9.2f} {share}")
    # the rows of one round ran minutes apart at most: each round's own share, paired
    for name in [n for n in rows if "in batches" in n]:
        pairs = [100 * (a / b - 1) for a, b in zip(rows[name], rows["batch with labels"],
                                                   strict=True)]
        print(f"{name}, each round against its own batch with labels: "
              + " ".join(f"{p:+.1f}%" for p in pairs)
              + f"; median {statistics.median(pairs):+.1f}%")


if __name__ == "__main__":
    main()
