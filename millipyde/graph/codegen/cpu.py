"""CPU-only kernel variants (``@njit(parallel=True)``), picked by ``execute`` on the cpu backend.

The generic kernels in ``codegen`` are written for a GPU grid: one output element per loop
iteration, bounds checks on every tap, the columns pass striding down memory. That costs the
CPU its vector units and its caches. The variants here compute the same values, in the same
order, laid out for a CPU:

- ``stencil_kernel()``: the separable stencil in one fused pass. The output is cut into tiles
  (bands of rows by strips of columns), one ``prange`` iteration each. A tile keeps a ring of
  the last ``ntaps`` rows-pass results (float64, channels interleaved as in the image) so the
  columns pass never goes back to memory for its input: there is no full-size float64
  temporary, which on this machine costs more (page faults plus two trips through DRAM) than
  the arithmetic; strips keep the ring in L2. Both passes are loops over a contiguous run of
  doubles (all ``nc * sw`` values of a tile row at once) with no bounds checks (the rows pass
  reads a zero-padded copy of the row), so LLVM vectorizes them; nothing in them divides (a
  ``% ntaps`` per tap once sat in the vector loop: LLVM may not hoist a division).

Same arithmetic as ``codegen.stencil_source``: each output is ``0.0 + taps[0] * v0 + taps[1] *
v1 + ...`` in tap order, float64, no FMA contraction (Numba leaves ``fastmath`` off). Zero
padding contributes ``taps[k] * 0.0`` terms where the generic kernel skips them (the rows pass
leaves out only the outputs whose whole group of taps reads padding); adding a zero to a sum
that started at ``+0.0`` never changes it (the sum can not be ``-0.0``), so results are
bit-identical. Channels past the third (alpha) are copied; integer outputs go through
``codegen._RINT_CLIP`` (round half to even, clip).
"""

from __future__ import annotations

from collections.abc import Callable

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
# The taps left over (fewer than UNROLL) are folded in groups of halving size (4, 2, 1): a tap
# alone costs a load and a store of the accumulator for each multiply-add.
UNROLL = 8


def _group(u: int, dst: str, src: str, count: str, slices: str) -> str:
    """Adds the ``u`` taps ``k .. k + u - 1``, ``t{j} * src.format(j=j)``, to ``dst[i]``, i <
    ``count``; ``slices`` (formatted with ``j``) makes each tap's row.

    (The loop starts at 0 and its arrays are slices: an index Numba can not prove
    non-negative gets a wraparound select per access, and the loop is not vectorized.)
    """
    terms = "".join(f" + t{j} * {src.format(j=j)}" for j in range(u))
    loads = "".join(f"t{j} = taps[k + {j}]\n" for j in range(u))
    rows = "".join(slices.format(j=j) + "\n" for j in range(u))
    return (f"{loads}{rows}for i in range({count}):\n"
            f"    {dst}[i] = {dst}[i]{terms}\n")


def _folded(fits: Callable[[int], str], first: str, each: Callable[[int], str],
            step: Callable[[int], str]) -> str:
    """``each(u)`` (a group of ``u`` taps from tap ``k``) while ``fits(UNROLL)``, then once for
    each halving size ``u`` the rest needs (``fits(u)``); ``first`` sets ``k`` before each
    group and ``step(u)`` advances past its taps."""
    if UNROLL & (UNROLL - 1):  # pragma: no cover - guards an edit of the constant
        raise RuntimeError(f"UNROLL must be a power of two (the halvings cover the rest): "
                           f"{UNROLL}")
    out = f"while {fits(UNROLL)}:\n" + indent_text(first + each(UNROLL) + step(UNROLL), 4)
    u = UNROLL // 2
    while u >= 1:
        out += f"if {fits(u)}:\n" + indent_text(first + each(u) + step(u), 4)
        u //= 2
    return out


_ROWS_HEAD = """\
# rows pass of input row yy into ring slot o, channels interleaved (o[i * nc + ch], as the
# tile's pixels lie in memory: one loop over its nc * sw values per tap, not nc short ones)
o = ring[yy % ntaps]
{fill}\
for i in range(n):
    o[i] = 0.0
k = 0
# outputs whose taps k .. k + u - 1 all read padding get no terms from them: their products are
# zeros, and adding zeros to a sum that starts at +0.0 changes nothing
"""

