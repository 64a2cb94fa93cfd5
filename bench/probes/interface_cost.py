"""The Python side of a gpuimage's ``__cuda_array_interface__`` and ``__dlpack__``, no GPU.

    MILLIPYDE_BACKEND=cpu PYTHONPATH=<tree> python bench/probes/interface_cost.py [--rounds 5]

Outputs as ``next()`` hands them out (gpuimages over members of a batch buffer stamped by the
pool, ``pool.LAYOUTS.member_stamp``), but over made-up device addresses: numba-cuda's
device arrays and their ``__cuda_array_interface__`` need no GPU until their memory is
touched. The cpu backend is told it has external memory (and, where the tree has
``Backend.interface``, given the cuda backend's). Rows, us an output, best of the rounds:
numba-cuda's property on the member alone; the gpuimage's property on fresh outputs (the
first read); again (what the second read of a take costs); ``hasattr`` then ``getattr`` on
fresh outputs, the two reads ``torch.as_tensor`` makes; and, where the tree makes DLPack
capsules itself, ``__dlpack__`` on fresh outputs as ``torch.from_dlpack`` asks (its stream the
legacy one; the capsule dropped unconsumed, which runs the same deleter). What this leaves
out: torch's own parse of the dict (~5 us an output on an H200) and its ``from_dlpack``, the
stream protocol's driver calls, and the GPU machine's faster host.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import time

import numpy as np

import millipyde as mp
from millipyde.backend import ACTIVE
from millipyde.backend.pool import LAYOUTS


def _outputs(n: int) -> list[mp.gpuimage]:
    step = 512 * 512 * 3
    layout = (np.dtype(np.uint8), (512, 512, 3), 0x7F00_0000_0000, None, None)
    if not hasattr(LAYOUTS, "member_stamp"):  # (a tree from before 2026-11-29)
        return [mp.gpuimage.from_buffer(m, 0) for m in LAYOUTS.stamp_members(n, step, *layout)]
    stamp = LAYOUTS.member_stamp(step, *layout)
    return [mp.gpuimage.from_buffer(stamp(m), 0) for m in range(n)]


def _time(fn, xs) -> float:
    t0 = time.perf_counter()
    fn(xs)
    return (time.perf_counter() - t0) / len(xs) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outputs", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    # a tree that makes its capsules itself (before: CuPy's, absent here)
    dlpack_here = importlib.util.find_spec("millipyde.backend.dlpack") is not None
    ACTIVE.caps = dataclasses.replace(ACTIVE.caps, external_memory=True)
    if hasattr(ACTIVE, "interface"):
        from millipyde.backend.cuda import CudaBackend

        ACTIVE.interface = CudaBackend.__new__(CudaBackend).interface
    name = "__cuda_array_interface__"

    def own(xs):
        for x in xs:
            x._node.buffer.__cuda_array_interface__  # noqa: B018

    def read(xs):
        for x in xs:
            x.__cuda_array_interface__  # noqa: B018

    def take(xs):
        for x in xs:
            if hasattr(x, name):
                getattr(x, name)

    rows: dict[str, list[float]] = {}
    for _ in range(a.rounds):
        xs = _outputs(a.outputs)
        rows.setdefault("numba-cuda's property (the member)", []).append(_time(own, xs))
        rows.setdefault("gpuimage's property, first read", []).append(_time(read, xs))
        rows.setdefault("gpuimage's property, again", []).append(_time(read, xs))
        rows.setdefault("hasattr + getattr (a take's two)", []).append(
            _time(take, _outputs(a.outputs)))
        if dlpack_here:
            def capsules(xs):
                for x in xs:
                    x.__dlpack__(stream=1, max_version=(1, 0))

            rows.setdefault("__dlpack__, a fresh output", []).append(
                _time(capsules, _outputs(a.outputs)))
    print(f"tree {mp.__file__}")
    for row, us in rows.items():
        print(f"{row:40s} {min(us):7.3f} us an output  ({' / '.join(f'{u:.3f}' for u in us)})")


if __name__ == "__main__":
    main()
