"""The body of a fused gather kernel: source reads (through tables, pads, samplers and user
maps), the chained ops, the grey conversion and the stores; and its per-launch prologue."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from ...kernels import REGISTRY
from .chain import chain_all, chain_calls
from .gather_sig import (
    A_OFF,
    BOUNDED_SLOTS,
    CLIP_HI_OFF,
    CLIP_OFF,
    FULL_OFF,
    MID_OFF,
    P_OFF,
    PROJECTIVE_SLOTS,
    GatherSig,
    chained,
    extras_offset,
    gather_nparams,
    op_offsets,
    projective_offset,
    stat_layout,
)


def gate_prologue(sig: GatherSig) -> str:
    """Per-image reads of the gate flags that follow ``sig``'s parameters (batched kernels).

    ``g<i>_`` is nonzero when chained op ``i`` is gated off for the image, ``gs_`` when the
    sampler is (it then reads one tap and blends nothing).
    """
    base = gather_nparams(sig)
    n = len(sig.pre) + len(sig.post) + len(sig.grey_ops)
    return "\n".join([f"g{i}_ = p[{base + i}]" for i in range(n)] + [f"gs_ = p[{base + n}]"])


#: a per-member read of one gate flag (``gate_prologue``, batched) and a test of one
_GATE_READ = re.compile(r"^(?P<ind>[ ]*)(?P<g>g\d+_|gs_) = (?P<v>p\[.+\])$", re.M)
_GATE_TEST = re.compile(r"\b(?P<g>g\d+_|gs_) (?P<op>[=!]=) 0\.0\b")
#: flags a word of :func:`gate_words` holds (int64 bits, the sign bit left alone)
GATE_BITS = 62


def gate_words(per_image: str, body: str) -> tuple[str, str]:
    """``per_image`` and ``body`` (a batched GPU kernel's per-member text and pixel text) with
    the gate flags ``g<i>_`` / ``gs_`` read into the bits of integer words ``gw<k>_`` instead
    of one float64 each, and each test ``g<i>_ == 0.0`` (``!= 0.0``) a test of its bit.

    The flags are live across the whole pixel loop: a policy's 14-16 gates held 28-32
    registers as float64 values, one word holds 62 of them in two. A flag's bit is set where
    the flag is nonzero (NaN included), so every test takes the branch it took before and
    values do not change. Texts that use a flag in any other form are returned as they are.
    """
    reads = {m["g"]: m for m in _GATE_READ.finditer(per_image)}
    if not reads:
        return per_image, body
    bit = {g: i for i, g in enumerate(reads)}
    text = _GATE_READ.sub("", per_image) + "\n" + body
    if (any(m["g"] not in bit for m in _GATE_TEST.finditer(text))
            or re.search(r"\b(?:g\d+_|gs_|gw\d+_)(?!\w)", _GATE_TEST.sub("", text))):
        return per_image, body

    def word(g: str) -> str:
        return f"gw{bit[g] // GATE_BITS}_"

    def read(m: re.Match) -> str:
        i, ind = bit[m["g"]], m["ind"]
        first = f"{ind}{word(m['g'])} = 0\n" if i % GATE_BITS == 0 else ""
        return (f"{first}{ind}if {m['v']} != 0.0:\n"
                f"{ind}    {word(m['g'])} |= {1 << (i % GATE_BITS)}")

    def test(m: re.Match) -> str:
        return f"({word(m['g'])} & {1 << (bit[m['g']] % GATE_BITS)}) {m['op']} 0"

    return _GATE_TEST.sub(test, _GATE_READ.sub(read, per_image)), _GATE_TEST.sub(test, body)


#: How a body treats its sampler's gate (``gs_``, with ``gates``): ``"pixel"`` branches on it
#: per pixel; ``"on"`` and ``"off"`` are the bodies of members whose sampler is known on or
#: gated off (the batched kernels choose one per member: ``batch_gather``).
SAMPLER_GATES = ("pixel", "on", "off")


def _blend(c: int, sig: GatherSig, rounds: bool, gates: bool, sampler: str = "pixel"
           ) -> list[str]:
    """Lines giving ``v{c}`` from the four taps ``t{c}_0..3`` (skimage's bilinear_interpolation:
    rows blended last), clipped as skimage's warp clips, rounded where the output is integer;
    ``sampler`` (:data:`SAMPLER_GATES`) says how a gated sampler's gate is taken."""
    if gates and sampler == "off":
        return [f"v{c} = t{c}_0"]  # tap 0 alone: the lines of the ``gs_ != 0.0`` branch below
    mix = (f"(1.0 - dr) * ((1.0 - dc) * t{c}_0 + dc * t{c}_1) + "
           f"dr * ((1.0 - dc) * t{c}_2 + dc * t{c}_3)")
    # the upper bound binds only for images whose values are all negative
    blend = [f"v{c} = min(max({mix}, clip_lo), clip_hi)"] if sig.clip else [f"v{c} = {mix}"]
    if rounds:
        blend.append(f"v{c} = _rint_clip(v{c}, full)")
    if gates and sampler == "pixel":
        # a gated-off sampler has an identity map: its one tap is the value, exactly as with
        # no sampler (blending in zero weights would turn -0.0 into +0.0)
        blend = ["if gs_ != 0.0:", f"    v{c} = t{c}_0", "else:", *("    " + ln for ln in blend)]
    return blend


def gather_body(sig: GatherSig, gates: bool = False, flat: bool = False,
                sampler: str = "pixel", words: bool = False) -> str:
    """The per-pixel body of the gather of ``sig`` (``y``, ``x``: the output pixel).

    ``flat`` (plain signatures; the batched kernels of ``batch_gather``): the source is read
    at ``_ix`` element offsets from the member's base ``ib_``, the index map stepping by the
    per-member ``dy_``, ``dx_`` and ``c0_`` (:func:`flat_offsets`) as packed gathers step by
    words; every other access stays indexed for ``batch_gather.flat_accesses``.

    ``sampler`` (with ``gates`` and a sampler; :data:`SAMPLER_GATES`): ``"off"`` is the body
    of a member whose sampler is gated off. Its value is tap 0 (``_blend``), so it reads tap 0
    alone: where the per-pixel branch read all four taps of every channel and kept one, it
    loads a quarter of the bytes (and table entries), with the same values. ``"on"`` drops
    the per-pixel branch (the member's blend always runs).

    ``words`` (``flat``, a sampler, three channels, uint8 source, GPUs): the kernel takes
    the source's uint64 view ``srcw`` too, and a pixel whose four taps are in the image reads
    each row's tap pair as two words (:func:`word_taps_head`).
    """
    if sampler not in SAMPLER_GATES:
        raise ValueError(f"sampler must be one of {SAMPLER_GATES}, got {sampler!r}")
    if not (gates and sig.sampler):
        sampler = "pixel"
    if not sig.plain:
        return _gather_body_general(sig, gates, sampler)
    c_in = sig.cin
    lut = sig.mode == "lut"
    cast = sig.is_int
    lines: list[str] = []
    chans = range(c_in)

    # Source indices are in bounds where they are read; as unsigned integers Numba does not
    # add its negative-index wraparound to every load.
    def load(c: int, sy: str, sx: str, byte: str = "") -> str:
        if byte:  # the value of a byte already read (a word tap)
            raw = byte
        elif sig.packed:
            raw = f"((pk >> {8 * c}) & 255)"
        elif flat:  # ``sy`` names the pixel's element offset
            raw = f"src[_u(ib_ + _ix({sy} + {c}))]"
        else:
            raw = f"src[_u({sy}), _u({sx}), {c}]"
        if lut and sig.lut_stages[0]:
            return f"_b2f(lut[0, {c}, {raw}])"
        return f"_b2f({raw})" if sig.packed else f"float({raw})"

    if not sig.sampler:
        if sig.packed:
            lines.append("pk = src[_u32(_u32(y) * dy_ + _u32(x) * dx_ + c0_)]")
        elif flat:
            lines.append("sy = _ix(y * dy_ + x * dx_ + c0_)")
        else:
            lines += ["sy = q0 * y + q1 * x + q2", "sx = q3 * y + q4 * x + q5"]
        if lut and not sig.grey and not sig.packed:
            # a pure table lookup: stay in uint8, no float round trip
            def value(c: int) -> str:
                raw = f"src[_u(ib_ + _ix(sy + {c}))]" if flat else f"src[_u(sy), _u(sx), {c}]"
                return f"lut[0, {c}, {raw}]" if sig.lut_stages[0] else raw

            return "\n".join(lines + [f"dst[y, x, {c}] = {value(c)}" for c in chans])
        for c in chans:
            lines.append(f"v{c} = {load(c, 'sy', 'sx')}")
            if not lut and sig.pre:
                lines.append(chain_calls(sig.pre, f"v{c}", c, "full", 0, cast, gates))
    else:
        lines += [
            "fy = a0_ * y + a1_ * x + a2_",
            "fx = a3_ * y + a4_ * x + a5_",
            "ty0 = math.floor(fy)",
            "tx0 = math.floor(fx)",
            "dr = fy - ty0",
            "dc = fx - tx0",
            "iy = int(ty0)",
            "ix = int(tx0)",
        ]
        if sig.packed:
            # the flat offset of the first tap; the others are one step away in y and/or x
            lines.append("o = _u32(_u32(iy) * dy_ + _u32(ix) * dx_ + c0_)")
        elif flat:
            lines.append("o = _ix(_ix(iy) * dy_ + _ix(ix) * dx_ + c0_)")
        else:
            lines += ["by = q0 * iy + q1 * ix + q2", "bx = q3 * iy + q4 * ix + q5"]
        lines += _sampler_taps(sig, gates, load, flat, sampler, words)
    return "\n".join(lines + _gather_tail(sig, gates, op_offsets(chained(sig))))


# the four bilinear taps: (row, column, row step, column step, packed word offset, index)
_TAPS = [("iy", "ix", "", "", "o", 0),
         ("iy", "ix + 1", " + q1", " + q4", "_u32(o + dx_)", 1),
         ("iy + 1", "ix", " + q0", " + q3", "_u32(o + dy_)", 2),
         ("iy + 1", "ix + 1", " + q0 + q1", " + q3 + q4", "_u32(o + dy_ + dx_)", 3)]


def _sampler_taps(sig: GatherSig, gates: bool, load: Callable[..., str],
                  flat: bool = False, sampler: str = "pixel", words: bool = False
                  ) -> list[str]:
    """The sampler's four taps read (through ``load``), blended and post-processed, per
    channel (``flat``: ``load`` takes the tap's element offset; ``sampler`` ``"off"``: tap 0
    alone; ``words``: word taps where they apply; ``gather_body``)."""
    lut = sig.mode == "lut"
    cast = sig.is_int
    chans = range(sig.cin)
    lines: list[str] = []
    taps = range(1) if sampler == "off" else range(4)
    # a gated-off member's one tap costs 3 byte loads: no words there
    words = words and flat and sig.cin == 3 and not sig.packed and sampler != "off"
    if words:
        lines += word_taps_head(sig.cin).splitlines()

    def chained(k: int, c: int, ind: str) -> list[str]:
        if lut or not sig.pre:
            return []
        return [ind + chain_calls(sig.pre, f"t{c}_{k}", c, "full", 0, cast, gates)
                .replace("\n", "\n" + ind)]

    def from_words(c: int) -> list[str]:
        """Channel ``c`` of the four taps out of the rows' words (``wi_``'s branch)."""
        out = []
        for k in taps:
            r, b = ("r0_", "r1_")[k // 2], c + sig.cin * (k % 2)
            out.append(f"    t{c}_{k} = {load(c, '', '', _word_byte(r, b))}")
            out += chained(k, c, "    ")
        return out

    def read(k: int, chs: list[int]) -> list[str]:
        ty, tx, dy, dx, word, _ = _TAPS[k]
        # one unsigned comparison per axis also rejects negative indices
        out = [f"t{c}_{k} = 0.0" for c in chs]
        out.append(f"if _u({ty}) < _u(mh) and _u({tx}) < _u(mw):")
        if sig.packed:
            out.append(f"    pk = src[{word}]")
        elif flat:
            out.append(f"    sy = {word.replace('_u32', '_ix')}")
        else:
            out += [f"    sy = by{dy}", f"    sx = bx{dx}"]
        for c in chs:
            out.append(f"    t{c}_{k} = {load(c, 'sy', 'sx')}")
            out += chained(k, c, "    ")
        return out

    def finish(c: int) -> list[str]:
        out = _blend(c, sig, cast or lut, gates, sampler)
        if lut and sig.lut_stages[1]:
            out.append(f"v{c} = _b2f(lut[1, {c}, int(v{c})])")
        elif sig.post:
            out.append(chain_calls(sig.post, f"v{c}", c, "full", len(sig.pre), cast, gates))
        return out

    if sig.packed:  # one word holds every channel of a tap: read the four words first
        for k in taps:
            lines += read(k, list(chans))
        for c in chans:
            lines += finish(c)
    else:
        # channel by channel, four taps each: 4 float64 taps live instead of 4 per
        # channel (the kernels were held to a quarter occupancy by their registers);
        # each channel's operations are the same, so the values are too
        for c in chans:
            reads = [ln for k in taps for ln in read(k, [c])]
            if words:  # the same taps, their bytes out of the words; at the edges as before
                reads = ["if wi_:", *from_words(c), "else:", *("    " + ln for ln in reads)]
            lines += reads + finish(c)
    return lines


def word_taps_head(cin: int) -> str:
    """Per pixel of a ``words`` body (before its channels): ``wi_``, whether all four taps
    are in the image and a row's tap pair is adjacent in the source (``dx_``: the member's
    integer map keeps columns), and then ``r0_``, ``r1_``: the pair's ``2 cin`` bytes of
    rows ``iy`` and ``iy + 1`` in their low bytes (:data:`WORD_TAPS_DEF`'s ``_w6``).

    A batch writer's rotated pixel read each tap's channels as bytes (12 ``ld.global.u8``
    per pixel, the writer bound by its L1 pipeline: bench/RESULTS.md, 2026-11-23/24);
    here 4 uint64 loads. The bytes are the ones the byte loads read, so the values are.
    ``wi_`` is the four taps' bounds checks together: every byte the words are read for is
    one the byte loads read (in the buffer), and so is each word read (``_w6``).
    """
    inside = " and ".join(f"_u({v}) < _u({n})" for v, n in (
        ("iy", "mh"), ("iy + 1", "mh"), ("ix", "mw"), ("ix + 1", "mw")))
    return "\n".join([f"wi_ = dx_ == {cin} and {inside}",
                      "r0_ = _u(0)", "r1_ = _u(0)", "if wi_:",
                      "    r0_ = _w6(srcw, ib_ + o)",
                      "    r1_ = _w6(srcw, ib_ + _ix(o + dy_))"])


def _word_byte(r: str, b: int) -> str:
    """Byte ``b`` of uint64 ``r`` (unsigned operands: numba makes a mixed-sign shift
    float64)."""
    return f"(({r} >> _u({8 * b})) & _u(255))" if b else f"({r} & _u(255))"


#: ``_w6(srcw, e)``: the six bytes at byte ``e`` of a whole-word 8-byte-aligned buffer (its
#: uint64 view ``srcw``) in the low bytes of a uint64. The words holding the first and the
#: last of them (the same word or the next) are funnel-shifted by ``e``'s alignment, as
#: ``tile2d_batch.word_loads`` does; ``(hi << 63 - sh) << 1`` shifts by 64 as zero.
WORD_TAPS_DEF = """

@_dev
def _w6(srcw, e):
    sh = _u((e & 7) * 8)
    lo = srcw[_u(e >> 3)]
    hi = srcw[_u((e + 5) >> 3)]
    return (lo >> sh) | ((hi << (_u(63) - sh)) << _u(1))
"""


def _gather_tail(sig: GatherSig, gates: bool, offsets: list[int]) -> list[str]:
    """The grey conversion, its chain and the stores (shared by both bodies)."""
    lines = []
    chans = range(sig.cin)
    if sig.grey:
        alpha = "v3" if sig.cin == 4 else "0.0"
        has_alpha = "True" if sig.cin == 4 else "False"
        lines.append(f"g = _f_{sig.grey}(v0, v1, v2, {alpha}, {has_alpha})")
        first = len(sig.pre) + len(sig.post)
        if sig.grey_ops:
            lines.append(chain_all(sig.grey_ops, ["g"], "1.0", first, offsets, False, gates,
                                   stat_layout(sig)))
        values = ["g"]
    else:
        values = [f"v{c}" for c in chans]
    if sig.packed:
        lines.append(f"od = _u32(_u32(y) * _u32(w) + _u32(x)) * {len(values)}")
        lines += [f"dst[_u32(od + {c})] = {v}" for c, v in enumerate(values)]
    else:
        lines += [f"dst[y, x, {c}] = {v}" for c, v in enumerate(values)]
    return lines


def _gather_body_general(sig: GatherSig, gates: bool = False, sampler: str = "pixel") -> str:
    """The gather with pads (fills), edge-mode and nearest samplers, user maps and ops of every
    chained kind: a value chain per pixel (or per tap) over all channels at once
    (``sampler``: as ``gather_body``'s)."""
    chans = list(range(sig.cin))
    lut = sig.mode == "lut"
    cast = sig.is_int
    offsets = op_offsets(chained(sig))
    stats = stat_layout(sig)
    lines: list[str] = []

    def local(i: int) -> list[str]:
        return prefix_lines(sig, i, gates)

    def load(c: int) -> str:
        raw = f"src[_u(sy), _u(sx), {c}]"
        return f"_b2f(lut[0, {c}, {raw}])" if lut and sig.lut_stages[0] else f"float({raw})"

    def read(vars_: list[str]) -> list[str]:
        """Set ``vars_`` from source position (sy, sx): loaded, or the fills outside."""
        out = [f"{v} = {load(c)}" for c, v in zip(chans, vars_, strict=True)]
        if sig.bounded:
            out = (["if _u(sy - wy_) < _u(wh_) and _u(sx - wx_) < _u(ww_):"]
                   + ["    " + line for line in out] + ["else:"]
                   + [f"    {v} = fill{c}_" for c, v in zip(chans, vars_, strict=True)])
        if not lut and sig.pre:
            chain = chain_all(sig.pre, vars_, "full", 0, offsets, cast, gates, stats, local)
            out += chain.splitlines()
        return out

    if not sig.sampler:
        lines += ["sy = q0 * y + q1 * x + q2", "sx = q3 * y + q4 * x + q5"]
        lines += read([f"v{c}" for c in chans])
    else:
        lines += ["fy = a0_ * y + a1_ * x + a2_", "fx = a3_ * y + a4_ * x + a5_"]
        if sig.projective:
            lines += projective_lines()
        if sig.umap:
            e = extras_offset(sig) + (BOUNDED_SLOTS if sig.bounded else 0)
            e += PROJECTIVE_SLOTS if sig.projective else 0
            args = "".join(f", p[{e + j}]" for j in range(REGISTRY[sig.umap].nparams))
            lines.append(f"fy, fx = _m_{sig.umap}(fy, fx, mh, mw{args})")
        if sig.umap or sig.guard or sig.projective:
            lines += guarded_coordinates()
        if sig.nearest:
            # one tap: the nearest pixel (torch's grid_sample, halves to even)
            lines += ["iy = int(_rne(fy))", "ix = int(_rne(fx))"]
        else:
            lines += ["ty0 = math.floor(fy)", "tx0 = math.floor(fx)", "dr = fy - ty0",
                      "dc = fx - tx0", "iy = int(ty0)", "ix = int(tx0)"]
        if sig.edge:
            # scipy's "nearest" mode: each tap index clamped into the input
            lines += ["ya_ = min(max(iy, 0), mh - 1)", "yb_ = min(max(iy + 1, 0), mh - 1)",
                      "xa_ = min(max(ix, 0), mw - 1)", "xb_ = min(max(ix + 1, 0), mw - 1)"]
            taps = [("ya_", "xa_"), ("ya_", "xb_"), ("yb_", "xa_"), ("yb_", "xb_")]
        else:
            taps = [("iy", "ix"), ("iy", "ix + 1"), ("iy + 1", "ix"), ("iy + 1", "ix + 1")]
        if sampler == "off" or sig.nearest:
            taps = taps[:1]
        for c in chans:
            lines += [f"t{c}_{k} = 0.0" for k in range(len(taps))]
        for k, (ty, tx) in enumerate(taps):
            body = [f"sy = q0 * ({ty}) + q1 * ({tx}) + q2",
                    f"sx = q3 * ({ty}) + q4 * ({tx}) + q5"] + read([f"t{c}_{k}" for c in chans])
            if sig.edge:
                lines += body
            else:
                lines.append(f"if _u({ty}) < _u(mh) and _u({tx}) < _u(mw):")
                lines += ["    " + line for line in body]
        for c in chans:
            if sig.nearest:
                lines.append(f"v{c} = t{c}_0")  # (a value read: no blend, nothing to round)
            else:
                lines += _blend(c, sig, cast or lut, gates, sampler)
            if lut and sig.lut_stages[1]:
                lines.append(f"v{c} = _b2f(lut[1, {c}, int(v{c})])")
        if not lut and sig.post:
            lines += chain_all(sig.post, [f"v{c}" for c in chans], "full", len(sig.pre),
                               offsets, cast, gates, stats, local).splitlines()
    return "\n".join(lines + _gather_tail(sig, gates, offsets))


#: sample coordinates at or beyond this magnitude read as outside (``int`` of a larger float,
#: or of NaN or infinity, is undefined in compiled code)
COORD_LIMIT = 2.0 ** 30


def projective_lines() -> list[str]:
    """Lines dividing the sample position ``(fy, fx)`` by the homography's third row (read
    once per launch, ``extras_prologue``); where it is 0 (the line at infinity) the position
    is sent outside, as the guard sends every non-finite one (``guarded_coordinates``)."""
    return ["fz = z0_ * y + z1_ * x + z2_", "if fz != 0.0:", "    fy = fy / fz",
            "    fx = fx / fz", "else:", "    fy = -2.0", "    fx = -2.0"]


def guarded_coordinates() -> list[str]:
    """Lines sending a non-finite or out-of-range sample position ``(fy, fx)`` outside every
    input (where all four taps read the zero outside): a NaN fails both comparisons."""
    return [f"if not (-{COORD_LIMIT!r} < fy < {COORD_LIMIT!r} "
            f"and -{COORD_LIMIT!r} < fx < {COORD_LIMIT!r}):",
            "    fy = -2.0", "    fx = -2.0"]


def prefix_lines(sig: GatherSig, i: int, gates: bool = False) -> list[str]:
    """The body of ``sig``'s gather up to its chained op ``i`` (its values left in ``v0 ..``,
    nothing stored): what a neighbourhood op runs at each of its neighbours. The prefix's
    parameters, gate flags and statistic rows are the start of the kernel's own."""
    npre = len(sig.pre)
    if i <= npre:
        pre, post = sig.pre[:i], ()
    else:
        pre, post = sig.pre, sig.post[:i - npre]
    if sig.umap:  # (its parameters follow every chained op's: not a prefix's layout)
        raise ValueError("a neighbourhood op fuses with no user map")
    return stat_body(dataclasses.replace(sig, pre=pre, post=post, grey="", grey_ops=()), gates)


def gather_prologue() -> str:
    """Per-launch setup read from the parameter array (shared with the batched kernels)."""
    # the integer map's entries are whole numbers: convert once, not per pixel; the sampler's
    # map is read once too (per pixel, a load the compiler cannot hoist past the stores)
    return (f"full = p[{FULL_OFF}]\nclip_lo = p[{CLIP_OFF}]\nclip_hi = p[{CLIP_HI_OFF}]\n"
            + "".join(f"q{i} = int(math.floor(p[{P_OFF + i}] + 0.5))\n" for i in range(6))
            + "".join(f"a{i}_ = p[{A_OFF + i}]\n" for i in range(6))
            + f"mh = int(p[{MID_OFF}])\nmw = int(p[{MID_OFF + 1}])")


def flat_offsets(cin: int) -> str:
    """Per-member element steps of the integer map over a flat source of ``cin`` channels and
    rows ``sw_`` pixels wide: one output (or tap) row ``dy_``, one column ``dx_``, the
    origin ``c0_`` (``gather_body``'s ``flat`` form)."""
    return "".join(f"\n{n} = _ix((q{a} * sw_ + q{b}) * {cin})"
                   for n, a, b in (("dy_", 0, 3), ("dx_", 1, 4), ("c0_", 2, 5)))


def extras_prologue(sig: GatherSig) -> str:
    """Per-launch reads of the window and fill values of a bounded gather, and of a
    projective one's third map row."""
    text = ""
    if sig.projective:
        z = projective_offset(sig)
        text = "".join(f"\nz{i}_ = p[{z + i}]" for i in range(PROJECTIVE_SLOTS))
    if not sig.bounded:
        return text
    e = extras_offset(sig)
    return (text + "".join(f"\n{v} = int(p[{e + i}])"
                           for i, v in enumerate(("wy_", "wx_", "wh_", "ww_")))
            + "".join(f"\nfill{c}_ = p[{e + 4 + c}]" for c in range(sig.cin)))


def stat_body(sig: GatherSig, gates: bool = False) -> list[str]:
    """The gather body of ``sig`` without its stores: the values a statistic of its output
    measures (``codegen.stat``; per image, or per batch member with ``gates``)."""
    if sig.packed:
        raise ValueError("a statistic's reduction reads unpacked images")
    return [line for line in _gather_body_general(sig, gates).splitlines()
            if not line.lstrip().startswith("dst[")]


def tabled_prologue(sig: GatherSig) -> str:
    """A ``tabled`` gather's table: the block's threads run the chain on the 256 values of
    each channel (the code every pixel runs when inlined), then wait for each other."""
    chans = range(sig.cin)
    vars_ = [f"v{c}" for c in chans]
    chain = chain_all(sig.pre, vars_, "full", 0, op_offsets(chained(sig)), True,
                      stats=stat_layout(sig))
    return "\n".join(
        [f"tab_ = cuda.shared.array(({sig.cin}, 256), _f64)",
         "i_ = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x",
         "n_ = cuda.blockDim.x * cuda.blockDim.y",
         "while i_ < 256:"]
        + [f"    {v} = float(i_)" for v in vars_]
        + ["    " + line for line in chain.splitlines()]
        + [f"    tab_[{c}, i_] = v{c}" for c in chans]
        + ["    i_ += n_", "cuda.syncthreads()"])


def tabled_body(sig: GatherSig) -> str:
    """A ``tabled`` gather's pixel: each channel's value read through the block's table."""
    return "\n".join(["sy = q0 * y + q1 * x + q2", "sx = q3 * y + q4 * x + q5"]
                     + [f"dst[y, x, {c}] = tab_[{c}, src[_u(sy), _u(sx), {c}]]"
                        for c in range(sig.cin)])