_COLS_HEAD = """\
# columns pass of output row y: ring rows y - r .. y + r inside the image, tap order
for i in range(n):
    acc[i] = 0.0
yc = max(0, y - r)
hi = min(h, y + r + 1)
# the ring slot of row yc, stepped without a division per row: LLVM computed ``% ntaps`` (a
# division it may not hoist: ``ntaps`` is not known non-zero) inside the vector loop
s = yc % ntaps
"""

_COLS_TAIL = """\
# rounded in a loop of its own (a contiguous one), then stored
if is_int:
    for i in range(n):
        acc[i] = _rint_clip(acc[i], full)
for ch in range(nc):
    for i in range(sw):
        dst[y, x0 + i, ch] = acc[i * nc + ch]
for ch in range(nc, c):
    for x in range(x0, x1):
        dst[y, x, ch] = src[y, x, ch]
"""


def _fill(value: str) -> str:
    """Input row ``yy``'s pixels inside the image into ``pad``, channels interleaved, each
    value ``value.format(ch=...)`` (of ``srow``, the row). Three channels are written out (a
    loop of three an input pixel cost a tenth of the 32 x 32 RGB kernel)."""
    three = "".join(f"    pad[e + {ch}] = {value.format(ch=ch)}\n" for ch in range(3))
    return ("srow = src[yy]\n"
            "if nc == 3:\n"
            "    for x in range(max(0, x0 - r), min(w, x1 + r)):\n"
            "        e = (x - x0 + r) * 3\n" + indent_text(three, 4)
            + "else:\n"
            "    # channels outside: the inner loop runs along the row (one channel: a loop of\n"
            "    # one inside cost a grey image twice the load)\n"
            "    for ch in range(nc):\n"
            "        for x in range(max(0, x0 - r), min(w, x1 + r)):\n"
            f"            pad[(x - x0 + r) * nc + ch] = {value.format(ch='ch')}\n")


def _passes(fill: str = _fill("srow[x, {ch}]")) -> tuple[str, str]:
    """The rows and columns passes, their taps folded in groups (``_folded``); ``fill`` loads
    the rows pass's input row (``_fill``)."""
    def rows_group(u: int) -> str:
        return (f"lo = max(0, r - k - {u - 1} - x0) * nc\n"
                "hi = max(lo, min(sw, w + r - k - x0) * nc)\n"
                "oo = o[lo:hi]\n"
                + _group(u, "oo", "p{j}[i]", "hi - lo",
                         "p{j} = pad[(k + {j}) * nc + lo:(k + {j}) * nc + hi]"))

    def cols_group(u: int) -> str:
        return _group(u, "acc", "q{j}[i]", "n",
                      "q{j} = ring[s]\ns = s + 1 if s + 1 < ntaps else 0")

    rows = _ROWS_HEAD.format(fill=fill) + _folded(lambda u: f"k + {u} <= ntaps", "", rows_group,
                                lambda u: f"k += {u}\n")
    cols = _COLS_HEAD + _folded(lambda u: f"yc + {u} <= hi", "k = yc - y + r\n", cols_group,
                                lambda u: f"yc += {u}\n") + _COLS_TAIL
    return rows, cols


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
        # zero padding, channels interleaved: entries outside the image are never written
        pad = np.zeros((sw + 2 * r) * nc)
        n = nc * sw
        acc = np.empty(n)
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
    # (int(): a float source, never with ``pre``, still has to type)
    rows, cols = _passes("if pre:\n" + indent_text(_fill("lut[0, {ch}, int(srow[x, {ch}])]"), 4)
                         + "else:\n" + indent_text(_fill("srow[x, {ch}]"), 4))
    store = "        dst[y, x0 + i, ch] = acc[i * nc + ch]\n"
    cols = replace_once(cols, store, "        if post:\n" + indent_text(store.replace(
        "= acc[i * nc + ch]", "= lut[1, ch, int(acc[i * nc + ch])]"), 4)
        + "        else:\n" + indent_text(store, 4))
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
        pad = np.zeros((sw + 2 * r) * nc)
        n = nc * sw
        acc = np.empty(n)
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
    rows, cols = _passes()
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
