"""Where a run of figure-5.1 training batches spends its time, per run (GPU): the spread.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/batch_spread.py \
        [--runs 4] [--batches 30] [--device 0|all] [--ahead N ...]

``--runs`` runs of ``bench_batches.rate``'s loop (``batches(256)`` float32 NCHW taken as torch
tensors and dropped, ``--batches`` per run, timed after the batches made ahead were taken),
each printing its rate and, per batch: the worker's ``_write_recorded`` wall time and its
thread CPU time per device (wall well above CPU: the worker waited, for the GIL or in the
driver), the consumer's time inside ``next()`` (waiting for the worker or the GPU), as median,
90th percentile and maximum, and Python's garbage-collector pauses inside the timed window.
``--device all`` makes the batches on every visible GPU in one process (one worker per
device); ``--ahead`` runs the same loop once per window size (batches made ahead of the
consumer, ``Batches._ahead``; default: the library's). With kernels of ~2.45 ms per batch, a
run whose worker wall time is above that is bound by the host.
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import threading
import time

sys.path.insert(0, os.getcwd())  # the tree under test

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_batches import _images, _steady, _sync, _tensor, operations  # noqa: E402
from millipyde.training import batches  # noqa: E402


def _ms(xs: list[float]) -> str:
    a = np.asarray(xs) * 1e3
    return f"{np.median(a):.2f}/{np.percentile(a, 90):.2f}/{a.max():.2f}"


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--device", default="0", help="a device index, or 'all'")
    ap.add_argument("--ahead", type=int, nargs="*", default=[0],
                    help="window sizes to run (0: the library's)")
    a = ap.parse_args()
    imgs = _images(512)
    rec: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    orig = batches.Batches._write_recorded

    def timed(self, rec_, ks, device, stream):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return orig(self, rec_, ks, device, stream)
        finally:
            rec[f"dev{device}"].append((time.perf_counter() - t0, time.thread_time() - c0))

    batches.Batches._write_recorded = timed
    pauses: list[float] = []
    started: dict[int, float] = {}

    def on_gc(phase: str, info: dict) -> None:
        tid = threading.get_ident()
        if phase == "start":
            started[tid] = time.perf_counter()
        elif tid in started:
            pauses.append(time.perf_counter() - started.pop(tid))

    gc.callbacks.append(on_gc)
    dev = None if a.device == "all" else int(a.device)
    print(f"devices: {mp.get_device_count()} visible; making on "
          f"{'every one' if dev is None else f'device {dev}'}; times in ms as "
          "median/p90/max over the timed batches", flush=True)
    for ahead in a.ahead:
        for run in range(a.runs + 1):
            waits = []
            gen = mp.Generator(imgs, operations(), seed=run, device=dev)
            with gen.batches(256) as bs:
                if ahead:
                    bs._ahead = ahead
                next(bs)
                _sync()
                _steady(bs)
                rec.clear()
                pauses.clear()
                t0 = time.perf_counter()
                for _ in range(a.batches):
                    t1 = time.perf_counter()
                    b = next(bs)
                    waits.append(time.perf_counter() - t1)
                    _tensor(b)
                _sync()
                dt = time.perf_counter() - t0
                window = bs._ahead
            if run == 0:
                continue  # compiles, loads
            parts = "; ".join(
                f"{d} record wall {_ms([r[0] for r in rs])} CPU {_ms([r[1] for r in rs])} "
                f"({len(rs)})" for d, rs in sorted(rec.items()))
            print(f"ahead {window} run {run}: {a.batches * 256 / dt:,.0f} img/s; {parts}; "
                  f"next() {_ms(waits)}; gc pauses {len(pauses)}, "
                  f"{sum(pauses) * 1e3:.1f} ms in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
