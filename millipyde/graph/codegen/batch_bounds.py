"""Batched warp-clip bounds: per batch member, its source's minimum and maximum made into the
clip its sampler reads (``kernels.clip.warp_clip_bounds``), written into its parameter row.

``kernel(src, sidx, p, off)``: ``src`` is (S, N), member ``b`` < ``p.shape[0]`` reads row
``sidx[b]`` (``sidx`` may be longer); the bounds go to ``p[b, off]`` and ``p[b, off + 1]``
(``gather_sig.CLIP_OFF``, ``CLIP_HI_OFF``), on the device, before the batched gather that
reads them launches: no copy to the host, no wait.
Minima and maxima are exact in any order, so the values are those of the per-output path's
reductions (``graph.exec.gather.warp_clip``); NaN wins, as there.

- CPU: one ``prange`` over members, each a plain loop.
- CUDA (and HIP, CUDASIM): one block of ``threads`` per member (launch with
  ``launch_blocks(kernel, B, threads, ...)``), a shared-memory tree at the end.
"""

from __future__ import annotations

import inspect

from ...kernels import clip
from .loader import load
from .target import _HEADER, _decorator

_SCAN = """    lo = math.inf
    hi = -math.inf
    nan = 0
    e = {start}
    while e < n:
        v = float(src[s, e])
        if v != v:
            nan = 1
        else:
            if v < lo:
                lo = v
            if v > hi:
                hi = v
        e += {step}
"""

_TREE = """    slo = cuda.shared.array({t}, _f64)
    shi = cuda.shared.array({t}, _f64)
    snan = cuda.shared.array({t}, _i32)
    slo[t] = lo
    shi[t] = hi
    snan[t] = nan
    cuda.syncthreads()
    k = {half}
    while k > 0:
        if t < k:
            if slo[t + k] < slo[t]:
                slo[t] = slo[t + k]
            if shi[t + k] > shi[t]:
                shi[t] = shi[t + k]
            if snan[t + k] > snan[t]:
                snan[t] = snan[t + k]
        cuda.syncthreads()
        k //= 2
    if t == 0:
        lo = slo[0]
        hi = shi[0]
        nan = snan[0]
"""

_STORE = """    if nan:
        lo = math.nan
    a, c = _bounds(lo, hi)
    p[b, off] = a
    p[b, off + 1] = c
"""


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "".join(pad + line + "\n" if line else "\n" for line in text.splitlines())


def _scalar_source() -> str:
    """``kernels.clip.warp_clip_bounds``'s text without its annotations (device code)."""
    text = inspect.getsource(clip.warp_clip_bounds)
    sig, body = text.split("\n", 1)
    if sig != "def warp_clip_bounds(lo: float, hi: float) -> tuple[float, float]:":
        raise RuntimeError(f"kernels.clip.warp_clip_bounds changed its signature: {sig}")
    return "def warp_clip_bounds(lo, hi):\n" + body


def bounds_source(target: str, sim: bool = False, threads: int = 256) -> str:
    """Source of the batched bounds ``kernel(src, sidx, p, off)`` (module doc); ``threads``
    (a power of two) per block on GPUs."""
    if threads & (threads - 1):
        raise ValueError(f"threads must be a power of two, got {threads}")
    head = ("# millipyde generated batched warp-clip bounds\n" + _HEADER[target] + "\n\n"
            + _scalar_source() + "\n\n_bounds = _dev(warp_clip_bounds)\n")
    fn = f"\n\n{_decorator(target, sim)}\ndef kernel(src, sidx, p, off):\n    n = src.shape[1]\n"
    if target == "cpu":
        body = ("    for b in prange(p.shape[0]):\n        s = sidx[b]\n"
                + _indent(_SCAN.format(start="0", step="1"), 4)
                + _indent(_STORE, 4))
        return head + fn + body
    head += "from numba import float64 as _f64\nfrom numba import int32 as _i32\n"
    body = ("    b = cuda.blockIdx.x\n    t = cuda.threadIdx.x\n    s = sidx[b]\n"
            + _SCAN.format(start="t", step=str(threads))
            + _TREE.format(t=threads, half=threads // 2)
            + _indent(_STORE, 4))
    return head + fn + body


def bounds_kernel(target: str, sim: bool = False, threads: int = 256):
    """The compiled (lazily, by Numba) batched bounds kernel (:func:`bounds_source`)."""
    return load(bounds_source(target, sim, threads), target).kernel
