"""CPU-only kernel variants (``@njit(parallel=True)``), picked by ``execute`` on the cpu backend.

The generic kernels in ``codegen`` are written for a GPU grid: one output element per loop
iteration, bounds checks on every tap, the columns pass striding down memory. That costs the
CPU its vector units and its caches. The variants here compute the same values, in the same
order, laid out for a CPU:

- ``stencil_kernel()``: the separable stencil in one fused pass. The output is cut into tiles
  (bands of rows by strips of columns), one ``prange`` iteration each. A tile keeps a ring of
  the last ``ntaps`` rows-pass results (float64, channel-planar) so the columns pass never goes
  back to memory for its input: there is no full-size float64 temporary, which on this machine
  costs more (page faults plus two trips through DRAM) than the arithmetic; strips keep the
  ring in L2. Both passes are loops over a contiguous run of doubles with no bounds checks (the
  rows pass reads a zero-padded copy of the row), so LLVM vectorizes them.

Same arithmetic as ``codegen.stencil_source``: each output is ``0.0 + taps[0] * v0 + taps[1] *
v1 + ...`` in tap order, float64, no FMA contraction (Numba leaves ``fastmath`` off). Zero
padding contributes ``taps[k] * 0.0`` terms where the generic kernel skips them; adding a zero
to a sum that started at ``+0.0`` never changes it (the sum can not be ``-0.0``), so results are
bit-identical. Channels past the third (alpha) are copied; integer outputs go through
``codegen._RINT_CLIP`` (round half to even, clip).
"""

from __future__ import annotations

import numba

from .loader import load
from .target import HEADER, RINT_CLIP, indent_text, replace_once

# Output rows per band (at least): each band recomputes ``2 * radius`` rows-pass rows to warm
# its ring up, so bands should be tall, yet there must be enough of them to share out.
MIN_BAND = 64
# Bytes of float64 ring a tile may keep: it is re-read for ``ntaps`` output rows, so it should
# stay in the per-core L2 (2 MiB here; wide colour images would otherwise spill to L3).
RING_BYTES = 512 * 1024
# Taps folded into one pass over a row. The sum is still left to right (``((acc + t0 a) + t1 b)
# + ...``), so unrolling changes no rounding; it cuts the loads and stores of the accumulator.
UNROLL = 8


def _unrolled(dst: str, src: str, step: str) -> str:
    """A loop adding ``UNROLL`` taps ``t{j} * src.format(j=j)`` to ``dst[i]``, i in [0, sw)."""
    terms = "".join(f" + t{j} * {src.format(j=j)}" for j in range(UNROLL))
    loads = "".join(f"    t{j} = taps[k + {j}]\n" for j in range(UNROLL))
    return (f"{loads}{step}    for i in range(sw):\n"
            f"        {dst}[i] = {dst}[i]{terms}\n")


_ROWS = """\
# rows pass of input row yy into ring slot o, channel-planar (o[ch * sw + i])
o = ring[yy % ntaps]
for ch in range(nc):
    for x in range(max(0, x0 - r), min(w, x1 + r)):
        pad[x - x0 + r] = src[yy, x, ch]
    oc = o[ch * sw:(ch + 1) * sw]
    for i in range(sw):
        oc[i] = 0.0
    k = 0
    while k + {U} <= ntaps:
{rows_unrolled}\
        k += {U}
    while k < ntaps:
        t0 = taps[k]
        p0 = pad[k:k + sw]
        for i in range(sw):
            oc[i] = oc[i] + t0 * p0[i]
        k += 1
"""

