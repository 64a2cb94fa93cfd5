"""Host time of one replayed small op on the cuda backend, taken apart on the real driver.

On a resident 512x512 RGB uint8 image, once ``img.adjust_gamma(g); img._materialize()`` has
learnt its replay launch (``RawBound2D``), each row times one part alone: the median over N
calls of each call's host time (a synchronize, untimed, every 32 calls keeps the launch queue
short), microseconds, and Python calls per call (cProfile's count):

- ``op``: the whole op, a new ``g`` each call (what ``profile_op.py`` reports);
- ``record``: ``img.adjust_gamma(g)`` alone (the node recorded, nothing runs);
- ``record + resolve``: that and ``replay.resolve`` (the cached plan found);
- ``ctx check``: ``rawlaunch.current_context()`` (one ``cuCtxGetCurrent``);
- ``alloc``: the replay launch's allocator (an output block and its array object, dropped);
- ``cuLaunchKernel``: the driver call alone over the bound's packed block (same output),
  eleven typed ctypes arguments; ``cuLaunchKernelEx``: the same launch as the replay launch
  makes it where the driver has it (four ctypes objects made once);
- ``bound call``: the replay launch's backend part (``RawBound2D.__call__``: compiled, once
  ``cuda_jit.AFTER`` calls have passed), and ``bound call (ctypes)`` its ctypes path.

``python3 bench/probes/launch_parts.py [--calls N]`` with ``MILLIPYDE_BACKEND=cuda``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.probes.profile_op import _calls, _median_call  # noqa: E402
from millipyde.backend import ACTIVE, cuda_jit, rawlaunch  # noqa: E402
from millipyde.backend.pool import stream_handle  # noqa: E402
from millipyde.graph.exec import replay  # noqa: E402


def replayed_gamma() -> tuple:
    """(a resident 512x512 RGB image, ``op(i)``: its gamma with a new value, materialized, the
    op's replay entry or None) once ``op`` has replayed a few times, the compiled call taken
    from the replay launch's first call."""
    img = mp.gpuimage(np.random.default_rng(0).integers(0, 256, (512, 512, 3), dtype=np.uint8))
    img._materialize()

    def op(i: int) -> None:
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)
        img._materialize()

    cuda_jit.AFTER = 0
    for i in range(8):
        op(i)
    mp.synchronize()
    fast = [e.fast for e in replay._cache.values() if e.fast is not None]
    return img, op, (fast[0] if fast else None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10_000)
    args = ap.parse_args()
    img, op, entry = replayed_gamma()
    bound = getattr(entry, "bound", None)
    print(f"backend {mp.backend()}, replay launch: {type(bound).__name__}", flush=True)
    source = img._node

    def record(i: int) -> None:
        img._bind(source)
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)

    def record_resolve(i: int) -> None:
        record(i)
        replay.resolve(img._node)

    rows = {"op": op, "record": record, "record + resolve": record_resolve,
            "ctx check": lambda i: rawlaunch.current_context()}
    dst = None
    if type(bound).__name__ == "RawBound2D":
        handle = stream_handle(ACTIVE.stream_on(bound.device))
        src = source.buffer
        dst = bound(src, list(entry.base))  # the block now writes into ``dst``, kept alive
        params = list(entry.base)
        lib = bound.lib
        rows["alloc"] = lambda i: bound.alloc(handle)
        rows["cuLaunchKernel"] = lambda i: lib.cuLaunchKernel(
            bound.handle, *bound.config, bound.shared, handle, bound.pointers, None)
        if getattr(bound, "ex", None) is not None:  # (the same launch, its arguments made once)
            rows["cuLaunchKernelEx"] = lambda i: bound.ex(*bound.ex_args)
        rows["bound call"] = lambda i: bound(src, params)
        if getattr(bound, "jit", None) is not None:  # (the compiled call taken: both paths)
            rows["bound call (ctypes)"] = lambda i: bound._ctypes_call(src, params, None, handle)
    for name, fn in rows.items():
        print(f"  {name:20s} {_median_call(fn, args.calls):8.2f} us {_calls(fn, 300):7.1f} calls",
              flush=True)
    img._bind(source)
    del dst


if __name__ == "__main__":
    main()
