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
"""

from __future__ import annotations

import argparse
import gc
import importlib
import time

import numpy as np
from skimage import data, transform

import millipyde as mp

try:
    from millipyde.training import recipes
except ImportError:  # trees that keep it at the top level
    from millipyde import recipes  # type: ignore[no-redef]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--outputs", type=int, default=4096)
    ap.add_argument("--seeds", type=int, default=3, help="Generators timed (seeds 4, 5, ..)")
    args = ap.parse_args()
    hosts = []
    for name in ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
                 "immunohistochemistry"):
        img = transform.resize(getattr(data, name)(), (args.side, args.side, 3),
                               preserve_range=True, anti_aliasing=False)
        hosts.append(np.clip(np.rint(img), 0, 255).astype(np.uint8))
    ops = recipes.figure_5_1_operations()
    n = args.outputs

    def gen(seed: int) -> mp.Generator:
        return mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=seed,
                            device=0)

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
    # the garbage collector's passes and their time (a batch's many small objects)
    gcs = {"runs": 0, "s": 0.0, "t0": 0.0}

    def collected(phase: str, info: dict) -> None:
        if phase == "start":
            gcs["t0"] = time.perf_counter()
        else:
            gcs["runs"] += 1
            gcs["s"] += time.perf_counter() - gcs["t0"]

    gc.callbacks.append(collected)
    with gen(3) as g:
        for x in g:
            np.asarray(x)
    print(f"millipyde from {mp.__file__}")
    total = {"c": 0.0, "outside": 0.0, "gc": 0.0}
    for seed in range(4, 4 + args.seeds):
        with gen(seed) as g:
            gcs.update(runs=0, s=0.0)
            k0, c0, t0 = kernel_s[0], time.process_time(), time.perf_counter()
            for x in g:
                np.asarray(x)
            wall, c = time.perf_counter() - t0, time.process_time() - c0
        total["c"] += c
        total["outside"] += c - (kernel_s[0] - k0)
        total["gc"] += gcs["s"]
        print(f"seed {seed}: {n / wall:,.0f} img/s, cpu/wall {c / wall:.2f}, process CPU "
              f"{c / n * 1e6:.1f} us/output, outside kernels "
              f"{(c - (kernel_s[0] - k0)) / n * 1e6:.1f} us/output; garbage collection "
              f"{gcs['runs']} passes, {gcs['s'] * 1e3:.1f} ms", flush=True)
    m = n * args.seeds
    print(f"all {args.seeds}: process CPU {total['c'] / m * 1e6:.1f} us/output, outside kernels "
          f"{total['outside'] / m * 1e6:.1f}, garbage collection {total['gc'] / m * 1e6:.1f}")


if __name__ == "__main__":
    main()
