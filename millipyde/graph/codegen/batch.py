"""Batched kernel sources: many same-shape images in one launch.

The batched kernels are made from the SAME body text as the per-image ones in ``codegen``, with
every array access given a leading image index: ``src[s, ...]`` reads the source image ``s =
sidx[b]`` of a stacked (S, H, W, C) source, ``dst[b, ...]``, ``lut[b, ...]``, ``p[b, ...]``,
``tmp[b, ...]`` and ``taps[b, ...]`` are the batch member's own output, tables, parameters,
temporary and taps. The arithmetic is untouched, so a batched launch computes bit-identical
values to one launch per image; only the loops around the body differ:

- CPU: one ``prange`` over (image, row) pairs, so a small batch still fills every core.
- CUDA (and HIP, CUDASIM): a grid-stride loop with the image index on the grid's z axis.

Per-image values the per-image kernel reads once per launch (the integer index map, the sampler
bounds, ``full``, the clip) are read once per image (per row on the CPU).

The batched gathers (and the batch writer fused into the last one) index flat buffers instead
(``batch_gather``): a member's 64-bit base plus a 32-bit offset per access, the same body text
with the same arithmetic.
"""

from __future__ import annotations

import re

from .batch_gather import gather_flat_source
from .gather_sig import GatherSig, stat_width
from .loader import load
from .stencil import STENCIL_COLS, STENCIL_ROWS
from .target import HEADER, RINT_CLIP, jit_decorator, loop_3d, replace_once

# An array access ``name[`` not preceded by a part of a longer name or an attribute dot.
_ACCESS = re.compile(r"(?<![A-Za-z0-9_.])(src|dst|lut|p|tmp|taps)\[")


def batched(text: str, index: dict[str, str]) -> str:
    """``text`` with each access ``name[`` of a name in ``index`` given ``index[name]`` first.

    >>> batched("dst[y, x, 0] = lut[0, 0, src[sy, sx, 0]]", {"src": "s", "dst": "b", "lut": "b"})
    'dst[b, y, x, 0] = lut[b, 0, 0, src[s, sy, sx, 0]]'
    """

    def sub(m: re.Match) -> str:
        name = m.group(1)
        return f"{name}[{index[name]}, " if name in index else m.group(0)

    return _ACCESS.sub(sub, text)


# --------------------------------------------------------------------------- gather


def gather_batch_source(sig: GatherSig, target: str, sim: bool = False,
                        gates: bool = False, wide: bool = False, tabled: bool = False) -> str:
    """Source of ``kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, dst)``: the fused gather of
    ``sig`` over a batch, on flat buffers (``batch_gather``; ``batch_gather.launch_args``).

    ``src`` holds the stacked sources (S images of ``sn_`` elements, rows ``sw_`` pixels
    wide), ``sidx`` (B,) int64 picks each member's source image, ``dst`` is (B, h, w, cout),
    ``lut`` (B or 1, 2, C, 256) uint8 (read only in ``"lut"`` mode) and ``p`` (B, P) float64
    holds each member's row of ``codegen``'s parameter layout; every array flat.

    With ``gates`` each row of ``p`` carries ``codegen.gather_ngates(sig)`` more flags
    (``codegen.gate_prologue``): a member whose probability coin skipped a chained op or the
    sampler does not run it, so members with different coins share one launch. ``tabled``:
    through per-block tables of the chain (``batch_gather.tabled``).
    """
    return gather_flat_source(sig, target, sim, gates, wide, tabled)


def gather_batch_kernel(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                        wide: bool = False, tabled: bool = False):
    """The compiled (lazily, by Numba) batched gather kernel for ``sig``.

    Ops that read a per-image statistic (``OpSpec.stat``) are not batched here: their images
    take the per-output path (``exec.batch``) or the arena's gathers (``codegen.arena``).
    """
    if stat_width(sig):
        raise ValueError("a batched gather kernel reads no per-image statistic; "
                         f"{sig.pre + sig.post + sig.grey_ops} has one")
    return load(gather_batch_source(sig, target, sim, gates, wide, tabled), target).kernel


