"""One Pipeline run as a timeline of host steps, per thread (any backend; meant for GPUs).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/pipeline_chunk_timeline.py

Pipeline A (the 5-op chain of ``bench_pipeline``) over ``--inputs`` fresh RGB inputs of
``--size`` pixels a side (512; small on the cpu backend, whose kernels are slow: its host steps
are the same Python), on one device and on every device (inputs made on device 0): after two
untimed runs, one run whose steps are stamped (milliseconds from the call of
``Pipeline.run``): the run's set-up (checks, ``Run.__init__``), the grouping into units, each
worker's start, each chunk's record (stack, draws, pack upload) and launch, the wait for its
kernels and its commit, the run's return and the devices' synchronization. The wait for a
chunk's kernels ends when they end (where the worker had nothing else to do), so the gaps
between one wait's end and the next launch's end on a device are where that device may run
dry. ``--chunk N`` sets ``pipeline.chunks.CHUNK``; ``--repeat N``: N timed runs, the
medians of the main thread's steps printed too, and of the start of the first chunk's record
after the call of ``Pipeline.run`` (the last run's timeline as before). The run
(``pipeline.run.Run``: a chain's holds every input's value as the run found it; a one-stage
run's workers release those as they go) is kept past the run's return and released after
the synchronization, timed apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, _inputs  # noqa: E402
from millipyde import pipeline as pipeline_pkg  # noqa: E402
from millipyde import workers  # noqa: E402
from millipyde.pipeline import chunks, run  # noqa: E402

STAMPS: list[tuple[str, str, float, float]] = []
RUNS: list = []  # the timed run's ``Run``, kept past its return: its release timed apart


def _stamp(obj: object, name: str, label: str) -> None:
    fn = getattr(obj, name)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            STAMPS.append((threading.current_thread().name, label, t0, time.perf_counter()))

    setattr(obj, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--chunk", type=int, default=0)
    ap.add_argument("--size", type=int, default=512,
                    help="inputs' side in pixels (small on the cpu backend: its kernels are slow)")
    ap.add_argument("--shape", default="",
                    help="HxWxC of each input (overrides --size; e.g. 3500x4666x4: part B)")
    ap.add_argument("--spread", action="store_true",
                    help="on several devices, input i made on device i %% n (part B(1))")
    ap.add_argument("--repeat", type=int, default=1,
                    help="timed runs; past one, also the median of each main-thread step")
    args = ap.parse_args()
    if args.chunk:
        chunks.CHUNK = args.chunk
    for obj, name, label in [(pipeline_pkg, "_run_of", "set-up"), (run.Run, "units", "units"),
                             (workers.WorkerGroup, "start", "start workers"),
                             (chunks.StageChunks, "record", "record"),
                             (chunks.StageChunks, "start", "launch"),
                             (chunks.Launched, "wait", "wait"),
                             (run.Run, "_commit", "commit"),
                             (run.Run, "_settle_sources", "settle sources"),
                             (run.Run, "execute", "execute"),
                             (workers.WorkerGroup, "join", "join workers"),
                             (run.Run, "_worker", "worker")]:
        _stamp(obj, name, label)
    made = pipeline_pkg._run_of

    def kept(chain):
        got = made(chain)
        RUNS.append(got)
        return got

    pipeline_pkg._run_of = kept
    rng = np.random.default_rng(0)
    shape = tuple(int(v) for v in args.shape.split("x")) if args.shape else \
        (args.size, args.size, 3)
    host = rng.integers(0, 256, shape, dtype=np.uint8)
    ngpu = mp.get_device_count()
    bases = []
    for d in range(ngpu if args.spread else 1):
        with mp.Device(d):
            bases.append(mp.gpuimage(host))
            bases[-1]._materialize()

    def make(spread: int) -> list:
        if spread <= 1:
            return _inputs(bases[0], args.inputs)
        xs = []
        for i in range(args.inputs):
            with mp.Device(i % spread):
                xs.append(bases[i % spread].clone())
        for x in xs:
            x._materialize()
        mp.synchronize()
        return xs

    ops = [mp.Operation(name, *a) for name, a in FIVE]
    where = "spread" if args.spread else "inputs on 0"
    cases = [("1 device", 0)] + ([(f"{ngpu} devices, {where}", None)] if ngpu > 1 else [])
    main_steps = ("set-up", "settle sources", "units", "start workers")
    for tag, device in cases:
        steps: dict[str, list[float]] = {k: [] for k in ("made", *main_steps, "released",
                                                           "returned", "idle", "first")}
        for n in range(2 + args.repeat):
            xs = make(ngpu if args.spread and device is None else 1)
            STAMPS.clear()
            RUNS.clear()
            t0 = time.perf_counter()
            p = mp.Pipeline(xs, ops, device=device)
            tp = time.perf_counter()
            p.run()
            t1 = time.perf_counter()
            mp.synchronize()
            t2 = time.perf_counter()
            RUNS.clear()  # the run's hold on the inputs' values as they were: released here
            t3 = time.perf_counter()
            del xs, p
            if n >= 2:
                for k, v in (("made", tp - t0), ("released", t3 - t2), ("returned", t1 - t0),
                             ("idle", t2 - t0)):
                    steps[k].append(v * 1e3)
                # the first chunk's record starts (the first worker's): ms after the run's call
                steps["first"].append((min(a for _, label, a, _ in STAMPS if label == "record")
                                       - tp) * 1e3)
                for k in main_steps:
                    steps[k].append(sum(b - a for thread, label, a, b in STAMPS
                                        if label == k and thread == "MainThread") * 1e3)
        if args.repeat > 1:
            med = {k: statistics.median(v) for k, v in steps.items()}
            host = sum(med[k] for k in ("made", *main_steps, "released"))
            print(f"== {tag}, main thread, median of {args.repeat} runs (ms): made "
                  f"{med['made']:.3f}, " + ", ".join(f"{k} {med[k]:.3f}" for k in main_steps)
                  + f", released after {med['released']:.3f}: {host:.3f} in all; first "
                  f"record {med['first']:.3f} after the run's call; run returned at "
                  f"{med['returned']:.2f}, devices idle at {med['idle']:.2f}")
        print(f"== {tag}: Pipeline made at {(tp - t0) * 1e3:.2f} ms, run returned at "
              f"{(t1 - t0) * 1e3:.2f} ms, devices idle at {(t2 - t0) * 1e3:.2f} ms "
              f"({args.inputs / (t2 - t0):,.0f} img/s); the run released in "
              f"{(t3 - t2) * 1e3:.2f} ms after it")
        for thread, label, a, b in sorted(STAMPS, key=lambda s: s[2]):
            print(f"   {thread[-14:]:>14s}  {label:14s} {(a - t0) * 1e3:7.2f} -> "
                  f"{(b - t0) * 1e3:7.2f} ms  ({(b - a) * 1e3:6.2f})")


if __name__ == "__main__":
    main()
