"""A Generator whose Operations hold one Python callable: the methods around it recorded as one
batch, the callable run per output (callables are the documented exception, per output).

Per output, the callable runs on a stand-in of the image it would get: a handle of the type,
shape, dtype and device the output has at that point (the Operations before it, recorded once
per input and coin pattern for their shape), whose value cannot be read. What it records
there is kept: nothing (its coin said skip, or it chose to do nothing: a grey image for
``recipes.colorize_if_colour``), or one op node (``colorize`` with the gains it drew). The
batch is then recorded at once by ``batch_record.Recorder`` as a batch of recording methods,
the callable's slot replayed from those captures (its coin: whether the output recorded a
node; its parameters: the recorded ones, through the state's ``draw``). Every output's plan is
the one its per-output recording gives, so its values are too.

An output whose callable reads the value, returns a new one, records more than one node or
another op than the batch's keeps the per-output path (the callable then runs a second time
for it); so does every output while a fault is armed (the per-output path meets the fault
points).
"""

from __future__ import annotations

import _thread
import threading
from collections import Counter
from typing import Any

import numpy as np

from .. import faults, targets
from .. import random as mprandom
from ..decorators import UserOp
from ..graph.ir.node import Node, apply, leaf
from ..image import gpuimage
from ..kernels import OpSpec
from ..operation import Operation, use_result
from ..policies import ImageOperation
from . import batch_math, batch_ops, template_share
from .batch_record import Recorder, given_rule, patterns, rule_key, rules_for
from .batch_record import draw as draw_rules


class ValueRead(RuntimeError):
    """A callable read the value of an output's stand-in (it then runs per output)."""


class _Unreadable:
    """The stand-in's buffer: any use of it (a host copy, a kernel argument) raises."""

    def __getattr__(self, name: str) -> Any:
        raise ValueRead(f"a callable Operation read its image's value ({name})")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueRead("a callable Operation read its image's value")

    def __len__(self) -> int:
        raise ValueRead("a callable Operation read its image's value")


_UNREADABLE = _Unreadable()


def _sig(node: Node) -> tuple:
    """The recorder a captured node's output joins: (its op, its parameter count)."""
    return id(node.op), len(node.params)


class _Replayed:
    """The callable's slot in the recorder's Operations: records output ``k``'s capture."""

    method = None

    def __init__(self, op: Operation, captures: dict[int, Node | None]) -> None:
        self.op = op
        self.name = op.name
        self.probability = None
        self.captures = captures

    def apply(self, x: Any, seed: int, sample: int, index: int, lift: bool = False) -> bool:
        cap = self.captures.get(sample)
        if cap is None:
            return False
        node = x._placed()
        x._bind(apply(cap.op, node, cap.params, cap.shape, cap.dtype, label=cap.label))
        return True


class _State:
    """The Generator state as the recorder reads it: its Operations with the callable's slot
    replayed, and the draws with that slot's coins and parameters taken from the captures."""

    def __init__(self, base: Any, operations: list, slot: int, width: int,
                 captures: dict[int, Node | None]) -> None:
        self._base = base
        self.operations = operations
        self.slot, self.width = slot, width
        self.captures = captures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def draw(self, rules: list, ks: np.ndarray) -> tuple[np.ndarray, list]:
        coins, params = draw_rules(rules, self._base.seed, ks)
        caps = list(map(self.captures.get, ks.tolist()))
        coins[:, self.slot] = [c is not None for c in caps]
        if self.width:
            none = (0.0,) * self.width
            params[self.slot] = np.array([none if c is None else c.params for c in caps],
                                         dtype=np.float64).reshape(len(caps), self.width)
        return coins, params


