"""Host time of one replayed op, ``img.adjust_gamma(g); img._materialize()`` with a new ``g``
each call on a resident RGB uint8 image, with the per-op fast paths on and off in turns.

Rows (median over N calls of each call's own host time, microseconds; on a GPU a synchronize,
untimed, every 32 calls keeps the launch queue short):

- ``op``: the whole op, from the method call until the kernel is queued (issue 13's measure);
- ``record``: ``img.adjust_gamma(g)`` alone (the node recorded, nothing runs);
- ``materialize``: ``img._materialize()`` of a node just recorded (the plan found, the replay
  launch called, the output stored): ``op`` less ``record``, timed alone;
- Python calls per op (cProfile's count).

Each row is taken with the fast paths on (``fast``) and off (``slow``) in turns, ``--rounds``
times: off means ``replay.SINGLE = False`` (every one-op chain looked up through its full key)
and plain ``threading.local`` objects for the device stack, the backend's per-thread state and
the random streams' key (every read of a field not set in the thread raises and catches an
AttributeError: the code before these fast paths).

The launch: on ``MILLIPYDE_BACKEND=cuda`` the real one (the replay launch the backend bound:
``RawBound2D`` through the driver). Elsewhere (no GPU: ``cudasim``) the image is ``--side``
16 by default, because the simulator runs the warm-up launches a thread at a time, and the
replay launch's backend call is a stub that returns an output made once: the rows then time
all the Python above the backend's bound launch, which is the same code as on a GPU (the
plan's key does not depend on the side beyond equality). ``--stub`` forces the stub on a GPU
too (the driver call, the allocation and the context check left out).

Without a GPU (and with gcc) two more rows time the cuda backend's own part of the replay
launch, ``RawBound2D.__call__`` (``backend/cuda_bound.py``), over a no-op driver built here
(``cuCtxGetCurrent`` and ``cuLaunchKernelEx`` return at once) and an allocator that returns
one output made once: ``bound (ctypes)`` its first ``cuda_jit.AFTER`` calls' path, ``bound
(compiled)`` the compiled calls' (where they load). Its parameter block has the gamma gather's
scalars. So ``op`` here + ``bound`` + the driver's launch, the allocation and the context check
as measured on a GPU (``launch_parts.py``) estimate the op there.

``python3 bench/probes/host_fastpath.py [--calls N] [--rounds R] [--side S] [--stub]`` from the
repository root, with ``MILLIPYDE_BACKEND`` set.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.probes.profile_op import _calls, _median_call  # noqa: E402
from millipyde import devices  # noqa: E402
from millipyde import random as mprandom  # noqa: E402
from millipyde.backend import ACTIVE  # noqa: E402
from millipyde.graph.exec import replay  # noqa: E402

_NOOP_DRIVER = r"""
#include <stdint.h>
#include <stddef.h>
int cuCtxGetCurrent(uint64_t *out) { *out = 0xC7; return 0; }
int cuLaunchKernelEx(const void *c, uint64_t f, void **p, void **e) { return 0; }
int cuLaunchKernel(uint64_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned sh, uint64_t st, void **p, void **e) {
    return 0;
}
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, uint64_t st) { return 0; }
"""


def _noop_bound(nscalars: int, side: int):
    """A ``RawBound2D`` of a (src, dst, table, ``nscalars`` float64) launch over the no-op
    driver, its backend the active one's thread state and a known stream; None without gcc."""
    import ctypes
    import shutil
    import subprocess
    import tempfile
    from types import SimpleNamespace

    from cuda.bindings.driver import CUdeviceptr
    from numba.core import types

    from millipyde.backend import rawlaunch
    from millipyde.backend.cuda_bound import RawBound2D
    from millipyde.backend.cuda_devices import CudaDevices

    if shutil.which("gcc") is None:
        return None
    d = Path(tempfile.mkdtemp(prefix="noopcuda"))
    (d / "noop.c").write_text(_NOOP_DRIVER)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(d / "libnoop.so"),
                    str(d / "noop.c")], check=True)
    rawlaunch._libcuda = rawlaunch.typed(ctypes.CDLL(str(d / "libnoop.so")))

    def array(ptr: int) -> SimpleNamespace:
        ref = np.empty((side, side, 3), np.uint8)
        return SimpleNamespace(size=ref.size, dtype=ref.dtype, shape=ref.shape,
                               strides=ref.strides, ndim=3,
                               gpu_data=SimpleNamespace(device_pointer=CUdeviceptr(ptr)))

    class Backend:
        _default_streams = {0: SimpleNamespace(handle=SimpleNamespace(value=0x77))}
        stream_on = CudaDevices.stream_on
        _tls = property(lambda self: ACTIVE._tls)  # (the switch's thread state)

    arr3 = types.Array(types.uint8, 3, "C")
    template = rawlaunch.build(0x1234, (arr3, arr3, arr3) + (types.float64,) * nscalars)
    src, dst, table = array(1 << 20), array(1 << 21), array(1 << 22)
    bound = RawBound2D(Backend(), None, template, lambda handle: dst, 0, 0xC7, (16, 64, 1),
                       (32, 8, 1), (src, dst, table) + (0.5,) * nscalars, src, nscalars)
    bound.warm = -1  # (the ctypes path until ``_attach`` is called)
    return bound, src, [0.5] * nscalars


