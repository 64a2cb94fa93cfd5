"""Batched gathers over an *arena*: sources of different sizes in one launch (issue 14, 15).

A Generator's distinct inputs are packed once into one flat device buffer; batch member ``b``
reads its source at ``rows[b, 0]`` (the flat offset) with row stride ``rows[b, 1]`` (source
width). The kernels are the per-image gather's body text (``gather_body._gather_body``) with

- each source read ``src[_u(sy), _u(sx), c]`` turned into a flat read of the member's source,
- every other array access given the member's index (``codegen.batch.batched``),
- a per-image statistic (``adjust_contrast``'s grey mean) read from ``stat[b]``: the sum a
  reduction kernel (:func:`arena_mean_source`) left there on the device, divided by the pixel
  count the host put in the op's statistic slot (the division ``exec.gather.grey_mean`` does),
- and, for :func:`arena_gather_source` with ``layout``, each store written converted into the
  training batch (``codegen.convert``), so a batch is one launch (two with a statistic).

The arithmetic is the per-image kernel's, so values are bit-identical to it.
"""

from __future__ import annotations

import re

from ...kernels import REGISTRY
from .batch import batched
from .chain import gather_defs, op_def
from .gather_body import (
    _gather_body,
    extras_prologue,
    gate_prologue,
    gather_prologue,
    grey_sum_body,
)
from .gather_sig import GatherSig, gather_ngates, gather_nparams, op_offsets
from .loader import load
from .target import _HEADER, _RINT_CLIP, _decorator, _indent, _loop_3d

_SRC = re.compile(r"src\[_u\((\w+)\), _u\((\w+)\), (\d+)\]")
_INDEX = {"dst": "b", "lut": "b", "p": "b"}
_STORE = re.compile(r"^(?P<ind>\s*)dst\[b, y, x, (?P<c>\d+)\] = (?P<v>.+)$", re.M)


def _chained(sig: GatherSig) -> tuple[str, ...]:
    return sig.pre + sig.post + sig.grey_ops


def stat_offset(sig: GatherSig) -> int:
    """Offset in ``p`` of the statistic slot of ``sig``'s one stat op (-1: none)."""
    ops = _chained(sig)
    offs = op_offsets(ops)
    stats = [i for i, n in enumerate(ops) if REGISTRY[n].stat]
    if len(stats) > 1:
        raise ValueError("an arena gather takes at most one per-image statistic")
    if not stats:
        return -1
    i = stats[0]
    return offs[i] + REGISTRY[ops[i]].nparams


def _arena_reads(text: str, cin: int) -> str:
    """Source reads of the per-image body as flat reads of the member's source."""
    out, n = _SRC.subn(lambda m: f"src[_u(so_ + ({m[1]} * sw_ + {m[2]}) * {cin} + {m[3]})]",
                       text)
    if n == 0 or out.count("src[") != n:
        raise RuntimeError("arena: gather body reads its source in an unexpected form")
    return out


def _stat_reads(text: str, sig: GatherSig, off: int) -> str:
    """The stat op's statistic argument ``p[off]`` read as the per-image ``st_``."""
    names = [n for n in _chained(sig) if REGISTRY[n].stat]
    if off < 0:
        return text
    pat = re.compile(rf"(_f_{names[0]}\([^\n]*?)p\[{off}\]")
    out, n = pat.subn(r"\1st_", text)
    if n == 0:
        raise RuntimeError("arena: stat op call not found in the gather body")
    return out


def _per_image(sig: GatherSig, gates: bool, off: int, extra: str = "") -> str:
    text = gather_prologue() + extras_prologue(sig) + ("\n" + gate_prologue(sig) if gates else "")
    if off >= 0:
        text += f"\nst_ = stat[b] / p[{off}]"
    return "so_ = rows[b, 0]\nsw_ = rows[b, 1]\n" + extra + batched(text, _INDEX)