class CallableRecorder:
    """``batch_record.Recorder``'s ``groups`` for a Generator with one callable Operation
    (see the module doc): one recorder per shape of capture (op, parameter count) met."""

    @classmethod
    def take(cls, state: Any) -> CallableRecorder | None:
        """The recorder of the state, or None where it does not take it (:func:`make`)."""
        return make(state)

    def __init__(self, state: Any, slot: int, rules: list) -> None:
        self.state = state
        self.slot = slot
        self.op: Operation = state.operations[slot]
        self.rules = rules  # of the other Operations, in order
        self.captures: dict[int, Node | None] = {}
        self._recorders: dict[tuple | None, Recorder] = {}
        # (shape, dtype) before the callable per input kind and coin pattern: the same for
        # Generators of the same chain and inputs' kind (each new seed or epoch would record
        # them again)
        self._shapes = template_share.store(template_share.chain_key(
            state.inputs, state.operations, "callable shapes", slot,
            rule_key(rules[:slot]))).shapes
        self._lock = threading.Lock()

    def _recorder(self, sig: tuple | None, op: Any = None) -> Recorder:
        """The recorder of captures of ``sig`` (``op``: their op; None: no capture)."""
        with self._lock:
            rec = self._recorders.get(sig)
            if rec is None:
                width = 0 if sig is None else sig[1]
                ops = list(self.state.operations)
                ops[self.slot] = _Replayed(self.op, self.captures)
                rules = self.rules[:self.slot] + [given_rule(width)] + self.rules[self.slot:]
                # shared with the recorders of Generators of the same chain and inputs' kind
                # whose captures have this op and width (``template_share``)
                key = template_share.chain_key(
                    self.state.inputs, self.state.operations, "callable", self.slot,
                    rule_key(rules), template_share.Same(op), width)
                rec = self._recorders[sig] = Recorder(
                    _State(self.state, ops, self.slot, width, self.captures), rules,
                    template_share.store(key))
            return rec

    def groups(self, ks: list[int], device: int, stacks: dict,
               ahead: bool = False) -> tuple[list, list[int]]:
        """The batched groups of outputs ``ks`` (``index``: their positions in ``ks``) and
        the positions left to the per-output path."""
        if faults.ARMED or not ks:
            return [], list(range(len(ks)))
        caps, left = self._capture(ks, device)
        # the recorder an output joins: its capture's (op, parameter count)
        # (``_sig`` of each capture by ``map``: no Python call per output)
        got = [c for c in caps.values() if c is not None]
        sigs = Counter(zip(map(id, [c.op for c in got]), map(len, [c.params for c in got]),
                           strict=True))
        use = sorted(caps)
        if len(sigs) <= 1:  # (the usual claim: every capture of one op and width)
            sig = next(iter(sigs), None)
        else:
            sig = sigs.most_common(1)[0][0]
            left += [r for r in use if caps[r] is not None and _sig(caps[r]) != sig]
            use = [r for r in use if caps[r] is None or _sig(caps[r]) == sig]
        op = next((c.op for c in caps.values() if c is not None and _sig(c) == sig), None)
        if not use:
            return [], sorted(left)
        sub = [ks[r] for r in use]
        with self._lock:
            self.captures.update(zip(sub, map(caps.__getitem__, use), strict=True))
        try:
            groups, lost = self._recorder(sig, op).groups(sub, device, stacks)
        finally:
            with self._lock:
                if len(self.captures) == len(sub):  # (only this claim's: one worker's)
                    self.captures.clear()
                else:
                    for k in sub:
                        self.captures.pop(k, None)
        at = np.asarray(use, dtype=np.int64)
        for g in groups:  # positions in ``sub`` to positions in ``ks``
            g.index = at[g.index]
        return groups, sorted(left + [use[r] for r in lost])

    def _capture(self, ks: list[int], device: int) -> tuple[dict[int, Node | None],
                                                           list[int]]:
        """Per position of ``ks`` the op node the callable recorded (None: nothing), and the
        positions whose callable did something else."""
        st, j = self.state, self.slot
        karr = np.asarray(ks, dtype=np.int64)
        seed = st.seed
        # the callable's stream for every output in one compiled call: draw -1 (its coin, as
        # ``random.gate_array``) and draws 0 .. BLOCK - 2 (a random form's parameters, as
        # ``random.uniforms``), bit for bit, where per output they took six SplitMix64
        # rounds in Python
        block = batch_math.op_uniforms(batch_ops.sample_round(seed, karr),
                                       np.array([j & mprandom.MASK], dtype=np.uint64),
                                       batch_ops.BLOCK_WORDS)[0]
        p = self.op.probability
        on = np.ones(len(ks), dtype=bool) if p is None else block[:, 0] < p
        # (the outputs whose coin skips the callable: nothing recorded)
        caps: dict[int, Node | None] = dict.fromkeys(np.flatnonzero(~on).tolist())
        left: list[int] = []
        inputs = st.inputs
        n = len(inputs)
        rows = np.flatnonzero(on)
        if not len(rows):
            return caps, left
        # the shape each output has when the callable gets it: per input and coin pattern of
        # the Operations before it
        coins, params = draw_rules(self.rules[:j], seed, karr[rows])
        before = patterns(self.rules[:j], coins, params)
        # ``Operation.apply`` without its coin (the coins are ``on``): a plain Operation's
        # callable called here with its stream key set (``call_drawn``'s bound call and stream
        # object, per output), the key holding its draws. The stand-ins of one claim share
        # their commit lock (else made per image on first use) and, per shape, their leaf:
        # one thread records them, one at a time, and no value of theirs is read.
        op = self.op
        plain = type(op) is Operation
        fn, args, kwargs, name = op.function, op.args, op.kwargs, op.name
        lock = _thread.RLock()
        by_shape: dict[tuple, Node] = {}
        stand_ins: dict[tuple, Node] = {}  # (by input kind and coin pattern)
        kinds = [(type(x), x.shape, x.dtype.str) for x in inputs]
        keys = mprandom.STREAM_KEYS
        new_key, DrawnKey = tuple.__new__, mprandom.DrawnKey
        previous = keys.key
        # (the claim's draws and parses of the Operation's arguments: ``random.DrawnKey``)
        claim = mprandom.ClaimDraws(block[rows, 1:], args)
        # each output's coin pattern as bytes: slices of the claim's patterns' bytes (a row's
        # ``tobytes``, without a call per output)
        before = np.ascontiguousarray(before)
        every, width = before.tobytes(), before.shape[1] * before.itemsize
        for at, r in enumerate(rows.tolist()):
            k = ks[r]
            i = k % n
            x = inputs[i]
            key = (kinds[i], every[at * width:(at + 1) * width])
            stand_in = stand_ins[key] if key in stand_ins else None
            if stand_in is None:  # (the claim's first output of this input kind and pattern)
                shape, dtype = self._shape_before(i, k, key)
                stand_in = by_shape.get((shape, dtype))
                if stand_in is None:
                    stand_in = by_shape[shape, dtype] = leaf(_UNREADABLE, shape, dtype, device)
                stand_ins[key] = stand_in
            y = x._new_like(stand_in, x._sample)
            y._commit_lock = lock
            try:
                if plain:
                    key = new_key(DrawnKey, (seed, k, j))
                    key.claim, key.at = claim, at
                    keys.key = key
                    try:
                        result = fn(y, *args, **kwargs)
                    finally:
                        keys.key = previous
                    if result is not None and result is not y:
                        use_result(y, result, name)
                else:
                    op.call_drawn(y, seed, k, j)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:  # the per-output path runs it again (and reports it)
                left.append(r)
                continue
            node = y._node
            if node is stand_in:
                caps[r] = None
            elif (isinstance(node.op, OpSpec) and node.inputs == (stand_in,)
                  and not node.gated_off and (not targets.ANY or targets.of(node) is None)):
                caps[r] = node
            else:
                left.append(r)
        return caps, left

    def _shape_before(self, i: int, k: int, key: tuple) -> tuple:
        """(shape, dtype) of input ``i`` after the Operations before the callable for output
        ``k``, whose key is (input ``i``'s kind, the coin pattern of those Operations):
        recorded once per key, on a private copy (nothing runs)."""
        got = self._shapes.get(key)
        if got is None:
            y = self.state.inputs[i].clone()
            for j, op in enumerate(self.state.operations[:self.slot]):
                op.apply(y, self.state.seed, k, j)
            got = self._shapes[key] = (y.shape, y.dtype)
        return got


def make(state: Any) -> CallableRecorder | None:
    """A :class:`CallableRecorder` for the Generator state, or None: not exactly one plain
    callable (user kernel ops keep ``batch_arena``; so do the policies and AugMix, whose drawn
    ops are gated entries of its gathers, ``batch_ops``, ``batch_augmix``, on inputs of one
    size too: a stand-in would send every output the per-output way), another Operation
    that is not a recording method, inputs of several shapes, or inputs with targets."""
    ops = state.operations
    slots = [j for j, op in enumerate(ops) if op.method is None]
    if len(slots) != 1 or isinstance(ops[slots[0]].function, UserOp) or \
            isinstance(ops[slots[0]], ImageOperation):
        return None
    xs = state.inputs
    if not xs or not all(isinstance(x, gpuimage) for x in xs) or \
            any(targets.of(x._node) is not None for x in xs):
        return None
    others = [op for op in ops if op.method is not None]
    rules = rules_for(xs, others) if others else []
    if rules is None:
        return None
    return CallableRecorder(state, slots[0], rules)
