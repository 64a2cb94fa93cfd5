"""What numba-cuda's deferred deallocations cost a Pipeline run (GPU).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/pipeline_deallocs.py

numba-cuda frees what it owns (events, modules, its own allocations) through a queue per
context, flushed whenever more than ``CUDA_DEALLOCS_COUNT`` items wait: a flush that frees
device memory waits for the device. Runs Pipeline A (the 5-op chain of ``bench_pipeline``
over ``--inputs`` fresh 512x512 RGB inputs) on one device and on every device, ``--repeat``
times each, alternating plain runs with runs inside ``numba.cuda.defer_cleanup()`` (nothing
flushed during the run), and prints per run its wall time, the items queued by kind
(destructor name, bytes) and the flushes with their wall time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import time
from pathlib import Path

import numpy as np
from numba import cuda
from numba.cuda.cudadrv import driver

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, _inputs  # noqa: E402

QUEUED: collections.Counter = collections.Counter()
FLUSHES: list[tuple[int, float]] = []


def _watch() -> None:
    add, clear = driver._PendingDeallocs.add_item, driver._PendingDeallocs.clear

    def add_item(self, dtor, handle, size=driver._SizeNotSet):
        QUEUED[(getattr(dtor, "__name__", str(dtor)), int(size))] += 1
        return add(self, dtor, handle, size)

    def timed_clear(self):
        n, t0 = len(self._cons), time.perf_counter()
        try:
            return clear(self)
        finally:
            if n and not self.is_disabled:
                FLUSHES.append((n, time.perf_counter() - t0))

    driver._PendingDeallocs.add_item = add_item
    driver._PendingDeallocs.clear = timed_clear


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=4)
    args = ap.parse_args()
    _watch()
    rng = np.random.default_rng(0)
    base = mp.gpuimage(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8))
    base._materialize()
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    ngpu = mp.get_device_count()
    cases = [("1 device", 0)] + ([(f"{ngpu} devices", None)] if ngpu > 1 else [])
    for tag, device in cases:
        mp.Pipeline(_inputs(base, 16), ops, device=device).run()
        mp.synchronize()
        best: dict[str, float] = {}
        for r in range(2 * args.repeat):
            mode = "deferred" if r % 2 else "plain"
            xs = _inputs(base, args.inputs)
            QUEUED.clear()
            FLUSHES.clear()
            hold = cuda.defer_cleanup() if mode == "deferred" else contextlib.nullcontext()
            with hold:
                t0 = time.perf_counter()
                mp.Pipeline(xs, ops, device=device).run()
                mp.synchronize()
                wall = time.perf_counter() - t0
            best[mode] = min(best.get(mode, wall), wall)
            kinds = ", ".join(f"{name} {size} B x{k}" for (name, size), k in
                              sorted(QUEUED.items()))
            flushes = ", ".join(f"{n} items {t * 1e3:.2f} ms" for n, t in FLUSHES)
            print(f"{tag} {mode:8s} {wall * 1e3:7.2f} ms ({args.inputs / wall:,.0f} img/s); "
                  f"queued: {kinds or '-'}; flushes: {flushes or '-'}", flush=True)
            del xs
        print(f"== {tag}: best plain {args.inputs / best['plain']:,.0f} img/s, deferred "
              f"{args.inputs / best['deferred']:,.0f} img/s", flush=True)


if __name__ == "__main__":
    main()
