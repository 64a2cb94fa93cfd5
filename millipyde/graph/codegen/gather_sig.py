"""The compile-time signature of a fused gather kernel and the layout of its parameters."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...kernels import REGISTRY
from ...kernels.registry import GENERATION
from ...kernels.stats import STATISTICS, stat_channels


@dataclass(frozen=True)
class GatherSig:
    """Compile-time shape of a fused gather kernel (parameter values travel at run time).

    ``mode`` is ``"lut"`` (uint8: per-channel 256-entry tables) or ``"chain"`` (the chained
    ops inlined: other dtypes, and uint8 kernels with ops no table can stand for, which mix
    channels or know their pixel). ``pre``/``post`` are the chain ops before/after the
    sampler, ``grey`` the colour-to-grey conversion's kernel ("": none), ``grey_ops`` the ops
    after it.
    """

    cin: int
    mode: str
    is_int: bool
    sampler: bool
    grey: str
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    grey_ops: tuple[str, ...] = ()
    # uint8 RGBA source read as one uint32 per pixel: ``src`` is then the flat uint32 view and
    # ``dst`` flat too, indexed with 32-bit offsets, so callers keep both under 2**31 elements
    # (``exec.gather._packable``); the source width and output height and width follow the
    # parameters (``PACKED_DIMS``)
    packed: bool = False
    # "lut" mode: which of the two table stages (before / after the sampler) hold any op; an
    # identity stage is not read at all
    lut_stages: tuple[bool, bool] = (True, True)
    # scikit-image's warp clip may apply: the blend is clamped below at ``clip_lo``
    clip: bool = True
    # a pad is fused: source positions outside the source read per-channel fill values
    bounded: bool = False
    # the sampler repeats the edge outside its input (resize) instead of reading zero
    edge: bool = False
    # the sampler is this user map (``@mp.index_map``), called per output pixel
    umap: str = ""
    # the sampler's coordinates may be non-finite or beyond the integer range (a user map
    # always; an affine map whose corners reach 2**30): they are tested, and read as outside
    guard: bool = False
    # the sampler reads the nearest pixel (torch's ``grid_sample`` nearest: halves to even)
    nearest: bool = False
    # the sampler is a homography (``perspective``): its position is divided by the third row
    # of its 3x3 map, read from the extras (``projective_offset``); implies ``guard``
    projective: bool = False
    # chained ops (and the sampler) may be gated off per image: flags follow the parameters
    # (``gather_body.gate_prologue``; the batched kernels take gates as an argument instead)
    gates: bool = False
    # "chain" mode, uint8, elementwise ``pre`` ops only, nothing else: each GPU block first
    # runs the chain on the 256 values of every channel into a table in shared memory, then
    # its pixels read that table (``tabled_fits``); each thread takes several pixels a row
    tabled: bool = False

    @property
    def cout(self) -> int:
        """Channels written."""
        return 1 if self.grey else self.cin

    @property
    def plain(self) -> bool:
        """Only the features the hand-tuned and batched kernels know (no pad, edge sampler,
        user map, or ops other than elementwise ones)."""
        ops = self.pre + self.post + self.grey_ops
        return (not self.bounded and not self.edge and not self.umap and not self.guard
                and not self.nearest and not self.projective
                and (self.mode == "lut" or self.cin == 1)
                and all(REGISTRY[n].kind == "elementwise" and not REGISTRY[n].stat
                        for n in ops))


# Parameter layout in the float64 array ``p``: P (src <- mid or src <- out), A (mid <- out),
# mid_h, mid_w, full, clip_lo and clip_hi (scikit-image's warp clip; -inf / +inf when a bound
# does not apply), then each chained op's slots (``OpSpec.slots``, three or more), then the
# extras: when ``bounded``, the window a pad reads (top, left, height, width in source
# coordinates; outside it the fills) and four fill values, then the third row of the sampler's
# map when ``projective``, then the user map's parameters when ``umap``.
P_OFF, A_OFF, MID_OFF, FULL_OFF, CLIP_OFF, CLIP_HI_OFF, OPS_OFF = 0, 6, 12, 14, 15, 16, 17


def op_offsets(ops: tuple[str, ...]) -> list[int]:
    """Offset in ``p`` of each chained op of ``ops`` (in order), and the end as last entry."""
    return list(_op_offsets(tuple(ops), GENERATION[0]))


@functools.lru_cache(maxsize=4096)
def _op_offsets(ops: tuple[str, ...], generation: int) -> tuple[int, ...]:
    # (a batch's recording asks for the same chains' offsets many times)
    out = [OPS_OFF]
    for name in ops:
        out.append(out[-1] + REGISTRY[name].slots)
    return tuple(out)


def chained(sig: GatherSig) -> tuple[str, ...]:
    """The ops ``sig`` chains, in the order of its parameter row.

    Parameters
    ----------
    sig : GatherSig
        The gather.

    Returns
    -------
    tuple of str
        ``sig.pre + sig.post + sig.grey_ops``.
    """
    return sig.pre + sig.post + sig.grey_ops


def stat_layout(sig: GatherSig) -> dict[int, tuple[int, int]]:
    """Per chained op that reads a statistic (its index in ``pre + post + grey_ops``): its
    offset in the kernel's statistic row and the channels the statistic measures. The rows of
    a kernel's statistic ops are laid end to end in chain order, so the layout of a gather's
    prefix (the gather before one of its ops) is the start of the gather's own."""
    out = {}
    at = 0
    first_grey = len(sig.pre) + len(sig.post)
    for i, name in enumerate(chained(sig)):
        stat = REGISTRY[name].stat
        if stat:
            ch = stat_channels(sig.cin, bool(sig.grey) and i >= first_grey)
            out[i] = (at, ch)
            at += STATISTICS[stat].width(ch)
    return out


