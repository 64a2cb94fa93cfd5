"""A Pipeline chunk's host steps one by one, wall time each (GPU; any backend runs it).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/chunk_steps.py

Builds ``--inputs`` fresh 512x512 RGB gpuimages on device 0 and, ``--repeat`` times over the
same inputs, takes apart what ``pipeline.chunks.StageChunks.launch`` does for one chunk of the
5-op chain of ``bench_pipeline`` (part A): the stack's steps (the inputs' buffers, the table
of their addresses, the stack's allocation, the table's upload, the stack kernel's launch),
then the record (``Recorder.groups``), the parameters' pack and upload, and each group's
launch; each step timed with ``perf_counter`` after the device went idle, medians printed in
microseconds (a chunk and an input). ``--sync`` synchronizes after every step (the device's
own time beside the host's); ``--busy`` never synchronizes, so each step is queued behind the
kernels before it, as a run's chunks are.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, _inputs  # noqa: E402
from millipyde.array import values_of  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.graph.exec import batch  # noqa: E402
from millipyde.graph.ir.member import Batch  # noqa: E402
from millipyde.pipeline import chunks  # noqa: E402


def _stack_steps(nodes: list, n: int, stream, lap, t: float) -> float:
    """``CudaMemory.stack_into``'s steps one by one (numba-cuda only)."""
    from millipyde.backend.cuda_memory import _stack_kernel

    bufs = [v.buffer for v in nodes]
    t = lap("stack: the inputs' buffers", t)
    srcs = np.array([int(b.gpu_data.device_pointer) for b in bufs], dtype=np.uint64)
    t = lap("stack: the address table", t)
    first = nodes[0]
    stack = runtime.empty((n, *first.shape), first.dtype, 0)
    t = lap("stack: allocate", t)
    table = runtime.upload_small(srcs, 0)
    t = lap("stack: upload the table", t)
    step = stack.strides[0]
    out = runtime.part(stack, 0, np.uint32, (n, step // 4))
    t = lap("stack: the uint32 view", t)
    kern = _stack_kernel()
    blocks = max(1, min(-(-(step // 4) // 256), 64))
    kern[(blocks, n), 256, stream](table, out)
    t = lap("stack: the kernel's launch", t)
    del stack, table, out
    return time.perf_counter()


def _time_driver_calls() -> dict[str, list]:
    """Wrap numba-cuda's driver functions made so far (attributes ``cu*`` of its driver) to
    count calls and wall time by name; returns the tally (filled as they are called)."""
    from numba.cuda.cudadrv import driver

    tally: dict[str, list] = {}
    drv = driver.driver
    for name, fn in list(vars(drv).items()):
        if not name.startswith("cu") or not callable(fn):
            continue

        def timed(*a, _fn=fn, _name=name):
            t0 = time.perf_counter()
            try:
                return _fn(*a)
            finally:
                got = tally.setdefault(_name, [0, 0.0])
                got[0] += 1
                got[1] += time.perf_counter() - t0

        setattr(drv, name, timed)
    return tally


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=250)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--sync", action="store_true")
    ap.add_argument("--profile", type=int, default=0,
                    help="also this many rows of a cProfile of the repeats (by internal time)")
    ap.add_argument("--busy", action="store_true",
                    help="no synchronization between steps or repeats: each step queued "
                         "behind the kernels before it, as in a run")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    base = mp.gpuimage(rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8))
    base._materialize()
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    mp.Pipeline(_inputs(base, 16), ops, device=0).run()  # compile and record once
    mp.synchronize()
    xs = _inputs(base, args.inputs)
    mp.synchronize()
    nodes = values_of(xs)
    n = len(xs)
    stage = chunks.StageChunks(ops, 0)
    key = chunks.group_key(xs[0], nodes[0])
    assert stage.takes(key, xs[0]), "the chain does not record chunks"
    stream = runtime.current_stream()
    steps: dict[str, list[float]] = {}

    def idle() -> None:
        if not args.busy:
            runtime.synchronize(0)

    def lap(label: str, t0: float) -> float:
        if args.sync:
            runtime.synchronize(0)
        t = time.perf_counter()
        steps.setdefault(label, []).append(t - t0)
        return t

    prof = cProfile.Profile() if args.profile else None
    calls: dict[str, list] = {}
    for r in range(args.repeat):
        if prof is not None and r == 2:  # (after two repeats: what a warm chunk does)
            calls = _time_driver_calls()
            prof.enable()
        idle()
        t = time.perf_counter()
        if runtime.name == "cuda" and not runtime.simulated:
            t = _stack_steps(nodes, n, stream, lap, t)
        stack = chunks.stack_values(nodes, 0, stream, lambda: None)
        t = lap("stack_values whole", t)
        rec = stage._recorder(key, 0)
        st = rec.state
        st.inputs, st.stacked_nodes = xs, {0: nodes}
        st.positions = np.arange(n, dtype=np.int64)
        st.stack_rows = np.arange(n, dtype=np.int64)
        stacks = {node.id: (stack, i) for i, node in enumerate(nodes)}
        t = lap("record: the stacks dict", t)
        groups, left = rec.groups(list(range(n)), 0, stacks)
        t = lap("record: Recorder.groups", t)
        st.inputs, st.stacked_nodes, st.stack_rows = [], {}, None
        pk = batch.Pack(n)
        for g in groups:
            g.pack(pk)
        t = lap("pack: Group.pack", t)
        pk.upload(0)
        t = lap("pack: upload", t)
        for g in groups:
            buffer = g.launch(pk)
        t = lap(f"launch: Group.launch x{len(groups)}", t)
        node = groups[-1].kernels()[-1].output
        made = Batch(buffer, node.shape, node.dtype, 0, runtime.member_views(buffer)).members(n)
        t = lap("launch: the members", t)
        runtime.record_event(stream)
        t = lap("launch: record_event", t)
        idle()
        t = time.perf_counter()
        got = stage.launch(key, list(range(n)), xs, nodes, 0, stream, lambda: None,
                           lambda: False)
        t = lap("StageChunks.launch whole", t)
        if not args.busy:
            got.wait()
        del made, got, groups, stack
    if prof is not None:
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.profile)
        print(out.getvalue())
        print("   driver calls of the profiled repeats (numba-cuda's binding), by total time:")
        for name, (k, t) in sorted(calls.items(), key=lambda kv: -kv[1][1]):
            print(f"   {name:28s} {k:6d} calls {t * 1e3:9.2f} ms  {t / k * 1e6:8.1f} us a call")
    total = 0.0
    print(f"== {n} inputs a chunk, {args.repeat} repeats, sync after each step: {args.sync}, "
          f"busy: {args.busy}")
    for label, ts in steps.items():
        med = statistics.median(ts)
        if "whole" not in label:
            total += med
        print(f"   {label:36s} {med * 1e6:9.1f} us a chunk  {med / n * 1e6:7.3f} us an input"
              f"  (min {min(ts) * 1e6:.1f})")
    print(f"   sum of the steps                     {total * 1e6:9.1f} us a chunk")


if __name__ == "__main__":
    main()
