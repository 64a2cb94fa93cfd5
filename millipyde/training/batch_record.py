"""A Generator batch recorded once: vectorised draws, per-member arrays, no graph per output.

For Operations that are op forms the same-size recorder takes (``Form.template``: the random
ones draw plain ranges, ``ops.Ranges``) on inputs of one shape, every coin and parameter of N
outputs is drawn at once (``random.uniform01_array``, bit-identical to the per-output draws).
Outputs whose coins (and zero-sigma blurs) agree form a *pattern*; the first output of each
pattern ever seen is recorded as usual once (its *template*: the kernels ``graph.exec.batch``
would batch it with), and every output of that pattern then gets its kernel arguments
(parameter rows, uint8 tables, taps) from the drawn arrays, computed as
``exec.gather.gather_args`` computes them. The groups run through ``graph.exec.batch``'s
batched kernels, one upload per batch.

An output whose rotation needs scikit-image's data-dependent warp clip when its pattern's
template's does not (or the reverse) plans another kernel structure: it joins the pattern's
second template's group, whose clip bounds are measured on the device
(``graph.exec.batch_group``). Outputs this cannot make (a pattern that does not batch) are
made by the Generator's per-output path; the caller gets their output indices back.
Callable Operations make the whole Generator use that path (documented in
``Generator.batches``).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..graph.exec import batch
from ..graph.ir.member import Member
from ..graph.ir.node import stored
from ..image import gpuimage
from ..ops import FORMS, Ranges
from ..ops.base import kind_of
from ..random import MASK
from ..workers import StepError, private_handle
from . import batch_math, template_share
from .batch_groups import ArrayGroup, Draws, KeyPlan, group_arrays, member_arrays
from .batch_ops import BLOCK, BLOCK_WORDS, Ctx, sample_round


@dataclass(frozen=True)
class _Rule:
    """How Operation ``j`` draws: its coin probability and its draw ranges (None: fixed)."""

    probability: float | None
    ranges: tuple[tuple[float, float], ...] | None
    zero_skips: bool  # random_gaussian: a drawn sigma of 0 records nothing


def rules_for(inputs: list, operations: list) -> list[_Rule] | None:
    """Per Operation its draw rule, or None when the batch cannot be recorded at once."""
    first = inputs[0]
    if not all(isinstance(x, gpuimage) and x.shape == first.shape and x.dtype == first.dtype
               for x in inputs):
        return None
    rules = []
    kind = kind_of(first.shape, first.dtype)
    for op in operations:
        form = FORMS.get(op.method)
        if form is None or not form.template or not op._records_only(first):
            return None
        ranges = None
        if form.random:
            try:
                args = form.parse(kind, *op.args, **op.kwargs)
            except (TypeError, ValueError):
                return None  # the per-output path reports the error
            if not isinstance(args, Ranges):
                return None
            ranges = tuple(args)
        rules.append(_Rule(op.probability, ranges, form.skips))
    return rules


def draws_nothing(rules: list[_Rule]) -> bool:
    """Whether no Operation of ``rules`` has a coin or a drawn range (a fixed chain: every
    output of one input kind records the same)."""
    return all(r.probability is None and r.ranges is None for r in rules)


def draw(rules: list[_Rule], seed: int, ks: np.ndarray) -> tuple[np.ndarray, list]:
    """Coins (n, J) and per Operation its (n, nparams) parameters (None where fixed): the
    streams' draws as ``batch_ops.Ctx`` makes them (compiled SplitMix64 rounds, the same
    bits), every op's coin and first draws in one call (``batch_math.op_uniforms``)."""
    if not rules:
        return np.ones((len(ks), 0), dtype=bool), []
    if draws_nothing(rules):
        # no coin and nothing drawn (a Pipeline of fixed ops): every coin says run, as the
        # streams' would (a uniform is below 1, so below 2), with no stream read
        return np.ones((len(ks), len(rules)), dtype=bool), [None] * len(rules)
    z1 = sample_round(seed, ks)
    words, cols = _draw_words(tuple(len(r.ranges) if r.ranges else 0 for r in rules))
    # (J, n, cols): column t + 1 is draw t of op j (``Ctx.block``); only the block's first
    # columns that some op reads (each uniform is its own SplitMix64 round: the same bits)
    blocks = batch_math.op_uniforms(z1, words, BLOCK_WORDS[:cols])
    # no coin: always drawn (a uniform is below 1, so below 2)
    probs = np.array([2.0 if r.probability is None else r.probability for r in rules])
    coins = blocks[:, :, 0].T < probs
    params: list[np.ndarray | None] = []
    for j, r in enumerate(rules):
        if r.ranges is None:
            params.append(None)
            continue
        if len(r.ranges) < BLOCK:  # every draw in the op's block: one compiled call
            params.append(batch_math.ranged(blocks[j], r.ranges))
            continue
        cols = []
        for t, (lo, hi) in enumerate(r.ranges):
            if lo == hi:
                cols.append(np.full(len(ks), lo))
            else:
                u = blocks[j, :, t + 1] if t < BLOCK - 1 else Ctx(seed, ks, j, _z1=z1).u(t)
                cols.append(lo + (hi - lo) * u)
        params.append(np.stack(cols, axis=1))
    return coins, params