_COLS = """\
# columns pass of output row y: ring rows y - r .. y + r inside the image, tap order
n = nc * sw
for i in range(n):
    acc[i] = 0.0
yc = max(0, y - r)
hi = min(h, y + r + 1)
while yc + {U} <= hi:
    k = yc - y + r
{cols_unrolled}\
    yc += {U}
while yc < hi:
    t0 = taps[yc - y + r]
    q0 = ring[yc % ntaps]
    for i in range(n):
        acc[i] = acc[i] + t0 * q0[i]
    yc += 1
for ch in range(nc):
    a = acc[ch * sw:(ch + 1) * sw]
    for i in range(sw):
        v = a[i]
        if is_int:
            v = _rint_clip(v, full)
        dst[y, x0 + i, ch] = v
for ch in range(nc, c):
    for x in range(x0, x1):
        dst[y, x, ch] = src[y, x, ch]
"""

_KERNEL = """

@njit(parallel=True, nogil=True, cache=True)
def stencil(src, dst, taps, nc, is_int, full, band, strip, lut, pre, post):
    h = src.shape[0]
    w = src.shape[1]
    c = src.shape[2]
    ntaps = taps.shape[0]
    r = ntaps // 2
    nstrips = (w + strip - 1) // strip
    for t in prange(((h + band - 1) // band) * nstrips):
        y0 = (t // nstrips) * band
        y1 = min(h, y0 + band)
        x0 = (t % nstrips) * strip
        x1 = min(w, x0 + strip)
        sw = x1 - x0
        ring = np.empty((ntaps, nc * sw))
        # zero padding: entries outside the image are never written
        pad = np.zeros(sw + 2 * r)
        acc = np.empty(nc * sw)
        # input row yy enters the ring; output row yy - r then has all its rows (the first
        # 2 r input rows of a band are its warm-up, recomputed from the band above)
        for yy in range(max(0, y0 - r), y1 + r):
            if yy < h:
{rows}\
            y = yy - r
            if y >= y0:
{cols}\
"""


def stencil_source() -> str:
    """Source of ``stencil(src, dst, taps, nc, is_int, full, band, strip, lut, pre, post)``.

    ``src``/``dst`` are (h, w, c) with the first ``nc`` channels filtered; the output is cut
    into tiles of ``band`` rows by ``strip`` columns, one ``prange`` iteration each. ``pre``/
    ``post`` (arguments, so that one kernel serves the four combinations: a compile each cost
    4-8 CPU-s) fuse uint8 tables: ``lut[0, ch]`` on each value loaded, ``lut[1, ch]`` on each
    value stored (``lut`` is read only then).
    """
    rows = _ROWS.format(U=UNROLL, rows_unrolled=indent_text(_unrolled(
        "oc", "p{j}[i]", "".join(f"    p{j} = pad[k + {j}:k + {j} + sw]\n"
                                 for j in range(UNROLL))), 4))
    cols = _COLS.format(U=UNROLL, cols_unrolled=_unrolled(
        "acc", "q{j}[i]", "".join(f"    q{j} = ring[(yc + {j}) % ntaps]\n"
                                  for j in range(UNROLL))).replace("range(sw)", "range(n)"))
    load = ("    for x in range(max(0, x0 - r), min(w, x1 + r)):\n"
            "        pad[x - x0 + r] = src[yy, x, ch]\n")
    # (int(): a float source, never with ``pre``, still has to type)
    rows = replace_once(rows, load, "    if pre:\n" + indent_text(load.replace(
        "= src[yy, x, ch]", "= lut[0, ch, int(src[yy, x, ch])]"), 4)
        + "    else:\n" + indent_text(load, 4))
    cols = replace_once(cols, "        dst[y, x0 + i, ch] = v\n",
                        "        if post:\n            dst[y, x0 + i, ch] = lut[1, ch, int(v)]\n"
                        "        else:\n            dst[y, x0 + i, ch] = v\n")
    return ("# millipyde generated fused separable stencil (CPU only)\n"
            + HEADER["cpu"] + RINT_CLIP
            + _KERNEL.format(rows=indent_text(rows, 16), cols=indent_text(cols, 16)))


