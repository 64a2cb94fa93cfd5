"""Batched gathers over an *arena*: sources of different sizes in one launch (issue 14, 15).

A Generator's distinct inputs are packed once into one flat device buffer; batch member ``b``
reads its source at ``rows[b, 0]`` (the flat offset) with row stride ``rows[b, 1]`` (source
width). The kernels are the per-image gather's body text (``gather_body.gather_body``) with

- each source read ``src[_u(sy), _u(sx), c]`` turned into a flat read of the member's source,
- every other array access given the member's index (``codegen.batch.batched``),
- per-image statistics (``adjust_contrast``'s grey sum, ``autocontrast``'s channel ranges,
  ``equalize``'s histograms) read from ``stat[b]``: the rows the reductions of
  ``codegen.stat`` left there on the device, read by the ops as the per-image kernel's read
  the rows the host uploaded,
- and, for :func:`arena_gather_source` with ``layout``, each store written converted into the
  training batch (``codegen.convert``), so a batch is one launch (and one reduction per
  statistic).

The arithmetic is the per-image kernel's, so values are bit-identical to it.
"""

from __future__ import annotations

import re

from ...kernels import REGISTRY
from . import cpu_tables
from .batch import batched
from .chain import gather_defs
from .gather_body import gate_words, gather_body
from .gather_sig import GatherSig
from .loader import load
from .stat import MEMBER_INDEX, arena_per_image, arena_reads
from .target import HEADER, RINT_CLIP, capped, indent_text, loop_3d

_STORE = re.compile(r"^(?P<ind>\s*)dst\[b, y, x, (?P<c>\d+)\] = (?P<v>.+)$", re.M)


def arena_gather_source(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                        layout: str = "", channels: int = 3) -> str:
    """Source of the arena gather of ``sig``.

    Without ``layout``: ``kernel(src, rows, dst, p, stat)``, ``dst`` (B, h, w, cout) in the
    image dtype. With ``layout`` ("NCHW"/"NHWC"): ``kernel(src, rows, p, stat, out, pos,
    mean, std, cfull)`` writing member ``b`` converted as sample ``pos[b]`` of the float32
    batch ``out`` (grey replicated to ``channels``, alpha dropped). ``src`` is the flat arena,
    ``rows`` (B, 2) int64 (offset, source width), ``p`` (B, P) float64 parameter rows (gate
    flags after them with ``gates``), ``stat`` (B, S) float64: the statistic rows of the ops
    that read one (``gather_sig.stat_layout``; read only when one is chained), which the
    reductions of ``codegen.stat`` left there. Only ``"chain"`` mode (no uint8 tables: their
    tables would need the statistics on the host).
    """
    from . import convert

    if sig.packed or sig.mode != "chain":
        raise ValueError("arena gathers are unpacked chain-mode gathers")
    text = gather_body(sig, gates)
    steps = cpu_steps(text) if target == "cpu" else None
    body = batched(steps or arena_reads(text, sig.cin), MEMBER_INDEX)
    per_image = STEPS.format(cin=sig.cin) if steps else ""
    tables = ""
    if target == "cpu":
        # uint8 members' elementwise runs read per-member tables (``cpu_tables``)
        body, tables, fill = cpu_tables.tables(sig, gates, body,
                                               lambda t: batched(t, MEMBER_INDEX))
        per_image += fill
        if steps:
            # axis-aligned members' sample coordinates once a row and a column
            body, cols, rowed = cpu_tables.separable(body)
            tables += cols
            per_image += rowed
    jam = jam_pixels(sig)
    defs = gather_defs(sig)
    if target == "cpu":
        # uint8 members' pixelwise ops in their byte forms (hue's one division, not seven)
        defs = cpu_tables.byte_forms(sig, defs)
    head = (f"# millipyde generated arena gather: {sig} layout={layout or '-'} "
            f"channels={channels}\n" + HEADER[target] + defs + RINT_CLIP)
    dec = f"\n\n{capped(target, sim, 'arena')}\n"
    if not layout:
        fn = (dec + "def kernel(src, rows, dst, p, stat):\n"
              "    nb = dst.shape[0]\n    h = dst.shape[1]\n    w = dst.shape[2]\n"
              + indent_text(tables, 4))
        return head + fn + loop_3d(target, "nb", "h", "w",
                                    *_gate_words(target, arena_per_image(sig, gates) + per_image,
                                                 body), jam)

    # the cpu's uint8 images: normalized values read from a table (``convert.TABLE``; integer
    # sources keep whole values in range through their chain, a grey conversion does not)
    tabled = target == "cpu" and sig.is_int and not sig.grey

    def store(m: re.Match) -> str:
        ind, c, v = m.group("ind"), int(m.group("c")), m.group("v")
        if c >= 3:
            return ""  # alpha
        targets = range(channels) if sig.cout == 1 else [c]
        return "\n".join([f"{ind}cv_ = float({v})"]
                         + ["\n".join(ind + line for line in convert.store(
                             layout, t, "cv_", "o_", "cfull", tabled).splitlines())
                            for t in targets])

    body, n = _STORE.subn(store, body)
    if n != sig.cout or "dst[" in body:
        raise RuntimeError("arena_gather_source: stores not where expected")
    hw = ("out.shape[2]", "out.shape[3]") if layout == "NCHW" else ("out.shape[1]",
                                                                   "out.shape[2]")
    fn = (dec + "def kernel(src, rows, p, stat, out, pos, mean, std, cfull):\n"
          f"    nb = pos.shape[0]\n    h = {hw[0]}\n    w = {hw[1]}\n" + indent_text(tables, 4))
    if tabled:
        fn += indent_text(convert.TABLE.format(channels=channels), 4)
        per_image += convert.TABLE_MEMBER
    return (head + convert.DEFS + fn
            + loop_3d(target, "nb", "h", "w",
                      *_gate_words(target, arena_per_image(sig, gates, "o_ = pos[b]\n")
                                   + per_image, body), jam))


