"""What a Pipeline chunk's output costs per member, made eagerly or bound as a member and read.

    MILLIPYDE_BACKEND=cpu python bench/probes/member_costs.py [--members 256] [--rounds 20]

On the active backend, over one batch buffer of ``--members`` 32x32 float64 members (best of
``--rounds``, ns a member): the eager outputs (``Backend.members`` views, ``node.leaves``,
``gpuarray._bind``), the lazy ones (``Batch.members``, ``gpuarray._bind_member`` from a node),
and the reads of a lazily bound array after it: its buffer alone (``_materialize``: the view)
and its node (``x._node``: view, leaf, lock). Then, without a device, the ``cuda`` backend's
stamp of one member view (``pool._Layouts.member_stamp``; a 512x512 float64 layout, the
context ``None``), which the eager batch stamps per member too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.graph.ir.member import Batch  # noqa: E402
from millipyde.graph.ir.node import leaves  # noqa: E402


def _best(fn: Callable[[], object], n: int, rounds: int, prepare: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        prepare()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    n, rounds = args.members, args.rounds
    shape, dtype = (32, 32), np.dtype(np.float64)
    buffer = runtime.from_host(np.zeros((n, *shape), dtype), 0)
    xs = [mp.gpuimage(np.zeros(shape)) for _ in range(n)]
    nodes = leaves(runtime.members(buffer), shape, dtype, 0)
    state: dict = {}

    def on_nodes() -> None:  # every array back on a stored node
        for x, node in zip(xs, nodes, strict=True):
            x._bind(node)

    def eager() -> None:
        for x, node in zip(xs, leaves(runtime.members(buffer), shape, dtype, 0), strict=True):
            x._bind(node)

    def lazy() -> None:
        batch = Batch(buffer, shape, dtype, 0, runtime.member_views(buffer))
        for x, m in zip(xs, batch.members(n), strict=True):
            x._bind_member(m)

    def lazy_bound() -> None:
        on_nodes()
        lazy()

    def read_buffer() -> None:
        for x in xs:
            x._materialize()

    def read_node() -> None:
        for x in xs:
            state["node"] = x._node

    rows = [("eager: views, leaves, bind", eager, on_nodes),
            ("lazy: Batch.members, bind a member", lazy, on_nodes),
            ("read a lazy one's buffer (_materialize)", read_buffer, lazy_bound),
            ("read a lazy one's node (x._node)", read_node, lazy_bound)]
    print(f"backend {runtime.name}, {n} members of {shape} {dtype}, best of {rounds}")
    for label, fn, prepare in rows:
        print(f"  {label:42s} {_best(fn, n, rounds, prepare):7.0f} ns a member", flush=True)
    try:
        from numba.cuda.cudadrv import devicearray

        from millipyde.backend.pool import LAYOUTS
    except ImportError:
        return
    if not hasattr(devicearray, "DeviceNDArray"):  # (the CUDA simulator's module)
        return
    big = (512, 512)
    step = 512 * 512 * 8
    stamp = LAYOUTS.member_stamp(step, dtype, big, 1 << 24, object(), None)
    t = _best(lambda: [stamp(m) for m in range(n)], n, rounds, lambda: None)
    print(f"  {'cuda: one member view stamped (no device)':42s} {t:7.0f} ns a member")


if __name__ == "__main__":
    main()