# --------------------------------------------------------------------------- separable stencil

_STENCIL_INDEX = {"src": "s", "dst": "b", "tmp": "b", "taps": "b"}


def stencil_batch_source(target: str, sim: bool = False) -> str:
    """Source of the batched separable passes ``rows`` and ``cols``.

    ``rows(src, sidx, tmp, taps, rad, nc)`` and ``cols(src, sidx, tmp, dst, taps, rad, nc,
    is_int, full)``: ``src`` is (S, H, W, C), ``tmp`` (B, H, W, nc) float64, ``dst`` (B, H, W,
    C), ``taps`` (B, T) float64 with member ``b``'s ``2 rad[b] + 1`` taps first. Channels past
    ``nc`` (alpha) are copied, integer outputs rounded and clipped, as in ``codegen``'s passes.
    ``rad[b] = -1`` (the stencil gated off for member ``b``) copies every channel.
    """
    head = ("# millipyde generated batched separable stencil passes\n" + HEADER[target]
            + RINT_CLIP)
    dec = jit_decorator(target, sim)
    per_image = "s = sidx[b]\nr = rad[b]\nntaps = 2 * r + 1"

    def wrap(text: str) -> str:
        return batched("c = x % nc_all\nxi = x // nc_all\n" + text.strip("\n"), _STENCIL_INDEX)

    rows = (f"\n\n{dec}\ndef rows(src, sidx, tmp, taps, rad, nc):\n"
            "    nb = tmp.shape[0]\n    h = src.shape[1]\n    w = src.shape[2]\n"
            "    nc_all = nc\n"
            + loop_3d(target, "nb", "h", "w * nc", per_image, wrap(STENCIL_ROWS)))
    cols = (f"\n\n{dec}\ndef cols(src, sidx, tmp, dst, taps, rad, nc, is_int, full):\n"
            "    nb = dst.shape[0]\n    h = src.shape[1]\n    w = src.shape[2]\n"
            "    nc_all = src.shape[3]\n"
            + loop_3d(target, "nb", "h", "w * nc_all", per_image,
                       wrap(replace_once(STENCIL_COLS, "if c < nc:", "if c < nc and r >= 0:"))))
    return head + rows + cols


def stencil_batch_kernels(target: str, sim: bool = False):
    """The batched (rows, cols) separable pass kernels for ``target``."""
    mod = load(stencil_batch_source(target, sim), target)
    return mod.rows, mod.cols



# --------------------------------------------------------------------------- tiled (GPU only)

_TILED_PROLOGUE = "    h = src.shape[0]\n    w = src.shape[1]\n    ntaps = taps.shape[0]\n"
_TILED_SIGNATURES = (
    ("def rows(src, tmp, taps, sw):", "def rows(src, sidx, tmp, taps, rad, sw):"),
    ("def cols(src, tmp, dst, taps, is_int, full):",
     "def cols(src, sidx, tmp, dst, taps, rad, is_int, full):"),
)


# A member whose stencil is gated off (rad[b] = -1): every block of its image copies a share
# of the image, all channels, and leaves before any barrier (``b`` is uniform in the block).
_GATED_COPY = """    if rad[b] < 0:
        nt_ = cuda.blockDim.x * cuda.blockDim.y
        t_ = (cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x) * nt_ + \\
            cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        c_ = dst.shape[3]
        for e_ in range(t_, h * w * c_, cuda.gridDim.x * cuda.gridDim.y * nt_):
            y_ = e_ // (w * c_)
            x_ = (e_ - y_ * w * c_) // c_
            k_ = e_ - (y_ * w + x_) * c_
            dst[b, y_, x_, k_] = src[s, y_, x_, k_]
        return
"""
_BATCH_PROLOGUE = ("    b = cuda.blockIdx.z\n    s = sidx[b]\n"
                   "    h = src.shape[1]\n    w = src.shape[2]\n")
