"""Where a chunked Pipeline's host time goes, function by function (any backend).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/pipeline_profile.py

The 5-op chain of ``bench_pipeline`` (part A) over ``--inputs`` copies of a ``--size`` RGB
image, run once to compile and record, then timed (best of ``--repeat``), then once under a
cProfile per thread: the main thread's and every Pipeline worker's (``pipeline.run.Run._worker``
wrapped; from Python 3.12 on, one profile sees every thread: then one table of all), for
one device and, where there are several, for every device with the inputs made on device 0.
Prints wall time, microseconds an input, and the top entries by internal time of the workers
(summed) and of the main thread. The timed run ends when the Pipeline has returned and the
devices are synchronized; ``read`` is then the main thread's time to take every output's
device buffer (``_materialize``: where outputs are bound lazily, as members of their chunk's
batch buffer, each one's view and node are made there), given beside it.

``--over-members``: each timed (and the profiled) run's inputs are first run, untimed, through
a one-op Pipeline (``fliplr``), so that the timed chain goes over inputs bound to that run's
unread outputs (members of its chunks' batch buffers, where the tree binds them lazily): a
second run over the same inputs, or a connected next stage, as the timed run sees it.

``--chunk N``: chunks of at most ``N`` inputs (``pipeline.chunks.CHUNK``, 256 by default).
Two runs at two sizes (e.g. 250 and 125: 8 and 16 chunks of 2000 inputs on one device) split
each phase's time into a part per chunk and a part per input: with ``T1`` over ``c1`` chunks
and ``T2`` over ``c2`` of the same inputs, ``(T2 - T1) / (c2 - c1)`` a chunk, the rest per
input.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, _inputs  # noqa: E402

try:
    from millipyde.pipeline import run as pipeline_run  # noqa: E402
except ImportError:  # trees before millipyde.pipeline was a package
    from millipyde import pipeline_run  # noqa: E402


def _top(stats: pstats.Stats, n: int) -> str:
    s = io.StringIO()
    stats.stream = s
    stats.sort_stats("tottime").print_stats(n)
    return s.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--top", type=int, default=40, help="profile rows (0: no profiled run)")
    ap.add_argument("--phases", action="store_true",
                    help="thread CPU and wall seconds of each phase of a chunk instead")
    ap.add_argument("--over-members", action="store_true",
                    help="time the chain over a previous (untimed) Pipeline run's outputs")
    ap.add_argument("--chunk", type=int, default=0,
                    help="most inputs a chunk records (0: the tree's CHUNK)")
    args = ap.parse_args()
    if args.chunk > 0:
        try:
            from millipyde.pipeline import chunks as pipeline_chunks
        except ImportError:  # trees before millipyde.pipeline was a package
            from millipyde import pipeline_chunks
        pipeline_chunks.CHUNK = args.chunk
    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8)
    base = mp.gpuimage(host)
    base._materialize()
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    ngpu = mp.get_device_count()
    cases = [("1 device", 0)] + ([(f"{ngpu} devices, inputs on 0", None)] if ngpu > 1 else [])
    for tag, device in cases:
        mp.Pipeline(_inputs(base, max(16, 4 * ngpu)), ops, device=device).run()
        mp.synchronize()
        times, reads = [], []
        for _ in range(args.repeat):
            xs = _fresh(base, args.inputs, device, args.over_members)
            t0 = time.perf_counter()
            mp.Pipeline(xs, ops, device=device).run()
            mp.synchronize()
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for x in xs:
                x._materialize()
            reads.append(time.perf_counter() - t0)
            del xs
        best = min(times)
        if args.phases:
            _phases(base, ops, device, args.inputs, tag, args.over_members)
            continue
        mid = sorted(times)[len(times) // 2]
        print(f"== {tag}: best {best:.4f} s = {args.inputs / best:,.0f} img/s, "
              f"{best / args.inputs * 1e6:.1f} us an input (median {mid / args.inputs * 1e6:.1f}; "
              f"runs {[round(t, 4) for t in times]}); read every output after it: "
              f"{min(reads) / args.inputs * 1e6:.2f} us an input", flush=True)
        if args.top <= 0:
            continue
        profs: list[cProfile.Profile] = []
        orig = pipeline_run.Run._worker

        def worker(self, *a, _orig=orig, profs=profs):
            p = cProfile.Profile()
            profs.append(p)
            p.enable()
            try:
                return _orig(self, *a)
            finally:
                p.disable()

        every_thread = sys.version_info >= (3, 12)  # (sys.monitoring: one profiler a process)
        if not every_thread:
            pipeline_run.Run._worker = worker
        xs = _fresh(base, args.inputs, device, args.over_members)
        main_prof = cProfile.Profile()
        t0 = time.perf_counter()
        main_prof.enable()
        try:
            mp.Pipeline(xs, ops, device=device).run()
            mp.synchronize()
        finally:
            main_prof.disable()
            pipeline_run.Run._worker = orig
        print(f"   profiled run {time.perf_counter() - t0:.4f} s, {len(profs)} worker(s)")
        if every_thread:
            print(f"-- every thread, {tag}\n" + _top(pstats.Stats(main_prof), args.top),
                  flush=True)
            continue
        print(f"-- workers, {tag}\n" + _top(pstats.Stats(*profs), args.top))
        print(f"-- main thread, {tag}\n" + _top(pstats.Stats(main_prof), args.top // 2),
              flush=True)


def _fresh(base: mp.gpuimage, n: int, device: int | None, over_members: bool) -> list:
    """``n`` inputs; ``over_members``: bound to a one-op Pipeline run's outputs, unread."""
    xs = _inputs(base, n)
    if over_members:
        mp.Pipeline(xs, [mp.Operation("fliplr")], device=device).run()
        mp.synchronize()
    return xs


