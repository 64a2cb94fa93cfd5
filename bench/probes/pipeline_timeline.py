"""Where a multi-GPU Pipeline's time goes: host work and GPU waits per input, per device (GPU).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/pipeline_timeline.py

The 5-op Pipeline of ``bench_pipeline`` on ``--count`` 3500x4666 RGBA inputs made on device 0
(as ``bench pipeline`` does), pinned to device 0 (``one``) and then unpinned over every device
(``all``). Each worker's ``apply_operations`` is timed: host (record, planning, launches; for
an input on another device this includes the move) until its stream sync, and the wait in
that sync.
Per device: inputs taken, summed host and wait seconds, and the run's wall time; with one GIL
for every worker, summed host time over all devices near the wall time
means the host serialises the devices. ``--profile``: also a cProfile of every worker's
pinned run (Python 3.12's cProfile sees every thread: the workers' calls, and the main
thread's waits), top entries by internal and by cumulative time.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import H, W, _inputs, workloads  # noqa: E402
from millipyde import pipeline, workers  # noqa: E402


def main() -> None:
    """Run both modes, best of ``--repeat``, and print the per-device table of the best run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval for the run (seconds; Python's default 0.005)")
    args = ap.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    local = threading.local()
    rows: list[tuple[int, float, float]] = []  # (device, host s, wait s)
    plain_apply, plain_sync = pipeline.apply_operations, workers.sync

    def timed_sync(stream):
        local.t_sync = time.perf_counter()
        return plain_sync(stream)

    def timed_apply(x, ops, seed, sample, device, stream, cancelled, **kw):
        t0 = time.perf_counter()
        local.t_sync = None
        try:
            return plain_apply(x, ops, seed, sample, device, stream, cancelled, **kw)
        finally:
            t2 = time.perf_counter()
            t1 = local.t_sync or t2
            rows.append((device, t1 - t0, t2 - t1))

    pipeline.apply_operations, workers.sync = timed_apply, timed_sync
    ops = workloads()["5-op"]
    rng = __import__("numpy").random.default_rng(0)
    base = mp.gpuimage(rng.integers(0, 256, (H, W, 4), dtype="uint8"))
    print(f"devices: {mp.device_count()}, workers per device: "
          f"{workers.workers_per_device(mp.device_count())}, switch interval "
          f"{sys.getswitchinterval()} s")
    for mode in ("one", "all"):
        best = None
        for r in range(args.repeat + 1):  # the first run warms up
            xs = _inputs(base, args.count)
            rows.clear()
            t0 = time.perf_counter()
            pipeline.Pipeline(xs, ops, device=0 if mode == "one" else None).run()
            mp.synchronize()
            wall = time.perf_counter() - t0
            if r and (best is None or wall < best[0]):
                best = (wall, list(rows))
        wall, got = best
        per: dict = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for d, h, w in got:
            per[d][0] += 1
            per[d][1] += h
            per[d][2] += w
        print(f"{mode}: wall {wall:.4f} s; " + "; ".join(
            f"device {d}: {n} inputs, host {h:.4f} s ({h / n * 1e3:.2f} ms each), "
            f"wait {w:.4f} s" for d, (n, h, w) in sorted(per.items())))
        if mode == "one" and args.profile:
            xs = _inputs(base, args.count)
            prof = cProfile.Profile()
            prof.enable()
            pipeline.Pipeline(xs, ops, device=0).run()
            mp.synchronize()
            prof.disable()
            stats = pstats.Stats(prof)
            for key in ("tottime", "cumulative"):
                s = io.StringIO()
                stats.stream = s
                stats.sort_stats(key).print_stats(40)
                print(s.getvalue())


if __name__ == "__main__":
    main()
