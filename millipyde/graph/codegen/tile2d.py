"""The one-pass 2-D tiled separable stencil (GPU only), per image and over a batch: one template.

A block owns a TH x TW output tile. Per filtered channel it runs the rows pass over the tile's
rows plus halo (a window of PX outputs slides along a row) into shared memory, then the columns
pass (a window of PY outputs slides down a shared-memory column) and stores. No float64
temporary goes through DRAM. Same arithmetic as the generic passes: float64, tap order, zero
padding (``taps[k] * 0.0`` terms add nothing to a sum started at +0.0), ``_rint_clip`` for
integer outputs.

Addressing: ``src`` and ``dst`` are the images' flat (1-D) C-contiguous buffers and every index
into them, into shared memory and into the taps is a 32-bit integer computed from the kernel's
own arguments (no array views inside the kernel). Numba types integer arithmetic as 64-bit and
multiplies a view's index by its run-time stride; through views NVVM also loses the address
space (generic loads). Here each index is one ``_i32(...)`` expression whose 64-bit arithmetic
LLVM narrows to 32 bits, and its use is unsigned (``_u``/``_u32``: no negative-index
wraparound code). So one image must have fewer than ``TILE_MAX_ELEMENTS`` elements; a batch
member's base offset (``ib``, ``ob``) is 64-bit.

``packed`` (uint8 RGBA, ``nc`` = 3; ``src``/``dst`` are flat uint32 words): the block first
reads its tile plus halo as words (coalesced) into three byte planes in shared memory (zero
outside the image, prologue tables applied once per pixel), the rows pass reads those bytes
without bounds checks, the columns pass writes its bytes back into the planes' tile, and the
block stores whole words with the source's alpha. Otherwise the rows pass reads ``src`` through
L1, one element per tap and channel.

``batch``: the image is ``blockIdx.z``; member ``b`` reads image ``sidx[b]`` of the stacked
source, its own taps row ``taps[b]`` (``2 rad[b] + 1`` of them) and writes ``dst``'s image
``b``; ``rad[b] = -1`` (the stencil gated off) copies the image. The block stages its taps in
shared memory with zeros past the last one, and the tap loops run whole blocks of taps over
those zeros where the remainder would take 3 or more of the shifting tail's steps
(``tile2d_batch``); ``u8`` (uint8 outputs) rounds and stores without ``_rint_clip``'s general
bounds. Neither changes a value (``tile2d_batch`` says why).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import tile2d_batch as _batch
from .loader import load
from .target import HEADER, RINT_CLIP

# geometry and shared-memory sizes (re-exported: ``codegen.gpu`` registers them)
from .tile2d_geometry import (  # noqa: F401
    TILE_GEOMETRY,
    TILE_GEOMETRY_SIM,
    TILE_MAX_ELEMENTS,
    Geometry,
    indexable,
    packed_shared_bytes,
    tile_geometry,
    tile_grid,
    tile_shared_bytes,
    tile_size,
)

#: Registers per thread the batched kernels may use on GPUs (``None``: as many as the compiler
#: takes); benchmarks set it to compare (bench/probes/gaussian_kernels.py).
BATCH_MAX_REGISTERS: int | None = None

# ``_i32``: numba's int32 cast (the simulator runs Python ints, which need none)
_I32 = (
    "from numba import int32 as _i32\n"
    "if _config.ENABLE_CUDASIM:\n"
    "    def _i32(v):\n"
    "        return int(v)\n"
)


@dataclass(frozen=True)
class _Tile:
    """What one generated kernel is: channels, tables, word staging, batch, geometry."""

    c: int
    nc: int
    pre: bool
    post: bool
    packed: bool
    batch: bool
    geometry: Geometry
    unsigned: bool = False
    u8: bool = False
    words: bool = False

    @property
    def th(self) -> int:
        return tile_size(self.geometry)[0]

    @property
    def tw(self) -> int:
        return self.geometry[0]

    @property
    def px(self) -> int:
        return self.geometry[2]

    @property
    def py(self) -> int:
        return self.geometry[3]

    def tap(self, k: str) -> str:
        """Tap ``k`` (the member's own row of taps in a batch)."""
        return f"hb[_u32({k})]" if self.batch else f"taps[_u32({k})]"

    def value(self, idx: str, ch: int | str) -> str:
        """``src`` element at flat offset ``idx`` (of this image) as float64, table applied."""
        raw = f"src[_u(ib + {idx})]"
        if self.pre:
            return f"_b2f(lut[0, {ch}, {raw}])"
        # a 64-bit conversion runs at a quarter of the FMA rate; _b2f is a move and an add
        return f"_b2f({raw})" if self.unsigned else f"float({raw})"


def _zero(names: list[str]) -> str:
    return f"{', '.join(names)} = {', '.join('0.0' for _ in names)}"


Load = Callable[[str, str, str], str]


def _slide(t: _Tile, n: int, load_: Load, ind: str, kf: str, head: str = "",
           bload: Load | None = None) -> str:
    """Code adding ``sum_k taps[k] * v(j + k)`` to ``a0..a{n-1}``, window ``v0..v{n-1}``.

    Whole blocks of ``n`` taps rotate the register names instead of moving values (element
    ``k + m`` lives in ``v{m % n}``), so the inner loop is FMAs and one load per tap; the last
    ``ntaps % n`` taps shift the window. ``load_(dst, offset, indent)`` emits the load of window
    element ``offset``. Each sum still runs in tap order. ``kf``: where the whole blocks end
    (batches: past ``ntaps`` over zero taps, ``tile2d_batch.whole_taps``). ``head``: code
    opening each whole block (``ind`` + 4 spaces deep); ``bload``: the whole blocks' loads.
    """
    whole = f"k < {kf}" if t.batch else f"k + {n} <= ntaps"
    lines = [f"{ind}k = _i32(0)", f"{ind}while {whole}:"]
    if head:
        lines.append(head.rstrip("\n"))
    for s_ in range(n):
        lines.append(f"{ind}    t = {t.tap(f'k + {s_}')}")
        lines += [f"{ind}    a{j} += t * v{(j + s_) % n}" for j in range(n)]
        lines.append((bload or load_)(f"v{s_}", f"k + {s_ + n}", ind + "    ").rstrip("\n"))
    lines += [f"{ind}    k = _i32(k + {n})", f"{ind}while k < ntaps:",
              f"{ind}    t = {t.tap('k')}"]
    lines += [f"{ind}    a{j} += t * v{j}" for j in range(n)]
    lines += [f"{ind}    v{j} = v{j + 1}" for j in range(n - 1)]
    lines.append(load_(f"v{n - 1}", f"k + {n}", ind + "    ").rstrip("\n"))
    lines.append(f"{ind}    k = _i32(k + 1)")
    return "\n".join(lines) + "\n"


def _window(t: _Tile, n: int, load_: Load, ind: str, kf: str, pre: str = "", head: str = "",
            bload: Load | None = None) -> str:
    """The first ``n`` window loads, ``pre``, then the tap loop (``_slide``)."""
    return ("".join(load_(f"v{j}", str(j), ind) for j in range(n)) + pre
            + _slide(t, n, load_, ind, kf, head, bload))


def _rows_window(t: _Tile, ch: int | str) -> str:
    """The rows pass of one window of channel ``ch`` into ``a0..a{PX-1}`` (row ``y`` in range).

    Packed: from the staged byte plane. Otherwise from ``src``: interior windows (most of
    them) load without bounds checks, edge windows test each column.
    """
    px, c = t.px, t.c
    if t.packed:
        def plane(dst: str, off: str, ind: str) -> str:
            return f"{ind}{dst} = _b2f(sb[_u32(pb + {off})])\n"

        ind = " " * 12
        return (f"{ind}pb = _i32({ch} * P + i * S + s_ * {px})\n"
                + _window(t, px, plane, ind, "kfx"))

    def inner(dst: str, off: str, ind: str) -> str:
        return f"{ind}{dst} = {t.value(f'_i32(rb + ({off}) * {c})', ch)}\n"

    def edge(dst: str, off: str, ind: str) -> str:
        return (f"{ind}xx = _i32(xb + {off})\n{ind}{dst} = 0.0\n"
                f"{ind}if xx >= 0 and xx < w:\n"
                f"{ind}    {dst} = {t.value(f'_i32(ry + xx * {c})', ch)}\n")

    ind = " " * 16
    # the window's last load: element max(whole blocks, ntaps) + PX - 1
    last = "kmx" if t.batch else "ntaps"
    words = _batch.word_loads(c, ind) if t.words else ("", "", None)
    return (f"            xb = _i32(x0 + s_ * {px} - r)\n"
            f"            if xb >= 0 and xb + {last} + {px - 1} < w:\n"
            f"{ind}rb = _i32((y * w + xb) * {c} + {ch})\n"
            + _window(t, px, inner, ind, "kfx", *words)
            + "            else:\n"
            f"{ind}ry = _i32(y * w * {c} + {ch})\n"
            + _window(t, px, edge, ind, "kfx"))


def _store(t: _Tile, acc: str, j: int, ch: int | str) -> str:
    """Store output ``j`` of a columns window (rounded and clipped for integer outputs)."""
    # unsigned indices: Numba adds no negative-index wraparound to the address (v is a whole
    # number in 0..255 wherever there is a table)
    val = f"lut[1, {ch}, _u(v)]" if t.post else "v"
    if t.packed:
        # into the staged tile; rows past the image are never stored, so no bound check
        ind, head, target = " " * 8, "", f"sb[_u32(o + {j} * S)]"
    else:
        ind, head = " " * 16, f"            if yb + {j} < h:\n"
        target = f"dst[_u(ob + _i32(od + {j} * WC))]"
    return (head + f"{ind}v = {acc}\n{ind}if is_int:\n{ind}    v = _rint_clip(v, full)\n"
            f"{ind}{target} = {val}\n")


def _channel(t: _Tile, ch: int | str) -> str:
    """Both passes of channel ``ch``: rows into shared memory, then columns and stores."""
    px, py, segs = t.px, t.py, t.tw // t.px
    hb0 = "HB + " if t.packed else "TB + " if t.batch else ""
    ha = [f"a{j}" for j in range(px)]
    va = [f"a{j}" for j in range(py)]

    def column(dst: str, off: str, ind: str) -> str:
        return f"{ind}{dst} = hb[_u32(cb + {off})]\n"

    if t.packed:
        stores = f"        o = _i32({ch} * P + (r + q) * S + r + tx)\n"
    else:
        stores = ("        if x < w:\n            yb = _i32(y0 + q)\n"
                  f"            od = _i32((yb * w + x) * {t.c} + {ch})\n")
    if t.u8:
        # whole windows inside the image (all but a bottom tile's) store unchecked
        put = [f"dst[_u(ob + _i32(od + {j} * WC))] = _rint_u8({va[j]})\n" for j in range(py)]
        stores += (f"            if yb + {py} <= h:\n" + "".join(" " * 16 + p_ for p_ in put)
                   + "            else:\n"
                   + "".join(f"                if _i32(yb + {j}) < h:\n{' ' * 20}{p_}"
                             for j, p_ in enumerate(put)))
    else:
        stores += "".join(_store(t, va[j], j, ch) for j in range(py))
    return (
        f"    # channel {ch}: rows pass of the tile's rows plus halo into shared memory\n"
        "    f = tid\n"
        f"    while f < nrow * {segs}:\n"
        f"        i = _i32(f // {segs})\n"
        f"        s_ = _i32(f - i * {segs})\n"
        "        y = _i32(y0 - r + i)\n"
        f"        {_zero(ha)}\n"
        "        if y >= 0 and y < h:\n"
        + _rows_window(t, ch)
        # column-major (column stride R, odd): the columns pass reads a column contiguously,
        # two wavefronts per warp load
        + f"        o = _i32({hb0}s_ * {px} * R + i)\n"
        + "".join(f"        hb[_u32(o + {j} * R)] = {ha[j]}\n" for j in range(px))
        + f"        f = _i32(f + {t.geometry[0] * t.geometry[1]})\n"
        "    cuda.syncthreads()\n"
        f"    # channel {ch}: columns pass, a window sliding down column tx of the tile\n"
        "    g = ty\n"
        f"    while g < {t.th // py}:\n"
        f"        q = _i32(g * {py})\n"
        f"        cb = _i32({hb0}tx * R + q)\n"
        f"        {_zero(va)}\n"
        + _window(t, py, column, "        ", "kfy")
        + stores
        + f"        g = _i32(g + {t.geometry[1]})\n"
        "    cuda.syncthreads()\n"
    )


# A member whose stencil is gated off (rad[b] = -1): every block of its image copies a share
# of the image, all channels, and leaves before any barrier (``b`` is uniform in the block).
_GATED_COPY = """    if rad[b] < 0:
        nt_ = cuda.blockDim.x * cuda.blockDim.y
        e_ = (cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x) * nt_ + \\
            cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        while e_ < n_:
            dst[_u(ob + e_)] = src[_u(ib + e_)]
            e_ += cuda.gridDim.x * cuda.gridDim.y * nt_
        return
"""


def _head(t: _Tile) -> str:
    """Shared arrays, sizes, the image's base offsets and taps, the block's tile."""
    bx, by = t.geometry[:2]
    lines = ["    sb = cuda.shared.array(0, dtype=uint8)\n" if t.packed else "",
             "    hb = cuda.shared.array(0, dtype=float64)\n",
             "    h = _i32(h_)\n    w = _i32(w_)\n"]
    if t.batch:
        per_image = 1 if t.packed else t.c  # elements of one pixel in the flat buffers
        lines += ["    b = cuda.blockIdx.z\n",
                  f"    n_ = h_ * w_ * {per_image}\n",
                  "    ib = sidx[b] * n_\n    ob = b * n_\n",
                  _GATED_COPY,
                  "    bt = _u32(b)\n    ntaps = _i32(2 * rad[b] + 1)\n"]
    else:
        lines.append("    ib = 0\n    ob = 0\n    ntaps = _i32(taps.shape[0])\n")
    lines.append(
        "    r = _i32(ntaps // 2)\n"
        f"    nrow = _i32({t.th} + 2 * r)\n"
        "    R = _i32(nrow + 1)\n"
        "    tx = cuda.threadIdx.x\n"
        "    ty = cuda.threadIdx.y\n"
        f"    tid = _i32(ty * {bx} + tx)\n"
        f"    x0 = _i32(cuda.blockIdx.x * {t.tw})\n"
        f"    y0 = _i32(cuda.blockIdx.y * {t.th})\n"
        "    x = _i32(x0 + tx)\n"
        f"    WC = _i32(w * {t.c})\n"
        "    # a tile no reader needs (graph/footprint.py): the block has nothing to do\n"
        f"    if x0 >= span[cuda.blockIdx.y, 1] or x0 + {t.tw} <= span[cuda.blockIdx.y, 0]:\n"
        "        return\n")
    if t.packed:
        lines.append(_packed_stage(t))
    if t.batch:
        lines.append(_batch.stage_taps(t.tw, bx * by, t.px, t.py))
    return "".join(lines)


def _packed_stage(t: _Tile) -> str:
    """Stage the tile plus halo (zero outside the image) as three byte planes."""
    bx, by = t.geometry[:2]
    put = "".join(f"                sb[_u32({ch} * P + e)] = "
                  + (f"lut[0, {ch}, (wd >> {8 * ch}) & 255]\n" if t.pre
                     else f"(wd >> {8 * ch}) & 255\n") for ch in range(3))
    zero = "".join(f"                sb[_u32({ch} * P + e)] = 0\n" for ch in range(3))
    return (
        f"    S = _i32({t.tw} + 2 * r + 1)\n"
        "    P = _i32(nrow * S)\n"
        "    HB = _i32((3 * P + 7) // 8)\n"
        "    # while loops: a stepped range divides for its trip count\n"
        "    i = ty\n"
        "    while i < nrow:\n"
        "        y = _i32(y0 - r + i)\n"
        "        yok = y >= 0 and y < h\n"
        "        j = tx\n"
        f"        while j < {t.tw} + 2 * r:\n"
        "            xx = _i32(x0 - r + j)\n"
        "            e = _i32(i * S + j)\n"
        "            if yok and xx >= 0 and xx < w:\n"
        "                wd = src[_u(ib + _i32(y * w + xx))]\n"
        + put + "            else:\n" + zero
        + f"            j = _i32(j + {bx})\n"
        f"        i = _i32(i + {by})\n"
        "    cuda.syncthreads()\n")


def _tail(t: _Tile) -> str:
    """After the channels: packed stores whole words; unfiltered channels are copied."""
    by, py = t.geometry[1], t.py
    if t.packed:
        return (
            "    if x < w:\n"
            "        i = ty\n"
            f"        while i < {t.th}:\n"
            "            if y0 + i < h:\n"
            "                e = _u32((r + i) * S + r + tx)\n"
            "                o = _i32((y0 + i) * w + x)\n"
            "                dst[_u(ob + o)] = (src[_u(ib + o)] & 0xFF000000) | uint32(sb[e])"
            " | (uint32(sb[e + P]) << 8) | (uint32(sb[e + 2 * P]) << 16)\n"
            f"            i = _i32(i + {by})\n")
    if t.c == t.nc:
        return ""
    return (
        "    if x < w:\n"
        "        g = ty\n"
        f"        while g < {t.th // py}:\n"
        f"            for j in range({py}):\n"
        f"                yy = _i32(y0 + g * {py} + j)\n"
        "                if yy < h:\n"
        f"                    o = _i32((yy * w + x) * {t.c})\n"
        + "".join(f"                    dst[_u(ob + o + {ch})] = src[_u(ib + o + {ch})]\n"
                  for ch in range(t.nc, t.c))
        + f"            g = _i32(g + {by})\n")


def stencil_2d_source(c: int, nc: int, pre: bool = False, post: bool = False,
                      sim: bool = False, geometry: Geometry | None = None,
                      packed: bool = False, batch: bool = False, unsigned: bool = False,
                      u8: bool = False, words: bool = False) -> str:
    """Source of the one-pass 2-D tiled stencil ``tile2d`` (see the module docstring).

    Per image: ``tile2d(src, dst, h_, w_, taps, is_int, full, lut, span)``; ``batch``:
    ``tile2d(src, sidx, dst, h_, w_, taps, rad, is_int, full, lut, span)``. ``src``/``dst`` are
    flat C-contiguous buffers of ``h_`` x ``w_`` images of ``c`` channels (packed: uint32
    words; batch: stacked), ``taps`` float64 (batch: (B, T), member ``b``'s ``2 rad[b] + 1``
    first), ``lut`` (2, C, 256) uint8 with the ``pre``/``post`` tables (a fused elementwise
    prologue on each value loaded, epilogue on each stored), ``span`` (tile rows, 2) int32 the
    columns each band of tile rows must compute (``footprint``). ``geometry`` overrides
    ``tile_geometry(sim)`` (benchmarks compare shapes). ``unsigned``: ``src`` holds unsigned
    integers below 2**32 (``unsigned_source``), converted to float64 exactly through ``_b2f``.
    ``u8`` (batch only): ``dst`` is uint8 (``is_int`` and ``full`` = 255 then go unread).
    ``words`` (batch only, uint8 ``src``, windows of 8): a last argument ``srcw``, the same
    buffer as uint64 words, feeds the interior windows' whole blocks (``tile2d_batch``).
    """
    if packed and (c, nc) != (4, 3):
        raise ValueError(f"packed stencil tiles are uint8 RGBA with 3 filtered channels, got "
                         f"c={c} nc={nc}")
    if u8 and not batch:
        raise ValueError("the uint8 store (u8) is for batched tiles")
    t = _Tile(c, nc, pre, post, packed, batch, geometry or tile_geometry(sim), unsigned, u8,
              words)
    if words and not (batch and not packed and t.px == _batch.WORD_BLOCK):
        raise ValueError(f"word loads are for batched windows of {_batch.WORD_BLOCK}")
    args = ("src, sidx, dst, h_, w_, taps, rad, is_int, full, lut, span" if batch
            else "src, dst, h_, w_, taps, is_int, full, lut, span")
    args += ", srcw" if words else ""
    dec = "@cuda.jit" if sim else "@cuda.jit(cache=True)"
    if batch and BATCH_MAX_REGISTERS and not sim:
        dec = f"@cuda.jit(cache=True, max_registers={int(BATCH_MAX_REGISTERS)})"
    return (
        f"# millipyde generated {'batched ' if batch else ''}one-pass 2-D tiled separable "
        f"stencil (GPU only): c={c} nc={nc} pre={pre} post={post} packed={packed} "
        f"unsigned={unsigned} u8={u8} geometry={t.geometry}"
        + (" words=True" if words else "") + "\n"
        + HEADER["cuda"] + _I32 + "from numba import float64, uint8, uint32, uint64\n"
        + RINT_CLIP
        + (_batch.RINT_U8 if u8 else "")
        + f"\n\n{dec}\ndef tile2d({args}):\n"
        + _head(t)
        + _channels(t)
        + _tail(t)
    )


#: Per-image packed (uint8 RGBA) tiles run their channels in a run-time loop as the others do:
#: unrolled, each of its four variants (``pre``/``post``) took 10-12 CPU-s to compile to a
#: cubin, the slowest kernels of the thesis recipe's cold start; looped, 4-5 (the same
#: arithmetic). False unrolls them again (GPU benchmarks compare the two).
PACKED_LOOP = True


def _channels(t: _Tile) -> str:
    """Both passes of every filtered channel: unrolled for batched packed tiles (their
    channels are planes of one staged tile), else one run-time loop over the channels, whose
    text is a third of the unrolled one's (the batched RGB kernel stalled on instruction fetch:
    its code did not fit the instruction caches, bench/RESULTS.md s9-3; and it compiles in a
    third of the time); the arithmetic is the same."""
    if t.nc == 1 or (t.packed and (t.batch or not PACKED_LOOP)):
        return "".join(_channel(t, ch) for ch in range(t.nc))
    body = "".join("    " + line + "\n" if line else "\n"
                   for line in _channel(t, "ch").splitlines())
    return (f"    ch = _i32(0)\n    while ch < {t.nc}:\n" + body
            + "        ch = _i32(ch + 1)\n")


def stencil_2d_kernel(c: int, nc: int, pre: bool = False, post: bool = False,
                      sim: bool = False, packed: bool = False,
                      geometry: Geometry | None = None, batch: bool = False,
                      unsigned: bool = False):
    """The one-pass 2-D tiled stencil kernel (see ``stencil_2d_source``)."""
    return load(stencil_2d_source(c, nc, pre, post, sim, geometry, packed, batch, unsigned),
                "cuda").tile2d


def unsigned_source(dtype: Any) -> bool:
    """Whether images of ``dtype`` take the kernel with ``unsigned=True`` (uint8 to uint32)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "u" and dtype.itemsize <= 4
