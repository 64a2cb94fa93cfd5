"""The tabled batched gather of members whose integer map moves whole pixels: words and tiles.

The figure-5.1 first gathers (transpose, fliplr, then a uint8 table: ``batch_tables``) read
and stored one byte per channel per thread. A transposed member's warp read one source
column, 32 cache lines per byte load, and every load and store was a byte: the kernels were
bound by the L1 pipeline (bench/RESULTS.md, 2026-11-23/24). Here the same gather (no sampler, the
chain a per-block table, ``cin`` = ``cout`` bytes per pixel) runs each member one of three
ways, chosen per member from its map (data: one kernel serves every member of a batch):

- *contiguous* (the identity, or any map whose member is one run of source bytes at an offset
  with the output's 8-byte alignment): the member as uint64 words, each thread loading a word
  of ``srcw``, looking its bytes up in the table and storing the word to ``dstw``.
- *axis map* (every ``|q|`` entry 0 or 1 with one per row and column: transpose, flips,
  rot90, and their offsets): ``TILE`` x ``TILE`` output tiles; the block loads the tile's
  source rectangle a source row at a time as uint64 words into shared memory (every row at
  the rectangle's one byte alignment), then each thread builds 8 output pixels (``cin``
  words) of an output row from shared bytes through the table and stores them as words.
- *general*: the per-pixel table body (``batch_tables.fast_body``) over the member's pixels.

Every output byte is the table's entry for the source byte the general gather reads for it
(the map's ``sy``, ``sx`` and channel), so the values are the same bits. The words need
(:func:`launch_words`) source and output rows of whole words (both widths multiples of 8: a
tile's source rows share one alignment) and both buffers as whole aligned uint64 words
(``backend.words``); a source word read may hold bytes of a neighbouring row or image, never
past the buffer. Launches that do not fit, other signatures, the cpu and wide members take
the general kernel (``batch_gather``).
"""

from __future__ import annotations

from typing import Any

from . import batch_tables
from .gather_sig import GatherSig

# the tile's element type (the simulator's ``_u32`` is a function)
HEAD = "from numba import uint32 as _w32t\n"

#: Output pixels per side of an axis-map member's tile (a multiple of 8: the store unit).
TILE = 64

#: Words a thread loads before it stores them (contiguous members, tile loads). 4 took 90
#: registers (2 blocks an SM) and ran the figure-5.1 first gathers slower than 1 (0.205
#: against 0.182 ms a batch: bench/RESULTS.md, h-gather). Benchmarks set it to compare.
WORDS_PER_TRIP = 1

#: Whether the flat batched gathers take this kernel where it applies (benchmarks compare).
ENABLED = True

# the general path's loop (a member's pixels over the member's blocks)
_GENERAL = """e_ = _ix(bl_ * nt_ + tid_)
while e_ < h * w:
    y = _ix(e_ // w)
    x = _ix(e_ - y * w)
{body}
    e_ = _ix(e_ + nbl_ * nt_)
"""


def applies(sig: GatherSig, target: str, src_dtype: Any) -> bool:
    """Whether the flat batched gather of ``sig`` over ``src_dtype`` has this kernel: a tabled
    gather (``batch_tables.tabled``) with no sampler, whose pixels are ``cin`` bytes in and
    out, on CUDA (or its simulator)."""
    return (ENABLED and target == "cuda" and batch_tables.tabled(sig, target, src_dtype)
            and not sig.sampler and not sig.grey and sig.cin in (1, 3))


def launch_words(runtime: Any, src_flat: Any, dst_flat: Any, sw: int, w: int
                 ) -> tuple | None:
    """``(srcw, dstw)``, the flat source and output as uint64 words, where a launch can take
    this kernel (source rows of ``sw`` and output rows of ``w`` pixels both whole words, both
    buffers whole aligned words), else None."""
    if sw % 8 or w % 8:
        return None
    srcw = runtime.words(src_flat)
    dstw = None if srcw is None else runtime.words(dst_flat)
    return None if dstw is None else (srcw, dstw)


