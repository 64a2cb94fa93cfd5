"""Batched gathers over flat buffers: the per-image gather body with 32-bit offsets.

The per-image gather body (``gather_body``) indexes 3-D arrays (``src[sy, sx, c]``,
``dst[y, x, c]``, ``lut[stage, c, v]``). Numba indexes an array by its run-time shape in
64-bit arithmetic, so a batched kernel over 4-D arrays kept every array's shape in registers
and spent 64-bit multiplies on each load and store (the batched kernels ran at a quarter
occupancy, held by 96-122 registers: bench/RESULTS.md, s9-3). Here every access of the body
becomes a read or write of a flat C-contiguous buffer at

    member base (64-bit, once per member) + one ``_ix(...)`` offset inside the member

where ``_ix`` is ``int32`` (LLVM narrows the index arithmetic to 32 bits; the offset's use is
unsigned, so Numba adds no negative-index wraparound) or, for members of ``2**31`` elements or
more, ``int64`` (``wide``). The arithmetic on values is the body's own, so values are
bit-identical to the per-image kernel's.

Arguments: ``src`` the flat stacked sources (member ``b`` reads image ``sidx[b]`` of ``sn_``
elements, rows ``sw_`` pixels wide), ``lut`` flat (B or 1, 2, cin, 256) uint8 (read in
``"lut"`` mode only), ``p`` flat (B, P) float64 parameter rows (gate flags after them with
``gates``); ``nb``, ``h``, ``w`` the members and the output size. Outputs: ``dst`` flat (B, h,
w, cout), or with a writer (``batch_writer.gather_writer_source``) the float32 training batch
``out``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import batch_perm, batch_tables
from .batch_rows import rows_body, split_stores
from .batch_tables import tabled  # noqa: F401  (batch_group asks here)
from .chain import gather_defs
from .gather_body import (
    extras_prologue,
    flat_offsets,
    gate_prologue,
    gather_body,
    gather_prologue,
)
from .gather_sig import GatherSig, gather_ngates, gather_nparams
from .loader import load
from .subscripts import rewrite_subscripts
from .target import HEADER, RINT_CLIP, capped, indent_text

#: Rows of a thread's grid-stride loop that one trip of a batched gather computes before it
#: stores them (GPUs; ``batch_rows``): the kernels without a sampler, and the batch writers
#: (whose registers bound their occupancy), apart: the one-channel ("grey") writers, whose
#: float64 tap loads the warps wait for (two rows: 0.19 -> 0.18 ms a batch, while the
#: colour writer's 0.523 went to 0.537; bench/RESULTS.md, 2026-11-24).
#: Benchmarks set these to compare.
ROWS_PER_TRIP = {"gather": 4, "writer": 1, "grey writer": 2}

# elements of one member that the 32-bit offsets index (``wide`` past it)
NARROW_ELEMENTS = 2**31

_IX = {
    "cpu": "from numba import {t} as _ix\n",
    "cuda": ("from numba import {t} as _ix\n"
             "if _config.ENABLE_CUDASIM:\n"
             "    def _ix(v):\n"
             "        return int(v)\n"),
}


def narrow(*shapes: tuple[int, ...]) -> bool:
    """Whether members of each of ``shapes`` fit 32-bit offsets (else the ``wide`` kernel)."""
    for shape in shapes:
        n = 1
        for s in shape:
            n *= int(s)
        if n >= NARROW_ELEMENTS:
            return False
    return True


def launch_args(sig: GatherSig, gates: bool, src: Any, sidx: Any, lut: Any, p: Any,
                hw: tuple[int, int], flat: Callable[[Any], Any], channels: int = 0,
                nb: int | None = None) -> tuple[tuple, bool]:
    """The leading arguments of a flat batched gather's launch, and whether it needs the
    ``wide`` kernel.

    ``src`` (S, H, W, C), ``lut`` and ``p`` as the batch keeps them, ``hw`` the output size,
    ``flat`` an array's 1-D view (``runtime.flat``), ``channels`` those a writer stores,
    ``nb`` the members (default: ``sidx``'s length; a batch may share one longer index).
    """
    nb = int(sidx.shape[0]) if nb is None else int(nb)
    # what depends on the signature and shapes only, worked out once per combination (a
    # batch launches the same few; the signature is kept with it, so its id is not reused)
    key = (id(sig), gates, tuple(src.shape), tuple(hw), channels)
    got = _ARGS.get(key)
    if got is None or got[0] is not sig:
        h, w = (int(v) for v in hw)
        got = (sig, gather_nparams(sig) + (gather_ngates(sig) if gates else 0),
               not narrow(src.shape[1:], (h, w, max(sig.cout, channels))), h, w,
               int(src.shape[1]) * int(src.shape[2]) * int(src.shape[3]), int(src.shape[2]))
        if len(_ARGS) >= 1024:
            _ARGS.clear()
        _ARGS[key] = got
    _, pn, wide, h, w, sn, sw = got
    if tuple(p.shape) != (nb, pn) or src.ndim != 4 or sidx.shape[0] < nb or (
            sig.mode == "lut" and tuple(lut.shape) != (nb, 2, sig.cin, 256)):
        raise RuntimeError(f"flat batched gather {sig}: arrays {src.shape}, {lut.shape}, "
                           f"{p.shape} do not fit {nb} members")
    return (flat(src), sidx, flat(lut), flat(p), nb, h, w, sn, sw), wide


#: ``launch_args``' per-signature-and-shape values: key -> (sig, pn, wide, h, w, sn, sw)
_ARGS: dict[tuple, tuple] = {}


def _unsigned(v: str) -> str:
    return v[3:-1] if v.startswith("_u(") and v.endswith(")") else v


def flat_accesses(text: str, sig: GatherSig) -> str:
    """Every ``src``/``lut``/``dst``/``p`` access of a gather text as a flat access."""
    cin, cout = sig.cin, sig.cout

    def src(ps: list[str]) -> str:
        if len(ps) == 1:  # already flat (``gather_body``'s flat form)
            return ps[0]
        sy, sx, c = (_unsigned(v) for v in ps)
        return f"_u(ib_ + _ix(({sy} * sw_ + {sx}) * {cin} + {c}))"

    def lut(ps: list[str]) -> str:
        stage, c, v = ps
        # the value converted first: under the simulator a uint8 plus an int stays uint8
        return f"_u(lb_ + _ix(_ix({v}) + ({stage} * {cin} + {c}) * 256))"

    def dst(ps: list[str]) -> str:
        y, x, c = ps
        return f"_u(db_ + _ix(({y} * w + {x}) * {cout} + {c}))"

    for name, fn in (("src", src), ("lut", lut), ("dst", dst),
                     ("p", lambda ps: f"_u(pb_ + {ps[0]})")):
        text = rewrite_subscripts(text, name, fn)
    return text


def loop(target: str, per_image: str, body: str, launch: str = "", rows: int = 1) -> str:
    """Members ``b`` < ``nb``, rows ``y`` < ``h``, columns ``x`` < ``w`` (``target.loop_3d``'s
    loops; ``launch`` runs once per thread before them; on GPUs a trip of ``body`` covers
    ``rows`` of the thread's rows, ``batch_rows``)."""
    if target == "cpu":
        return (indent_text(launch, 4)
                + "    for t_ in prange(nb * h):\n"
                "        b = t_ // h\n"
                "        y = t_ - b * h\n"
                + indent_text(per_image, 8)
                + "        for x in range(w):\n" + indent_text(body, 12))
    return _members(launch, per_image, indent_text(_pixels(body, rows), 8))


def _members(launch: str, per_image: str, pixels: str) -> str:
    """The GPU grid-stride loop over members ``b`` < ``nb``: ``per_image``, then ``pixels``
    (indented to the member's level)."""
    return (indent_text(launch, 4)
            + "    x0, y0, b0 = cuda.grid(3)\n"
            "    sx_, sy_, sb_ = cuda.gridsize(3)\n"
            "    b = b0\n"
            "    while b < nb:\n"
            + indent_text(per_image, 8) + pixels
            + "        b += sb_\n")


def _pixels(body: str, rows: int) -> str:
    """A member's rows ``y`` < ``h`` and columns ``x`` < ``w``, ``rows`` rows a trip of
    ``body``."""
    # 32-bit rows and columns: the offsets made from them narrow to 32-bit math
    return ("y = _ix(y0)\nwhile y < h:\n    x = _ix(x0)\n    while x < w:\n"
            + indent_text(body, 8) + "        x = _ix(x + sx_)\n"
            f"    y = _ix(y + {rows} * sy_)\n")


def prologue(sig: GatherSig, gates: bool) -> str:
    """Per member: its base offsets, then the per-launch reads of the per-image kernel."""
    pn = gather_nparams(sig) + (gather_ngates(sig) if gates else 0)
    lb = f"b * {2 * sig.cin * 256}" if sig.mode == "lut" else "0"
    text = (gather_prologue() + (flat_offsets(sig.cin) if sig.plain else "")
            + extras_prologue(sig) + ("\n" + gate_prologue(sig) if gates else ""))
    return (f"s = sidx[b]\nib_ = s * sn_\npb_ = b * {pn}\nlb_ = {lb}\n"
            f"db_ = b * (h * w * {sig.cout})\n" + text)


def head(sig: GatherSig, target: str, wide: bool, what: str) -> str:
    """The text a batched gather's module starts with (the writer's as well).

    Parameters
    ----------
    sig : GatherSig
        The gather.
    target : str
        The codegen target (``HEADER``'s key).
    wide : bool
        64-bit offsets (else 32-bit).
    what : str
        The kernel's description in the module's first line.

    Returns
    -------
    str
        The first line, the target's header, the index type and the gather's definitions.
    """
    return (f"# millipyde generated flat batched {what}: {sig} wide={wide}\n"
            + HEADER[target] + _IX[target].format(t="int64" if wide else "int32")
            + gather_defs(sig) + RINT_CLIP)


def gather_flat_source(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                       wide: bool = False, tabled_: bool = False) -> str:
    """Source of ``kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, dst)``: the fused gather of
    ``sig`` over a batch, flat buffers (module doc, :func:`launch_args`); ``wide``: 64-bit
    offsets; ``tabled_``: through per-block tables (:func:`tabled` says where)."""
    rows = 1 if target == "cpu" else ROWS_PER_TRIP["gather"]
    launch, per = "", prologue(sig, gates)
    if tabled_:
        if not batch_tables.chain_tables(sig, target):
            raise ValueError(f"a tabled batched gather needs a uint8 RGB or grey chain: {sig}")
        launch = batch_tables.launch_text(sig)
        per += "\n" + batch_tables.table_text(sig, gates)

    def body(sampler: str) -> str:
        text = (batch_tables.fast_body(sig, gates, sampler) if tabled_
                else gather_body(sig, gates, flat=True, sampler=sampler))
        compute, stores = split_stores(text)
        return flat_accesses(rows_body(compute, stores, rows), sig)

    per = flat_accesses(per, sig)
    fn = (f"\n\n{capped(target, sim, 'gather')}\n"
          "def kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, dst):\n")
    what = f"gather rows={rows}" + (" tabled" if tabled_ else "")
    top = head(sig, target, wide, what) + (batch_tables.HEAD if tabled_ else "") + fn
    if gated_sampler(sig, gates, target):
        return top + loop_by(per, [(SAMPLER_ON, body("on")), ("", body("off"))], launch,
                              rows)
    return top + loop(target, per, body("pixel"), launch, rows=rows)


# the per-member condition (``gate_prologue``'s flag) under which a gated sampler blends
SAMPLER_ON = "gs_ == 0.0"


def gated_sampler(sig: GatherSig, gates: bool, target: str) -> bool:
    """Whether a batched kernel of ``sig`` gives members whose sampler is gated off their own
    pixel loop, which reads one tap (GPUs: ``loop_by``; ``gather_body.gather_body``)."""
    return target != "cpu" and gates and sig.sampler


def gather_flat_kernel(sig: GatherSig, target: str, sim: bool = False, gates: bool = False,
                       wide: bool = False, tabled_: bool = False):
    """The compiled flat batched gather (:func:`gather_flat_source`)."""
    return load(gather_flat_source(sig, target, sim, gates, wide, tabled_), target).kernel


def gather_axis_source(sig: GatherSig, target: str, sim: bool = False,
                       gates: bool = False) -> str:
    """Source of ``kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, dst, srcw, dstw)``: the
    tabled flat batched gather of ``sig`` (:func:`gather_flat_source` with ``tabled_``) with
    its members' contiguous and axis-map branches (``batch_perm``); ``srcw``, ``dstw`` are
    ``src`` and ``dst`` as uint64 words (``batch_perm.launch_words``)."""
    if not batch_perm.applies(sig, target, np.uint8):
        raise ValueError(f"the axis-map batched gather takes tabled gathers of whole pixels: {sig}")
    per = flat_accesses(prologue(sig, gates) + "\n" + batch_tables.table_text(sig, gates), sig)
    general = flat_accesses(batch_tables.fast_body(sig, gates), sig)
    launch = batch_tables.launch_text(sig) + batch_perm.launch_text(sig.cin)
    fn = (f"\n\n{capped(target, sim, 'axis')}\n"
          "def kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, dst, srcw, dstw):\n")
    what = f"gather axis-map words tile={batch_perm.TILE}"
    return (head(sig, target, False, what) + batch_tables.HEAD + batch_perm.HEAD + fn
            + _members(launch, per + "\n" + batch_perm.member_text(sig.cin, general), ""))


def gather_axis_kernel(sig: GatherSig, target: str, sim: bool = False, gates: bool = False):
    """The compiled axis-map batched gather (:func:`gather_axis_source`)."""
    return load(gather_axis_source(sig, target, sim, gates), target).kernel


def axis_words(sig: GatherSig, target: str, src: Any, dst_flat: Any, w: int, wide: bool,
               runtime: Any) -> tuple | None:
    """``(srcw, dstw)`` where the flat batched gather of ``sig`` from ``src`` into
    ``dst_flat`` (``w`` pixels wide) launches :func:`gather_axis_kernel`, else None (the
    gather of :func:`gather_flat_source`): the signature (``batch_perm.applies``), 32-bit
    offsets, and the buffers as words (``batch_perm.launch_words``)."""
    if wide or not batch_perm.applies(sig, target, src.dtype):
        return None
    return batch_perm.launch_words(runtime, runtime.flat(src), dst_flat, int(src.shape[2]), w)


def loop_by(per_image: str, bodies: list[tuple[str, str]], launch: str, rows: int) -> str:
    """``loop`` on GPUs with one pixel loop per ``(condition, body)`` of ``bodies``: a member
    runs the first whose condition (uniform per member, set by ``per_image``) holds; the
    last's condition is not read (``else``).

    The writers' table and inline bodies were one loop branching per pixel: the registers
    of both stayed live in it and the 80-register cap spilled in the pixel loop (7 local
    loads per pixel; bench/RESULTS.md, 2026-11-23). A member whose sampler is gated
    off loads one tap in its own loop, not four and a branch per pixel. The pixels and
    values are the same."""
    text = ""
    for i, (cond, body) in enumerate(bodies):
        head = ("if" if i == 0 else "elif") + f" {cond}:" if i < len(bodies) - 1 else "else:"
        text += f"        {head}\n" + indent_text(_pixels(body, rows), 12)
    return _members(launch, per_image, text)
