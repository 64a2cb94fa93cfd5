"""Hand-tuned GPU-only kernel variants, registered beside the generic ones in ``codegen``.

The generic kernels (``codegen.gather_source``, ``codegen.stencil_source``) serve every target;
the variants here only run on the real ``cuda``/``hip`` backends (``execute`` picks them) and
compute the same values:

- ``stencil_tiled_kernels(c, nc)``: separable stencil passes with register windows. The rows pass
  stages a row segment (plus halo, zero padded, de-interleaved per channel) in dynamic shared
  memory; each thread then slides a window of ``PX`` values over it, so one shared load feeds
  ``PX`` fused multiply-adds. The columns pass slides a window of ``PY`` rows down one column
  straight from global memory (coalesced across the warp, reused through L1/L2). Float64
  accumulation in tap order, zero padding, alpha copied, ``_rint_clip`` for integer outputs:
  the same arithmetic as the generic passes.
- ``stencil_2d_kernel(c, nc, pre, post)`` (module ``tile2d``): both separable passes in one
  launch over 2-D tiles (rows pass of the tile plus halo into shared memory, columns pass from
  it; no float64 temporary in DRAM), with optional uint8 tables on load and store (stencil
  prologue/epilogue). On uint8 RGBA (``packed``) the block first stages its tile as three byte
  planes in shared memory from coalesced word loads, and stores whole words. The two-pass
  kernels above remain for radii whose tile does not fit in shared memory.
- ``lut_rgba_kernels()``: uint8 RGBA gathers with no sampler and no grey conversion. Pixels are
  read and written as one uint32; the four 256-entry tables sit pre-shifted in shared memory.
  ``flat`` is the identity index map (1-D grid-stride), ``mapped`` any integer affine index map
  (flips, transposes), both with or without a table. Each thread loads ``LUT_ITEMS`` words
  before it stores any.
"""

from __future__ import annotations

from collections.abc import Callable

from .loader import load
from .target import HEADER, RINT_CLIP
from .tile2d import (  # noqa: F401 - the one-pass 2-D tile, registered here with the variants
    TILE_GEOMETRY,
    TILE_GEOMETRY_SIM,
    indexable,
    packed_shared_bytes,
    stencil_2d_kernel,
    stencil_2d_source,
    tile_geometry,
    tile_grid,
    tile_shared_bytes,
    tile_size,
    unsigned_source,
)

# Outputs per thread along the window (rows pass: pixels in x; columns pass: rows in y).
PX = 8
PY = 8
# Threads per block of the rows pass (x: one warp slides over a segment of BX * PX pixels).
ROWS_BLOCK = (32, 4)
# Threads per block of the columns pass (x: flat columns, y: groups of PY rows).
COLS_BLOCK = (32, 8)


def _decorator(sim: bool) -> str:
    return "@cuda.jit" if sim else "@cuda.jit(cache=True)"


def _vars(prefix: str, n: int) -> str:
    return ", ".join(f"{prefix}{i}" for i in range(n))


def rows_segment_width(bx: int, radius: int) -> int:
    """Doubles per channel plane of one row in shared memory (segment + halo + bank padding)."""
    n = bx * PX + 2 * radius + 1
    return n + n // PX + 1


def rows_shared_bytes(block: tuple[int, int], nc: int, radius: int) -> int:
    """Dynamic shared memory of one rows-pass block."""
    return block[1] * nc * rows_segment_width(block[0], radius) * 8


def stencil_tiled_source(c: int, nc: int, sim: bool = False) -> str:
    """Source of ``rows(src, tmp, taps, sw)`` and ``cols(src, tmp, dst, taps, is_int, full)``.

    ``c`` channels in the image, the first ``nc`` filtered (both compile-time constants).
    """
    dec = _decorator(sim)
    head = (
        f"# millipyde generated tiled separable stencil (GPU only): c={c} nc={nc}\n"
        + HEADER["cuda"] + "from numba import float64\n" + RINT_CLIP
    )
    return head + _tiled_rows_source(c, nc, dec) + _tiled_cols_source(c, nc, dec)


