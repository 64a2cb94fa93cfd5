"""One fused gather for many outputs at once: ``Gather.add`` and ``exec.gather.gather_args`` as
NumPy arrays with one row per output (``batch_arena`` records whole batches with it).

:class:`VGather` holds, per batch member, what ``graph.plan.schedule.Gather`` holds for one
output: the integer map ``P`` and sampler map ``A`` (n, 3, 3), the sampler's input size
``mid``, the current size ``cur`` and the chained ops' parameter rows. The structure (which
ops, in which stage, whether a sampler) is shared by every member, so all of them run one
compiled kernel; an op a member's coin skipped is a per-member *gate* (its chained call is
not made, its index map not composed, its sampler reads one tap unblended), which is exactly
the kernel of an output that never recorded it.

The matrices are the same 3x3 products, in the same order, as ``Gather.add`` takes one output
at a time (``batch_math.compose``), and every parameter is the value the per-output recording
computes (``batch_ops``), so each row equals ``exec.gather.gather_args`` of that output's own plan
(tests compare the outputs bit for bit).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from ..graph.codegen.gather_body import COORD_LIMIT
from ..graph.codegen.gather_sig import (
    A_OFF,
    BOUNDED_SLOTS,
    CLIP_HI_OFF,
    CLIP_OFF,
    FULL_OFF,
    MID_OFF,
    OPS_OFF,
    P_OFF,
    PROJECTIVE_SLOTS,
    GatherSig,
    gather_nparams,
    op_offsets,
)
from ..graph.plan.schedule import axis_aligned, fill_window
from ..kernels import REGISTRY
from ..kernels.registry import GENERATION
from ..kernels.stats import STATISTICS
from . import batch_math


def _leaves(a: np.ndarray, mid: np.ndarray, out: np.ndarray, warp_clip: bool) -> np.ndarray:
    """(n,) ``schedule.needs_warp_clip`` (where ``warp_clip``) or ``schedule.wide_map`` of each
    member's sampler map ``a`` (n, 3, 3), its input size ``mid`` and output size ``out``: the
    same corner tests, on every member at once."""
    n = len(a)
    zero = np.zeros(n)
    h1, w1 = out[:, 0] - 1.0, out[:, 1] - 1.0
    ys = np.stack([zero, zero, h1, h1], axis=1)
    xs = np.stack([zero, w1, zero, w1], axis=1)
    with np.errstate(all="ignore"):
        fy = a[:, 0, 0, None] * ys + a[:, 0, 1, None] * xs + a[:, 0, 2, None]
        fx = a[:, 1, 0, None] * ys + a[:, 1, 1, None] * xs + a[:, 1, 2, None]
        wide = ~((np.abs(fy) < COORD_LIMIT) & (np.abs(fx) < COORD_LIMIT)).all(axis=1)
        if not warp_clip:
            return wide
        lin = a[:, :2]
        integer = (np.abs(lin - np.round(lin)) <= 1e-12).all(axis=(1, 2))
        outside = ((fy <= -1) | (fy >= mid[:, 0, None]) | (fx <= -1)
                   | (fx >= mid[:, 1, None])).any(axis=1)
    return wide | (~integer & ~outside)


def _full(dtype: np.dtype, _known: dict = {}) -> float:  # noqa: B006 - a cache by dtype
    """The full intensity of ``dtype`` (its largest integer; 1.0 for floats)."""
    got = _known.get(dtype)
    if got is None:
        got = _known[dtype] = float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0
    return got


def leaves_of(name: str, a: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """(m,) whether sampler ``name`` with maps ``a`` (m, 3, 3) on images of sizes ``hw`` (m,
    2; the output's too) sends a member per output, as :meth:`VGather.sampler` tests it."""
    spec = REGISTRY[name]
    if spec.mode == "edge" or spec.projective:
        raise ValueError(f"leaves_of: name {name} is not an affine zero-fill sampler")
    return _leaves(a, hw, hw, spec.warp_clip)


class Unsupported(Exception):
    """The chain does not plan to one gather (and its statistics' reductions) for every
    member."""


class _Chained(NamedTuple):
    # (a tuple: ``chain_many`` makes a block's without a Python call per op,
    # ``tuple.__new__``)
    name: str
    params: np.ndarray  # (n, slots)
    off: np.ndarray  # (n,) bool: gated off for the member


_NAME = operator.attrgetter("name")
_EYE = np.eye(3)


class Prefix:
    """The gather as it stood before a stat op: the reduction of the op's statistic
    (``stat``, ``kernels.stats``) runs it with ``sig``; ``hw`` the largest output height and
    width (the reduction's grid).

    Its rows ``p`` (n, params + flags + 3): the parameter rows, then the output height and
    width, then 1 where the op is gated off for the member (nothing to measure). They are
    made when first asked for, from the arrays the gather's rows were made of then
    (``parts``, whose concatenated columns ``take`` are the rows): while the gather keeps
    those (:meth:`VGather.begun`), its own rows hold every value of them (its first columns
    are the prefix's; the flags, extras and size further on), and ``batch_arena`` has the
    reduction read those instead of packing these."""

    __slots__ = ("stat", "sig", "hw", "group", "_p", "_parts", "_take", "_state")

    def __init__(self, stat: str, sig: GatherSig, hw: tuple[int, int],
                 p: np.ndarray | None = None, parts: tuple | None = None,
                 take: np.ndarray | None = None, state: tuple | None = None,
                 group: tuple | None = None) -> None:
        self.stat, self.sig, self.hw = stat, sig, hw
        # the prefixes of one group (equal, not None) are of ops of which at most one runs
        # per member (``VGather.chain_many``'s ``groups``): their reductions may share a launch
        self.group = group
        self._p, self._parts, self._take = p, parts, take
        # (the gather's fixed slots and extras, its sizes, its sampler flags): the objects the
        # rows were made of (None: rows of their own, as a ``take`` makes them)
        self._state = state

    @property
    def p(self) -> np.ndarray:
        """(n, params + flags + 3) the rows (see the class doc)."""
        if self._p is None:
            joined = np.concatenate(self._parts, axis=1)
            self._p = joined if self._take is None else joined[:, self._take]
            self._parts = None
        return self._p


def _room(buf: np.ndarray, flags: np.ndarray, cols: int, need: int, k: int,
          nops: int) -> tuple[np.ndarray, np.ndarray]:
    """``VGather``'s joined parameters ``buf`` (its first ``cols`` columns used) and gate
    flags ``flags`` (the first ``k``), grown (doubled at least, the used part kept) to hold
    ``need`` columns and ``nops`` flags."""
    n = buf.shape[0]
    if need > buf.shape[1]:
        grown = np.empty((n, max(need, 2 * buf.shape[1])))
        grown[:, :cols] = buf[:, :cols]
        buf = grown
    if nops > flags.shape[1]:
        grown = np.empty((n, max(nops, 2 * flags.shape[1])), dtype=bool)
        grown[:, :k] = flags[:, :k]
        flags = grown
    return buf, flags


@dataclass
class VGather:
    """A fused gather of ``n`` members (see the module doc)."""

    cur: np.ndarray  # (n, 2) int64
    cin: int
    dtype: np.dtype
    gates: bool = False
    # end the gather before a statistic op that follows a sampler (``chain``): the op's
    # reduction then reads the stage's output instead of running the gather before it again
    stat_cut: bool = False
    P: np.ndarray = field(init=False)
    A: np.ndarray | None = None
    mid: np.ndarray | None = None
    edge: bool = False
    nearest: bool = False
    projective: bool = False  # the sampler is a homography (``GatherSig.projective``)
    phase: int = 0
    positional: bool = False
    ops: list[_Chained] = field(default_factory=list)
    npre: int = 0
    soff: np.ndarray | None = None  # (n,) bool: the sampler gated off
    # one per stat op, in chain order: each reduction reads the rows of those before it
    prefixes: list[Prefix] = field(default_factory=list)
    fill: float | None = None  # a fused pad's value
    umap: str = ""  # a user index map standing for the sampler (``@mp.index_map``)
    uparams: np.ndarray | None = None  # (n, k) its parameters
    left: np.ndarray = field(init=False)  # (n,) bool: members the per-output path makes
    # (n, 4) what a fused pad reads (top, left, height, width in source coordinates;
    # ``schedule.fill_window``): the sources, narrowed to each pad's input
    window: np.ndarray = field(init=False)
    # (n, 4) the members' sources as regions of larger images (top, left, image height and
    # width: ``data.region``), for the first op recorded (``batch_ops.record_step``), which
    # takes it; None: whole images
    region: np.ndarray | None = field(default=None, compare=False)
    # the gathers before this one (``cut``), in order: each writes an image of its own
    # dtype that the next reads, as the per-output plan's kernels do
    stages: list[VGather] = field(default_factory=list)
    # a fork's marker in ``stages`` (``training.batch_augmix.Fork``): the stage the marker
    # stands for makes the fork's branches and their mix, which the next stage reads
    forked: Any = None
    # ``_joined_ops``' buffers: (the ops list they hold, how many of its ops, their slots side
    # by side, their gate flags side by side, the columns used); the ops list only grows
    _joined: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # ``_fixed``'s last rows: (the objects they were made of, the fixed slots, the extras)
    _fixed_rows: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # (``cur``, its largest height and width): a statistic prefix's grid, per ``cur`` array
    _largest: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # (``cur``, whether every member has one size): ``_cuts_before_stat``'s, per ``cur`` array
    _one_size: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n, k = self.cur.shape
        self.P = np.empty((n, 3, 3))
        self.P[...] = _EYE
        self.left = np.zeros(n, dtype=bool)
        self.window = np.zeros((n, 2 * k), dtype=self.cur.dtype)  # (0, 0, height, width)
        self.window[:, k:] = self.cur

    def fork(self, fork: Any) -> None:
        """End the gather at a fork (``batch_augmix``): the gather as it stands becomes a stage
        (unless it does nothing: the fork then reads its source), then the fork's marker; the
        gather goes on reading the fork's output."""
        if (self.ops or self.A is not None or self.fill is not None or self.umap
                or self.prefixes or not (self.P == _EYE).all()):
            self.cut()
        marker = VGather(self.cur.copy(), self.cin, self.dtype, self.gates, self.stat_cut)
        marker.forked = fork
        self.stages.append(marker)

    def cut(self) -> None:
        """End this gather here (a stage, kept in ``stages``) and go on in a new one that reads
        its output, where the per-output plan starts its next kernel (a second sampler, a
        geometric op after a neighbourhood op)."""
        # this gather as it stands (its lists are not changed again): a shallow copy
        done = object.__new__(VGather)
        done.__dict__.update(self.__dict__)
        done.stages = []
        stages = self.stages + [done]
        left = self.left
        fresh = VGather(self.cur.copy(), self.cin, self.dtype, self.gates, self.stat_cut)
        self.__dict__.update(fresh.__dict__)
        self.stages, self.left = stages, left

    @property
    def n(self) -> int:
        return len(self.cur)

    @property
    def full(self) -> float:
        return _full(self.dtype)

    # -- Gather.add, per kind ---------------------------------------------------------------
    def index_map(self, name: str, params: np.ndarray | None, on: np.ndarray) -> None:
        """An index map (fliplr, crop): composed into ``P`` (before a sampler) or ``A``."""
        spec = REGISTRY[name]
        if self.positional:
            raise Unsupported("a geometric op after a positional one")
        if spec.swaps_axes:
            raise Unsupported(name)
        if spec.fills:
            # Gather.accepts: a pad joins only before a sampler and any chained op, one value
            value = float(params[0, -1])
            if (self.phase != 0 or self.ops or (self.fill is not None and self.fill != value)
                    or not axis_aligned(self.P).all()):
                raise Unsupported("a pad the per-output plan puts in another kernel")
            self.fill = value
            self.window = np.where(on[:, None], fill_window(self.window, self.P, self.cur),
                                   self.window)
        m = batch_math.affine_rows(spec, self.cur[:, 0], self.cur[:, 1], params)
        if self.A is None:
            self.P = batch_math.compose(self.P, m, on)
        else:
            self.A = batch_math.compose(self.A, m, on)
        if spec.shape_fn is not None:
            if not on.all():
                raise Unsupported("a shape-changing op gated off")
            vals = np.zeros((self.n, 0)) if params is None else params
            # a built-in shape rule is arithmetic: evaluated on the members' arrays at once
            h, w = spec.shape_fn(self.cur[:, 0], self.cur[:, 1], *vals.T)
            # (each column cast as ``astype(np.int64)`` casts it: an assignment's unsafe cast)
            cur = np.empty((self.n, 2), dtype=np.int64)
            cur[:, 0], cur[:, 1] = h, w
            self.cur = cur

    def sampler(self, name: str, params: np.ndarray | None, on: np.ndarray,
                out: np.ndarray | None = None,
                known: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """A bilinear sampler (resize, warp_affine): ``A``, ``mid``; ``out`` its (n, 2) output
        size (None: the input's). ``known``: instead of ``params``, the members' maps (n, 3,
        3; the identity where not ``on``) and which of them ``_leaves`` (computed on the
        same rows elsewhere: a policy's slots, per code of the draw, ``batch_ops``)."""
        spec = REGISTRY[name]
        if self.phase != 0 or self.positional:
            raise Unsupported("a second sampler, or a sampler after a positional op")
        if out is not None and not on.all():
            raise Unsupported("a shape-changing sampler gated off")
        if known is None:
            a = batch_math.affine_rows(spec, self.cur[:, 0], self.cur[:, 1], params)
            # (``a`` is a new array: every member on, it is the maps as they are)
            self.A = a if on.all() else np.where(on[:, None, None], a, np.eye(3))
        else:
            self.A = known[0]
        self.mid = self.cur.copy()
        self.phase = 1
        self.edge = spec.mode == "edge"
        self.nearest = spec.nearest
        self.projective = spec.projective
        self.soff = ~on
        if out is not None:
            self.cur = np.asarray(out, dtype=np.int64).reshape(self.n, 2)
        if self.edge:
            # an empty input has no edge to repeat: those members go per output, whose plan
            # reads the zero outside it
            self.left |= on & ((self.mid[:, 0] == 0) | (self.mid[:, 1] == 0))
        else:
            # scikit-image's data-dependent clip (where the sampler has it), and maps reaching
            # positions this kernel does not test (``schedule.wide_map``): those members go
            # per output (a homography's kernel tests every position: ``GatherSig.guard``)
            if not self.projective:
                self.left |= on & (_leaves(self.A, self.mid, self.cur, spec.warp_clip)
                                   if known is None else known[1])

    def leaves_of(self, name: str, a: np.ndarray, hw: np.ndarray) -> np.ndarray:
        """(m,) whether sampler ``name`` with maps ``a`` (m, 3, 3) on images of sizes ``hw``
        (m, 2; the output's too) sends a member per output, as :meth:`sampler` tests it
        (for ``known``)."""
        return leaves_of(name, a, hw)

    def user_map(self, name: str, params: np.ndarray, out: np.ndarray) -> None:
        """A user ``@mp.index_map`` (``Gather.add``: the sampler's place, ``A`` the identity);
        ``out`` its (n, 2) output sizes. Never gated: a skipped map is another structure."""
        if self.phase != 0 or self.positional:
            raise Unsupported("a user map after a sampler or a positional op")
        self.A = np.broadcast_to(np.eye(3), (self.n, 3, 3)).copy()
        self.mid = self.cur.copy()
        self.phase = 1
        self.umap, self.uparams = name, params
        self.cur = np.asarray(out, dtype=np.int64).reshape(self.n, 2)

    def chain(self, name: str, params: np.ndarray, on: np.ndarray) -> None:
        """A chained op (elementwise, pixelwise, positional, neighbourhood) with per-member
        parameters."""
        spec = REGISTRY[name]
        if spec.kind == "pixelwise" and self.cin < 3:
            raise Unsupported("a pixelwise op on grey images")
        if spec.kind == "neighbourhood" and self.umap:
            raise Unsupported("a neighbourhood op with a user map")
        if params.shape[1] == spec.slots and params.dtype == np.float64:
            slots = params  # (never written: kept as it is)
        else:
            slots = np.zeros((self.n, spec.slots))
            slots[:, :params.shape[1]] = params
        off = ~on
        if spec.stat:
            if self.dtype.kind not in "ui" and not STATISTICS[spec.stat].exact_on_floats:
                # float sums are not exact in any order: the per-output row is the reference
                raise Unsupported(f"a {spec.stat} of a float image")
            if self._cuts_before_stat():
                self.cut()
            self._prefix(spec.stat, off)
        self.positional = self.positional or spec.reads_position
        self.ops.append(_Chained(name, slots, off))  # the pre ops all come before the sampler
        if self.phase == 0:
            self.npre += 1

    def chain_many(self, names: tuple[str, ...], params: list[np.ndarray],
                   offs: list[np.ndarray], block: tuple[np.ndarray, np.ndarray],
                   groups: tuple | None = None) -> None:
        """Chained ops ``names`` one after another, as many :meth:`chain` calls (each its
        (n, slots) float64 parameters and (n,) gate-off flags, kept as they are, never
        written): the same ops, rows and statistic prefixes. ``block``: the same parameters
        side by side (n, their slots) and flags (n, ops), of which ``params`` and ``offs``
        are the columns. What depends only on the structure (the checks, each prefix's
        signature and layout) is made once per chain of names and gather kind and kept
        (:func:`_chain_layout`); each prefix's rows are then a few column copies.
        ``groups``: per op, a key (None: none) of which at most one op with that key runs per
        member (a policy's entries of one position): their statistic prefixes are a group
        (``Prefix.group``)."""
        if not self.gates:
            # (no gate flags in the rows: one op at a time)
            for name, prm, off in zip(names, params, offs, strict=True):
                self.chain(name, prm, ~off)
            return
        if block[1].shape[1] != len(names):
            raise ValueError("VGather.chain_many: the block is not the ops' columns")
        if self._cuts_before_stat():
            # the first statistic op ends the gather (``chain``; the new one has no sampler,
            # so no later op does): the ops before it here, it and the rest in the new one
            # (an ``Unsupported`` op among them: raised as ``chain`` raises it, the gather
            # given up either way)
            i = next((q for q, name in enumerate(names) if REGISTRY[name].stat), None)
            if i is not None:
                c = sum([p.shape[1] for p in params[:i]])
                if i:
                    self.chain_many(names[:i], params[:i], offs[:i],
                                    (block[0][:, :c], block[1][:, :i]),
                                    None if groups is None else groups[:i])
                self.cut()
                self.chain_many(names[i:], params[i:], offs[i:],
                                (block[0][:, c:], block[1][:, i:]),
                                None if groups is None else groups[i:])
                return
        before = tuple(map(_NAME, self.ops))
        lay = _chain_layout(before, names, self.npre if self.phase else None, self.cin,
                            self.dtype.kind in "ui", self.A is not None, self.edge,
                            self.fill is not None, self.umap, self.nearest, self.projective,
                            GENERATION[0])
        if isinstance(lay, Unsupported):
            raise Unsupported(str(lay))  # (a fresh one: the kept one gathers no tracebacks)
        positional, stats = lay
        self._joined_ops()  # (the ops so far joined: the new ones are added at once below)
        self.ops.extend(map(tuple.__new__, repeat(_Chained),
                            zip(names, params, offs, strict=True)))
        self.positional = self.positional or positional
        if self.phase == 0:
            self.npre += len(names)
        joined, flags = self._join_block(block)
        if not stats:
            return
        head, tail = self._fixed()
        n = self.n
        soff = np.zeros((n, 1)) if self.soff is None else self.soff[:, None]
        hw = self.cur
        largest = self._largest
        if largest is None or largest[0] is not hw:  # (the size changes at samplers only)
            largest = self._largest = (hw, (int(hw[:, 0].max(initial=0)),
                                            int(hw[:, 1].max(initial=0))))
        # every column a prefix's rows take, side by side (as float64: the flags 0.0 / 1.0,
        # the sizes exact), then per prefix one take of its columns (``_prefix_columns``):
        # ``rows(spare=3)`` as it stood before op t, its own gate flag last; made only where
        # asked for (``Prefix.p``)
        parts = (head, joined, tail, flags, soff, hw)
        state = (head, tail, hw, self.soff)
        cols = _prefix_columns(lay, joined.shape[1], tail.shape[1], len(self.ops))
        start, token = len(before), object()  # (groups of this call's ops only)
        for (t, stat, sig, _, _), take in zip(stats, cols, strict=True):
            key = None if groups is None else groups[t - start]
            self.prefixes.append(Prefix(stat, sig, largest[1], parts=parts, take=take,
                                        state=state,
                                        group=None if key is None else (token, key)))

    def _cuts_before_stat(self) -> bool:
        """Whether a statistic op ends the gather here (``stat_cut``): after a sampler, on
        integer images, every member of one size.

        The reduction of a statistic computes, per member, the gather as it stands before the
        op (``Prefix``); on the cpu backend that is one thread per member running the whole
        prefix again, sampler included (the ImageNet recipe's contrast: 1.4-1.7 ms of core time
        an image). Cut here, the prefix runs once, into a stage of the image's dtype, and the
        reduction and the rest of the chain read that. Values are unchanged: on integer
        images every chained op's value is rounded and clipped to the dtype
        (``_rint_clip``) before the next reads it, so the stage stores exactly what the
        fused kernel carried, and the reduction sums the same values in the same order.
        """
        if not (self.stat_cut and self.A is not None and self.dtype.kind in "ui"
                and self.n > 0):
            return False
        got = self._one_size
        if got is None or got[0] is not self.cur:  # (the size changes at samplers only)
            got = self._one_size = (self.cur, bool((self.cur == self.cur[0]).all()))
        return got[1]

    def _prefix(self, stat: str, off: np.ndarray) -> None:
        """The prefix of a statistic op (``stat``, its gate-off flags ``off``) placed after
        the chained ops so far: its rows are ``rows(spare=3)`` with the sizes and ``off``
        in the spare columns, made where asked for (``Prefix.p``)."""
        sig = self.sig()
        n = self.n
        if not self.gates and (any(c.off.any() for c in self.ops)
                               or (self.soff is not None and self.soff.any())):
            raise RuntimeError("VGather: members gated off in a kernel without gates")
        head, tail = self._fixed()
        params, offs = self._joined_ops()
        hw = self.cur
        parts: tuple = (head, params, tail)
        if self.gates:
            parts += (offs, np.zeros((n, 1)) if self.soff is None else self.soff[:, None])
        parts += (hw, np.asarray(off, dtype=np.float64).reshape(n, 1))
        largest = self._largest
        if largest is None or largest[0] is not hw:  # (the size changes at samplers only)
            largest = self._largest = (hw, (int(hw[:, 0].max(initial=0)),
                                            int(hw[:, 1].max(initial=0))))
        self.prefixes.append(Prefix(stat, sig, largest[1], parts=parts,
                                    state=(head, tail, hw, self.soff)))

    # -- exec.gather.gather_args -------------------------------------------------------------
    def sig(self, upto: int | None = None) -> GatherSig:
        """The signature of the gather (of its first ``upto`` chained ops; None: all)."""
        return self._layout(upto)[0]

    def _layout(self, upto: int | None = None) -> tuple[GatherSig, int, int]:
        """``sig(upto)``, the end of its chained ops' slots and its parameter count: kept
        per signature (``_SIGS``: a batch asks for the same few many times)."""
        names = tuple(map(_NAME, self.ops if upto is None else self.ops[:upto]))
        npre = self.npre if upto is None else min(self.npre, upto)
        key = (names, npre, self.cin, self.dtype.kind in "ui", self.A is not None, self.edge,
               self.fill is not None, self.umap, self.nearest, self.projective, GENERATION[0])
        got = _SIGS.get(key)
        if got is None:
            sig = GatherSig(
                cin=self.cin, mode="chain", is_int=self.dtype.kind in "ui",
                sampler=self.A is not None, grey="", pre=names[:npre],
                post=names[npre:], lut_stages=(False, False), clip=False, edge=self.edge,
                bounded=self.fill is not None, umap=self.umap, nearest=self.nearest,
                projective=self.projective, guard=self.projective)
            got = (sig, op_offsets(names)[-1], gather_nparams(sig))
            if len(_SIGS) >= 4096:  # (kept bounded)
                _SIGS.clear()
            _SIGS[key] = got
        return got

    def rows(self, spare: int = 0, upto: int | None = None) -> tuple[GatherSig, np.ndarray]:
        """The signature and per-member parameter rows (gate flags after them with
        ``gates``): ``exec.gather.gather_args``'s ``p`` of each member; ``spare`` more
        columns after them, left for the caller to fill; ``upto``: of the gather with its
        first ``upto`` chained ops only (None: all; while only chained ops are appended, the
        rows it had then)."""
        sig, end, width = self._layout(upto)
        n = self.n
        ops = self.ops if upto is None else self.ops[:upto]
        if not self.gates and (any(c.off.any() for c in ops)
                               or (self.soff is not None and self.soff.any())):
            raise RuntimeError("VGather: members gated off in a kernel without gates")
        nflags = len(ops) + 1 if self.gates else 0
        head, tail = self._fixed()
        params, offs = self._joined_ops()
        if upto is not None:
            params, offs = params[:, :end - OPS_OFF], offs[:, :upto]
        # one array: the fixed slots, each op's slots, the extras, the flags, the spare (as
        # float64: the flags 0.0 / 1.0)
        pieces = [head, params, tail]
        if self.gates:
            pieces += [offs, np.zeros((n, 1)) if self.soff is None else self.soff[:, None]]
        if spare:
            pieces.append(np.empty((n, spare)))
        p = np.concatenate(pieces, axis=1)
        if p.shape[1] != width + nflags + spare:  # pragma: no cover - the layout's invariant
            raise RuntimeError(f"VGather: rows of {p.shape[1]} columns for {sig}")
        return sig, p

    def begun(self) -> list[bool]:
        """Per statistic prefix, whether this gather's own rows hold the prefix's (at the
        columns ``batch_arena`` reads): the gather still has the fixed slots, extras, sizes
        and sampler flags the prefix was made with (the chained ops' slots and flags only
        grow at the end; the sizes are the same for every member)."""
        head, tail = self._fixed()
        cur, soff = self.cur, self.soff
        return [(st := pr._state) is not None and st[2] is cur and st[3] is soff
                and st[0] is head and st[1] is tail for pr in self.prefixes]

    def _fixed(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, OPS_OFF) the fixed slots (the maps, the middle size, the full intensity, the
        clip) and (n, extras) the extras after the chained ops (a pad's window and fills, a
        homography's third row, a user map's parameters): kept while the arrays and values
        they are made of are the same objects (a statistic op's prefix asks for them once per
        op; the chained ops leave them as they are)."""
        key = (self.P, self.A, self.mid, self.window, self.uparams, self.fill,
               self.projective, self.umap, self.dtype, self.cin)
        got = self._fixed_rows
        if got is not None and all(map(operator.is_, got[0], key)):  # (no Python call each)
            return got[1], got[2]
        n = self.n
        head = np.empty((n, OPS_OFF))
        head[:, P_OFF:P_OFF + 6] = self.P[:, :2].reshape(n, 6)
        if self.A is not None:
            head[:, A_OFF:A_OFF + 6] = self.A[:, :2].reshape(n, 6)
            head[:, MID_OFF:MID_OFF + 2] = self.mid
        else:
            head[:, A_OFF:MID_OFF + 2] = 0.0
        head[:, FULL_OFF] = self.full
        head[:, CLIP_OFF], head[:, CLIP_HI_OFF] = -np.inf, np.inf
        tail = np.zeros((n, (BOUNDED_SLOTS if self.fill is not None else 0)
                         + (PROJECTIVE_SLOTS if self.projective else 0)
                         + (REGISTRY[self.umap].nparams if self.umap else 0)))
        e = 0
        if self.fill is not None:  # the window a pad reads, then one fill per channel
            tail[:, :4] = self.window
            tail[:, 4:4 + self.cin] = self.fill
            e = BOUNDED_SLOTS
        if self.projective:  # the homography's third row (gated-off members: 0, 0, 1)
            tail[:, e:e + PROJECTIVE_SLOTS] = self.A[:, 2]
            e += PROJECTIVE_SLOTS
        if self.umap:
            tail[:, e:e + self.uparams.shape[1]] = self.uparams
        self._fixed_rows = (key, head, tail)
        return head, tail

    def _joined_ops(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, slots) every chained op's slots side by side and (n, ops) their gate-off flags
        (views of kept buffers whose filled columns are never written again): the ops added
        since the last call written after the others, the buffers doubled when full (a
        gather's statistic ops ask for its rows as it grows: each op's columns are copied
        once, not once per prefix)."""
        ops = self.ops
        got = self._joined
        k = 0 if got is None or got[0] is not ops else got[1]
        if got is None or got[0] is not ops:
            # (room for a policy's few positions of value entries: grown seldom)
            got = (ops, 0, np.empty((self.n, 128)), np.empty((self.n, 32), dtype=bool), 0)
        _, _, buf, flags, cols = got
        new = ops[k:]
        if new:
            need = cols + sum([c.params.shape[1] for c in new])
            buf, flags = _room(buf, flags, cols, need, k, len(ops))
            for i, c in enumerate(new, k):
                w = c.params.shape[1]
                buf[:, cols:cols + w] = c.params
                flags[:, i] = c.off
                cols += w
        self._joined = (ops, len(ops), buf, flags, cols)
        return buf[:, :cols], flags[:, :len(ops)]

    def _join_block(self, block: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray,
                                                                          np.ndarray]:
        """``_joined_ops`` where the last ops (the rest joined already) are ``block``'s
        columns: copied at once."""
        ops = self.ops
        _, k, buf, flags, cols = self._joined
        params, offs = block
        need = cols + params.shape[1]
        buf, flags = _room(buf, flags, cols, need, k, len(ops))
        buf[:, cols:need] = params
        flags[:, k:len(ops)] = offs
        self._joined = (ops, len(ops), buf, flags, need)
        return buf[:, :need], flags[:, :len(ops)]

    def take(self, keep: np.ndarray) -> VGather:
        """The members ``keep`` (a boolean mask) only."""
        out = VGather(self.cur[keep], self.cin, self.dtype, self.gates, self.stat_cut)
        out.P = self.P[keep]
        out.A = None if self.A is None else self.A[keep]
        out.mid = None if self.mid is None else self.mid[keep]
        out.soff = None if self.soff is None else self.soff[keep]
        out.edge, out.phase, out.positional, out.npre = (self.edge, self.phase,
                                                         self.positional, self.npre)
        out.nearest = self.nearest
        out.projective = self.projective
        out.fill, out.window = self.fill, self.window[keep]
        out.umap = self.umap
        out.uparams = None if self.uparams is None else self.uparams[keep]
        out.ops = [_Chained(c.name, c.params[keep], c.off[keep]) for c in self.ops]
        out.left = self.left[keep]
        out.region = None if self.region is None else self.region[keep]
        out.stages = [st.take(keep) for st in self.stages]
        out.forked = None if self.forked is None else self.forked.take(keep)
        for pr in self.prefixes:  # (rows of their own: the kept members')
            p = pr.p[keep]
            out.prefixes.append(Prefix(pr.stat, pr.sig, (
                int(p[:, -3].max(initial=0)), int(p[:, -2].max(initial=0))), p=p,
                group=pr.group))
        return out


_LAYOUTS: dict[tuple, tuple | Unsupported] = {}
_SIGS: dict[tuple, tuple[GatherSig, int, int]] = {}


def _chain_layout(before: tuple[str, ...], names: tuple[str, ...], npre: int | None,
                  cin: int, is_int: bool, sampler: bool, edge: bool, bounded: bool, umap: str,
                  nearest: bool, projective: bool, generation: int) -> tuple | Unsupported:
    """``VGather.chain_many``'s structure of chained ops ``names`` after ``before`` (``npre``:
    the ops before the sampler, None while there is none): whether one reads its position,
    and per statistic op its index, statistic, prefix signature, end of the ops' slots and
    parameter count; or the ``Unsupported`` :meth:`VGather.chain` raises. Kept per argument
    (``generation``: the registry's, so a replaced op is never read stale)."""
    key = (before, names, npre, cin, is_int, sampler, edge, bounded, umap, nearest,
           projective, generation)
    got = _LAYOUTS.get(key)
    if got is not None:
        return got
    positional = False
    stats = []
    chained = before
    for name in names:
        spec = REGISTRY[name]
        if spec.kind == "pixelwise" and cin < 3:
            got = Unsupported("a pixelwise op on grey images")
        elif spec.kind == "neighbourhood" and umap:
            got = Unsupported("a neighbourhood op with a user map")
        elif spec.stat and not is_int and not STATISTICS[spec.stat].exact_on_floats:
            got = Unsupported(f"a {spec.stat} of a float image")
        if got is not None:
            break
        if spec.stat:
            pre = len(chained) if npre is None else npre
            sig = GatherSig(cin=cin, mode="chain", is_int=is_int, sampler=sampler, grey="",
                            pre=chained[:pre], post=chained[pre:], lut_stages=(False, False),
                            clip=False, edge=edge, bounded=bounded, umap=umap,
                            nearest=nearest, projective=projective, guard=projective)
            stats.append((len(chained), spec.stat, sig, op_offsets(chained)[-1],
                          gather_nparams(sig)))
        positional = positional or spec.reads_position
        chained = chained + (name,)
    if got is None:
        got = (positional, stats)
    if len(_LAYOUTS) >= 4096:  # (kept bounded)
        _LAYOUTS.clear()
    _LAYOUTS[key] = got
    return got


_COLUMNS: dict[tuple, tuple[tuple, list[np.ndarray]]] = {}


def _prefix_columns(layout: tuple, ncols: int, nextras: int, nops: int) -> list[np.ndarray]:
    """Per statistic op of ``layout`` (``_chain_layout``), the columns of its prefix's rows
    in ``VGather.chain_many``'s side-by-side array (the fixed slots, ``ncols`` of chained
    ops' slots, ``nextras`` extras, ``nops`` gate flags, the sampler's flag, the height and
    width): kept per layout."""
    key = (id(layout), ncols, nextras, nops)
    got = _COLUMNS.get(key)
    if got is not None and got[0] is layout:
        return got[1]
    tail = OPS_OFF + ncols
    flags = tail + nextras
    soff = flags + nops
    cols = []
    for t, _, _, end, width in layout[1]:
        if width - end != nextras:  # pragma: no cover - one gather's extras
            raise RuntimeError("VGather: a prefix's extras differ from the gather's")
        cols.append(np.concatenate([np.arange(end), np.arange(tail, flags),
                                    np.arange(flags, flags + t),
                                    [soff, soff + 1, soff + 2, flags + t]]).astype(np.intp))
    if len(_COLUMNS) >= 4096:  # (kept bounded)
        _COLUMNS.clear()
    _COLUMNS[key] = (layout, cols)
    return cols


# --------------------------------------------------------------------------- launches
# (what a batch's record hands its writer: ``batch_arena`` makes them from gathers,
# ``batch_policy_fill`` from a kept template)

@dataclass
class Stage:
    """A gather before a launch's last one (``VGather.cut``): it writes every member's image
    of ``hw`` (its own dtype, ``cout`` channels) that the next stage reads."""

    sig: Any
    p: np.ndarray
    hw: tuple[int, int]
    cout: int
    prefixes: list[Prefix]
    # per prefix, its reduction's column arguments where it reads ``p`` (None: its own rows,
    # packed): :func:`stat_reads`
    reads: list = field(default_factory=list)


@dataclass
class Launch:
    """One arena gather of a batch (after its ``stages``, if any): its members' batch
    positions and arrays."""

    sig: Any
    gates: bool
    pos: np.ndarray  # (m,) batch positions
    p: np.ndarray  # (m, P) parameter rows (and gate flags)
    rows: np.ndarray  # (m, 2) int64 arena offset, source width
    hw: tuple[int, int]
    cout: int
    dtype: np.dtype
    prefixes: list[Prefix]
    stages: list[Stage] = field(default_factory=list)
    reads: list = field(default_factory=list)  # (as ``Stage.reads``)

    @property
    def shape(self) -> tuple[int, ...]:
        """The stored shape of every member's output."""
        return self.hw if self.cout == 1 else (*self.hw, self.cout)


@dataclass
class ForkStage:
    """A fork before a launch's last gather (``batch_augmix``): the launches of its branches
    (their ``pos``: branch ``i * m + r`` is chain ``i`` of member ``r``; their source the
    fork's), written side by side into one buffer, then the weighted sum of every member's
    original and chains (``weights`` (m, 1 + k)) into its image of ``hw`` (``cout`` channels
    of ``dtype``), which the next stage reads."""

    weights: np.ndarray
    pieces: list[Launch]
    hw: tuple[int, int]
    cout: int
    dtype: np.dtype
    full: float
    prefixes: list = field(default_factory=list)  # (none of its own: the chains' are theirs)
