"""Host time of the backend-independent parts of one small op, on any backend (no GPU needed).

On a resident 512x512 RGB uint8 image, ``img.adjust_gamma(g)`` with a new ``g`` each call:

- ``record``: the method call (a node recorded, nothing runs);
- ``record + plan``: that and ``replay.plan`` (a replay hit after the first calls);
- ``gather_args, table``: the kernel's signature and parameters with the 256-entry table built
  on the host (what every call paid before); ``gather_args, inline``: the same with the chain
  computed in the kernel (what device backends do for images this small);
- ``kind_key``: the launch-kind check of the gather's 20 arguments (3 arrays, 17 floats);
- ``pack``: the driver-level parameter block of that launch, packed (``rawlaunch``; no
  driver call);
- ``op, replay launch, no kernel``: ``img.adjust_gamma(g); img._materialize()`` on the replay
  launch path (``replay.learn``) with the backend's launch replaced by a stub returning a
  ready buffer: record, replay lookup, parameters, settle (on the cpu backend the chain is
  computed in the kernel, as device backends do for this size);
- ``raw replay launch, fake driver``: the cuda backend's ``RawBound2D`` call (context check,
  stream, allocation, block rewrite, ``cuLaunchKernel``) with a fake driver and allocator.

Best of 9 runs of N calls, microseconds per call, and Python function calls per call
(cProfile's count: machine-independent). ``python3 bench/probes/host_parts.py [--calls N]``
(any ``MILLIPYDE_BACKEND``; the lead compares before/after on the same machine).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE, launcher, rawlaunch  # noqa: E402
from millipyde.graph.exec import gather as exec_gather  # noqa: E402
from millipyde.graph.exec import replay  # noqa: E402


def _per_call(fn, n: int) -> float:
    fn(0)
    runs = []
    for r in range(9):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i + r * n)
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return min(runs)  # the least disturbed run: this measures code, on shared machines too


def _calls(fn, n: int = 200) -> float:
    fn(0)
    prof = cProfile.Profile()
    prof.enable()
    for i in range(n):
        fn(i)
    prof.disable()
    return pstats.Stats(prof).total_calls / n


def _fake_array(shape: tuple[int, ...]) -> SimpleNamespace:
    ref = np.empty(shape, np.uint8)
    return SimpleNamespace(size=ref.size, dtype=ref.dtype, shape=ref.shape, strides=ref.strides,
                           gpu_data=SimpleNamespace(device_pointer=1 << 32), ndim=ref.ndim,
                           _dummy=SimpleNamespace(is_c_contig=True))


def _template(nscalars: int) -> rawlaunch.Template:
    from numba.core import types

    kinds = [types.Array(types.uint8, 3, "C")] * 3 + [types.float64] * nscalars
    return rawlaunch.build(0, tuple(kinds))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    img = mp.gpuimage(np.random.default_rng(0).integers(0, 256, (512, 512, 3), dtype=np.uint8))
    img._materialize()
    source = img._node

    def record(i: int) -> None:
        img._bind(source)
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)

    def record_plan(i: int) -> None:
        record(i)
        replay.plan(img._node)

    record_plan(0)
    record_plan(1)  # cached on the second sighting
    (k,) = replay.plan(img._node)
    rows = {"record": record, "record + plan": record_plan,
            "gather_args, table": lambda i: exec_gather.gather_args(k)}
    if "tables" in exec_gather.gather_args.__code__.co_varnames:
        rows["gather_args, inline"] = lambda i: exec_gather.gather_args(k, False)
    _, _, p = exec_gather.gather_args(k)
    launch_args = (_fake_array((512, 512, 3)), _fake_array((512, 512, 3)),
                   _fake_array((2, 3, 256)), *p.tolist())
    rows["kind_key (20 args)"] = lambda i: launcher.kind_key(launch_args)
    t = _template(len(p))

    def pack(i: int) -> None:
        t.layout.pack_into(t.block, 0, *t.values(launch_args))

    rows["pack (20 args)"] = pack
    img._bind(source)
    rows["op, replay launch, no kernel"] = _replay_op(img)
    if ACTIVE.name != "cuda":  # (the fake driver replaces the real one for the process)
        rows["raw replay launch, fake driver"] = _raw_bound(t, launch_args, len(p))
    print(f"backend {mp.backend()}, {args.calls} calls, best of 9, us per call, "
          "python calls per call")
    for name, fn in rows.items():
        print(f"  {name:30s} {_per_call(fn, args.calls):8.2f} {_calls(fn):7.1f}", flush=True)


def _replay_op(img: mp.gpuimage):
    """``adjust_gamma(g)`` + ``_materialize()`` on the replay launch, the launch stubbed."""
    if not ACTIVE.caps.device_memory:  # inline the chain as device backends do at this size
        exec_gather.tables_inline = lambda k: bool((k.pre or k.post) and k.lut_mode)
    source = img._node
    for i in range(4):  # planned twice (cached on the second), then replayed: launch learnt
        img._bind(source)
        img.adjust_gamma(0.5 + i * 1e-3)
        img._materialize()
    entry = next(e for e in replay._cache.values() if e.fast is not None)
    ready = img._node.buffer

    class _Stub:  # the backend's part, timed on its own below
        def __call__(self, src, params):
            return ready

    entry.fast.bound = _Stub()

    def op(i: int) -> None:
        img._bind(source)
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)
        img._materialize()

    return op


def _raw_bound(t: rawlaunch.Template, launch_args: tuple, nscalars: int):
    """``RawBound2D.__call__`` with a fake driver (no launch) and a fake allocator."""
    from millipyde.backend import cuda_bound

    class _Driver:
        def cuLaunchKernel(self, *a):  # noqa: N802
            return 0

        def cuCtxGetCurrent(self, out):  # noqa: N802
            out._obj.value = 0xC7
            return 0

    stream = SimpleNamespace(handle=SimpleNamespace(value=0))
    backend = SimpleNamespace(_tls=threading.local(), stream_on=lambda d: stream)
    out = launch_args[1]
    rawlaunch._libcuda = _Driver()
    b = cuda_bound.RawBound2D(backend, None, t, lambda handle: out, 0, 0xC7, (16, 64, 1),
                              (32, 8, 1), launch_args, launch_args[0], nscalars)
    src, params = launch_args[0], list(launch_args[len(launch_args) - nscalars:])
    return lambda i: b(src, params)


if __name__ == "__main__":
    main()
