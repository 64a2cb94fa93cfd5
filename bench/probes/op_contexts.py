"""Host time of one replayed op in ``bench ops``'s loop against the same op in tighter loops,
taken apart (GPU).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/op_contexts.py \\
        [--width 512] [--ops gamma fliplr] [--calls 200]

``op_timeline.py`` shows the timed region of ``bench ops`` at 512 wide to be host-bound: one
kernel of a few microseconds, queued ~35 us after the call, while ``profile_op.py`` times the
same op at ~17 us in a loop of back-to-back calls. This probe runs one op (RGBA uint8, as
``bench ops``) in five contexts and prints, per context, the median host time of the op
(method + ``_materialize``) and of its parts:

- ``bench``: ``bench ops``'s loop: a fresh resident clone (clone + ``_materialize`` +
  ``mp.synchronize``), a device synchronize and two new CUDA events, untimed; then the op;
- ``bench+spin``: the same, then 100 us of a Python busy loop (untimed) before the op: a
  thread that just came back from a synchronize, or not;
- ``bench+warm``: the same, then the same op on another image (untimed) right before it: the
  op's own code and data warm in the caches, the clone fresh;
- ``same image``: no clone: the op again on the previous result; a device synchronize and
  the events between calls;
- ``back-to-back``: the op again on the previous result with nothing between calls but a
  synchronize every 32 (``profile_op``'s median).

Parts (each wrapped, so each call's parts add ~1 us of wrapper time, the same in every context):
``record`` (the method), ``resolve`` (``replay.resolve``), ``bound`` (the replay launch's
backend call, ``RawBound2D``), ``alloc`` and ``launch`` (inside it: the pool and the driver
call), ``settle`` (the output stored, the input dropped). ``op`` is the whole op.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.common import _event, device_synchronize  # noqa: E402
from bench.ops_spec import OPS  # noqa: E402
from millipyde.graph.exec import replay  # noqa: E402
from millipyde.graph.ir.node import Node  # noqa: E402

clock = time.perf_counter_ns
CONTEXTS = ("bench", "bench+spin", "bench+warm", "same image", "back-to-back")
PARTS: dict[str, int] = collections.defaultdict(int)  # this call's parts, ns


def _timed(fn, name: str):
    def wrapper(*a, **k):
        t0 = clock()
        try:
            return fn(*a, **k)
        finally:
            PARTS[name] += clock() - t0
    return wrapper


def instrument(cls, method: str) -> None:
    """Wrap the parts (module and class attributes the op's path looks up at call time)."""
    setattr(cls, method, _timed(getattr(cls, method), "record"))
    if not getattr(replay.resolve, "_op_contexts", False):
        replay.resolve = _timed(replay.resolve, "resolve")
        replay.resolve._op_contexts = True
        Node.settle = _timed(Node.settle, "settle")


def instrument_bounds() -> None:
    """Wrap each learnt replay launch's backend call, allocator and driver launch."""
    for entry in replay._cache.values():
        bound = getattr(entry.fast, "bound", None)
        if bound is None or getattr(bound, "_op_contexts", False):
            continue
        if hasattr(bound, "alloc"):
            bound.alloc = _timed(bound.alloc, "alloc")
        if getattr(bound, "ex", None) is not None:
            bound.ex = _timed(bound.ex, "launch")
        entry.fast.bound = _Marked(bound)


class _Marked:
    _op_contexts = True

    def __init__(self, bound) -> None:
        self.inner = bound

    def __call__(self, *a):
        t0 = clock()
        try:
            return self.inner(*a)
        finally:
            PARTS["bound"] += clock() - t0


def run_context(name: str, op, base, calls: int, vary: bool = False
                ) -> dict[str, list[float]]:
    """``calls`` ops in context ``name``: per part, each call's host us (``vary``: the op's
    first parameter a little different each call)."""
    method, args = op.method, op.args
    out: dict[str, list[float]] = collections.defaultdict(list)
    img = base.clone()
    img._materialize()
    mp.synchronize()
    for i in range(calls + 3):
        if name.startswith("bench"):
            img = base.clone()
            img._materialize()
            mp.synchronize()
        if name != "back-to-back" or i % 32 == 0:
            device_synchronize()
        if name.startswith("bench") or name == "same image":
            start = _event()
            _event()
            start.record()
        if name == "bench+spin":
            t = clock() + 100_000
            while clock() < t:
                pass
        elif name == "bench+warm":
            spare = base.clone()
            spare._materialize()
            getattr(spare, method)(*args)
            spare._materialize()
        if vary:
            args = (op.args[0] + 1e-6 * i, *op.args[1:])
        PARTS.clear()
        t0 = clock()
        getattr(img, method)(*args)
        img._materialize()
        total = clock() - t0
        if i >= 3:
            out["op"].append(total / 1e3)
            for k, v in PARTS.items():
                out[k].append(v / 1e3)
        if i == 2:
            instrument_bounds()
    mp.synchronize()
    return out


def main() -> int:
    """Every context for every op; medians (min) per part."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--ops", nargs="+", default=["gamma", "fliplr"])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--vary", action="store_true",
                    help="a new first parameter each call (gamma: a new table each call)")
    ap.add_argument("--contexts", nargs="+", default=list(CONTEXTS))
    args = ap.parse_args()
    h = args.width * 4 // 3
    host = np.random.default_rng(args.width).integers(0, 256, (h, args.width, 4), np.uint8)
    base = mp.gpuimage(host)
    base._materialize()
    cls = type(base)
    order = ("record", "resolve", "bound", "alloc", "launch", "settle")
    for name in args.ops:
        op = OPS[name]
        instrument(cls, op.method)
        for ctx in args.contexts:
            got = run_context(ctx, op, base, args.calls, args.vary)
            parts = "  ".join(f"{k} {statistics.median(got[k]):5.1f}" for k in order if got[k])
            print(f"{name:<8} {ctx:<13} op {statistics.median(got['op']):6.1f} us "
                  f"(min {min(got['op']):5.1f})  {parts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