def _tiled_rows_source(c: int, nc: int, dec: str) -> str:
    """The rows pass: a window of ``PX`` outputs slides along a shared-memory row segment."""
    accs = [f"a{i}" for i in range(PX)]
    wins = [f"v{i}" for i in range(PX)]
    fma_x = "\n".join(f"            {a} += t * {v}" for a, v in zip(accs, wins, strict=True))
    shift_x = "\n".join(f"            {wins[i]} = {wins[i + 1]}" for i in range(PX - 1))
    init_x = "\n".join(
        f"        {wins[i]} = sh[pb + (q + {i}) + (q + {i}) // {PX}]" for i in range(PX)
    )
    store_x = "\n".join(
        f"        sh[pb + (q + {i} + r) + (q + {i} + r) // {PX}] = {accs[i]}" for i in range(PX)
    )
    stage_rows = "\n".join(
        f"        fs{j} = f0 + {j} * bx\n"
        f"        ps{j} = fs{j} // {c}\n"
        f"        cs{j} = fs{j} - ps{j} * {c}\n"
        f"        xs{j} = x0 - r + ps{j}\n"
        f"        u{j} = 0.0\n"
        f"        if yok and fs{j} < n and cs{j} < {nc} and xs{j} >= 0 and xs{j} < w:\n"
        f"            u{j} = float(src[y, xs{j}, cs{j}])"
        for j in range(4)
    ) + "\n" + "\n".join(
        f"        if fs{j} < n and cs{j} < {nc}:\n"
        f"            sh[rb + cs{j} * sw + ps{j} + ps{j} // {PX}] = u{j}"
        for j in range(4)
    )
    rows = f'''

{dec}
def rows(src, tmp, taps, sw):
    sh = cuda.shared.array(0, dtype=float64)
    h = src.shape[0]
    w = src.shape[1]
    ntaps = taps.shape[0]
    r = ntaps // 2
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockDim.x
    seg = bx * {PX}
    x0 = cuda.blockIdx.x * seg
    y = cuda.blockIdx.y * cuda.blockDim.y + ty
    yok = y < h
    rb = ty * {nc} * sw
    # stage the row segment [x0 - r, x0 + seg + r) of the first NC channels, zero padded
    n = (seg + 2 * r) * {c}
    # four independent loads in flight per thread, then four stores
    for f0 in range(tx, n, 4 * bx):
{stage_rows}
    cuda.syncthreads()
    q = tx * {PX}
    for ch in range({nc}):
        pb = rb + ch * sw
{init_x}
        {", ".join(accs)} = {", ".join("0.0" for _ in accs)}
        for k in range(ntaps):
            t = taps[k]
{fma_x}
{shift_x}
            j = q + {PX} + k
            {wins[-1]} = sh[pb + j + j // {PX}]
        cuda.syncthreads()
        # every thread is past its reads of this plane: overwrite it with the results
{store_x}
    cuda.syncthreads()
    # coalesced store of the segment, channels interleaved as in tmp
    for f in range(tx, seg * {nc}, bx):
        p = f // {nc}
        ch = f - p * {nc}
        x = x0 + p
        if yok and x < w:
            j = p + r
            tmp[y, x, ch] = sh[rb + ch * sw + j + j // {PX}]
'''
    return rows


def _tiled_cols_source(c: int, nc: int, dec: str) -> str:
    """The columns pass: a window of ``PY`` outputs slides down a shared-memory column."""
    accs = [f"a{i}" for i in range(PY)]
    wins = [f"v{i}" for i in range(PY)]
    init_y = "\n".join(f"        {wins[i]} = sh[(q + {i}) * bx + tx]" for i in range(PY))
    fma_y = "\n".join(f"            {a} += t * {v}" for a, v in zip(accs, wins, strict=True))
    shift_y = "\n".join(f"            {wins[i]} = {wins[i + 1]}" for i in range(PY - 1))
    store_y = "\n".join(
        f"        if y0 + {i} < h:\n"
        f"            if is_int:\n"
        f"                {accs[i]} = _rint_clip({accs[i]}, full)\n"
        f"            dst[y0 + {i}, p, ch] = {accs[i]}"
        for i in range(PY)
    )
    stage_cols = "\n".join(
        f"        r{j} = rr0 + {j} * by\n"
        f"        yy{j} = yb - r + r{j}\n"
        f"        u{j} = 0.0\n"
        f"        if act and r{j} < th and yy{j} >= 0 and yy{j} < h:\n"
        f"            u{j} = tmp[yy{j}, p, ch]"
        for j in range(4)
    ) + "\n" + "\n".join(
        f"        if r{j} < th:\n            sh[r{j} * bx + tx] = u{j}" for j in range(4)
    )
    cols = f'''

{dec}
def cols(src, tmp, dst, taps, is_int, full):
    sh = cuda.shared.array(0, dtype=float64)
    h = src.shape[0]
    w = src.shape[1]
    ntaps = taps.shape[0]
    r = ntaps // 2
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockDim.x
    by = cuda.blockDim.y
    xf = cuda.blockIdx.x * bx + tx
    yb = cuda.blockIdx.y * by * {PY}
    th = by * {PY} + 2 * r
    p = xf // {c}
    ch = xf - p * {c}
    inside = xf < w * {c}
    act = inside and ch < {nc}
    # stage rows [yb - r, yb + by * PY + r) of this block's columns, zero padded
    for rr0 in range(ty, th, 4 * by):
{stage_cols}
    cuda.syncthreads()
    y0 = yb + ty * {PY}
    if act and y0 < h:
        q = ty * {PY}
{init_y}
        {", ".join(accs)} = {", ".join("0.0" for _ in accs)}
        for k in range(ntaps):
            t = taps[k]
{fma_y}
{shift_y}
            {wins[-1]} = sh[(q + {PY} + k) * bx + tx]
{store_y}
    elif inside and y0 < h:
        for i in range({PY}):
            if y0 + i < h:
                dst[y0 + i, p, ch] = src[y0 + i, p, ch]
'''
    return cols