def _gate_words(target: str, per_image: str, body: str) -> tuple[str, str]:
    """GPU kernels' gate flags as bits of integer words (``gather_body.gate_words``: fewer
    registers live across the pixel loop); the CPU's texts as they are (``cpu_tables`` reads
    its gates in their own form)."""
    return (per_image, body) if target == "cpu" else gate_words(per_image, body)


#: a source position through the integer map, ``sy``, ``sx`` of the body (``gather_body``)
_PAIR = re.compile(r"^(?P<ind>[ ]*)sy = q0 \* (?P<a>.+) \+ q1 \* (?P<b>.+) \+ q2\n"
                   r"(?P=ind)sx = q3 \* (?P=a) \+ q4 \* (?P=b) \+ q5$", re.M)
#: the member's element steps through the integer map (after ``arena_per_image``)
STEPS = ("\nky_ = (q0 * sw_ + q3) * {cin}\nkx_ = (q1 * sw_ + q4) * {cin}"
         "\nk0_ = so_ + (q2 * sw_ + q5) * {cin}")


def cpu_steps(text: str) -> str | None:
    """``text`` (a per-image gather body) with each source position through the integer map
    (``sy = q0 * A + q1 * B + q2``, ``sx = q3 * A + q4 * B + q5``, read as ``src[_u(sy),
    _u(sx), c]``) computed as the member's flat element offset ``sy = k0_ + A * ky_ + B *
    kx_`` (:data:`STEPS`), read as ``src[_u(sy + c)]`` (``stat.arena_reads``' flat reads);
    None where the body reads ``sx`` otherwise (a bounded gather's window test) or reads its
    source in another form.

    The offset is the same integer (``so_ + ((q0 A + q1 B + q2) sw_ + q3 A + q4 B + q5) cin``
    expanded), so values are bit-identical; per pixel a bilinear sampler's taps cost 4 integer
    multiplies instead of 12 (the cpu stage of the ImageNet recipe: 7% of its time; GPU
    kernels are left as they are)."""
    out, n = _PAIR.subn(lambda m: f"{m['ind']}sy = k0_ + {m['a']} * ky_ + {m['b']} * kx_",
                        text)
    out, reads = re.subn(r"src\[_u\(sy\), _u\(sx\), (\d+)\]", r"src[_u(sy + \1)]", out)
    if n == 0 or re.search(r"\bsx\b", out) or out.count("src[") != reads:
        return None
    return out


def jam_pixels(sig: GatherSig) -> bool:
    """Whether the cpu gather of ``sig`` computes two pixels a trip (``cpu_jam``): where it
    chains a pixelwise op (saturation, hue: long chains of divisions and conversions, 70-110
    cycles of latency a pixel). The ImageNet recipe's colour gather: 4.1 -> 3.0 ms of core
    time an image (2-core machine); a crop, flip and brightness gather gains nothing, and a
    jammed kernel compiles in twice the time, so the others are left as they are.

    Pixelwise ops before a sampler (``pre``) run on each of its four taps: four independent
    chains a pixel already, and jammed, eight copies of each op and four more for an odd last
    column (ColorJitter's ``RandomOrder`` before a resize: 47 kB of kernel text). Those
    kernels are left as they are too."""
    def pixelwise(ops: tuple) -> bool:
        return any(REGISTRY[n].kind == "pixelwise" for n in ops)

    return pixelwise(sig.post + sig.grey_ops) or (not sig.sampler and pixelwise(sig.pre))


def arena_gather_kernel(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                        layout: str = "", channels: int = 3):
    """The compiled arena gather (:func:`arena_gather_source`)."""
    return load(arena_gather_source(sig, target, sim, gates, layout, channels), target).kernel