def stat_width(sig: GatherSig) -> int:
    """Slots of the statistic row of ``sig``'s kernel (0: it reads no statistic)."""
    layout = stat_layout(sig)
    if not layout:
        return 0
    last = max(layout)
    at, ch = layout[last]
    return at + STATISTICS[REGISTRY[chained(sig)[last]].stat].width(ch)


def extras_offset(sig: GatherSig) -> int:
    """Where the extras (bounds, fills, user map parameters) start in ``p``."""
    return op_offsets(chained(sig))[-1]


#: parameter slots of a ``bounded`` gather's window and fills
BOUNDED_SLOTS = 8


#: parameter slots of a ``projective`` gather's third map row
PROJECTIVE_SLOTS = 3


def projective_offset(sig: GatherSig) -> int:
    """Where a ``projective`` gather's third map row (z <- y, x, 1) is in ``p``."""
    return extras_offset(sig) + (BOUNDED_SLOTS if sig.bounded else 0)


def _nextras(sig: GatherSig) -> int:
    n = BOUNDED_SLOTS if sig.bounded else 0
    n += PROJECTIVE_SLOTS if sig.projective else 0
    return n + (REGISTRY[sig.umap].nparams if sig.umap else 0)


def gather_ngates(sig: GatherSig) -> int:
    """Gate flags after the parameters of ``sig``: one per chained op, one for the sampler."""
    return len(sig.pre) + len(sig.post) + len(sig.grey_ops) + 1


PACKED_DIMS = 3  # source width, output height, output width


def gather_nparams(sig: GatherSig) -> int:
    """Length of the parameter array of ``sig``'s kernel."""
    n = extras_offset(sig) + _nextras(sig)
    return n + PACKED_DIMS if sig.packed else n


def tabled_fits(sig: GatherSig) -> bool:
    """Whether ``sig`` may be ``tabled``: a chain of elementwise ops before no sampler, no
    grey conversion, pad, packing or user map (the caller knows the source is uint8)."""
    return (sig.mode == "chain" and sig.is_int and bool(sig.pre) and not sig.post
            and not sig.gates
            and not sig.grey_ops and not sig.sampler and not sig.grey and not sig.packed
            and not sig.bounded and not sig.edge and not sig.umap and sig.cin <= 4
            and all(REGISTRY[n].kind == "elementwise" for n in sig.pre))