def arena_gather_source(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                        layout: str = "", channels: int = 3) -> str:
    """Source of the arena gather of ``sig``.

    Without ``layout``: ``kernel(src, rows, dst, p, stat)``, ``dst`` (B, h, w, cout) in the
    image dtype. With ``layout`` ("NCHW"/"NHWC"): ``kernel(src, rows, p, stat, out, pos,
    mean, std, cfull)`` writing member ``b`` converted as sample ``pos[b]`` of the float32
    batch ``out`` (grey replicated to ``channels``, alpha dropped). ``src`` is the flat arena,
    ``rows`` (B, 2) int64 (offset, source width), ``p`` (B, P) float64 parameter rows (gate
    flags after them with ``gates``), ``stat`` (B,) float64 (read only when a stat op is
    chained). Only ``"chain"`` mode (no uint8 tables: their tables would need the statistic
    on the host).
    """
    from . import convert

    if sig.packed or sig.mode != "chain":
        raise ValueError("arena gathers are unpacked chain-mode gathers")
    off = stat_offset(sig)
    body = batched(_stat_reads(_arena_reads(_gather_body(sig, gates), sig.cin), sig, off),
                   _INDEX)
    head = (f"# millipyde generated arena gather: {sig} layout={layout or '-'} "
            f"channels={channels}\n" + _HEADER[target] + gather_defs(sig) + _RINT_CLIP)
    dec = f"\n\n{_decorator(target, sim)}\n"
    if not layout:
        fn = (dec + "def kernel(src, rows, dst, p, stat):\n"
              "    nb = dst.shape[0]\n    h = dst.shape[1]\n    w = dst.shape[2]\n")
        return head + fn + _loop_3d(target, "nb", "h", "w", _per_image(sig, gates, off), body)

    def store(m: re.Match) -> str:
        ind, c, v = m.group("ind"), int(m.group("c")), m.group("v")
        if c >= 3:
            return ""  # alpha
        targets = range(channels) if sig.cout == 1 else [c]
        return "\n".join([f"{ind}cv_ = float({v})"]
                         + [ind + convert._store(layout, t, "cv_", "o_", "cfull")
                            for t in targets])

    body, n = _STORE.subn(store, body)
    if n != sig.cout or "dst[" in body:
        raise RuntimeError("arena_gather_source: stores not where expected")
    hw = ("out.shape[2]", "out.shape[3]") if layout == "NCHW" else ("out.shape[1]",
                                                                   "out.shape[2]")
    fn = (dec + "def kernel(src, rows, p, stat, out, pos, mean, std, cfull):\n"
          f"    nb = pos.shape[0]\n    h = {hw[0]}\n    w = {hw[1]}\n")
    return (head + convert._DEFS + fn
            + _loop_3d(target, "nb", "h", "w", _per_image(sig, gates, off, "o_ = pos[b]\n"),
                       body))


def arena_gather_kernel(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                        layout: str = "", channels: int = 3):
    """The compiled arena gather (:func:`arena_gather_source`)."""
    return load(arena_gather_source(sig, target, sim, gates, layout, channels), target).kernel


def arena_mean_source(sig: GatherSig, target: str, sim: bool = False,
                      gates: bool = False) -> str:
    """Source of ``kernel(src, rows, p, stat)``: per member ``b``, the sum of the grey values
    of what the arena gather of ``sig`` would store (``codegen.gather_mean_source``'s sum),
    into ``stat[b]`` (zeroed by the caller).

    The output height and width of member ``b`` are ``p[b, n]`` and ``p[b, n + 1]``, ``n``
    the parameters and gate flags. On the CPU one ``prange`` over members; on GPUs each
    warp adds its sum of member ``b`` with one atomic add (launch it over ``MEAN_GRID``).
    Colour sums are of whole numbers (uint8 images), exact in float64 whatever the order.
    """
    body = batched(_arena_reads("\n".join(grey_sum_body(sig, gates)), sig.cin), _INDEX)
    n = gather_nparams(sig) + (gather_ngates(sig) if gates else 0)
    per = _per_image(sig, gates, -1) + f"\nh = int(p[b, {n}])\nw = int(p[b, {n + 1}])"
    head = (f"# millipyde generated arena grey-mean gather: {sig}\n" + _HEADER[target]
            + gather_defs(sig) + op_def("tv_grey") + _RINT_CLIP)
    fn = (f"\n\n{_decorator(target, sim)}\ndef kernel(src, rows, p, stat):\n"
          "    nb = stat.shape[0]\n")
    if target == "cpu":
        loop = ("    for b in prange(nb):\n" + _indent(per, 8) + "        acc_ = 0.0\n"
                "        for y in range(h):\n            for x in range(w):\n"
                + _indent(body, 16) + "        stat[b] = acc_\n")
    else:
        loop = ("    x0, y0, b0 = cuda.grid(3)\n    sx_, sy_, sb_ = cuda.gridsize(3)\n"
                "    b = b0\n    while b < nb:\n" + _indent(per, 8) + "        acc_ = 0.0\n"
                "        y = y0\n        while y < h:\n            x = x0\n"
                "            while x < w:\n" + _indent(body, 16)
                + "                x += sx_\n            y += sy_\n"
                + _indent(_warp_sum(sim), 8) + "        b += sb_\n")
    return head + fn + loop


def _warp_sum(sim: bool) -> str:
    """Each thread's sum added into ``stat[b]``: on GPUs summed across the warp first (every
    lane of a block shares ``b``), so an image takes one atomic add per warp; the simulator,
    one per thread. Sums of whole numbers: any order gives the same value."""
    if sim:
        return "cuda.atomic.add(stat, b, acc_)"
    shuffles = "".join(f"acc_ += cuda.shfl_down_sync(0xFFFFFFFF, acc_, {d})\n"
                       for d in (16, 8, 4, 2, 1))
    return (shuffles
            + "if cuda.laneid == 0:\n    cuda.atomic.add(stat, b, acc_)")


#: the grid a mean reduction is launched over per member (``batch_arena``): threads that each
#: sum many pixels, so few warps per image add into its sum
MEAN_GRID = (32, 32)


def arena_mean_kernel(sig: GatherSig, target: str, sim: bool = False, gates: bool = False):
    """The compiled arena grey-mean reduction (:func:`arena_mean_source`)."""
    return load(arena_mean_source(sig, target, sim, gates), target).kernel
