"""Host time of the backend-independent parts of one small op, on any backend (no GPU needed).

On a resident 512x512 RGB uint8 image, ``img.adjust_gamma(g)`` with a new ``g`` each call:

- ``record``: the method call (a node recorded, nothing runs);
- ``record + plan``: that and ``replay.plan`` (a replay hit after the first calls);
- ``gather_args, table``: the kernel's signature and parameters with the 256-entry table built
  on the host (what every call paid before); ``gather_args, inline``: the same with the chain
  computed in the kernel (what device backends do for images this small);
- ``kind_key``: the launch-kind check of the gather's 20 arguments (3 arrays, 17 floats);
- ``pack``: the driver-level parameter block of that launch, packed (``rawlaunch``; no
  driver call).

Best of 9 runs of N calls, microseconds per call. ``python3 bench/probes/host_parts.py [--calls N]``
(any ``MILLIPYDE_BACKEND``; the lead compares before/after on the same machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from millipyde.backend import launcher, rawlaunch  # noqa: E402
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
    print(f"backend {mp.backend()}, {args.calls} calls, best of 9, us per call")
    for name, fn in rows.items():
        print(f"  {name:26s} {_per_call(fn, args.calls):8.2f}", flush=True)
    img._bind(source)


if __name__ == "__main__":
    main()
