"""Where the fusion bench's time goes: GPU kernels (CUPTI, through torch.profiler) vs host.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/fusion_breakdown.py

Runs the thesis 5-op chain (bench_fusion's) fused and with fusion off, ``--repeat`` times each
under torch.profiler, and prints per variant: the wall time per chain, the summed GPU kernel time
per chain, and each kernel's mean duration. Wall minus kernels is host time the GPU waited for.
Then, one chain at a time (synchronized, as ``bench fusion`` times them), the host timeline:
recording the ops, when each launch starts and returns (ms from the start), and the inclusive
host time of the executor's steps.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_fusion import _chain, chain_input  # noqa: E402
from millipyde import faults  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.graph.exec import execute, replay  # noqa: E402
from millipyde.graph.exec import gather as exec_gather  # noqa: E402
from millipyde.graph.exec import stencil as exec_stencil  # noqa: E402
from millipyde.graph.plan import footprint, schedule  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--width", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    from torch.profiler import ProfilerActivity, profile

    _, base = chain_input(args.width)
    for fuse in (True, False):
        inputs = [base.clone() for _ in range(args.repeat + 2)]
        for x in inputs:
            x._materialize()
        mp.synchronize()
        for x in inputs[:2]:  # warm-up: compile, pool
            _chain(x)
            with schedule.fusion(fuse):
                execute.materialize(x._node)
        mp.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for x in inputs[2:]:
                _chain(x)
                with schedule.fusion(fuse):
                    execute.materialize(x._node)
            mp.synchronize()
            wall = (time.perf_counter() - t0) * 1e3 / args.repeat
        per = collections.defaultdict(list)
        for ev in prof.events():
            if ev.device_type.name == "CUDA" and "memcpy" not in ev.name.lower():
                per[ev.name].append(ev.device_time_total / 1e3)
        total = sum(sum(v) for v in per.values()) / args.repeat
        print(f"== fusion {'on' if fuse else 'off'}: wall {wall:.3f} ms/chain, "
              f"kernels {total:.3f} ms/chain, host-bound gap {wall - total:.3f} ms")
        for name, ds in sorted(per.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {len(ds) / args.repeat:4.1f}x {np.mean(ds):8.3f} ms  {name[:90]}")
        timeline(base, fuse, args.repeat)
    return 0


# host functions whose inclusive time the timeline sums per chain
TIMED = {
    replay: ("plan",),
    execute: ("private_reader",),
    exec_gather: ("gather_args",),
    exec_stencil: ("stencil_tables", "run_stencil_2d"),
    footprint: ("spans", "full_spans"),
    runtime: ("empty", "upload_small", "_launch", "current_stream"),
    faults: ("check",),
}


def timeline(base: mp.gpuimage, fuse: bool, repeat: int) -> None:
    """Median host times (ms from the chain's start) of one synchronized chain's phases, and
    the inclusive host time of the functions in ``TIMED`` per chain."""
    marks: list[float] = []
    spent: dict[str, list[float]] = collections.defaultdict(list)
    on = [False]  # only the timed chain counts

    def timed(fn, name):
        def wrapper(*a, **kw):
            if not on[0]:
                return fn(*a, **kw)
            t = time.perf_counter()
            if name == "_launch":
                marks.append(t - t0)
            try:
                return fn(*a, **kw)
            finally:
                now = time.perf_counter()
                spent[name][-1] += now - t
                if name == "_launch":
                    marks.append(now - t0)
        return wrapper

    saved = [(mod, name, getattr(mod, name)) for mod, names in TIMED.items() for name in names]
    # the kernel kinds' runners are called through the registry, not their modules
    runners = {kind: execute.RUNNERS[kind] for kind in ("gather", "stencil")}
    rows = []
    for mod, name, fn in saved:
        setattr(mod, name, timed(fn, name))
    for kind, fn in runners.items():
        execute.RUNNERS[kind] = timed(fn, f"run_{kind}")
    try:
        for _ in range(repeat):
            x = base.clone()
            x._materialize()
            mp.synchronize()
            marks.clear()
            for name in [name for _, name, _ in saved] + [f"run_{k}" for k in runners]:
                spent[name].append(0.0)
            on[0] = True
            t0 = time.perf_counter()
            _chain(x)
            t1 = time.perf_counter()
            with schedule.fusion(fuse):
                execute.materialize(x._node)
            t3 = time.perf_counter()
            mp.synchronize()
            t4 = time.perf_counter()
            on[0] = False
            rows.append([t1 - t0, t3 - t0, t4 - t0] + marks)
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)
        execute.RUNNERS.update(runners)
    med = np.median(np.array(rows), axis=0) * 1e3
    print(f"   host: record {med[0]:.3f}, materialize returns at {med[1]:.3f}, synchronized "
          f"at {med[2]:.3f} (ms from the start)")
    print("   launches (start-return): " + ", ".join(
        f"{a:.3f}-{b:.3f}" for a, b in zip(med[3::2], med[4::2], strict=True)))
    print("   inclusive host ms per chain: " + ", ".join(
        f"{name} {np.median(ts) * 1e3:.3f}" for name, ts in spent.items()))


if __name__ == "__main__":
    raise SystemExit(main())
