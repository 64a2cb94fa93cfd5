"""Pieces of the batched ``tile2d`` kernel: staged zero-padded taps and the uint8 store.

The batched Gaussian is issue-bound (bench/RESULTS.md, 2026-11-23): a window's whole blocks of
taps rotate register names (``tile2d._slide``: one load and PX FMAs per tap), but the last
``ntaps % PX`` taps shift the window (PX - 1 register moves per tap, the tap's own address
and loop test), and odd tap counts always leave 1, 3, 5 or 7 of them. Here a block stages its
member's taps in shared memory followed by zeros, and where the remainder is 3 or more the
whole blocks run past ``ntaps`` over those zeros (``whole_taps``): a zero tap adds
``0.0 * v = +0.0`` (every ``v`` it meets is finite: source bytes, zeros past the image, the
rows pass's float64 sums, and the zeroed spare slots below) to a sum that started at +0.0 and
so is never -0.0; the sum keeps its value bit for bit, its tap order unchanged.

What the columns pass reads past a column's ``nrow`` rows of float64 (the windows' extra
rows) is the column's spare slot (row ``nrow``, never written by the rows pass), then the next
column's first rows, and past the last column ``max(PX, PY)`` doubles after the tile: both
are zeroed once per block.

``_rint_u8`` is ``_rint_clip`` then the uint8 conversion, for ``full`` = 255, with no
float64 clip: ``v + 1.5 * 2**52`` rounds ``v`` to an integer (the FPU's round half to even =
``rint``) in the low word where ``0 <= rint(v) < 2**31`` (the high word says so), then an
integer min with 255; anything else is 255 for ``v > 0`` and 0 otherwise (negative, NaN).
``clip(rint(v), 0, 255) = rint(clip(v, 0, 255))`` (rint is monotone, the bounds are integers).
"""

from __future__ import annotations

from typing import Any

from .tile2d_geometry import Geometry, tile_shared_bytes

# 1.5 * 2**52: for |v| < 2**51, v + BIAS lies in [2**52, 2**53), where doubles are the
# integers, so the add rounds v to an integer (half to even, as rint) and leaves it, two's
# complement, in the low bits: BIAS's high word, then rint(v), for 0 <= rint(v) < 2**31
BIAS = 6755399441055744.0
BIAS_HIGH_WORD = 0x43380000

RINT_U8 = f'''
if _config.ENABLE_CUDASIM:
    import struct as _struct

    def _rint_u8(v):
        x = v + {BIAS!r}
        bits = _struct.unpack("<q", _struct.pack("<d", x))[0]
        hi = bits >> 32
        lo = bits & 0xFFFFFFFF
        lo = lo - 0x100000000 if lo >= 0x80000000 else lo
        if hi == {BIAS_HIGH_WORD:#x} and lo >= 0:
            return lo if lo < 255 else 255
        return 255 if v > 0.0 else 0
else:
    @_dev
    def _rint_u8(v):
        # integer compares and a min on the rounded value's words, where the clip in float64
        # took two compares and five selects (the max's NaN rules) per output
        x = v + {BIAS!r}
        hi = _ld.double2hiint(x)
        lo = _ld.double2loint(x)
        if hi == {BIAS_HIGH_WORD:#x} and lo >= 0:
            return lo if lo < 255 else 255
        return 255 if v > 0.0 else 0
'''


def whole_taps(n: int) -> str:
    """Expression for where a window of ``n`` outputs ends its whole blocks of taps.

    ``ntaps`` rounded up to a multiple of ``n`` when that leaves 3 or more taps to the
    shifting tail (a padded block costs about what 2 shifting steps cost), else down; windows
    of fewer than 3 outputs never pad.
    """
    if n < 3:
        return f"_i32(ntaps // {n} * {n})"
    return f"_i32((ntaps + {n - 3}) // {n} * {n})"