_BATCH_NTAPS = "    ntaps = 2 * rad[b] + 1\n"


def stencil_tiled_batch_source(c: int, nc: int, sim: bool = False) -> str:
    """``codegen_gpu``'s tiled separable passes over a batch: the image is ``blockIdx.z``.

    ``rows(src, sidx, tmp, taps, rad, sw)`` and ``cols(src, sidx, tmp, dst, taps, rad, is_int,
    full)``, arrays as in :func:`stencil_batch_source`; ``sw`` and the shared memory are sized
    for the largest radius of the batch (a smaller one uses less of them). A member with
    ``rad[b] = -1`` is skipped by ``rows`` and copied by ``cols``.
    """
    from . import gpu as codegen_gpu

    text = codegen_gpu.stencil_tiled_source(c, nc, sim)
    cut = text.index("\n\n")  # header first: its text is not batched
    head, body = text[:cut], text[cut:]
    for old, new in _TILED_SIGNATURES:
        if old not in body:  # pragma: no cover - guards edits of codegen_gpu
            raise RuntimeError(f"codegen_gpu.stencil_tiled_source lost {old!r}")
        body = body.replace(old, new)
    if body.count(_TILED_PROLOGUE) != 2:  # pragma: no cover - guards edits of codegen_gpu
        raise RuntimeError("codegen_gpu.stencil_tiled_source: prologue not found twice")
    body = batched(body, _STENCIL_INDEX)
    # rows comes first in the text: it has no output to copy, only nothing to do
    body = body.replace(_TILED_PROLOGUE, _BATCH_PROLOGUE + "    if rad[b] < 0:\n        return\n"
                        + _BATCH_NTAPS, 1)
    body = body.replace(_TILED_PROLOGUE, _BATCH_PROLOGUE + _GATED_COPY + _BATCH_NTAPS, 1)
    return head.replace("generated tiled", "generated batched tiled", 1) + body


def stencil_tiled_batch_kernels(c: int, nc: int, sim: bool = False):
    """The batched tiled (rows, cols) passes for ``c``-channel images filtering ``nc``."""
    mod = load(stencil_tiled_batch_source(c, nc, sim), "cuda")
    return mod.rows, mod.cols


def stencil_2d_batch_source(c: int, nc: int, sim: bool = False, unsigned: bool = False,
                            geometry: tuple[int, int, int, int, int] | None = None,
                            u8: bool = False, words: bool = False) -> str:
    """``tile2d``'s one-pass 2-D tiled stencil over a batch: the image is ``blockIdx.z``.

    ``tile2d(src, sidx, dst, h_, w_, taps, rad, is_int, full, lut, span)`` over flat stacked
    buffers (``tile2d.stencil_2d_source``, ``batch=True``; ``span`` shared by the batch:
    ``footprint.full_spans``); the shared memory is sized for the batch's largest radius. A
    member with ``rad[b] = -1`` is copied. ``unsigned``, ``geometry`` and ``u8`` (uint8
    ``dst``): as ``tile2d.stencil_2d_source``'s. Shared memory:
    ``tile2d_batch.batch_shared_bytes``.
    """
    from . import tile2d

    return tile2d.stencil_2d_source(c, nc, sim=sim, geometry=geometry, batch=True,
                                    unsigned=unsigned, u8=u8, words=words)


def stencil_2d_batch_kernel(c: int, nc: int, sim: bool = False, unsigned: bool = False,
                            geometry: tuple[int, int, int, int, int] | None = None,
                            u8: bool = False, words: bool = False):
    """The batched one-pass 2-D tiled stencil for ``c``-channel images filtering ``nc``."""
    return load(stencil_2d_batch_source(c, nc, sim, unsigned, geometry, u8, words),
                "cuda").tile2d
