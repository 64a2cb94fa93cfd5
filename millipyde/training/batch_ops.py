"""Per-Operation vectorised recording for ``batch_arena``: every coin and parameter of a batch's
members drawn at once and applied to a ``batch_chain.VGather``.

A built-in op is recorded from its definition (``millipyde.ops``): the form's ``sample`` over
all members, the same code a method call runs over one image, so the parameters are the same
bits. :class:`Ctx` is the members' :class:`~millipyde.ops.Draws`: the counter-based streams of
(seed, output index, Operation index), computed in compiled integer arithmetic. User ops
(``decorators.py``) draw their ranges here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import random as mprandom
from ..checks import number, number_range
from ..compose import Choice, child_index
from ..decorators import UserOp
from ..image import gpuimage
from ..kernels import REGISTRY
from ..kernels.registry import GENERATION
from ..ops import FORMS, OPS, Emit, Form, Reject
from ..ops.base import columns, kind_for
from ..policies import ENTRY_METHODS, GEOMETRIC, GEOMETRIC_METHOD, Policy, entry_call
from . import batch_math
from .batch_chain import Unsupported, VGather, leaves_of


def sample_round(seed: int, ks: np.ndarray) -> np.ndarray:
    """The first SplitMix64 rounds of ``random.key64`` (seed, then sample): the same for
    every op of an output (pass it to each op's :class:`Ctx`)."""
    s = ks.astype(np.int64).view(np.uint64)
    return batch_math.mix_rounds(s, np.array([mprandom.mix(seed & mprandom.MASK)],
                                             dtype=np.uint64))[:, 0]


def _word(t: int) -> np.ndarray:
    return np.array([t & mprandom.MASK], dtype=np.uint64)


#: draws ``-1 .. BLOCK - 2`` of an op (the coin, then the first parameters) come in one block
BLOCK = 10
#: the block's draw indices as the uint64 words the compiled draws mix in
BLOCK_WORDS = np.array([t & mprandom.MASK for t in range(-1, BLOCK - 1)], dtype=np.uint64)


class Ctx:
    """What a handler draws from: the seed, the members' output indices, the op's index.

    The first two SplitMix64 rounds of ``random.key64`` depend only on (seed, sample, op):
    they are computed once per op and batch, and the coin and first draws in one more round
    over an (n, BLOCK) block (``batch_math.mix_uniforms``: integer arithmetic); the values
    are ``random.uniform01_array``'s, bit for bit.
    """

    def __init__(self, seed: int, ks: np.ndarray, j: int, _z: np.ndarray | None = None,
                 _block: np.ndarray | None = None, _z1: np.ndarray | None = None) -> None:
        self.seed, self.ks, self.j = seed, ks, j
        if _z is None:
            z = sample_round(seed, ks) if _z1 is None else _z1
            _z = batch_math.mix_rounds(z, _word(j))[:, 0]
        self._z = _z
        self._block = _block
        # (the Ctx this one is ``sub`` of, and its rows there; what steps keep of its draws)
        self.parent: tuple[Ctx, np.ndarray] | None = None
        self.memo: dict[Any, Any] = {}

    def block(self) -> np.ndarray:
        """(n, BLOCK) draws ``-1 .. BLOCK - 2`` (column ``t + 1``)."""
        if self._block is None:
            self._block = batch_math.mix_uniforms(self._z, BLOCK_WORDS)
        return self._block

    def coins(self, probability: float | None) -> np.ndarray:
        """``random.gate_array`` of every member."""
        if probability is None:
            return np.ones(len(self.ks), dtype=bool)
        return self.block()[:, 0] < probability

    def sub(self, rows: np.ndarray) -> Ctx:
        """The members ``rows`` only."""
        out = Ctx(self.seed, self.ks[rows], self.j, self._z[rows],
                  None if self._block is None else self._block[rows])
        out.parent = (self, rows)
        return out

    def u(self, t: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Draw ``t`` of this op's stream for every member (or ``rows``)."""
        if -1 <= t < BLOCK - 1:
            b = self.block()[:, t + 1]
            return b if rows is None else b[rows]
        z = self._z if rows is None else self._z[rows]
        return batch_math.mix_uniforms(z, _word(t))[:, 0]

    def uniforms(self, ts: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(len(rows), len(ts)) draws ``ts`` of the members ``rows`` (``u``'s values, in
        one call)."""
        ts = np.asarray(ts, dtype=np.int64)
        if len(ts) and ts.min() >= -1 and ts.max() < BLOCK - 1:
            return self.block()[rows][:, ts + 1]
        words = np.array([int(t) & mprandom.MASK for t in ts.tolist()], dtype=np.uint64)
        return batch_math.mix_uniforms(self._z[rows], words)

    def first_fits(self, fn: Any, hw: np.ndarray, params: tuple[float, ...], tries: int,
                   draws: int, values: int) -> tuple[np.ndarray, np.ndarray]:
        """``ops.base.first_fits`` of every member (``hw`` their sizes): the try ``fn``
        compiled into one loop over the members (``batch_math.first_fits``)."""
        return batch_math.first_fits(fn, self._z, hw, params, tries, draws, values)

    def key64(self, t: int) -> np.ndarray:
        """``random.key64(seed, k, j, t)`` of every member (uint64)."""
        return batch_math.mix_rounds(self._z, _word(t))[:, 0]

    @property
    def n(self) -> int:
        """How many members."""
        return len(self.ks)

    def member(self, i: int) -> Callable[[int], float]:
        """``u(t)`` of member ``i`` alone (``random.uniform01``)."""
        k = int(self.ks[i])
        return lambda t: mprandom.uniform01(self.seed, k, self.j, t)


class Step:
    """A method Operation of a batch: its op form, and its arguments parsed once per image kind
    (channels, dtype) as the method parses them."""

    def __init__(self, op: Any, form: Form) -> None:
        self.op, self.form = op, form
        self._parsed: dict[Any, Any] = {}

    @property
    def reshapes(self) -> bool:
        """Whether it may change the size (its coins split a batch's structure)."""
        return self.form.reshapes

    def args_for(self, cin: int, dtype: np.dtype) -> Any:
        """The form's parsed arguments for images of ``cin`` channels and ``dtype``."""
        kind = kind_for(cin, dtype)
        got = self._parsed.get(kind)
        if got is None:
            got = self._parsed[kind] = (self.form.parse(kind, *self.op.args, **self.op.kwargs),)
        return got[0]


def step_of(op: Any) -> Step | None:
    """The :class:`Step` of a method Operation, or None (not a built-in op form)."""
    form = FORMS.get(op.method)
    return None if form is None else Step(op, form)


class ChoiceStep:
    """A ``compose.Choice`` of method Operations that keep the size: each child recorded on
    every member, gated where the member's choice (or the child's own coin) skips it."""

    reshapes = False

    def __init__(self, op: Any, children: list) -> None:
        self.op, self.children = op, children


def choice_step(op: Any, inputs: list) -> ChoiceStep | None:
    """The :class:`ChoiceStep` of a choice whose children (nested choices included) are
    built-in op forms that keep the size, on gpuimage's own methods; else None."""
    children: list = []
    for child in op.operations:
        if isinstance(child, Choice):
            got = choice_step(child, inputs)
        elif child.method is None or not all(
                getattr(type(x), child.method, None) is getattr(gpuimage, child.method, 0)
                for x in inputs):
            got = None
        else:
            got = step_of(child)
        if got is None or got.reshapes:
            return None
        children.append(got)
    return ChoiceStep(op, children)


def record_choice(g: VGather, c: Ctx, step: ChoiceStep, on: np.ndarray) -> None:
    """A choice on every member of ``g``: the choice drawn for all at once
    (``Choice.sequence``, the code one image's call runs), then each child with its own
    stream and coin, gated where the member's choice skips it."""
    ctxs: dict[int, Ctx] = {}
    for i, chosen in step.op.sequence(c.u, c.n):
        child = step.children[i]
        cc = ctxs.get(i)
        if cc is None:
            cc = ctxs[i] = Ctx(c.seed, c.ks, child_index(c.j, i))
        record_step(g, cc, child, on & chosen & cc.coins(child.op.probability))


class PolicyStep:
    """A ``policies.Policy`` in a batch: every op of its space recorded on every member,
    gated where the member did not draw it (:func:`record_policy`)."""

    reshapes = False

    def __init__(self, op: Policy) -> None:
        self.op = op
        self.geometric = np.array([name in GEOMETRIC for name in op.names])
        # the value entries whose kernels read a neighbourhood (sharpness): ``apart``
        self.neighbourhood = np.array([_reads_neighbourhood(name) for name in op.names]
                                      + [False])  # (the ``none`` code's op: none)
        # whether ``apart`` splits its members: two positions or more, and such an entry
        self.splits = op.positions >= 2 and bool(self.neighbourhood.any())
        self._parsed: dict[Any, Any] = {}
        self._entries: dict[tuple, list | None] = {}  # ``entry_rows``
        self._slots: dict[tuple, tuple] = {}  # ``slot_row``
        self._values: dict[tuple, ValueTable | None] = {}  # ``value_table``

    def structure(self, c: Ctx) -> np.ndarray:
        """(n,) how many geometric entries the member draws (its gather's sampler slots):
        the structures a policy records, at most its positions + 1."""
        return self.draws(c).geo.sum(axis=1, dtype=np.int64)

    def apart(self, c: Ctx) -> np.ndarray:
        """(n,) 1 where the member draws a value entry that reads a neighbourhood
        (sharpness), else 0: a second structure column (``ArenaRecorder.record``) where the
        policy has two positions or more and such an entry.

        A neighbourhood entry at a later position runs the entries before it on each of its
        taps (9 of the 3x3), a sharpness after a sharpness 81: the gathers that carry them
        hold 140-170 registers a thread on sm_90, one 256-thread block an SM, while the
        members that draw none (about 86% of RandAugment(2, 9)'s) need about 100. Apart,
        those members' gathers leave the neighbourhood kernels out (:func:`record_policy`'s
        ``plain``) and the few others keep them."""
        if not self.splits:
            return np.zeros(c.n, dtype=np.int64)
        return self.draws_neighbourhood(self.draws(c).value).astype(np.int64)

    def draws_neighbourhood(self, value: np.ndarray) -> np.ndarray:
        """(n,) whether each member draws a value entry that reads a neighbourhood, at any
        position (``value``: ``PolicyDraws.value`` of the members)."""
        return self.neighbourhood[value // (2 * self.op.bins)].any(axis=1)

    def plain(self, value: np.ndarray) -> bool:
        """Whether a gather of members whose ``PolicyDraws.value`` is ``value`` (one
        :meth:`apart` structure) leaves the neighbourhood entries out: the policy is split
        (:meth:`apart`) and none of them draws one."""
        return self.splits and not self.draws_neighbourhood(value).any()

    def draws(self, c: Ctx) -> PolicyDraws:
        """The members' :class:`PolicyDraws` (made once per batch: those of a ``sub`` of a
        Ctx that has them are their rows)."""
        got = c.memo.get(self)
        if got is None:
            if c.parent is not None and self in c.parent[0].memo:
                got = c.parent[0].memo[self].take(c.parent[1])
            else:
                got = PolicyDraws(self, c)
            c.memo[self] = got
        return got

    def entry_rows(self, name: str, magnitude: float | None, kind: Any, h: int, w: int,
                   full: float, c: Ctx) -> list | None:
        """Value entry ``name`` at ``magnitude`` (None: at 0, recorded gated off) on an
        ``h`` x ``w`` image of ``kind``: per kernel its name and its one parameter row (a
        deterministic form's parameters are the same on every member: sampled on one), a
        kernel None where the image refuses it; None for an entry that records nothing.
        Made once per (entry, magnitude, kind, size) and kept. Each kernel comes with the width
        of its rows in the gather (its row, at least the kernel's slots) and whether it is a
        chained op (``VGather.chain``)."""
        # (the sign too: -0.0 and 0.0 are one dict key; the registry's generation: a replaced
        # op's slots are never read stale)
        key = (name, magnitude, None if magnitude is None else math.copysign(1.0, magnitude),
               kind, h, w, full, GENERATION[0])
        got = self._entries.get(key, _NOTHING)
        if got is not _NOTHING:
            return got
        call = entry_call(name, 0.0 if magnitude is None else magnitude, h, w, full)
        if call is None:
            got = None
        else:
            method, args = call
            form = FORMS[method]
            if form.draws or name in GEOMETRIC:  # pragma: no cover - the tables' invariant
                raise Unsupported(f"a policy entry {name} whose parameters are per member")
            got = []
            one = np.zeros(1, dtype=np.int64)
            cur = np.array([[h, w]], dtype=np.int64)
            for e in form.emits(self.parsed(method, kind, args), c.sub(one), cur, kind):
                if isinstance(e, Reject):
                    got.append((None, None, 0, False))
                    continue
                if e.skip is not None or e.out is not None:
                    raise Unsupported(f"a policy entry {name} that skips or resizes")
                row = np.array(e.params[0], dtype=np.float64)
                row.flags.writeable = False
                spec = REGISTRY[e.kernel]
                got.append((e.kernel, row, max(len(row), spec.slots), spec.kind in CHAINED))
        if len(self._entries) >= 4096:  # (many sizes or magnitudes: kept bounded)
            self._entries.clear()
        self._entries[key] = got
        return got

    def value_table(self, kind: Any, h: int, w: int, full: float,
                    plain: bool = False) -> ValueTable | None:
        """The :class:`ValueTable` of this policy's value entries on ``h`` x ``w`` images of
        ``kind`` (made once and kept), or None where its entries' kernels are not the same
        at every magnitude (those batches take the per-magnitude path). ``plain``: without
        the entries that read a neighbourhood (for members that draw none: :meth:`plain`)."""
        key = (kind, h, w, full, plain, GENERATION[0])
        got = self._values.get(key, _NOTHING)
        if got is _NOTHING:
            got = ValueTable.make(self, kind, h, w, full, plain)
            if len(self._values) >= 256:  # (many sizes: kept bounded)
                self._values.clear()
            self._values[key] = got
        return got

    def slot_row(self, op: int, magnitude: float, h: int, w: int, full: float,
                 kind: Any) -> tuple:
        """The ``warp_affine`` parameters of geometric entry ``op`` (an index into the
        policy's names) at ``magnitude`` on an ``h`` x ``w`` image: made once and kept."""
        key = (op, magnitude, math.copysign(1.0, magnitude), h, w, full, kind)
        got = self._slots.get(key)
        if got is None:
            (matrix,) = entry_call(self.op.names[op], magnitude, h, w, full)[1]
            got = self.parsed(GEOMETRIC_METHOD, kind, (matrix,))
            if len(self._slots) >= 4096:  # (many sizes: kept bounded)
                self._slots.clear()
            self._slots[key] = got
        return got

    def parsed(self, method: str, kind: Any, args: tuple) -> Any:
        """The form's parsed arguments (cached: policies repeat a few values)."""
        key = (method, kind, _key(args))
        got = self._parsed.get(key)
        if got is None:
            got = self._parsed[key] = (FORMS[method].parse(kind, *args),)
        return got[0]


class PolicyDraws:
    """What a policy's record reads of the members' draws (``Policy.plan``), per member
    and position: whether the entry is geometric and runs (``geo``), how many such entries
    come before it (``before``), its code (op, magnitude bin, sign: ``ValueTable``) and the
    code of its value entry (``value``: ``none`` where it is geometric or does not run)."""

    def __init__(self, step: PolicyStep | None, c: Ctx | None) -> None:
        if step is None:
            return
        pol = step.op
        self.plan = plan = pol.plan(c.u, c.n)
        n, npos = c.n, len(plan)
        self.none = len(pol.names) * 2 * pol.bins
        if not npos:
            self.geo = np.zeros((n, 0), dtype=bool)
            self.codes = self.value = np.zeros((n, 0), dtype=np.int64)
        else:
            # (n, positions) each: one array of the positions' rows, seen transposed (the
            # same values as ``np.stack(axis=1)``, fewer calls)
            runs = np.array([d.runs for d in plan]).T
            ops = np.array([d.op for d in plan]).T
            self.geo = runs & step.geometric[ops]
            self.codes = (ops * pol.bins + np.array([d.bin for d in plan]).T) * 2 + (
                np.array([d.negative for d in plan]).T & pol._signed[ops])
            self.value = np.where(runs & ~self.geo, self.codes, self.none)
        self.before = np.cumsum(self.geo, axis=1) - self.geo

    def take(self, rows: np.ndarray) -> PolicyDraws:
        """The members ``rows`` only."""
        out = PolicyDraws(None, None)
        out.plan = None  # (``Draw`` rows only where asked: ``record_policy``'s other path)
        out.none = self.none
        out.geo, out.before = self.geo[rows], self.before[rows]
        out.codes, out.value = self.codes[rows], self.value[rows]
        return out


def policy_step(op: Policy, inputs: list) -> PolicyStep | None:
    """The :class:`PolicyStep` of a policy, or None where an input's class overrides one of
    the methods its entries call."""
    if not all(getattr(type(x), m, None) is getattr(gpuimage, m, 0) for x in inputs
               for m in ENTRY_METHODS):
        return None
    return PolicyStep(op)


_NOTHING = object()


def _reads_neighbourhood(name: str) -> bool:
    """Whether policy entry ``name``'s op has a kernel that reads a neighbourhood."""
    if name in GEOMETRIC or name == "Identity":
        return False
    call = entry_call(name, 0.0, 8, 8, 255.0)
    op = None if call is None else OPS.get(call[0])
    return op is not None and any(REGISTRY[k].kind == "neighbourhood" for k in op.kernels)


def _key(args: tuple) -> tuple:
    return tuple(tuple(a.ravel().tolist()) if isinstance(a, np.ndarray) else a for a in args)


class ValueTable:
    """A policy's value entries (its ops but the geometric ones and ``Identity``) recorded at
    one position as table lookups: made once per (policy, image kind, size), it holds the
    chained kernels every position records (each op's kernels in the op's order, the same
    at every magnitude) and, per *code* of a member's draw (op, magnitude bin, sign; one more
    code for a member with no value entry there), the row of every kernel's parameters (zeros
    but for the drawn op's) and its gate-off flags. A position's record is then one fancy
    index of each (:meth:`record`) instead of one grouping and emit per op and magnitude.

    It equals the per-magnitude path (``_record_entries``) where every member has this size
    (the magnitudes are then the tables' at (op, bin), signed as drawn), every op's kernels
    are chained and the same at every magnitude with none refused, and a magnitude of 0 gives
    the same rows whatever its sign (that path groups -0.0 with 0.0): :meth:`make` checks the
    first three, :meth:`_fill` the last as codes are first drawn, else None.
    """

    def __init__(self, step: PolicyStep, sized: tuple, kernels: list, owner: list) -> None:
        pol = step.op
        self.step, self.sized = step, sized
        self.kernels = tuple(k for k, _ in kernels)
        widths = [wd for _, wd in kernels]
        self.cols = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64).tolist()
        self.owner = owner  # per kernel, the op index it belongs to
        self.bins = pol.bins
        self.none = len(pol.names) * 2 * pol.bins  # the code of no value entry
        ncodes = self.none + 1
        self.params = np.zeros((ncodes, self.cols[-1]))
        self.off = np.ones((ncodes, len(self.kernels)), dtype=bool)
        self.filled = np.zeros(ncodes, dtype=bool)
        self.filled[self.none] = True
        self.broken = False  # a code broke the conditions (``ready``)
        valued = {k for k in owner}
        # a geometric entry, Identity (or in a plain table a neighbourhood one): no kernels
        for k in range(len(pol.names)):
            if k not in valued:
                self.filled[k * 2 * pol.bins:(k + 1) * 2 * pol.bins] = True
        # per code of a geometric entry, the map and per-output test ``VGather.sampler``
        # makes of its ``warp_affine`` parameters at this size (``slot``)
        self.slot_filled = np.zeros(ncodes, dtype=bool)
        self.slot_filled[self.none] = True
        self.slot_map = np.broadcast_to(np.eye(3), (ncodes, 3, 3)).copy()
        self.slot_leaves = np.zeros(ncodes, dtype=bool)
        self._span_cols: dict[int, tuple] = {}  # ``_spans``

    @classmethod
    def make(cls, step: PolicyStep, kind: Any, h: int, w: int, full: float,
             plain: bool = False) -> ValueTable | None:
        """The table, or None where an entry's kernels are not all chained ones recorded at
        every magnitude (those are checked again per code: :meth:`_fill`). ``plain``: the
        entries that read a neighbourhood have no kernels in it (their codes' rows are no
        entry's: only members that draw none record by it, ``PolicyStep.plain``)."""
        pol = step.op
        spec = REGISTRY[GEOMETRIC_METHOD]
        if spec.kind != "sampler" or spec.mode == "edge" or spec.projective:
            return None  # (``ValueTable.slot``'s maps are those of an affine zero-fill one)
        sized = (kind, h, w, full)
        kernels: list = []
        owner: list = []
        one = Ctx(0, np.zeros(1, dtype=np.int64), 0)
        for k, name in enumerate(pol.names):
            if name in GEOMETRIC or name == "Identity" or (plain and step.neighbourhood[k]):
                continue
            emitted = step.entry_rows(name, None, kind, h, w, full, one)
            if emitted is None:
                return None  # (an entry that records nothing: the per-magnitude path)
            for kernel, _, width, chained in emitted:
                if kernel is None or not chained or width != REGISTRY[kernel].slots:
                    return None
                kernels.append((kernel, width))
                owner.append(k)
        return cls(step, sized, kernels, owner)

    def ready(self, codes: np.ndarray) -> bool:
        """Make the rows of ``codes`` not made yet; False where one breaks the table's
        conditions (the class doc)."""
        if self.broken:
            return False
        missing = ~self.filled[codes]
        if not missing.any():
            return True
        if not all(self._fill(int(u)) for u in np.unique(codes[missing]).tolist()):
            self.broken = True  # (kept: the per-magnitude path from then on)
        return not self.broken

    def _fill(self, u: int) -> bool:
        kind, h, w, full = self.sized
        pol = self.step.op
        k, mm = self.magnitude(u)
        values = [mm]
        if mm == 0.0 and pol._signed[k]:  # a 0 of a signed op: both signs' rows, the same
            values.append(-values[0])
        one = Ctx(0, np.zeros(1, dtype=np.int64), 0)
        got = [self.step.entry_rows(pol.names[k], v, kind, h, w, full, one) for v in values]
        mine = [q for q, o in enumerate(self.owner) if o == k]
        for emitted in got:
            if emitted is None or [e[0] for e in emitted] != [self.kernels[q] for q in mine]:
                return False
            if any(e[1] is None or e[2] != self.cols[q + 1] - self.cols[q]
                   for e, q in zip(emitted, mine, strict=True)):
                return False
        if len(got) == 2 and any(a[1].tobytes() != b[1].tobytes()
                                 for a, b in zip(got[0], got[1], strict=True)):
            return False
        for (_, row, _, _), q in zip(got[0], mine, strict=True):
            self.params[u, self.cols[q]:self.cols[q] + len(row)] = row
            self.off[u, q] = False
        self.filled[u] = True
        return True

    def magnitude(self, u: int) -> tuple[int, float]:
        """The op index and signed magnitude of code ``u`` (``Policy.magnitudes``' value)."""
        k, b, neg = u // (2 * self.bins), (u // 2) % self.bins, u % 2
        _, h, w, _ = self.sized
        pol = self.step.op
        m = float(pol.tables(h, w)[k, b])
        # (an unsigned op's codes carry no sign: ``PolicyDraws`` never sets it)
        return k, (-m if neg and pol._signed[k] else m)

    def slot(self, g: VGather, codes: np.ndarray, has: np.ndarray) -> None:
        """The slot's ``warp_affine`` on ``g`` (``codes``: each member's geometric entry's
        code, where ``has``): ``_slot_matrices``' rows, the sampler's maps and its per-output
        test made once per code (``PolicyStep.slot_row``, ``batch_math.affine_rows``,
        ``leaves_of``: row by row, the values the whole batch's calls give)."""
        cd = self.slot_codes(codes, has)
        g.sampler(GEOMETRIC_METHOD, None, has, known=(self.slot_map[cd], self.slot_leaves[cd]))

    def slot_codes(self, codes: np.ndarray, has: np.ndarray) -> np.ndarray:
        """``codes`` where ``has``, else ``none``: the codes of a slot's members, their
        ``slot_map`` and ``slot_leaves`` made where not yet (once per code)."""
        cd = np.where(has, codes, self.none)
        missing = ~self.slot_filled[cd]
        if missing.any():
            kind, h, w, full = self.sized
            spec = REGISTRY[GEOMETRIC_METHOD]
            hw = np.array([[h, w]], dtype=np.int64)
            for u in np.unique(cd[missing]).tolist():
                k, m = self.magnitude(u)
                row = np.asarray(self.step.slot_row(k, m, h, w, full, kind),
                                 dtype=np.float64).reshape(1, 6)
                a = batch_math.affine_rows(spec, hw[:, 0], hw[:, 1], row)
                self.slot_map[u] = a[0]
                self.slot_leaves[u] = leaves_of(GEOMETRIC_METHOD, a, hw)[0]
                self.slot_filled[u] = True
        return cd

    def record(self, g: VGather, codes: np.ndarray) -> None:
        """Every value entry's kernels on ``g`` at consecutive positions (``codes``: (n,
        positions) each member's code there, ``none`` where it draws no value entry), gated
        off but for the drawn one: each position's kernels after the last's, all chained at
        once."""
        n, npos = codes.shape
        # (n, positions, columns) rows side by side: one fancy index for every position
        params = self.params[codes].reshape(n, -1)
        off = self.off[codes].reshape(n, -1)
        names, pcols, ocols, groups = self._spans(npos)
        g.chain_many(names, list(map(params.__getitem__, pcols)),
                     list(map(off.__getitem__, ocols)), (params, off), groups)

    def _spans(self, npos: int) -> tuple[tuple[str, ...], list[tuple], list[tuple], tuple]:
        """For ``npos`` consecutive positions: the kernels, each kernel's parameter columns
        and gate column in :meth:`record`'s side-by-side rows (index tuples), and each
        kernel's exclusive group (``VGather.chain_many``'s ``groups``: its position, for a
        statistic op whose entry has no other; at most one entry of a position runs per
        member); made once per ``npos`` and kept."""
        got = self._span_cols.get(npos)
        if got is None:
            cols, width, r = self.cols, self.cols[-1], len(self.kernels)
            stats = [q for q in range(r) if REGISTRY[self.kernels[q]].stat]
            alone = {q for q in stats
                     if sum(self.owner[j] == self.owner[q] for j in stats) == 1}
            got = self._span_cols[npos] = (
                self.kernels * npos,
                [(slice(None), slice(b * width + cols[q], b * width + cols[q + 1]))
                 for b in range(npos) for q in range(r)],
                [(slice(None), q) for q in range(r * npos)],
                tuple(b if q in alone else None for b in range(npos) for q in range(r)))
        return got


def _record_entries(g: VGather, c: Ctx, step: PolicyStep, name: str,
                    groups: list[tuple[float, np.ndarray]], on: np.ndarray,
                    sized: tuple[Any, int, int, float, int]) -> None:
    """Entry ``name`` (a value op: its arguments depend on the magnitude alone) on the members
    ``on``, ``groups`` their distinct magnitudes (ascending) and the rows of each: its
    deterministic form sampled once per distinct magnitude (and kept:
    :meth:`PolicyStep.entry_rows`), the rows gathered into one gated emit per kernel (every
    member gets a row; those not ``on`` are gated off). ``sized``: the members' image kind and
    the first member's height and width (a value entry's rows do not depend on the size),
    the gather's full intensity and its member count."""
    kind, h0, w0, full, n = sized
    if not groups:  # no member draws it: recorded gated off (the same structure)
        groups = _GATED_OFF
    params: dict[str, np.ndarray] = {}
    order: list[tuple[str, bool]] = []
    for m, rows in groups:
        emitted = step.entry_rows(name, m, kind, h0, w0, full, c)
        if emitted is None:
            return  # Identity: nothing recorded
        for kernel, row, width, chained in emitted:
            if kernel is None:  # the image refuses this entry
                if len(rows):
                    raise Unsupported(f"a policy entry {name} the image refuses")
                continue
            p = params.get(kernel)
            if p is None:
                # (as wide as the kernel's slots: the gather keeps it as it is)
                p = params[kernel] = np.zeros((n, width))
                order.append((kernel, chained))
            p[rows, :len(row)] = row
    for kernel, chained in order:
        if chained:  # (``apply_emit``'s choice, made once per entry and kept)
            g.chain(kernel, params[kernel], on)
        else:
            apply_emit(g, Emit(kernel, params[kernel]), on)


#: an entry no member draws: recorded once, at magnitude 0, gated off for all
_GATED_OFF = ((None, np.zeros(0, dtype=np.int64)),)

#: the kernel kinds ``apply_emit`` gives to ``VGather.chain``
CHAINED = frozenset(("elementwise", "pixelwise", "positional", "neighbourhood"))


def _position_groups(ops: np.ndarray, mags: np.ndarray,
                     placed: np.ndarray) -> dict[int, list[tuple[float, np.ndarray]]]:
    """Per op index drawn by the members ``placed`` at one position (``ops`` each member's
    op, ``mags`` its magnitude): its distinct magnitudes, ascending, and the rows drawing
    each (one 1-D unique for the position, not one per op of the space)."""
    rows = np.flatnonzero(placed)
    if not len(rows):
        return {}
    ops_on, m_on = ops[rows].astype(np.int64), mags[rows]
    mvals, minv = np.unique(m_on, return_inverse=True)  # (-0.0 and 0.0 as one value)
    code = ops_on * len(mvals) + minv.reshape(-1)
    uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
    order = np.argsort(inv.reshape(-1), kind="stable")
    bounds = np.searchsorted(inv.reshape(-1)[order], np.arange(len(uniq) + 1)).tolist()
    out: dict[int, list[tuple[float, np.ndarray]]] = {}
    for u, (op, f) in enumerate(zip((uniq // len(mvals)).tolist(), first.tolist(),
                                    strict=True)):
        out.setdefault(op, []).append((float(m_on[f]), rows[order[bounds[u]:bounds[u + 1]]]))
    return out


def _slot_matrices(g: VGather, step: PolicyStep, names: np.ndarray, mags: np.ndarray,
                   hw: np.ndarray, has: np.ndarray) -> np.ndarray:
    """(n, 6) the ``warp_affine`` parameters of each member's geometric entry (``names`` its
    op index, ``mags`` its magnitude, ``hw`` its size; zeros where not ``has``): computed
    once per distinct (op, magnitude, size) and kept (:meth:`PolicyStep.slot_row`)."""
    kind = kind_for(g.cin, g.dtype)
    mat = np.zeros((g.n, 6))
    rows = np.flatnonzero(has)
    if not len(rows):
        return mat
    # one integer per distinct (op, magnitude, size): a 1-D unique (magnitudes by their
    # bits: each member's own, -0.0 included)
    mvals, minv = np.unique(np.ascontiguousarray(mags[rows], dtype=np.float64).view(np.int64),
                            return_inverse=True)
    h, w = hw[rows, 0], hw[rows, 1]
    if (h == h[0]).all() and (w == w[0]).all():
        sinv, nsz = np.zeros(len(rows), dtype=np.int64), 1
    else:
        svals, sinv = np.unique(h * (1 << 31) + w, return_inverse=True)
        nsz = len(svals)
    code = (names[rows].astype(np.int64) * len(mvals) + minv.reshape(-1)) * nsz + \
        sinv.reshape(-1)
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    table = np.array([step.slot_row(int(names[r]), float(mags[r]), int(hw[r, 0]),
                                    int(hw[r, 1]), g.full, kind)
                      for r in rows[first].tolist()]).reshape(len(first), 6)
    mat[rows] = table[inv.reshape(-1)]
    return mat


def record_policy(g: VGather, c: Ctx, step: PolicyStep, on: np.ndarray,
                  cut_positions: bool = False) -> None:
    """A policy on every member of ``g``: the entries drawn for all at once
    (``Policy.plan``, the code one image's call runs), then every op of its space recorded
    per position, gated where the member did not draw it.

    The members of ``g`` draw the same number ``s`` of geometric entries (``structure``):
    each is a sampler *slot* (the member's ``j``-th geometric entry, a ``warp_affine``), and
    the other entries are recorded between the slots where they can fall (entry ``i`` lies
    after slot ``j`` where ``j`` geometric entries precede it). A slot that cannot join the
    gather (a sampler or a neighbourhood op before it) starts the next stage of the gather
    (``VGather.cut``), where the per-output plan starts its next kernel.

    ``cut_positions``: each position's entries in a stage of their own (``VGather.cut``
    between positions), as a per-output path that materialises entry by entry has them
    (``AugMix``'s): a neighbourhood entry (sharpness) then reads the stage before it, not the
    positions before it computed again for each of its taps. Values are the same on integer
    images (every chained op's value is rounded and clipped before the next reads it).
    """
    pol = step.op
    dr = step.draws(c)
    geo, before = dr.geo, dr.before
    npos = geo.shape[1]
    if not npos:
        return
    hw = g.cur.copy()
    # (the entries keep the size: every value entry's rows are made at the first member's)
    sized = (kind_for(g.cin, g.dtype), int(hw[0, 0]), int(hw[0, 1]), g.full, g.n)
    slots = int(geo[on].sum(axis=1).max(initial=0))
    # no member draws a neighbourhood entry (``PolicyStep.apart``): their kernels left out
    # (with positions cut apart a neighbourhood entry reads the stage before it: its taps
    # run no chain, nothing to spare)
    plain = not cut_positions and step.plain(dr.value)
    # every member of one size: the entries by table (``ValueTable``), else per magnitude
    table = step.value_table(*sized[:4], plain) if (hw == hw[0]).all() else None
    if table is not None and not table.ready(dr.codes.reshape(-1)):
        table = None
    if table is None:
        plan = pol.plan(c.u, c.n)
        mags = [pol.magnitudes(d, hw) for d in plan]
        if slots:  # (n, positions) each member's op and magnitude per position
            ops_at, mags_at = np.stack([d.op for d in plan], axis=1), np.stack(mags, axis=1)
    every = np.arange(g.n)
    for j in range(slots + 1):
        if j:
            # slot j: each member's j-th geometric entry
            # (a plain gather cuts where the neighbourhood entries would have cut it: the
            # same stages and statistic launches as the members that draw one)
            if g.phase != 0 or g.positional or plain:
                g.cut()
            at = geo & (before == j - 1)  # (n, positions): the j-th geometric entry
            has = on & at.any(axis=1)
            i = np.argmax(at, axis=1)
            if table is None:
                mat = _slot_matrices(g, step, ops_at[every, i], mags_at[every, i], hw, has)
                apply_emit(g, Emit(GEOMETRIC_METHOD, mat), has)
            else:
                table.slot(g, dr.codes[every, i], has)
        # entry i after slot j: j geometric entries before it, slots - j from it on
        placing = [i for i in range(npos) if j <= i and slots - j <= npos - i]
        if table is not None:
            # (the positions between two slots: one record; with cut_positions one each)
            spans = [slice(i, i + 1) for i in placing] if cut_positions else \
                [slice(placing[0], placing[-1] + 1)] if placing else []  # (consecutive)
            for q, span in enumerate(spans):
                if q:
                    g.cut()
                table.record(g, np.where(on[:, None] & (before[:, span] == j),
                                         dr.value[:, span], table.none))
            continue
        for q, i in enumerate(placing):
            if q and cut_positions:
                g.cut()
            d = plan[i]
            placed = on & d.runs & ~geo[:, i] & (before[:, i] == j)
            drawn = _position_groups(d.op, mags[i], placed)
            for k, name in enumerate(pol.names):
                if name in GEOMETRIC or name == "Identity" or (plain and step.neighbourhood[k]):
                    continue
                _record_entries(g, c, step, name, drawn.get(k, []), placed & (d.op == k), sized)


def record_step(g: VGather, c: Ctx, step: Step | ChoiceStep | PolicyStep,
                on: np.ndarray) -> None:
    """Record a built-in op's form on every member of ``g`` (``on``: the members whose coin
    ran it): its entries applied by kernel kind; a kind the gather cannot take raises
    ``Unsupported``. A :class:`ChoiceStep` records its children, a :class:`PolicyStep` its
    entries."""
    if isinstance(step, ChoiceStep):
        record_choice(g, c, step, on)
        return
    if isinstance(step, PolicyStep):
        record_policy(g, c, step, on)
        return
    form = step.form
    args = step.args_for(g.cin, g.dtype)
    kind = kind_for(g.cin, g.dtype)
    region, g.region = g.region, None  # (sources that are regions: the first op takes them)
    entries = form.emits(args, c, g.cur, kind) if region is None else \
        form.emits_on_region(args, c, region, kind)
    for e in entries:
        if isinstance(e, Reject):
            g.left |= e.mask  # the per-output path raises the method's ValueError
            continue
        apply_emit(g, e, on)


def apply_emit(g: VGather, e: Emit, on: np.ndarray) -> None:
    """One :class:`~millipyde.ops.Emit` on the gather (its skipped members gated off)."""
    eon = on if e.skip is None else on & ~e.skip
    kind = REGISTRY[e.kernel].kind
    if kind == "index_map":
        g.index_map(e.kernel, e.params if e.params.shape[1] else None, eon)
    elif kind == "sampler":
        g.sampler(e.kernel, e.params, eon, e.out)
    elif kind in CHAINED:
        g.chain(e.kernel, e.params, eon)
    else:
        raise Unsupported(f"a {kind} op ({e.kernel})")


def user_op(g: VGather, c: Ctx, fn: UserOp, params: tuple, on: np.ndarray) -> None:
    """A user ``@mp.elementwise`` / ``@mp.pixelwise`` / ``@mp.index_map`` op
    (``UserOp._values``' draws)."""
    cols = []
    for i, p in enumerate(params):
        if isinstance(p, (tuple, list, np.ndarray)):
            lo, hi = number_range(p, "") if len(p) != 2 or not all(
                type(v) is float for v in p) else p
            cols.append(lo + (hi - lo) * c.u(i))
        else:
            cols.append(number(p, ""))
    vals = columns(*cols, n=g.n)
    if fn.kind != "index_map":
        g.chain(fn.name, vals, on)
        return
    if not on.all():  # pragma: no cover - the recorder splits a user map's coins
        raise Unsupported("a user map gated off")
    spec = fn.spec
    out = [spec.out_shape((h, w), tuple(v))[:2] for (h, w), v in zip(
        g.cur.tolist(), vals.tolist(), strict=True)]
    g.user_map(fn.name, vals, np.array(out, dtype=np.int64))