def _phases(base: mp.gpuimage, ops: list, device: int | None, n: int, tag: str,
            over_members: bool = False) -> None:
    """Thread CPU and wall seconds summed over the run's chunks, per phase: the stack of
    inputs, the record (draws, groups), the pack upload, the launches, the outputs (eager
    trees: the member views and leaf nodes; lazy ones: the members' references), the commits;
    the grouping into units on the main thread; then, after the run, the main thread's read
    of every output (``_materialize``)."""
    import collections
    import threading

    from millipyde.backend import ACTIVE as runtime
    from millipyde.graph.exec import batch, batch_group
    try:
        from millipyde.pipeline import chunks as pipeline_chunks
        from millipyde.training.batch_record import Recorder
    except ImportError:  # trees before millipyde.pipeline and training were packages
        from millipyde.batch_record import Recorder

        from millipyde import pipeline_chunks

    acc: dict = collections.defaultdict(lambda: [0.0, 0.0, 0])
    lock = threading.Lock()

    def timed(fn, label):
        def wrapper(*a, **k):
            c0, t0 = time.thread_time(), time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                with lock:
                    got = acc[label]
                    got[0] += time.thread_time() - c0
                    got[1] += time.perf_counter() - t0
                    got[2] += 1
        return wrapper

    patches = [(pipeline_chunks, "_stack"), (pipeline_chunks, "stack_values"),
               (pipeline_chunks, "leaves"), (Recorder, "groups"),
               (batch.Pack, "upload"), (batch_group.Group, "launch"),
               (batch_group.Group, "pack"), (pipeline_run.Run, "_finish"),
               (pipeline_run.Run, "_commit"), (pipeline_run.Run, "units"),
               (pipeline_chunks.StageChunks, "launch"), (pipeline_chunks.StageChunks, "record"),
               (pipeline_chunks.StageChunks, "start"), (pipeline_run.Run, "_launch"),
               (pipeline_run, "still_holds"), (pipeline_run, "bind_members"),
               (batch_group.Group, "rebound"), (pipeline_chunks.Launched, "wait"),
               (runtime, "record_event"), (runtime, "stack_into")]
    try:  # trees whose chunks bind their outputs lazily
        from millipyde.graph.ir.member import Batch
        patches.append((Batch, "members"))
    except ImportError:
        pass
    saved = [(obj, name, getattr(obj, name)) for obj, name in patches if hasattr(obj, name)]
    members = runtime.members
    try:
        for obj, name, fn in saved:
            setattr(obj, name, timed(fn, f"{getattr(obj, '__name__', type(obj).__name__)}.{name}"))
        runtime.members = timed(members, "runtime.members")
        for _ in range(2):
            xs = _fresh(base, n, device, over_members)
            acc.clear()
            t0 = time.perf_counter()
            mp.Pipeline(xs, ops, device=device).run()
            mp.synchronize()
            wall = time.perf_counter() - t0
            c0, t0 = time.thread_time(), time.perf_counter()
            for x in xs:
                x._materialize()
            read = [time.thread_time() - c0, time.perf_counter() - t0, n]
        acc["read every output after the run"] = read
        print(f"== {tag}, phases: wall {wall:.4f} s ({n / wall:,.0f} img/s)")
        for label, (cpu, w, calls) in sorted(acc.items(), key=lambda kv: -kv[1][0]):
            print(f"   {label:38s} {calls:5d} calls  thread CPU {cpu * 1e3:8.2f} ms "
                  f"({cpu / n * 1e6:5.2f} us an input)  wall {w * 1e3:8.2f} ms")
    finally:
        for obj, name, fn in saved:
            setattr(obj, name, fn)
        del runtime.members


if __name__ == "__main__":
    main()
