"""The floors under issue 13's 8 us: what one launch costs the host with no Python around it, and
what CuPy and torch pay per small op on the same image, same protocol.

On a resident 512x512 RGB image, each row is the median over N calls of one call's host time
(microseconds; a synchronize, untimed, every 32 calls keeps the launch queue short):

- ``driver floor``: ``cuLaunchKernelEx`` over millipyde's replay launch's packed block, 32
  launches per compiled call (``jit_launch.launch_loop``: no Python between them), the time
  of each 32 divided by 32;
- ``compiled check`` / ``compiled launch``: the replay launch's two compiled calls alone
  (``current_is``; the block's writes and the launch, same output each call);
- ``bound call``: the replay launch (``RawBound2D.__call__``, compiled), and ``bound call
  (ctypes)`` its ctypes path, both allocating;
- ``op``: ``img.adjust_gamma(g); img._materialize()``, a new ``g`` each call;
- ``A/B ...``: the bound call, and the op, compiled and through ctypes taken in turns (one
  of each per step: a drifting host favours neither);
- ``cupy RawKernel``: a gamma ``cupy.RawKernel`` on a uint8 (512, 512, 3) array, a new
  float32 ``g`` each call, into a kept output; ``cupy ElementwiseKernel``: the same gamma
  as an ``ElementwiseKernel``, a new output each call; ``cupy.power``: float32 data,
  ``out=`` a kept array;
- ``torch.pow``: float32 data, ``out=`` a kept tensor (where torch is installed).

``python3 bench/probes/launch_floor.py [--calls N]`` with ``MILLIPYDE_BACKEND=cuda``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.probes.launch_parts import replayed_gamma  # noqa: E402
from millipyde.backend import ACTIVE  # noqa: E402
from millipyde.backend.pool import stream_handle  # noqa: E402

_GAMMA = r"""
extern "C" __global__ void gamma(const unsigned char* x, unsigned char* y, float g, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (unsigned char)(255.0f * powf(x[i] / 255.0f, g) + 0.5f);
}
"""


def median_call(fn: Callable[[int], object], n: int, sync: Callable[[], object],
                per: int = 1) -> float:
    """Median over ``n`` calls of ``fn(i)``'s host time / ``per``, us; ``sync`` (untimed)
    every 32 calls (every call where ``per`` is 32)."""
    fn(0)
    sync()
    clock = time.perf_counter_ns
    times = []
    every = 1 if per >= 32 else 32
    for i in range(n):
        t0 = clock()
        fn(i)
        times.append(clock() - t0)
        if i % every == every - 1:
            sync()
    sync()
    return statistics.median(times) / 1e3 / per


def ab_calls(fa: Callable[[int], object], fb: Callable[[int], object], n: int,
             sync: Callable[[], object]) -> tuple[float, float]:
    """``median_call`` of ``fa`` and ``fb`` taken in turns (one of each per step, ``n``
    steps): neither gains from running second, on a host whose speed drifts."""
    fa(0), fb(0)
    sync()
    clock = time.perf_counter_ns
    ta, tb = [], []
    for i in range(n):
        t0 = clock()
        fa(i)
        t1 = clock()
        fb(i)
        tb.append(clock() - t1)
        ta.append(t1 - t0)
        if i & 15 == 15:
            sync()
    sync()
    return statistics.median(ta) / 1e3, statistics.median(tb) / 1e3


def _millipyde_rows(n: int) -> dict[str, float]:
    img, op, entry = replayed_gamma()
    bound = getattr(entry, "bound", None)
    sync = mp.synchronize
    rows = {"op": median_call(op, n, sync)}
    jit = getattr(bound, "jit", None)
    print(f"replay launch: {type(bound).__name__}, compiled: {jit is not None}", flush=True)
    if jit is None:
        return rows
    src, params = img._node.buffer, list(entry.base)
    handle = stream_handle(ACTIVE.stream_on(bound.device))
    dst = bound(src, params)
    state = bound.state
    s, d = int(src.gpu_data.device_pointer), int(dst.gpu_data.device_pointer)
    rows["driver floor"] = median_call(lambda i: jit.launch_loop(state, 32), max(n // 32, 64),
                                       sync, per=32)
    rows["compiled check"] = median_call(lambda i: jit.current_is(state), n, sync)
    rows["compiled launch"] = median_call(lambda i: jit.launch(state, s, d, 0, handle), n, sync)
    rows["bound call"] = median_call(lambda i: bound(src, params), n, sync)
    rows["bound call (ctypes)"] = median_call(
        lambda i: bound._ctypes_call(src, params, None, handle), n, sync)

    def switched(on: object) -> Callable[[int], None]:
        def run(i: int) -> None:
            bound.jit = on  # (None: the ctypes path)
            op(i)
        return run

    a, b = ab_calls(lambda i: bound(src, params),
                    lambda i: bound._ctypes_call(src, params, None, handle), n, sync)
    rows["A/B bound call: compiled"], rows["A/B bound call: ctypes"] = a, b
    a, b = ab_calls(switched(jit), switched(None), n, sync)
    bound.jit = jit
    rows["A/B op: compiled"], rows["A/B op: ctypes"] = a, b
    del dst
    return rows


def _cupy_rows(n: int) -> dict[str, float]:
    import cupy as cp

    x = cp.asarray(np.random.default_rng(0).integers(0, 256, (512, 512, 3), dtype=np.uint8))
    y = cp.empty_like(x)
    xf, yf = x.astype(cp.float32) / 255, cp.empty(x.shape, cp.float32)
    raw = cp.RawKernel(_GAMMA, "gamma")
    size = np.int32(x.size)
    grid = ((x.size + 255) // 256,)
    ek = cp.ElementwiseKernel("uint8 x, float32 g", "uint8 y",
                              "y = (unsigned char)(255.0f * powf(x / 255.0f, g) + 0.5f)",
                              "mp_gamma")
    sync = cp.cuda.Device().synchronize
    g = [np.float32(0.5 + i * 1e-5) for i in range(100)]
    return {
        "cupy RawKernel": median_call(lambda i: raw(grid, (256,), (x, y, g[i % 100], size)),
                                      n, sync),
        "cupy ElementwiseKernel": median_call(lambda i: ek(x, g[i % 100]), n, sync),
        "cupy.power": median_call(lambda i: cp.power(xf, 0.5 + i * 1e-5, out=yf), n, sync),
    }


def _torch_rows(n: int) -> dict[str, float]:
    try:
        import torch
    except ImportError:
        return {}
    t = torch.rand((512, 512, 3), device="cuda")
    o = torch.empty_like(t)
    return {"torch.pow": median_call(lambda i: torch.pow(t, 0.5 + i * 1e-5, out=o), n,
                                     torch.cuda.synchronize)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10_000)
    args = ap.parse_args()
    for part in (_millipyde_rows, _cupy_rows, _torch_rows):
        for name, us in part(args.calls).items():
            print(f"  {name:24s} {us:8.2f} us", flush=True)


if __name__ == "__main__":
    main()