def stage_taps(tw: int, threads: int, px: int, py: int) -> str:
    """Kernel text (after the block's tile is known): taps into ``hb[0:TB]`` with zeros past
    ``ntaps``, the spare slots zeroed, the whole-block ends ``kfx``/``kfy``; a barrier."""
    tail = max(px, py)
    return (
        "    # taps staged once per block, zero past ntaps: the tap loops' whole blocks may\n"
        "    # run past ntaps over zeros (tile2d_batch)\n"
        "    TB = _i32((taps.shape[1] + 15) // 8 * 8)\n"
        f"    kfx = {whole_taps(px)}\n"
        f"    kfy = {whole_taps(py)}\n"
        "    kmx = kfx if kfx > ntaps else ntaps\n"
        "    e_ = tid\n"
        "    while e_ < TB:\n"
        "        tv = 0.0\n"
        "        if e_ < ntaps:\n"
        "            tv = taps[bt, _u32(e_)]\n"
        "        hb[_u32(e_)] = tv\n"
        f"        e_ = _i32(e_ + {threads})\n"
        "    # each column's spare slot and the doubles past the tile, read by padded windows\n"
        "    e_ = tid\n"
        f"    while e_ < {tw + tail}:\n"
        f"        if e_ < {tw}:\n"
        "            hb[_u32(TB + e_ * R + nrow)] = 0.0\n"
        "        else:\n"
        f"            hb[_u32(TB + {tw} * R + e_ - {tw})] = 0.0\n"
        f"        e_ = _i32(e_ + {threads})\n"
        "    cuda.syncthreads()\n"
    )


def taps_shared_bytes(tap_columns: int, geometry: Geometry) -> int:
    """Shared memory the batched kernel takes besides the tile's float64 rows: the staged
    taps (``taps.shape[1]`` columns, padded) and the zeroed doubles past the tile."""
    return ((tap_columns + 15) // 8 * 8 + max(geometry[2], geometry[3])) * 8


def batch_shared_bytes(radius: int, geometry: Geometry, tap_columns: int) -> int:
    """Dynamic shared memory of the batched kernel for the batch's largest ``radius``."""
    return taps_shared_bytes(tap_columns, geometry) + tile_shared_bytes(radius, geometry)


# Elements per whole block of the word loads: 8 elements of a ``c``-byte pixel are 8 c bytes,
# a whole number of uint64 words, so a window's blocks keep one alignment.
WORD_BLOCK = 8


def word_loads(c: int, ind: str) -> tuple[str, str, Any]:
    """``(pre, head, bload)`` for ``tile2d._window``: an interior window of uint8 ``src`` (the
    rows pass's L1-bound byte loads, bench/RESULTS.md, 2026-11-23/24) loads each whole block of 8
    elements (``8 c`` bytes at element ``k + 8``) as ``c + 1`` aligned uint64 words of
    ``srcw`` (the same buffer), instead of 8 byte loads; funnel shifts by the window's byte
    alignment ``wa`` (the same for every block) leave element ``j`` in byte ``c j % 8`` of
    ``u{c j // 8}``. The values, so the sums, are the bytes the byte loads read. Word ``c`` is
    read only where it holds a needed byte (``wl``; else word ``c - 1`` again): every word read
    holds a byte of the image, so it lies in the (8-byte aligned) buffer.
    """
    i2 = ind + "    "
    pre = (f"{ind}wa = _i32((ib + rb) & 7)\n"
           f"{ind}sh = uint64(wa * 8)\n"
           f"{ind}sl = uint64(63) - sh\n"
           f"{ind}wl = _i32((wa + {7 * c}) >> 3)\n"
           f"{ind}wq = (ib + rb + {8 * c}) >> 3\n")
    head = [f"{i2}q_ = wq + (k >> 3) * {c}"]
    head += [f"{i2}w{i} = srcw[_u(q_ + {i})]" for i in range(c)]
    head.append(f"{i2}w{c} = srcw[_u(q_ + wl)]")
    # (w << 63 - sh) << 1: no shift by 64 where the alignment is 0
    head += [f"{i2}u{i} = (w{i} >> sh) | ((w{i + 1} << sl) << uint64(1))" for i in range(c)]

    def bload(dst: str, off: str, ind_: str) -> str:
        j = int(off.rpartition("+")[2]) - WORD_BLOCK  # element k + 8 + j
        u, b = divmod(c * j, 8)
        return f"{ind_}{dst} = _b2f(_i32((u{u} >> uint64({8 * b})) & uint64(255)))\n"

    return pre, "\n".join(head) + "\n", bload
