"""Where a run of figure-5.1 training batches spends its time, per run (GPU): the spread.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/batch_spread.py

``--runs`` runs of ``bench_batches.rate``'s loop (``batches(256)`` float32 NCHW taken as torch
tensors and dropped, ``--batches`` per run), each printing its rate and, per batch (medians):
the worker's ``_write_recorded`` wall time and its thread CPU time (wall well above CPU: the
worker waited, for the GIL or in the driver), and the consumer's time inside ``next()``
(waiting for the worker or the GPU). With kernels of ~2.45 ms per batch, a run whose worker
wall time is above that is bound by the host.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.getcwd())  # the tree under test

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_batches import _images, _sync, _tensor, operations  # noqa: E402
from millipyde import batches  # noqa: E402


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--batches", type=int, default=30)
    a = ap.parse_args()
    imgs = _images(512)
    rec: list[tuple[float, float]] = []
    orig = batches.Batches._write_recorded

    def timed(self, *args, **kw):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return orig(self, *args, **kw)
        finally:
            rec.append((time.perf_counter() - t0, time.thread_time() - c0))

    batches.Batches._write_recorded = timed
    for run in range(a.runs + 1):
        rec.clear()
        waits = []
        with mp.Generator(imgs, operations(), seed=run).batches(256) as bs:
            next(bs)
            _sync()
            rec.clear()
            t0 = time.perf_counter()
            for _ in range(a.batches):
                t1 = time.perf_counter()
                b = next(bs)
                waits.append(time.perf_counter() - t1)
                _tensor(b)
            _sync()
            dt = time.perf_counter() - t0
        if run == 0:
            continue  # compiles
        wall, cpu = (np.median([r[i] for r in rec]) * 1e3 for i in (0, 1))
        print(f"run {run}: {a.batches * 256 / dt:,.0f} img/s; worker record wall {wall:.2f} ms, "
              f"CPU {cpu:.2f} ms (median of {len(rec)}); consumer in next() "
              f"{np.median(waits) * 1e3:.2f} ms median, {np.mean(waits) * 1e3:.2f} mean",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
