"""Host time per output of ``Generator.__next__`` on the figure-5.1 recipe, kernels taken out.

    MILLIPYDE_BACKEND=cpu NUMBA_NUM_THREADS=1 MILLIPYDE_WORKERS=1 \
        python bench/probes/next_host.py [--side 32] [--outputs 4096]

Part C's ``next()`` row of ``bench_pipeline.py engine`` (six photographs, the recipe's
colorize an opaque callable, each output taken as it comes; a warm-up Generator of seed 3
first), for seeds 4, 5, 6 (``--seeds``) in one process. On the cpu backend a kernel is host
time too: each kernel call's thread CPU time is summed (``CpuBackend._run_cpu``; with
``NUMBA_NUM_THREADS=1`` a kernel runs in the calling thread) and taken from the process CPU
time, which leaves what a GPU's host would also spend per output (drawing, recording,
grouping, launching, handing out). ``MILLIPYDE_WORKERS=1``: a GPU's worker count for a
batched Generator (``workers.workers_per_device``). Run it from a tree (``PYTHONPATH``) to
measure that tree's library.

The garbage collector: its passes by generation and their time in each timed Generator.
``--keep`` holds each Generator's outputs in a list until its last one, as part C keeps its
torch tensors. ``--promoted`` instead counts the objects each young (generation-1) pass
moves to the oldest generation, per output: what brings a full collection closer (CPython
runs one once those exceed a quarter of the objects already there), whatever the process's
size; the objects alive after the warm-up are frozen (``gc.freeze``) so that count is cheap,
and the timings of that run are not the default collector's. ``--heap`` adds that many
thousand tracked objects before the warm-up (a process holding torch and a GPU's Numba
objects has a larger heap than this one: fewer full collections, each longer).
``--grown``: ``generator_state.GROWN`` for this run (trees that have it).

Overlap: the time ``next()`` waited for its output to be made and the time the workers
waited for room in the window, per Generator (the state's condition's waits, by thread).
Where making is the slower side (a GPU's host), every claim should start as soon as the last
is made (no room waits) and ``next()`` waits only for what is still being made.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import threading
import time
from pathlib import Path

import numpy as np

import millipyde as mp

# the repository, after PYTHONPATH's trees (bench_pipeline's part C inputs)
sys.path.append(str(Path(__file__).resolve().parents[2]))
from bench.bench_pipeline import part_c_photos  # noqa: E402

try:
    from millipyde.training import recipes
except ImportError:  # trees that keep it at the top level
    from millipyde import recipes  # type: ignore[no-redef]


def kernel_seconds() -> list[float]:
    """Count every cpu kernel call's thread CPU time from now on: the returned list's one
    element, the seconds so far (``CpuBackend._run_cpu`` wrapped; the probes take it out of
    the host time they report)."""
    kernel_s = [0.0]
    cpu = importlib.import_module("millipyde.backend.cpu")
    plain = cpu.CpuBackend._run_cpu

    def timed(self, *a, **k):
        t0 = time.thread_time()
        try:
            return plain(self, *a, **k)
        finally:
            kernel_s[0] += time.thread_time() - t0

    cpu.CpuBackend._run_cpu = timed
    return kernel_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--outputs", type=int, default=4096)
    ap.add_argument("--seeds", type=int, default=3, help="Generators timed (seeds 4, 5, ..)")
    ap.add_argument("--keep", action="store_true", help="hold a Generator's outputs to its end")
    ap.add_argument("--promoted", action="store_true",
                    help="count the objects moved to the oldest generation per output")
    ap.add_argument("--heap", type=int, default=0, help="thousands of tracked objects added")
    ap.add_argument("--grown", type=int, default=0, help="generator_state.GROWN (0: as is)")
    args = ap.parse_args()
    if args.grown:
        from millipyde.training import generator_state

        generator_state.GROWN = args.grown
    ballast = [[] for _ in range(args.heap * 1000)]
    hosts = part_c_photos(args.side)
    ops = recipes.figure_5_1_operations()
    n = args.outputs

    def gen(seed: int) -> mp.Generator:
        return mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=seed,
                            device=0)

    kernel_s = kernel_seconds()
    # the garbage collector's passes and their time by generation (a batch's many small
    # objects), and with --promoted the objects its young passes move to the oldest one
    gcs: dict = {"runs": [0, 0, 0], "s": [0.0, 0.0, 0.0], "t0": 0.0, "old": 0, "moved": 0}

    def collected(phase: str, info: dict) -> None:
        gen_ = info["generation"]
        if phase == "start":
            if args.promoted and gen_ == 1:
                gcs["old"] = len(gc.get_objects(generation=2))
            gcs["t0"] = time.perf_counter()
        else:
            gcs["runs"][gen_] += 1
            gcs["s"][gen_] += time.perf_counter() - gcs["t0"]
            if args.promoted and gen_ == 1:
                gcs["moved"] += len(gc.get_objects(generation=2)) - gcs["old"]

    gc.callbacks.append(collected)
    with gen(3) as g:
        for x in g:
            np.asarray(x)
    print(f"millipyde from {mp.__file__}; tracked objects {len(gc.get_objects()):,} "
          f"({len(ballast):,} of them added)")
    if args.promoted:
        gc.collect()
        gc.freeze()
    total = {"c": 0.0, "outside": 0.0, "gc": 0.0, "moved": 0, "full": 0, "full_s": 0.0}
    for seed in range(4, 4 + args.seeds):
        kept = []
        with gen(seed) as g:
            waited = {"next": 0.0, "worker": 0.0}
            cond = g._state.cond
            plain_wait = cond.wait
            consumer = threading.get_ident()

            def wait(timeout=None, _plain=plain_wait, _w=waited, _me=consumer):
                t = time.perf_counter()
                try:
                    return _plain(timeout)
                finally:
                    who = "next" if threading.get_ident() == _me else "worker"
                    _w[who] += time.perf_counter() - t

            cond.wait = wait
            gcs.update(runs=[0, 0, 0], s=[0.0, 0.0, 0.0], moved=0)
            k0, c0, t0 = kernel_s[0], time.process_time(), time.perf_counter()
            for x in g:
                np.asarray(x)
                if args.keep:
                    kept.append(x)
            wall, c = time.perf_counter() - t0, time.process_time() - c0
        del kept
        total["c"] += c
        total["outside"] += c - (kernel_s[0] - k0)
        total["gc"] += sum(gcs["s"])
        total["moved"] += gcs["moved"]
        total["full"] += gcs["runs"][2]
        total["full_s"] += gcs["s"][2]
        passes = ", ".join(f"gen{i} {gcs['runs'][i]} ({gcs['s'][i] * 1e3:.1f} ms)"
                           for i in range(3))
        moved = f", {gcs['moved'] / n:.1f} objects/output to the oldest" if args.promoted \
            else ""
        print(f"seed {seed}: {n / wall:,.0f} img/s, cpu/wall {c / wall:.2f}, process CPU "
              f"{c / n * 1e6:.1f} us/output, outside kernels "
              f"{(c - (kernel_s[0] - k0)) / n * 1e6:.1f} us/output; next() waited "
              f"{waited['next'] * 1e3:.1f} ms, workers for room {waited['worker'] * 1e3:.1f} ms"
              f" of {wall * 1e3:.0f}; garbage collection {passes}{moved}", flush=True)
    m = n * args.seeds
    moved = f", {total['moved'] / m:.1f} objects/output to the oldest generation" \
        if args.promoted else ""
    print(f"all {args.seeds}: process CPU {total['c'] / m * 1e6:.1f} us/output, outside kernels "
          f"{total['outside'] / m * 1e6:.1f}, garbage collection {total['gc'] / m * 1e6:.1f} "
          f"(full: {total['full']}, {total['full_s'] * 1e3:.1f} ms){moved}")


if __name__ == "__main__":
    main()
