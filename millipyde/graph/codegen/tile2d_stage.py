"""Staging of a ``tile2d`` block's source tile plus halo in shared memory (generated text).

``packed_stage``: uint8 RGBA words as three byte planes (prologue tables applied once per
pixel); ``byte_stage``: a uint8 source's interleaved bytes as they are. Both take the kernel's
``_Tile`` (``tile2d``) and emit code that runs after its head and ends on a barrier.
"""

from __future__ import annotations

from typing import Any


def packed_stage(t: Any) -> str:
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


def byte_stage(t: Any) -> str:
    """Stage the tile plus halo of a uint8 source as its interleaved bytes (all ``c``
    channels; bytes outside the image zero): rows ``S`` bytes apart, a warp loads 32
    consecutive bytes of a row. Rows outside the image are not staged (never read)."""
    bx, by, c = t.geometry[0], t.geometry[1], t.c
    return (
        f"    RB = _i32(({t.tw} + 2 * r + 1) * {c})\n"
        "    S = _i32((((RB + 3) >> 2) | 1) * 4)\n"
        "    HB = _i32((nrow * S + 7) // 8)\n"
        f"    NR = _i32((nrow + {bx - 1}) // {bx} * {bx})\n"
        f"    gx = _i32((x0 - r) * {c})\n"
        "    i = ty\n"
        "    while i < nrow:\n"
        "        y = _i32(y0 - r + i)\n"
        "        if y >= 0 and y < h:\n"
        "            j = tx\n"
        "            while j < RB:\n"
        "                e = _i32(gx + j)\n"
        "                if e >= 0 and e < WC:\n"
        "                    sb[_u32(i * S + j)] = src[_u(ib + _i32(y * WC + e))]\n"
        "                else:\n"
        "                    sb[_u32(i * S + j)] = 0\n"
        f"                j = _i32(j + {bx})\n"
        f"        i = _i32(i + {by})\n"
        "    cuda.syncthreads()\n")
