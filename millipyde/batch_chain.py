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

import copy
import operator
from dataclasses import dataclass, field

import numpy as np

from . import batch_math
from .graph.codegen.gather_body import COORD_LIMIT
from .graph.codegen.gather_sig import (
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
from .graph.plan.schedule import axis_aligned, fill_window
from .kernels import REGISTRY
from .kernels.stats import STATISTICS


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


class Unsupported(Exception):
    """The chain does not plan to one gather (and its statistics' reductions) for every
    member."""


@dataclass
class _Chained:
    name: str
    params: np.ndarray  # (n, slots)
    off: np.ndarray  # (n,) bool: gated off for the member


_NAME = operator.attrgetter("name")


@dataclass
class Prefix:
    """The gather as it stood before a stat op: the reduction of the op's statistic
    (``stat``, ``kernels.stats``) runs it with ``sig`` and rows ``p``."""

    stat: str
    sig: GatherSig
    # (n, params + flags + 3): the rows, then the output height and width, then 1 where the
    # op is gated off for the member (nothing to measure)
    p: np.ndarray
    hw: tuple[int, int]  # largest output height and width (the reduction's grid)


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
    # the gathers before this one (``cut``), in order: each writes an image of its own
    # dtype that the next reads, as the per-output plan's kernels do
    stages: list[VGather] = field(default_factory=list)
    # ``_joined_ops``' buffers: (the ops list they hold, how many of its ops, their slots side
    # by side, their gate flags side by side, the columns used); the ops list only grows
    _joined: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # ``_fixed``'s last rows: (the objects they were made of, the fixed slots, the extras)
    _fixed_rows: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # (``cur``, its largest height and width): a statistic prefix's grid, per ``cur`` array
    _largest: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.cur)
        self.P = np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
        self.left = np.zeros(n, dtype=bool)
        self.window = np.concatenate([np.zeros_like(self.cur), self.cur], axis=1)

    def cut(self) -> None:
        """End this gather here (a stage, kept in ``stages``) and go on in a new one that reads
        its output, where the per-output plan starts its next kernel (a second sampler, a
        geometric op after a neighbourhood op)."""
        done = copy.copy(self)  # this gather as it stands (its lists are not changed again)
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
            self.cur = np.stack([np.broadcast_to(np.asarray(h), (self.n,)),
                                 np.broadcast_to(np.asarray(w), (self.n,))],
                                axis=1).astype(np.int64)

    def sampler(self, name: str, params: np.ndarray, on: np.ndarray,
                out: np.ndarray | None = None) -> None:
        """A bilinear sampler (resize, warp_affine): ``A``, ``mid``; ``out`` its (n, 2) output
        size (None: the input's)."""
        spec = REGISTRY[name]
        if self.phase != 0 or self.positional:
            raise Unsupported("a second sampler, or a sampler after a positional op")
        if out is not None and not on.all():
            raise Unsupported("a shape-changing sampler gated off")
        a = batch_math.affine_rows(spec, self.cur[:, 0], self.cur[:, 1], params)
        self.A = np.where(on[:, None, None], a, np.eye(3))
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
                self.left |= on & _leaves(self.A, self.mid, self.cur, spec.warp_clip)

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
        if spec.stat:
            if self.dtype.kind not in "ui" and not STATISTICS[spec.stat].exact_on_floats:
                # float sums are not exact in any order: the per-output row is the reference
                raise Unsupported(f"a {spec.stat} of a float image")
            if self._cuts_before_stat():
                self.cut()
            sig, p = self.rows(spare=3)
            hw = self.cur
            p[:, -3:-1] = hw
            p[:, -1] = off = ~on
            largest = self._largest
            if largest is None or largest[0] is not hw:  # (the size changes at samplers only)
                largest = self._largest = (hw, (int(hw[:, 0].max(initial=0)),
                                                int(hw[:, 1].max(initial=0))))
            self.prefixes.append(Prefix(spec.stat, sig, p, largest[1]))
        else:
            off = ~on
        self.positional = self.positional or spec.reads_position
        self.ops.append(_Chained(name, slots, off))  # the pre ops all come before the sampler
        if self.phase == 0:
            self.npre += 1

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
        return (self.stat_cut and self.A is not None and self.dtype.kind in "ui"
                and self.n > 0 and bool((self.cur == self.cur[0]).all()))

    # -- exec.gather.gather_args -------------------------------------------------------------
    def sig(self) -> GatherSig:
        names = tuple(map(_NAME, self.ops))  # (no Python call per op)
        return GatherSig(
            cin=self.cin, mode="chain", is_int=self.dtype.kind in "ui",
            sampler=self.A is not None, grey="", pre=names[:self.npre],
            post=names[self.npre:], lut_stages=(False, False), clip=False, edge=self.edge,
            bounded=self.fill is not None, umap=self.umap, nearest=self.nearest,
            projective=self.projective, guard=self.projective)

    def rows(self, spare: int = 0) -> tuple[GatherSig, np.ndarray]:
        """The signature and per-member parameter rows (gate flags after them with
        ``gates``): ``exec.gather.gather_args``'s ``p`` of each member; ``spare`` more
        columns after them, left for the caller to fill."""
        sig = self.sig()
        n = self.n
        ops = self.ops
        end = op_offsets(tuple(map(_NAME, ops)))[-1]
        width = gather_nparams(sig)
        if not self.gates and (any(c.off.any() for c in ops)
                               or (self.soff is not None and self.soff.any())):
            raise RuntimeError("VGather: members gated off in a kernel without gates")
        nflags = len(ops) + 1 if self.gates else 0
        head, tail = self._fixed()
        params, offs = self._joined_ops()
        # one array: the fixed slots, each op's slots, the extras, the flags, the spare
        p = np.empty((n, width + nflags + spare))
        p[:, :OPS_OFF] = head
        p[:, OPS_OFF:end] = params
        p[:, end:width] = tail
        if not self.gates:
            return sig, p
        p[:, width:width + len(ops)] = offs
        p[:, width + len(ops)] = 0.0 if self.soff is None else self.soff
        return sig, p

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
            got = (ops, 0, np.empty((self.n, 16)), np.empty((self.n, 4), dtype=bool), 0)
        _, _, buf, flags, cols = got
        new = ops[k:]
        if new:
            need = cols + sum([c.params.shape[1] for c in new])
            if need > buf.shape[1]:
                grown = np.empty((self.n, max(need, 2 * buf.shape[1])))
                grown[:, :cols] = buf[:, :cols]
                buf = grown
            if len(ops) > flags.shape[1]:
                grown = np.empty((self.n, max(len(ops), 2 * flags.shape[1])), dtype=bool)
                grown[:, :k] = flags[:, :k]
                flags = grown
            for i, c in enumerate(new, k):
                w = c.params.shape[1]
                buf[:, cols:cols + w] = c.params
                flags[:, i] = c.off
                cols += w
        self._joined = (ops, len(ops), buf, flags, cols)
        return buf[:, :cols], flags[:, :len(ops)]

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
        out.stages = [st.take(keep) for st in self.stages]
        for pr in self.prefixes:
            hw = pr.p[keep, -3:-1]
            out.prefixes.append(Prefix(pr.stat, pr.sig, pr.p[keep], (
                int(hw[:, 0].max(initial=0)), int(hw[:, 1].max(initial=0)))))
        return out
