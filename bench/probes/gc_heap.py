"""Where a training process's cyclic garbage comes from, and what a full collection costs.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/gc_heap.py [--side 512] [--outputs 1024] [--top 8]

Part C's setup of bench_pipeline (the thesis recipe over six photographs) step by step: torch's
CUDA start, millipyde's import, the first ``batches(256)`` (compiling), a ``next()`` warm-up, then
three ``next()`` Generators with their outputs dropped as a training loop drops them. The
automatic collector is off; after each step one full collection reports the objects it found
unreachable (the garbage that step left for a later pass), their commonest types, its time and
the objects tracked after it. A full pass costs in proportion to every tracked object, and the
automatic one lands wherever the counts cross its threshold: inside a timed run it is the run's
largest cost.
"""

from __future__ import annotations

import argparse
import collections
import gc
import sys
import time
from pathlib import Path

import numpy as np

# the repository, after PYTHONPATH's trees (bench_pipeline's part C inputs)
sys.path.append(str(Path(__file__).resolve().parents[2]))


def _step(name: str, top: int) -> None:
    before = len(gc.get_objects())
    gc.set_debug(gc.DEBUG_SAVEALL)
    t0 = time.perf_counter()
    found = gc.collect()
    spent = time.perf_counter() - t0
    kinds = collections.Counter(type(o).__name__ for o in gc.garbage)
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()  # the saved garbage itself, now freed
    after = len(gc.get_objects())
    print(f"{name:<24} tracked {before:>9,} unreachable {found:>8,} full pass {spent * 1e3:7.1f} ms"
          f" -> {after:>9,}  {kinds.most_common(top)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--outputs", type=int, default=1024)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    gc.disable()
    _step("start", args.top)
    try:
        import torch

        torch.zeros(1, device="cuda")

        def take(x):
            return torch.as_tensor(x, device="cuda")
    except ImportError:
        def take(x):
            return np.asarray(x)
    _step("torch on the GPU", args.top)
    import millipyde as mp
    from bench.bench_pipeline import part_c_photos
    from millipyde.training import recipes

    _step("millipyde imported", args.top)
    hosts = part_c_photos(args.side)
    ops = recipes.figure_5_1_operations()

    def gen(seed: int, n: int):
        return mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=seed,
                            device=0)

    _step("images made", args.top)
    with gen(1, 512) as g, g.batches(256) as it:
        for b in it:
            take(b)
    _step("first batches (compile)", args.top)
    with gen(3, args.outputs) as g:
        for x in g:
            take(x)
    _step("next() warm-up", args.top)
    for seed in (4, 5, 6):
        t0 = time.perf_counter()
        with gen(seed, args.outputs) as g:
            for x in g:
                take(x)
        rate = args.outputs / (time.perf_counter() - t0)
        _step(f"next() seed {seed} ({rate:,.0f}/s)", args.top)
    gc.enable()


if __name__ == "__main__":
    main()