def stencil_tiled_kernels(c: int, nc: int, sim: bool = False):
    """The (rows, cols) tiled pass kernels for ``c``-channel images filtering ``nc`` of them."""
    mod = load(stencil_tiled_source(c, nc, sim), "cuda")
    return mod.rows, mod.cols


def rows_grid(h: int, w: int, block: tuple[int, int]) -> tuple[int, int]:
    """Grid of the rows pass: one block per segment of ``block[0] * PX`` pixels x block rows."""
    seg = block[0] * PX
    return ((w + seg - 1) // seg, (h + block[1] - 1) // block[1])


def cols_shared_bytes(block: tuple[int, int], radius: int) -> int:
    """Dynamic shared memory of one columns-pass block (its rows plus halo, one extra row)."""
    return (block[1] * PY + 2 * radius + 1) * block[0] * 8


def cols_grid(h: int, w: int, c: int, block: tuple[int, int]) -> tuple[int, int]:
    """Grid of the columns pass: flat columns x groups of ``PY`` rows."""
    rows = block[1] * PY
    return ((w * c + block[0] - 1) // block[0], (h + rows - 1) // rows)


# --------------------------------------------------------------------------- uint8 RGBA LUT

LUT_BLOCK = 256
LUT_BLOCK_SIM = 16
# Words each thread moves per step. Streaming kernels are latency-bound unless enough bytes are
# in flight: one 4-byte load per thread reached 0.74-1.46 TB/s on an H200 (copy: 4.1), so each
# thread issues all its loads of a step before its first store.
LUT_ITEMS = 8
# (x, y) threads of a ``mapped`` block; a block covers BX columns by BY * LUT_ITEMS rows
MAPPED_BLOCK = (32, 8)
MAPPED_BLOCK_SIM = (4, 2)


def _lut_steps(index: Callable[[int], list[str]], load: Callable[[int], str],
               store: Callable[[int, str], str], bound: Callable[[int], str], ind: str) -> str:
    """Code that loads ``LUT_ITEMS`` words, then stores them (tables applied when ``use_lut``).

    For item j: ``index(j)`` the statements that compute its indices, ``load(j)`` its load,
    ``store(j, value)`` its store and ``bound(j)`` its in-range test.
    """
    lines = [f"{ind}{stmt}" for j in range(LUT_ITEMS) for stmt in index(j)]
    lines += [f"{ind}v{j} = uint32(0)\n{ind}if {bound(j)}:\n{ind}    v{j} = {load(j)}"
              for j in range(LUT_ITEMS)]
    lines.append(f"{ind}if use_lut:")
    lines += [f"{ind}    v{j} = _apply(v{j}, sl)" for j in range(LUT_ITEMS)]
    lines += [f"{ind}if {bound(j)}:\n{ind}    {store(j, f'v{j}')}" for j in range(LUT_ITEMS)]
    return "\n".join(lines) + "\n"


def lut_rgba_source(sim: bool = False) -> str:
    """Source of ``flat(src, dst, lut, use_lut)`` and ``mapped(src, dst, lut, p, use_lut)``.

    ``src``/``dst`` are uint32 views of RGBA uint8 images (``flat``: 1-D, ``mapped``: 2-D);
    ``lut`` the (2, 4, 256) uint8 tables of the gather (stage 0 is applied); ``p`` the integer
    index map ``(sy, sx) = (p0 y + p1 x + p2, p3 y + p4 x + p5)``. Each thread moves
    ``LUT_ITEMS`` words per step: ``flat`` words ``blockDim.x`` apart, ``mapped`` rows
    ``blockDim.y`` apart. ``lut_launch`` and ``mapped_launch`` give their launch shapes.
    """
    dec = _decorator(sim)
    flat_body = _lut_steps(
        lambda j: [f"i{j} = i + {j} * nt"],
        lambda j: f"src[_u(i{j})]",
        lambda j, v: f"dst[_u(i{j})] = {v}",
        lambda j: f"i{j} < n", " " * 8)
    mapped_body = _lut_steps(
        lambda j: [f"y{j} = yb + {j} * by", f"sy{j} = int(p0 * y{j} + q0 + 0.5)",
                   f"sx{j} = int(p3 * y{j} + q1 + 0.5)"],
        lambda j: f"src[_u(sy{j}), _u(sx{j})]",
        lambda j, v: f"dst[_u(y{j}), _u(x)] = {v}",
        lambda j: f"y{j} < h", " " * 12)
    return (
        "# millipyde generated uint8 RGBA LUT gathers (GPU only)\n" + HEADER["cuda"]
        + "from numba import uint32\n"
        + f'''

@_dev
def _load_lut(lut, sl):
    i = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    n = cuda.blockDim.x * cuda.blockDim.y
    for j in range(i, 1024, n):
        ch = j >> 8
        sl[j] = uint32(lut[0, ch, j & 255]) << uint32(8 * ch)
    cuda.syncthreads()


@_dev
def _apply(px, sl):
    return (sl[px & 255] | sl[256 + ((px >> 8) & 255)] | sl[512 + ((px >> 16) & 255)]
            | sl[768 + (px >> 24)])


{dec}
def flat(src, dst, lut, use_lut):
    sl = cuda.shared.array(1024, dtype=uint32)
    if use_lut:
        _load_lut(lut, sl)
    n = dst.shape[0]
    nt = cuda.blockDim.x
    chunk = nt * {LUT_ITEMS}
    i = cuda.blockIdx.x * chunk + cuda.threadIdx.x
    while i < n:
{flat_body}        i += cuda.gridDim.x * chunk


{dec}
def mapped(src, dst, lut, p, use_lut):
    sl = cuda.shared.array(1024, dtype=uint32)
    if use_lut:
        _load_lut(lut, sl)
    h = dst.shape[0]
    w = dst.shape[1]
    p0, p1, p2, p3, p4, p5 = p[0], p[1], p[2], p[3], p[4], p[5]
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    by = cuda.blockDim.y
    rows = by * {LUT_ITEMS}
    while x < w:
        q0 = p1 * x + p2
        q1 = p4 * x + p5
        yb = cuda.blockIdx.y * rows + cuda.threadIdx.y
        while yb < h:
{mapped_body}            yb += cuda.gridDim.y * rows
        x += cuda.gridDim.x * cuda.blockDim.x
'''
    )


def lut_launch(n: int, sim: bool = False) -> tuple[int, int]:
    """``(blocks, threads)`` of a ``flat`` launch over ``n`` words: enough to fill the GPU.

    Each block loads the 1024-entry table first, so a block that moves only a few chunks
    spends much of its time on the table; 2048 blocks keep every SM of an H200 full.
    """
    threads, cap = (LUT_BLOCK_SIM, 3) if sim else (LUT_BLOCK, 2048)
    return max(1, min(-(-n // (threads * LUT_ITEMS)), cap)), threads


def mapped_launch(h: int, w: int, sim: bool = False
                  ) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(grid, block)`` of a ``mapped`` launch over an ``h`` x ``w`` output (rows loop)."""
    bx, by = block = MAPPED_BLOCK_SIM if sim else MAPPED_BLOCK
    cap = 2 if sim else 65535
    return (min(-(-w // bx), 65535), max(1, min(-(-h // (by * LUT_ITEMS)), cap))), block


def lut_rgba_kernels(sim: bool = False):
    """The (flat, mapped) uint32 RGBA LUT gather kernels."""
    mod = load(lut_rgba_source(sim), "cuda")
    return mod.flat, mod.mapped
