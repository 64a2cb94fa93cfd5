"""The fused gather kernel as one source text per target (its statistics' reductions:
``codegen.stat``)."""

from __future__ import annotations

import re

from .chain import gather_defs
from .gather_body import (
    extras_prologue,
    gate_prologue,
    gather_body,
    gather_prologue,
    tabled_body,
    tabled_prologue,
)
from .gather_sig import (
    PACKED_DIMS,
    GatherSig,
    gather_ngates,
    gather_nparams,
    stat_width,
    tabled_fits,
)
from .loader import load
from .target import HEADER, RINT_CLIP, jit_decorator, loop_2d, loop_2d_items


def gather_source(sig: GatherSig, target: str, sim: bool = False) -> str:
    """Source of the fused gather kernel ``kernel(src, dst, lut, p)`` for ``target``;
    ``kernel(src, dst, lut, stat, p)`` where chained ops read statistics (``stat``: their
    rows end to end, ``gather_sig.stat_layout``)."""
    tabled = sig.tabled and target != "cpu"
    if sig.tabled and not tabled_fits(sig):
        raise ValueError(f"a tabled gather needs an elementwise uint8 chain alone: {sig}")
    body = tabled_body(sig) if tabled else gather_body(sig, gates=sig.gates)
    head = (f"# millipyde generated gather kernel: {sig}\n" + HEADER[target] + gather_defs(sig)
            + RINT_CLIP + ("from numba import float64 as _f64\n" if tabled else ""))
    params = "p"
    if target == "cuda":
        # on GPUs the parameters travel as scalar kernel arguments: no upload per launch
        # (numba-cuda spends ~0.1 ms of host time on each small device array)
        params = ", ".join(f"p_{i}" for i in range(gather_nargs(sig)))
    if sig.packed:
        # flat arrays: a tap's 32-bit offset is one multiply-add, where a two-index subscript
        # costs 64-bit multiplies (three instructions each) per load and store. (Numba cannot
        # reshape inside a CUDA kernel, so the views and their dimensions come from the host.)
        n = gather_nparams(sig) - PACKED_DIMS
        dims = f"sw_ = int(p[{n}])\nh = int(p[{n + 1}])\nw = int(p[{n + 2}])\n"
        offsets = ("\ndy_ = _u32(q0 * sw_ + q3)\ndx_ = _u32(q1 * sw_ + q4)\n"
                   "c0_ = _u32(q2 * sw_ + q5)")
    else:
        dims, offsets = "h = dst.shape[0]\nw = dst.shape[1]\n", ""
    prologue = dims + gather_prologue() + offsets + extras_prologue(sig)
    if sig.gates:
        prologue += "\n" + gate_prologue(sig)
    stats = stat_width(sig) > 0
    if stats:
        prologue += "\nst_ = stat"
    if tabled:
        prologue += "\n" + tabled_prologue(sig)
    fn = (
        f"\n\n{jit_decorator(target, sim)}\n"
        f"def kernel(src, dst, lut, {'stat, ' if stats else ''}{params}):\n"
        + "".join(f"    {line}\n" for line in prologue.splitlines())
    )
    items = gather_items(sig, target, sim)
    if items > 1 and not tabled:
        load, rest = body.split("\n", 1)
        if not load.startswith("pk = src["):  # pragma: no cover - guards edits of gather_body
            raise RuntimeError(f"packed gather body does not start with its load: {load!r}")
        source = head + fn + loop_2d_items(target, "h", "w", load, rest, items)
    else:
        source = head + fn + loop_2d(target, "h", "w", body)
    if target == "cuda":
        source = re.sub(r"\bp\[(\d+)\]", r"p_\1", source)
    return source


# Pixels per thread and trip of a packed gather without a sampler (uint8 RGBA to grey): on an
# H200 one pixel a trip left rgb2grey at 27% of copy bandwidth, latency-bound (bench/RESULTS.md).
GATHER_ITEMS = 4
GATHER_ITEMS_SIM = 2
# Pixels of a row per thread of a tabled gather: the table's chain runs once per thread, the
# pixels cost a load, a shared-memory read and a store per channel
TABLED_ITEMS = 8
TABLED_ITEMS_SIM = 2


def gather_items(sig: GatherSig, target: str, sim: bool = False) -> int:
    """Pixels of a row each GPU thread takes per trip of ``sig``'s kernel (1 but for packed
    gathers without a sampler, whose one load per pixel is all they wait for)."""
    if target == "cpu":
        return 1
    if sig.tabled:
        # the table costs each thread one chain run: a thread's pixels share it (the
        # grid-stride loop takes them, ``w / items`` apart)
        return TABLED_ITEMS_SIM if sim else TABLED_ITEMS
    if not sig.packed or sig.sampler:
        return 1
    return GATHER_ITEMS_SIM if sim else GATHER_ITEMS


def gather_nargs(sig: GatherSig) -> int:
    """Length of the parameter array of ``sig``'s one-image kernel: its parameters, then its
    gate flags where it has them."""
    return gather_nparams(sig) + (gather_ngates(sig) if sig.gates else 0)


def gather_kernel(sig: GatherSig, target: str, sim: bool = False):
    """The compiled (lazily, by Numba) gather kernel for ``sig``."""
    return load(gather_source(sig, target, sim), target).kernel
