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

A member's image in one block runs on one SM: a clipped group of one member (the figure-5.1
batch) took 0.107 ms of the batch's stream, its loop latency-bound (ncu in bench/RESULTS.md,
2026-11-23). The GPU source also holds a split form over ``parts`` blocks per member:
``partial(src, sidx, part, parts)`` (``B * parts`` blocks of ``threads``; block ``j`` of
member ``b`` scans elements ``j * threads + t`` in steps of ``parts * threads`` and writes its
minimum, maximum and NaN flag to ``part[3 (b parts + j) ...]``), then ``finish(part, p, off,
parts)`` (``B`` blocks of ``PARTS_MAX`` threads; ``parts <= PARTS_MAX``) reduces each member's
``parts`` triples as the one-block tree does and writes the bounds. Minima, maxima and the
NaN flag do not depend on how the elements are grouped, so the bounds are the one-block
kernel's (a zero's sign, which the grouping can change, binds no bound: ``warp_clip_bounds``).
"""

from __future__ import annotations

import inspect

from ...kernels import clip
from .loader import load
from .target import HEADER, indent_text, jit_decorator

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


_PARTIAL = """    i = cuda.blockIdx.x
    b = i // parts
    j = i - b * parts
    t = cuda.threadIdx.x
    s = sidx[b]
"""

_PART_STORE = """    if t == 0:
        part[3 * i] = lo
        part[3 * i + 1] = hi
        part[3 * i + 2] = nan
"""

_FINISH = """    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    lo = math.inf
    hi = -math.inf
    nan = 0
    if t < parts:
        i = b * parts + t
        lo = part[3 * i]
        hi = part[3 * i + 1]
        if part[3 * i + 2] != 0.0:
            nan = 1
"""

#: Blocks per member of the split bounds at most (``finish`` runs this many threads), and on
#: the simulator (a Python thread per GPU thread).
PARTS_MAX = {"gpu": 128, "sim": 8}


def parts_max(sim: bool) -> int:
    """The most blocks per member of the split bounds (``finish``'s threads)."""
    return PARTS_MAX["sim" if sim else "gpu"]


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
    head = ("# millipyde generated batched warp-clip bounds\n" + HEADER[target] + "\n\n"
            + _scalar_source() + "\n\n_bounds = _dev(warp_clip_bounds)\n")
    fn = f"\n\n{jit_decorator(target, sim)}\ndef kernel(src, sidx, p, off):\n    n = src.shape[1]\n"
    if target == "cpu":
        body = ("    for b in prange(p.shape[0]):\n        s = sidx[b]\n"
                + indent_text(_SCAN.format(start="0", step="1"), 4)
                + indent_text(_STORE, 4))
        return head + fn + body
    head += "from numba import float64 as _f64\nfrom numba import int32 as _i32\n"
    body = ("    b = cuda.blockIdx.x\n    t = cuda.threadIdx.x\n    s = sidx[b]\n"
            + _SCAN.format(start="t", step=str(threads))
            + _TREE.format(t=threads, half=threads // 2)
            + indent_text(_STORE, 4))
    # the split form (module doc): the same scan over a member's share, the same tree
    m = parts_max(sim)
    dec = jit_decorator(target, sim)
    partial = (f"\n\n{dec}\ndef partial(src, sidx, part, parts):\n    n = src.shape[1]\n"
               + _PARTIAL + _SCAN.format(start=f"j * {threads} + t", step=f"parts * {threads}")
               + _TREE.format(t=threads, half=threads // 2) + _PART_STORE)
    finish = (f"\n\n{dec}\ndef finish(part, p, off, parts):\n" + _FINISH
              + _TREE.format(t=m, half=m // 2) + indent_text(_STORE, 4))
    return head + fn + body + partial + finish


def bounds_kernel(target: str, sim: bool = False, threads: int = 256):
    """The compiled (lazily, by Numba) batched bounds kernel (:func:`bounds_source`)."""
    return load(bounds_source(target, sim, threads), target).kernel


def split_kernels(target: str, sim: bool = False, threads: int = 256) -> tuple:
    """The split form's ``(partial, finish)`` kernels on GPUs (module doc)."""
    if target == "cpu":
        raise ValueError("the split bounds are GPU kernels")
    mod = load(bounds_source(target, sim, threads), target)
    return mod.partial, mod.finish


def parts_of(n: int, threads: int, sim: bool = False) -> int:
    """Blocks per member of the split bounds of members of ``n`` elements: each thread
    scans about 32 of them (a member's blocks spread over the SMs), at most
    :func:`parts_max`."""
    return max(1, min(parts_max(sim), -(-n // (threads * 32))))