_BATCH_KERNEL = """

@njit(parallel=True, nogil=True, cache=True)
def stencil(srcs, sidx, dsts, tapss, rad, nc, is_int, full, band, strip, lut):
    nb = dsts.shape[0]
    h = dsts.shape[1]
    w = dsts.shape[2]
    c = dsts.shape[3]
    nstrips = (w + strip - 1) // strip
    tiles = ((h + band - 1) // band) * nstrips
    for mt in prange(nb * tiles):
        m = mt // tiles
        t = mt % tiles
        src = srcs[sidx[m]]
        dst = dsts[m]
        y0 = (t // nstrips) * band
        y1 = min(h, y0 + band)
        x0 = (t % nstrips) * strip
        x1 = min(w, x0 + strip)
        sw = x1 - x0
        r = rad[m]
        if r < 0:
            # gated off for this member: its tile copied
            for y in range(y0, y1):
                for x in range(x0, x1):
                    for ch in range(c):
                        dst[y, x, ch] = src[y, x, ch]
            continue
        ntaps = 2 * r + 1
        taps = tapss[m, :ntaps]
        ring = np.empty((ntaps, nc * sw))
        pad = np.zeros(sw + 2 * r)
        acc = np.empty(nc * sw)
        for yy in range(max(0, y0 - r), y1 + r):
            if yy < h:
{rows}\
            y = yy - r
            if y >= y0:
{cols}\
"""


def stencil_batch_source() -> str:
    """Source of the batched ``stencil(srcs, sidx, dsts, tapss, rad, nc, is_int, full, band,
    strip, lut)``: ``stencil_source``'s tiles, one ``prange`` over every member's tiles of a
    batch (member ``m`` reads ``srcs[sidx[m]]`` with taps ``tapss[m, :2 rad[m] + 1]``,
    ``rad[m] < 0``: copied), so a batch of small images is one parallel loop, not a call (and
    a thread pool's start) per member. Same arithmetic per member as ``stencil_source``."""
    rows = _ROWS.format(U=UNROLL, rows_unrolled=indent_text(_unrolled(
        "oc", "p{j}[i]", "".join(f"    p{j} = pad[k + {j}:k + {j} + sw]\n"
                                 for j in range(UNROLL))), 4))
    cols = _COLS.format(U=UNROLL, cols_unrolled=_unrolled(
        "acc", "q{j}[i]", "".join(f"    q{j} = ring[(yc + {j}) % ntaps]\n"
                                  for j in range(UNROLL))).replace("range(sw)", "range(n)"))
    return ("# millipyde generated batched fused separable stencil (CPU only)\n"
            + HEADER["cpu"] + RINT_CLIP
            + _BATCH_KERNEL.format(rows=indent_text(rows, 16), cols=indent_text(cols, 16)))


def stencil_batch_kernel():
    """The compiled (lazily, by Numba) batched fused stencil (``stencil_batch_source``)."""
    return load(stencil_batch_source(), "cpu").stencil


def stencil_kernel():
    """The compiled (lazily, by Numba) fused stencil (see ``stencil_source``)."""
    return load(stencil_source(), "cpu").stencil


def stencil_tiles(h: int, w: int, nc: int, ntaps: int,
                  threads: int | None = None) -> tuple[int, int]:
    """``(band, strip)``: tile rows and columns for an ``h`` x ``w`` image, ``nc`` filtered.

    Strips keep a tile's ring within ``RING_BYTES``; bands are at least ``MIN_BAND`` rows and
    cut about four tiles per thread (Numba's count by default), so a core slowed by other work
    does not hold the rest back.
    """
    if threads is None:
        threads = numba.get_num_threads()
    if h <= 0 or w <= 0:
        return 1, 1  # an empty image: no tile (and no division by its width)
    strip = max(64, RING_BYTES // (8 * ntaps * max(1, nc)))
    strip = -(-w // -(-w // strip))  # even strips
    nstrips = -(-w // strip)
    bands = max(1, -(-4 * threads // nstrips))
    band = max(min(MIN_BAND, h), -(-h // bands))
    return max(1, band), max(1, strip)
