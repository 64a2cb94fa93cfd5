"""What ``batches(mix=)`` adds to a batch worker: its host time and the consumer's period (GPU).

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/mix_worker.py [--size 256] [--batches 400] [--rounds 3]
    MILLIPYDE_BACKEND=cpu python3 bench/probes/mix_worker.py --hw 16 --no-mix-kernel


The ImageNet recipe (``training.recipes``) over the six photographs of bench_recipes into float32
NCHW batches of ``size`` with their labels, taken one after another as a training loop takes
them (a sync at the run's end only). Per mix (none, MixUp, CutMix), in ``rounds`` interleaved
rounds: the consumer's period per batch, and inside the worker thread, per batch, the wall and
thread CPU time of ``Batches._make`` (everything the worker does for a batch) and of
``Batches._extras`` (labels, the mix). A worker whose ``_make`` wall time is the consumer's
period bounds the rate by its host time; the mix's share of ``_extras`` is its host cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.training import batches as batches_mod  # noqa: E402

_lock = threading.Lock()
_spent: dict[str, list[float]] = {}


def _timed(name: str) -> None:
    real = getattr(batches_mod.Batches, name)

    def wrapper(*a: object, **k: object) -> object:
        w, c = time.perf_counter(), time.thread_time()
        try:
            return real(*a, **k)
        finally:
            dw, dc = time.perf_counter() - w, time.thread_time() - c
            with _lock:
                _spent.setdefault(f"{name} wall", []).append(dw)
                _spent.setdefault(f"{name} cpu", []).append(dc)
    setattr(batches_mod.Batches, name, wrapper)


def _no_mix_kernel() -> None:
    """The mix's kernel launch a no-op (the cpu backend's ``launch_blocks``, where the kernel
    would run on the worker's thread); every other launch as it is."""
    from millipyde.training import batch_mix

    if runtime.codegen_target != "cpu":
        raise SystemExit("--no-mix-kernel is for the cpu backend")
    real = runtime.launch_blocks

    def launch_blocks(kernel: object, *a: object, **k: object) -> None:
        if kernel is not batch_mix._KERNELS.get(runtime.name):
            real(kernel, *a, **k)
    runtime.launch_blocks = launch_blocks


def _run(imgs: list, ops: list, size: int, batches: int, mix: object | None) -> dict:
    gen = mp.Generator(imgs, ops, seed=0, labels=list(range(len(imgs))))
    with gen.batches(size, with_labels=True, mix=mix) as bs:
        it = iter(bs)
        for _ in range(3):  # warm-up: compiles, workers started, the ring filled
            batch, _ = next(it)
        runtime.synchronize(batch.device)
        with _lock:
            _spent.clear()
        t0 = time.perf_counter()
        for _ in range(batches):
            batch, labels = next(it)
            labels._materialize()
            batch._materialize()
        runtime.synchronize(batch.device)
        period = (time.perf_counter() - t0) / batches
        with _lock:
            got = {k: statistics.median(v) for k, v in _spent.items()}
    got["period"] = period
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--no-mix-kernel", action="store_true",
                    help="the mix's launch a no-op (cpu backend: its host work alone)")
    args = ap.parse_args()
    from bench.bench_mix import _photos
    from millipyde.training import recipes

    _timed("_make")
    _timed("_extras")
    if args.no_mix_kernel:
        _no_mix_kernel()
    imgs = _photos()
    ops = recipes.operations("imagenet", size=args.hw)
    mixers = {"none": None, "MixUp": mp.MixUp(num_classes=args.classes, seed=0),
              "CutMix": mp.CutMix(num_classes=args.classes, seed=0)}
    rows: dict[str, list[dict]] = {}
    for rnd in range(args.rounds):
        for name, mix in mixers.items():
            got = _run(imgs, ops, args.size, args.batches, mix)
            rows.setdefault(name, []).append(got)
            print(f"round {rnd} {name:7s} period {got['period'] * 1e3:.3f} ms; _make wall "
                  f"{got['_make wall'] * 1e3:.3f} cpu {got['_make cpu'] * 1e3:.3f}; _extras "
                  f"wall {got['_extras wall'] * 1e3:.3f} cpu {got['_extras cpu'] * 1e3:.3f}",
                  flush=True)
    print(f"medians over {args.rounds} rounds of {args.batches} batches of {args.size} (ms); "
          f"share: against 'none' of the same round, median")
    base = rows["none"]
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        shares = [100 * (r["period"] / b["period"] - 1) for r, b in zip(runs, base, strict=True)]
        print(f"{name:7s} period {med['period'] * 1e3:.3f} ({statistics.median(shares):+.1f}%: "
              + " ".join(f"{s:+.1f}" for s in shares) + f"); _make wall "
              f"{med['_make wall'] * 1e3:.3f} cpu {med['_make cpu'] * 1e3:.3f}; _extras wall "
              f"{med['_extras wall'] * 1e3:.3f} cpu {med['_extras cpu'] * 1e3:.3f}")


if __name__ == "__main__":
    main()