class _Switch:
    """The per-op fast paths on (``fast``) or off (``slow``: as before them)."""

    def __init__(self) -> None:
        self.fast = (devices.TARGETS, ACTIVE._tls, mprandom.STREAM_KEYS)

    def set(self, on: bool) -> None:
        replay.SINGLE = on
        if on:
            devices.TARGETS, ACTIVE._tls, mprandom.STREAM_KEYS = self.fast
        else:  # (fresh plain thread-locals: nothing is set in them at the probe's top level)
            fresh = (threading.local(), threading.local(), threading.local())
            devices.TARGETS, ACTIVE._tls, mprandom.STREAM_KEYS = fresh


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", type=int, default=None)
    ap.add_argument("--stub", action="store_true")
    args = ap.parse_args()
    gpu = mp.backend() == "cuda"
    stub = args.stub or not gpu
    side = args.side or (512 if gpu else 16)
    img = mp.gpuimage(np.random.default_rng(0).integers(0, 256, (side, side, 3),
                                                         dtype=np.uint8))
    img._materialize()
    source = img._node

    def op(i: int) -> None:
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)
        img._materialize()

    for i in range(8):  # planned, cached, the replay launch learnt
        op(i)
    mp.synchronize()
    fast = [e.fast for e in replay._cache.values() if e.fast is not None]
    if not fast:
        raise SystemExit("no replay launch was learnt")
    bound = fast[0].bound
    if stub:
        out = img._node.buffer

        def stubbed(src, params, table=None):
            return out

        fast[0].bound = stubbed
    load = os.getloadavg()
    print(f"backend {mp.backend()}, {side}x{side} RGB, replay launch {type(bound).__name__}"
          f"{' (stubbed)' if stub else ''}, {args.calls} calls a row, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)

    def record(i: int) -> None:
        img._bind(source)
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)

    def timed_materialize(n: int) -> float:
        # each call's node recorded untimed just before it
        clock = time.perf_counter_ns
        times = []
        for i in range(n):
            img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)
            t0 = clock()
            img._materialize()
            times.append(clock() - t0)
            if gpu and i & 31 == 31:
                mp.synchronize()
        mp.synchronize()
        return statistics.median(times) / 1e3

    switch = _Switch()
    rows = {"op": lambda: _median_call(op, args.calls),
            "record": lambda: _median_call(record, args.calls),
            "materialize": lambda: timed_materialize(args.calls)}
    noop = None if gpu else _noop_bound(len(fast[0].base), side)
    if noop is not None:
        raw, raw_src, _ = noop
        base, at = fast[0].base, fast[0].slots[0][1]

        def raw_call(i: int) -> None:
            # as the replay launch calls it: a copy of its base, the gamma's slot written
            p = base.copy()
            p[at] = 0.5 + (i % 100_000) * 1e-5
            raw(raw_src, p)

        rows["bound (ctypes)"] = lambda: _median_call(raw_call, args.calls)
    results: dict[tuple[str, bool], list[float]] = {}
    for r in range(args.rounds):
        for name, fn in rows.items():
            for on in ((True, False) if r % 2 == 0 else (False, True)):
                switch.set(on)
                img._bind(source)
                results.setdefault((name, on), []).append(fn())
                img._bind(source)
    if noop is not None:
        raw._attach()
        if raw.jit is not None:
            for r in range(args.rounds):
                for on in ((True, False) if r % 2 == 0 else (False, True)):
                    switch.set(on)
                    results.setdefault(("bound (compiled)", on), []).append(
                        _median_call(raw_call, args.calls))
            rows["bound (compiled)"] = None
    calls = {}
    for on in (True, False):
        switch.set(on)
        img._bind(source)
        calls[on] = _calls(op, 300)
        img._bind(source)
    switch.set(True)
    for name in rows:
        f, s = results[(name, True)], results[(name, False)]
        print(f"  {name:16s} fast {' '.join(f'{v:6.2f}' for v in f)}  slow "
              f"{' '.join(f'{v:6.2f}' for v in s)}  us (rounds)", flush=True)
    print(f"  Python calls per op: fast {calls[True]:.1f}, slow {calls[False]:.1f}")


if __name__ == "__main__":
    main()