def state_draw(state: Any, rules: list[_Rule], ks: np.ndarray) -> tuple[np.ndarray, list]:
    """:func:`draw` for the outputs ``ks`` of ``state``, or the state's own ``draw(rules, ks)``
    where it has one (a Generator with a callable: the callable's slot holds what each output
    recorded, not draws; ``generator_callables``)."""
    own = getattr(state, "draw", None)
    return draw(rules, state.seed, ks) if own is None else own(rules, ks)


def given_rule(params: int) -> _Rule:
    """The rule of an Operation whose ``params`` parameters per output are given by the
    state's ``draw`` (no coin of its own: the state's coins say where it recorded)."""
    return _Rule(None, ((0.0, 1.0),) * params if params else None, False)


def rule_key(rules: list[_Rule]) -> tuple:
    """The rules as plain values (a part of ``template_share.chain_key``)."""
    return tuple((r.probability, r.ranges, r.zero_skips) for r in rules)


@functools.lru_cache(maxsize=64)
def _draw_words(nranges: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """``draw``'s per-op words (read only) and how many of an op block's columns (the coin,
    then the draws) it reads, for ops with these numbers of draw ranges."""
    words = np.array([j & MASK for j in range(len(nranges))], dtype=np.uint64)
    words.flags.writeable = False
    return words, min(BLOCK, 1 + max(nranges, default=0))


def patterns(rules: list[_Rule], coins: np.ndarray, params: list) -> np.ndarray:
    """Per output the bits that decide its recorded structure: coins, zero sigmas."""
    bits = [coins]
    for j, r in enumerate(rules):
        if r.zero_skips:
            bits.append((params[j][:, :1] > 0) & coins[:, j:j + 1])
    return np.concatenate(bits, axis=1)


_MISSING = object()


class RecordError(Exception):
    """Recording output ``k`` failed: ``err`` (a ``workers.StepError``) says where."""

    def __init__(self, k: int, err: BaseException) -> None:
        super().__init__(k, err)
        self.k, self.err = k, err


class _Template:
    """One pattern's recorded output: its group key, kernels and which op made each node."""

    def __init__(self, key: tuple, member: Any, op_of: dict[int, int]) -> None:
        self.key = key
        self.kernels = member.kernels
        self.args = member.args
        self.op_of = op_of
        self.recipes: dict[int, Any] = {}  # kernel index -> _GatherRecipe
        self.plan: KeyPlan | None = None  # its group key's (``Recorder.template``)


def record_template(state: Any, rules: list[_Rule], k: int, device: int,
                    stacks: dict) -> _Template | None:
    """Record output ``k`` as the Generator does; its batch analysis (None: not batchable)."""
    i = state.input_index(k)
    x = state.inputs[i]
    nodes = state.stacked_nodes.get(device)
    if nodes is not None:  # the value that was stacked, even if the input changed since
        value = nodes[i]
        if type(value) is Member:
            # a Pipeline's input bound to an unread member, stacked by the member: a leaf of
            # its own around the member's view, stacked where the member is (the recording's,
            # for the few inputs a template is recorded from; the member stays unread)
            node = stored(value.view(), value.shape, value.dtype, value.device)
            stacks[node.id] = stacks[value]
            value = node
        x = private_handle(x, value)
    y = x.clone()
    op_of: dict[int, int] = {}
    y._pinned = device
    try:
        y._placed()
        for j, op in enumerate(state.operations):
            before = y._node
            try:
                op.apply(y, state.seed, k, j, batch.LIFT_GATES)
            except Exception as err:
                raise RecordError(k, StepError(f"operation {j} ({op.name!r})", err)) from err
            n = y._node
            while n is not before and n.inputs:
                op_of[n.id] = j
                n = n.inputs[0]
    finally:
        y._pinned = None
    got = batch.analyse(y._node, 0, stacks)
    if got is None:
        return None
    t = _Template(got[0], got[1], op_of)
    _check_draws(t, rules, state, k)
    for kern in t.kernels:
        for node in kern.nodes:
            j = op_of.get(node.id)
            if getattr(node.op, "kind", "") == "sampler" and j is not None and \
                    rules[j].ranges is not None and len(node.params) != len(rules[j].ranges):
                return None  # a sampler with fixed parameters beside its drawn ones
    return t


def _check_draws(t: _Template, rules: list[_Rule], state: Any, k: int) -> None:
    """The vectorised draws of output ``k`` must be the parameters its recording drew."""
    _, params = state_draw(state, rules, np.array([k], dtype=np.int64))
    for kern in t.kernels:
        for node in kern.nodes:
            j = t.op_of.get(node.id)
            if j is None or params[j] is None or node.gated_off:
                continue
            drawn = params[j][0].tolist()
            # the drawn values lead the recorded parameters (fixed ones may follow)
            if drawn != [float(v) for v in node.params[:len(drawn)]]:
                raise RuntimeError(f"batch_record: vectorised draws of operation {j} "
                                   f"{params[j][0].tolist()} differ from the recorded "
                                   f"{node.params} (output {k})")


class BatchRecorder(Protocol):
    """What a recorder of a Generator's batches at once offers ``Generator.batches``
    (``batches._write_recorded``) and the Generator's per-call batches
    (``generator_state``): :class:`Recorder`, ``generator_callables.CallableRecorder``."""

    def groups(self, ks: list[int], device: int, stacks: dict,
               ahead: bool = False) -> tuple[list, list[int]]:
        """The batched groups of outputs ``ks`` (``index``: their positions in ``ks``) and
        the positions left to the per-output path."""


class RecorderKind(Protocol):
    """A kind of :class:`BatchRecorder`, which says itself whether it takes a Generator
    state: ``batches.RECORDERS`` tries the kinds in order, the first one's recorder is the
    state's."""

    def take(self, state: Any) -> BatchRecorder | None:
        """Its recorder of the Generator state, or None where it does not take the state."""


class Recorder:
    """Records a Generator's batches at once (see module doc); one per Generator state."""

    @classmethod
    def take(cls, state: Any) -> Recorder | None:
        """The recorder of the state, or None: an input of another size or dtype, or an
        Operation that is not a recording method of template ops (:func:`rules_for`)."""
        rules = rules_for(state.inputs, state.operations)
        if rules is None:
            return None
        return cls(state, rules, template_share.store(template_share.chain_key(
            state.inputs, state.operations, rule_key(rules))))

    def __init__(self, state: Any, rules: list[_Rule],
                 store: template_share.TemplateStore | None = None) -> None:
        self.state = state
        self.rules = rules
        # per Operation: whether its coin records it gated off (``KeyPlan.gateable``)
        self.coins = tuple(batch.LIFT_GATES and r.probability is not None for r in rules)
        # the templates, shared with the recorders of Generators whose recordings are the
        # same (``template_share``: another seed, another epoch), or this recorder's own
        self.store = template_share.TemplateStore() if store is None else store
        self.lock = self.store.lock
        self.templates: dict[tuple[int, bytes, int], _Template | None] = self.store.templates
        self.failed: dict[tuple[int, bytes, int], int] = self.store.failed
        # per group key: its templates as arrays
        self.plans: dict[tuple, KeyPlan] = self.store.plans
        # device -> pattern as an integer -> its template (or None): ``templates`` without
        # the pattern's bytes made per batch
        self.by_dev: dict[int, dict[int, _Template | None]] = self.store.by_dev
        self.by_dev1: dict[int, dict[int, _Template | None]] = self.store.by_dev1
        self._sidx: dict[int, tuple[dict, np.ndarray]] = {}  # device -> (stacks, indices)
        # device -> its stack's (S, H, W, C) view (``ArrayGroup``: this Generator's own)
        self._s4: dict[int, dict] = {}
        self.ahead: set[int] = set()  # devices whose first batch recorded templates ahead

    #: Outputs tried as a pattern's template before the pattern is left to per-output work
    #: (an output whose recording does not batch: a plan ``batch.analyse`` refuses).
    TRIES = 4

    def template(self, device: int, pattern: np.ndarray, candidates: list[int],
                 stacks: dict, variant: int = 0) -> Any:
        """The pattern's template, recorded from the first candidate that batches.

        ``variant`` 1: the pattern's other plan, for its outputs whose warp clip differs
        from the first template's (``batch_groups.group_arrays``' lost rows).
        """
        key = (device, pattern.tobytes(), variant)
        with self.lock:
            if key in self.templates:
                return self.templates[key]
            tried = self.failed.get(key, 0)
            for k in candidates[:max(0, self.TRIES - tried)]:
                t = record_template(self.state, self.rules, k, device, stacks)
                if t is not None:
                    template_share.count_recorded()
                    # the group key without the recording's stack (``batch.analyse``'s first
                    # entry): a group launches on its batch's stack, and templates recorded
                    # over other stacks (another Generator's, a Pipeline's other chunk) of
                    # the same structure join one plan
                    t.key = ("recorded", *t.key[1:])
                    t.plan = self.plans.get(t.key)
                    if t.plan is None:
                        t.plan = self.plans[t.key] = KeyPlan(t.key, self.coins)
                    self.templates[key] = t
                    return t
                tried += 1
            self.failed[key] = tried
            if tried >= self.TRIES:
                self.templates[key] = None
            return None

    #: Outputs whose patterns get their templates on a device's first batch (``AHEAD_BATCHES``
    #: batches' worth, at most ``AHEAD_MAX``).
    AHEAD_BATCHES = 32
    AHEAD_MAX = 8192

    def _record_ahead(self, ks: list[int], device: int, stacks: dict) -> None:
        """Record the templates of every pattern (and warp-clip variant) among the next
        ``AHEAD_BATCHES`` batches' outputs now, by grouping them all at once: a pattern's first
        output would otherwise plan its template in the middle of a later batch (~1 ms each;
        a figure-5.1 chain has ~60, the rare ones first seen dozens of batches later). The
        grouping is vectorised: looking ahead costs about one large batch of NumPy work."""
        st = self.state
        step = st.world
        count = min(self.AHEAD_MAX, self.AHEAD_BATCHES * len(ks))
        if st.outputs is not None:  # this rank's outputs end at global_index(outputs)
            count = min(count, max(0, (st.global_index(st.outputs) - ks[0]) // step))
        if count <= len(ks):
            return
        try:
            self._groups((ks[0] + step * np.arange(count, dtype=np.int64)).tolist(), device,
                         stacks)
        except RecordError:
            pass  # reported by the batch that holds that output, if it comes

    def groups(self, ks: list[int], device: int, stacks: dict,
               ahead: bool = False) -> tuple[list, list[int]]:
        """The batched groups (:class:`ArrayGroup`, ``index``: batch positions) of outputs
        ``ks``, and the positions left to the per-output path.

        ``ahead``: on the device's first call, also record the templates of the batches
        ahead (:meth:`_record_ahead`; ``Generator.batches``, whose first batch is not a
        single output's latency).
        """
        if ahead and device not in self.ahead and ks:
            self.ahead.add(device)
            self._record_ahead(ks, device, stacks)
        return self._groups(ks, device, stacks)

    def _groups(self, ks: list[int], device: int, stacks: dict) -> tuple[list, list[int]]:
        st = self.state
        karr = np.asarray(ks, dtype=np.int64)
        coins, params = state_draw(st, self.rules, karr)
        pats = patterns(self.rules, coins, params)
        drawn = Draws(params)
        if pats.shape[1] <= 62:  # one integer per pattern: grouped in one compiled pass
            pats_1d = pats.astype(np.int64) @ (np.int64(1) << np.arange(pats.shape[1]))
            uniq, first, inverse, order, bounds = batch_math.group_ints(pats_1d)
            ints = uniq.tolist()
        else:
            _, first, inverse = np.unique(pats, axis=0, return_index=True,
                                          return_inverse=True)
            ints = [None] * len(first)
            inverse = inverse.reshape(-1)
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(len(first) + 1))
        got = self._sidx.get(device)  # (per stack: the stacks are made once per device)
        if got is None or got[0] is not stacks:
            # (a Pipeline chunk's state gives them where each input is its own stack row: no
            # lookup an input)
            rows = getattr(st, "stack_rows", None)
            if rows is None:
                rows = np.array([stacks[n if type(n) is Member else n.id][1]
                                 for n in st.stacked_nodes[device]], dtype=np.int64)
            got = self._sidx[device] = (stacks, rows)
        sidx_of = got[1]
        stack = next(iter(stacks.values()))[0] if stacks else None
        sidx_rows = sidx_of[st.input_index(karr)]
        groups: list[ArrayGroup] = []
        left: list[np.ndarray] = []
        seen = self.by_dev.setdefault(device, {})
        s4 = self._s4.setdefault(device, {})
        try:  # every pattern seen before, every template in its plan: no loop over patterns
            ts = [seen[key] for key in ints]
        except KeyError:
            ts = None
        lost = None
        if ts is not None and None not in ts:
            lost = self._grouped_fast(ts, inverse, order, drawn, stack, device, sidx_rows,
                                      groups, s4)
        if lost is None:
            bounds = bounds.tolist()
            parts: dict[Any, list] = defaultdict(list)  # KeyPlan -> per pattern (template, rows)
            for u, (f, key) in enumerate(zip(first.tolist(), ints, strict=True)):
                rows = order[bounds[u]:bounds[u + 1]]
                try:  # a pattern seen before: no call but the append (patterns x groups)
                    t = seen[key]
                except KeyError:
                    t = self._template_of(device, pats[f], key, ks, rows, stacks)
                if t is None:
                    left.append(rows)
                else:
                    parts[t.plan].append((t, rows))
            lost = self._grouped(parts, drawn, stack, device, sidx_rows, groups, s4)
        if len(lost):
            # outputs whose warp clip differs from their pattern's template: the pattern's
            # other plan (a template of their own), batched too
            again: dict[int, list] = {}
            lost_pat = inverse[lost]
            seen1 = self.by_dev1.setdefault(device, {})
            for u in np.unique(lost_pat).tolist():
                rows = lost[lost_pat == u]
                key = ints[u]  # (a variant seen before: its template without the lock)
                t = seen1[key] if key in seen1 else \
                    self._template_of(device, pats[first[u]], key, ks, rows, stacks, 1)
                if t is None:
                    left.append(rows)
                else:
                    again.setdefault(id(t.plan), []).append((t, rows))
            left.append(self._grouped(again, drawn, stack, device, sidx_rows, groups, s4))
        return groups, sorted(np.concatenate(left).tolist()) if left else []

    def _template_of(self, device: int, pattern: np.ndarray, key: int | None, ks: list[int],
                     rows: np.ndarray, stacks: dict, variant: int = 0) -> Any:
        """The template of ``pattern`` (``key``: its integer, None past 62 bits; ``variant``
        as :meth:`template`'s), recorded if it is not yet; once decided it is also kept under
        ``key`` (``by_dev``, ``by_dev1`` for variant 1)."""
        full = (device, pattern.tobytes(), variant)
        t = self.templates.get(full, _MISSING)
        if t is _MISSING:
            t = self.template(device, pattern, [ks[r] for r in rows[:self.TRIES].tolist()],
                              stacks, variant)
        if key is not None and full in self.templates:  # (not while tries are left)
            (self.by_dev1 if variant else self.by_dev).setdefault(device, {})[key] = t
        return t

    @staticmethod
    def _grouped_fast(ts: list[Any], inverse: np.ndarray, order: np.ndarray, drawn: Draws,
                      stack: Any, device: int, sidx_rows: np.ndarray,
                      groups: list, s4: dict | None = None) -> np.ndarray | None:
        """``_grouped`` of a batch whose patterns (``ts``: per pattern its template, by
        pattern rank) all have templates that joined their plans: per plan its members'
        template indices and rows by array operations over the members, in the order the
        per-pattern loop gives them (patterns ascending, members in order within each).
        None (nothing appended) where a template has not joined yet."""
        plans: dict[Any, Any] = {}  # plan -> its first pattern's template (its kernels)
        number: dict[Any, int] = {}
        pu, tu = [], []
        for t in ts:
            plan = t.plan
            at = plan.ready.get(t)
            if at is None:
                return None
            q = number.get(plan)
            if q is None:
                q = number[plan] = len(number)
                plans[plan] = t
            pu.append(q)
            tu.append(at)
        seq = inverse[order]  # each member's pattern rank, members sorted by pattern
        lost = []
        if len(plans) == 1:
            masks: list[Any] = [None]
        else:
            member_plan = np.asarray(pu, dtype=np.int64)[seq]
            masks = [member_plan == q for q in range(len(plans))]
        tid_all = np.asarray(tu, dtype=np.int64)[seq]
        for (plan, first), m in zip(plans.items(), masks, strict=True):
            templates, kernels = plan.state
            rows, tid = (order, tid_all) if m is None else (order[m], tid_all[m])
            index, arrays, rest = member_arrays(templates, kernels, tid, rows, drawn)
            lost.append(rest)
            if len(index):
                groups.append(ArrayGroup(plan, stack, device, first.kernels, index, arrays,
                                         sidx_rows, kernels, s4))
        return np.sort(np.concatenate(lost)) if lost else np.zeros(0, dtype=np.int64)

    @staticmethod
    def _grouped(parts: dict[Any, list], drawn: Draws, stack: Any, device: int,
                 sidx_rows: np.ndarray, groups: list, s4: dict | None = None) -> np.ndarray:
        """Append the groups of ``parts`` (per group key, per pattern its template and rows)
        to ``groups``; the rows they leave (sorted)."""
        lost = []
        for got in parts.values():
            plan = got[0][0].plan
            index, arrays, rest, kernels = group_arrays(plan, got, drawn)
            lost.append(rest)
            if len(index):
                groups.append(ArrayGroup(plan, stack, device, got[0][0].kernels, index, arrays,
                                         sidx_rows, kernels, s4))
        return np.sort(np.concatenate(lost)) if lost else np.zeros(0, dtype=np.int64)