def _bytes_of(c: int) -> list[tuple[int, int, int]]:
    """The ``8 c`` bytes of 8 pixels of ``c`` channels: (pixel, channel, word)."""
    return [(k // c, k % c, k // 8) for k in range(8 * c)]


def _contiguous(c: int) -> str:
    """The contiguous member: word ``wr`` of the member from source word ``wr + sq_``,
    ``WORDS_PER_TRIP`` words of a thread's grid-stride loop loaded before any is stored."""
    n = WORDS_PER_TRIP
    lines = ["nw_ = _ix(h * w * " + str(c) + " // 8)",
             "st_ = _ix(nbl_ * nt_)",
             "wr = _ix(bl_ * nt_ + tid_)",
             "while wr < nw_:"]
    # a word past the member is loaded at the member's last word and not stored
    lines += [f"    wq{i}_ = _ix(min(wr + {i} * st_, nw_ - 1))" for i in range(n)]
    lines += [f"    wv{i}_ = _u(srcw[_u(sq_ + wq{i}_)])" for i in range(n)]
    for i in range(n):
        if c == 1:
            offs = ["0"] * 3
        else:
            # the channel of the word's first byte: member byte 8 wr, 8 = 2 (mod 3)
            lines += [f"    k0_ = _ix((wq{i}_ + wq{i}_) % 3)",
                      "    k1_ = _ix(k0_ - 2 if k0_ == 2 else k0_ + 1)",
                      "    k2_ = _ix(k1_ - 2 if k1_ == 2 else k1_ + 1)"]
            offs = ["k0_ * 256", "k1_ * 256", "k2_ * 256"]
        terms = [f"(_u(ct_[_u32({offs[j % 3]} + _u32((wv{i}_ >> _u({8 * j})) & _u(255)))])"
                 f" << _u({8 * j}))" for j in range(8)]
        lines.append(f"    ov{i}_ = " + " | ".join(terms))
    lines.append("    dstw[_u(dq_ + wr)] = ov0_")
    for i in range(1, n):
        lines += [f"    if wr + {i} * st_ < nw_:", f"        dstw[_u(dq_ + wq{i}_)] = ov{i}_"]
    lines.append(f"    wr = _ix(wr + {n} * st_)")
    return "\n".join(lines) + "\n"


def _axis_map(c: int) -> str:
    """The axis-map member, tile by tile (``TILE`` x ``TILE`` output pixels)."""
    t, rsw = TILE, _row_words(c)
    units = t // 8
    nwr = (t * c + 7) // 8 + 1  # source words a tile row can touch (misaligned)
    load = f"""ntx_ = _ix((w + {t - 1}) // {t})
ntt_ = _ix(ntx_ * ((h + {t - 1}) // {t}))
tt_ = _ix(bl_)
while tt_ < ntt_:
    ty_ = _ix(tt_ // ntx_)
    y0_ = _ix(ty_ * {t})
    x0_ = _ix((tt_ - ty_ * ntx_) * {t})
    ny_ = _ix(min(h - y0_, {t}))
    nx_ = _ix(min(w - x0_, {t}))
    # the source rectangle of the tile: rows sl_ + u (u < nu_), columns vl_ + v (v < nv_)
    sl_ = _ix(m2_ + min(m0_ * y0_, m0_ * (y0_ + ny_ - 1))
              + min(m1_ * x0_, m1_ * (x0_ + nx_ - 1)))
    vl_ = _ix(m5_ + min(m3_ * y0_, m3_ * (y0_ + ny_ - 1))
              + min(m4_ * x0_, m4_ * (x0_ + nx_ - 1)))
    nu_ = _ix(abs(m0_) * (ny_ - 1) + abs(m1_) * (nx_ - 1) + 1)
    nv_ = _ix(abs(m3_) * (ny_ - 1) + abs(m4_) * (nx_ - 1) + 1)
    # source row u from word aw_ + u ws_ on (rows of whole words: one alignment am_ for
    # all), shared row u's byte am_ + v c its column vl_ + v
    a_ = ib_ + (sl_ * sw_ + vl_) * {c}
    am_ = _ix(a_ & 7)
    aw_ = a_ >> 3
    e_ = _ix(tid_)
    while e_ < nu_ * {nwr}:
{_tile_loads(c)}        e_ = _ix(e_ + {WORDS_PER_TRIP} * nt_)
    # output pixel (y0_ + r, x0_ + i) reads shared byte ob_ + r rs_ + i xs_ (+ its channel)
    ob_ = _ix((m0_ * y0_ + m1_ * x0_ + m2_ - sl_) * {4 * rsw} + am_
              + (m3_ * y0_ + m4_ * x0_ + m5_ - vl_) * {c})
    rs_ = _ix(m0_ * {4 * rsw} + m3_ * {c})
    xs_ = _ix(m1_ * {4 * rsw} + m4_ * {c})
    cuda.syncthreads()
    e_ = _ix(tid_)
    while e_ < ny_ * {units}:
        r = _ix(e_ // {units})
        j = _ix(e_ - r * {units})
        if j * 8 < nx_:
            o_ = _ix(ob_ + r * rs_ + j * 8 * xs_)
"""
    body: list[str] = []
    words = [["_u(0)"] for _ in range(c)]
    for p, ch, wd in _bytes_of(c):
        off = f"_u32(o_ + {p} * xs_ + {ch})"
        sh = f"((_u32({off} & _u32(3))) << _u32(3))"
        sb = f"_u32((tl_[_u32({off} >> _u32(2))] >> {sh}) & _u32(255))"
        k = (p * c + ch) % 8
        words[wd].append(f"(_u(ct_[_u32({ch * 256} + {sb})]) << _u({8 * k}))")
    for wd in range(c):
        body.append(f"ov{wd}_ = " + " | ".join(words[wd]))
    body.append(f"ow_ = dq_ + _ix(((y0_ + r) * w + x0_ + j * 8) * {c} >> 3)")
    body += [f"dstw[_u(ow_ + {wd})] = ov{wd}_" for wd in range(c)]
    tail = "        e_ = _ix(e_ + nt_)\n    cuda.syncthreads()\n    tt_ = _ix(tt_ + nbl_)\n"
    return load + "".join(" " * 12 + line + "\n" for line in body) + tail


def _tile_loads(c: int) -> str:
    """One trip of the tile's loads: ``WORDS_PER_TRIP`` of the thread's source words (row
    ``u``, word ``k``) loaded, then stored to shared memory."""
    t, rsw, n = TILE, _row_words(c), WORDS_PER_TRIP
    nwr = (t * c + 7) // 8 + 1
    lines = []
    for i in range(n):
        lines += [f"e{i}_ = _ix(e_ + {i} * nt_)",
                  f"u{i}_ = _ix(e{i}_ // {nwr})",
                  f"k{i}_ = _ix(e{i}_ - u{i}_ * {nwr})",
                  # a word of the row's bytes (of the tile's rows)
                  f"l{i}_ = e{i}_ < nu_ * {nwr} and k{i}_ * 8 < am_ + nv_ * {c}",
                  f"wv{i}_ = _u(srcw[_u(aw_ + _ix(u{i}_ * ws_ + k{i}_))]) if l{i}_ else _u(0)"]
    for i in range(n):
        lines += [f"if l{i}_:",
                  f"    tl_[_u32(u{i}_ * {rsw} + 2 * k{i}_)] = _u32(wv{i}_ & _u(0xFFFFFFFF))",
                  f"    tl_[_u32(u{i}_ * {rsw} + 2 * k{i}_ + 1)] = _u32(wv{i}_ >> _u(32))"]
    return "".join(" " * 8 + line + "\n" for line in lines)


def _row_words(c: int) -> int:
    """32-bit words of a shared tile row: ``TILE`` pixels and up to 7 bytes of alignment, an
    odd count (the threads of an output column read rows that then start in other banks)."""
    n = (TILE * c + 7 + 3) // 4 + 1  # (+ 1: a whole last 64-bit word past a misaligned end)
    return n if n % 2 else n + 1


def launch_text(c: int) -> str:
    """Per thread, before the member loop: the tile in shared memory, the thread's place."""
    return (f"tl_ = cuda.shared.array({TILE * _row_words(c)}, dtype=_w32t)\n"
            "tid_ = _ix(cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x)\n"
            "nt_ = _ix(cuda.blockDim.x * cuda.blockDim.y)\n"
            "bl_ = _ix(cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x)\n"
            "nbl_ = _ix(cuda.gridDim.x * cuda.gridDim.y)\n")


def member_text(c: int, general: str) -> str:
    """Per member (after the prologue and its table): the member's branch, then its pixels;
    ``general`` the per-pixel body (flat accesses) of the general branch."""
    ind = "".join("    " + line + "\n" for line in general.splitlines())
    return (f"ws_ = _ix(sw_ * {c} // 8)\n"
            + "".join(f"m{i}_ = _ix(q{i})\n" for i in range(6))
            + "dq_ = db_ >> 3\n"
            + "sq_ = (ib_ + c0_) >> 3\n"
            # an axis map: one entry of 1 or -1 per row and per column of the 2 x 2 map
            + "axis_ = (abs(q0) + abs(q1) == 1 and abs(q3) + abs(q4) == 1"
            " and abs(q0) == abs(q4))\n"
            + f"if dx_ == {c} and dy_ == w * {c} and (db_ & 7) == 0 and ((ib_ + c0_) & 7) == 0:\n"
            + "".join("    " + line + "\n" for line in _contiguous(c).splitlines())
            + "elif axis_:\n"
            + "".join("    " + line + "\n" for line in _axis_map(c).splitlines())
            + "else:\n"
            + "".join("    " + line + "\n"
                      for line in _GENERAL.format(body=ind.rstrip("\n")).splitlines()))


def shared_bytes(c: int) -> int:
    """Shared memory of the kernel: the tile and the chain table."""
    return 4 * TILE * _row_words(c) + 256 * c

