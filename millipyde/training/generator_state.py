"""The state a Generator shares with its worker threads: the window of outputs made ahead.

Output ``k`` (Generator-wide) is input ``k % n`` through the Operations with streams keyed on
``(seed, k, operation index)``; this rank makes the ``k`` with ``k % world == rank``. Workers
claim whole batches where the inputs batch (``graph.exec.batch``), within a window bounded in
outputs and bytes; ``take`` hands them out in order. With callables the claims ramp up (1,
3, 12, 48, ... outputs, :meth:`GeneratorState._want`) and, once the outputs' bytes are known,
grow past a batch to :data:`GROWN` within :data:`AHEAD_BYTES` and a working set of
``batch.BATCH_BYTES`` or a large device's :data:`CLAIM_MEMORY_SHARE` (``_grow``); inputs of
mixed sizes ramp alike up to their batch (:data:`MIXED_BATCH`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import numpy as np

from .. import config, faults, targets
from .. import random as mprandom
from ..array import gpuarray
from ..backend import ACTIVE as runtime  # the active backend
from ..graph.exec import batch
from ..graph.ir.node import leaf, leaves
from ..image import RECORDING_METHODS
from ..pipeline import PipelineError
from ..workers import (
    Cancelled,
    StepError,
    WorkerGroup,
    apply_operations,
    kernels_failed,
    record_operations,
    reraise_interrupt,
    sync,
    workers_per_device,
)
from .batch_targets import sample_targets

#: Bound on the bytes of the outputs a batched Generator makes ahead of ``next()``.
AHEAD_BYTES = 1 << 30


#: outputs a worker makes at once from inputs of several sizes (arena gathers)
MIXED_BATCH = 32

#: Outputs a ramped Generator's claims (callables: 1, 3, 12, 48, ... outputs) grow to past
#: ``batch``, within ``AHEAD_BYTES`` counted at its outputs' own bytes and ``batch.BATCH_BYTES``
#: (``GeneratorState._grow``; 170 at 512 x 512 RGB within ``BATCH_BYTES``, 370 on an H200,
#: ``CLAIM_MEMORY_SHARE``): a recorded batch's work per batch (the draws, the groups, their
#: arrays and launches: ~9 groups of the figure-5.1 recipe a claim, each costing about as much
#: for 100 members as for 500) is then spread over more outputs, and its first outputs still
#: come from the ramp's small claims. 512, not ``batches``' 256: at 32 x 32 a claim of 512
#: made an output in 20% less host time than one of 256 (bench/RESULTS.md, 2026-11-29).
GROWN = 512

#: A grown claim's float64-sized working set may take this share of its device's memory where
#: that is more than ``batch.BATCH_BYTES`` (a device of more than 64 GiB): a claim's draws,
#: groups and launches cost about the same for 170 outputs as for 370, so a large device's
#: 512 x 512 RGB claims grow further (an H200's 139 GiB: 2.2 GiB a claim, 370 outputs) where
#: 1 GiB held them at 170; a device of 64 GiB or less keeps ``BATCH_BYTES``.
CLAIM_MEMORY_SHARE = 64


def _arena_candidate(inputs: list, operations: list) -> bool:
    """Whether an arena gather may record these Operations on these inputs: images, and
    Operations that are op forms or user ops (``batch_arena.make`` decides at first use)."""
    from ..decorators import UserOp
    from ..image import gpuimage
    from ..ops import FORMS

    return all(isinstance(x, gpuimage) and x.ndim in (2, 3) for x in inputs) and all(
        op.method in FORMS if op.method is not None
        else isinstance(op.function, UserOp) and not op.kwargs for op in operations)


def _values(shape: tuple[int, ...]) -> int:
    """Values in an array of ``shape``."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


class _Failed:
    """An output that failed (``results`` and ``ready`` hold a made output as its value
    alone, no tuple per output; a failure as this): rank output ``k``'s error, the device
    that met it."""

    __slots__ = ("k", "err", "device")

    def __init__(self, k: int, err: BaseException, device: int) -> None:
        self.k, self.err, self.device = k, err, device


def step_failure(err: StepError, k: int, where: str, device: int) -> PipelineError:
    """The PipelineError of an Operation's failure on output ``k`` (``where``: its input or
    sample), chained to the Operation's own error."""
    out = PipelineError(f"Generator: {err.what} failed on output {k} {where} on device "
                        f"{device}: {type(err.cause).__name__}: {err.cause}")
    out.__cause__ = err.cause
    return out


class GeneratorState:
    """What the workers share with the Generator (kept apart so ``__del__`` can run)."""

    #: a batch's recording may plan the templates of the batches after it (its outputs ahead
    #: are outputs of this state)
    plan_ahead = True

    def __init__(self, inputs: list[gpuarray], operations: list, device: int, seed: int,
                 outputs: int | None, return_to_host: bool, rank: int = 0,
                 world: int = 1, sampler: Any = None, start: int | None = None) -> None:
        self.inputs = inputs
        self.operations = operations
        self.device = device
        self.seed = seed
        self.rank, self.world = rank, world
        # which input output k shows (``data.EpochSampler``; None: input k % n), and the
        # output index of this rank's first output (the start of an epoch)
        self.sampler = sampler
        self.start_k = rank if start is None else int(start)
        # this rank's share of the outputs: global output k belongs to rank k % world
        self.outputs = None if outputs is None else len(range(rank, outputs, world))
        self.return_to_host = return_to_host
        # same-shape inputs: a worker makes `batch` outputs at once, one launch per kernel
        self.batch = batch.batch_size([x._node for x in inputs]) if inputs else 1
        # inputs of several sizes whose Operations an arena gather may record: a worker makes
        # up to MIXED_BATCH outputs at once as arena gathers (``_make_arena``), gates as data,
        # so every coin pattern shares one compiled kernel
        self.mixed = self.batch == 1 and len(inputs) > 1 and _arena_candidate(inputs,
                                                                              operations)
        if self.mixed:
            self.batch = min(MIXED_BATCH, config.generator_batch(batch.BATCH))
            self.mixed = self.batch > 1
        self.workers = workers_per_device(batched=self.batch > 1)
        # a mixed chunk's first outputs may be made one by one (ramped like callables)
        self.ramp = self.mixed or any(op.method not in RECORDING_METHODS for op in operations)
        self.depth = 2 * self.workers  # outputs made ahead of next(): bounded memory
        if self.batch > 1:
            # a worker starts the next batch while next() hands out the last one, within
            # AHEAD_BYTES (an output is counted at 8 bytes per input value: float64 at most)
            per = 8 * max(1, max(x.size for x in inputs))  # (empty inputs: a byte each)
            self.depth = max(self.depth, min((self.workers + 1) * self.batch,
                                             max(self.batch, AHEAD_BYTES // per)))
        # a ramped claim's most outputs: ``batch``, grown to ``GROWN`` once the outputs' bytes
        # are known (``_grow``); the largest output's bytes seen so far, and values
        self.grown = self.batch
        self.out_bytes = 0
        # the most values of an input or output seen (a claim's working set)
        self.out_values = max((x.size for x in inputs), default=1)
        self.depth0 = self.depth
        self.stacks: dict[int, dict] = {}  # per device: the inputs stacked there
        # per device: the input values (nodes) those stacks hold; a Pipeline may commit new
        # values to the inputs meanwhile, and recorded batches must read the stacked ones
        self.stacked_nodes: dict[int, list] = {}
        self.stack_lock = threading.Lock()
        self.cond = threading.Condition()
        self.claimed = 0  # next output index a worker will make
        self.tickets = 0  # next output index a next() call will return
        # output index -> its value, or its :class:`_Failed`: handed on to ``ready`` as it is
        self.results: dict[int, Any] = {}
        # outputs that ``take`` moved out of ``results`` with the one it handed out (the made
        # outputs right after it): the next calls hand them out in order without the lock;
        # they still count as made ahead (``_room``)
        self.ready: deque[Any] = deque()
        # how short ``ready`` gets before the next claim has room (``_room_at``): ``take``
        # pops ``ready`` without the lock and wakes the workers there, so a worker makes the
        # next claim while the made ones are handed out (-1: nothing to wake)
        self.wake_at = -1
        self.stopped = False
        self.crashes: list[tuple[BaseException, int]] = []
        self.group: WorkerGroup | None = None
        #: whether :meth:`start` has started the workers (``next()`` calls it until then; an
        #: attribute, not a property over ``group``: read on every output)
        self.started = False

    #: ``next()`` compiles its first outputs' kernels ahead (``precompile.before_outputs``)
    #: on this state: in-memory inputs, its own workers
    compiles_ahead = True

    def twin(self) -> GeneratorState:
        """A fresh state over the same inputs, Operations, seed, sampler and outputs (nothing
        made or cached shared): what compiling ahead records its outputs on."""
        return GeneratorState(self.inputs, self.operations, self.device, self.seed, self.outputs,
                              False, self.rank, self.world, self.sampler, self.start_k)

    def start(self) -> None:
        if self.group is not None:  # (two threads' first next() calls may both get here)
            return
        with self.cond:  # (two threads' first next() calls start one group)
            if self.group is None:
                group = WorkerGroup("generator", self._worker, self._crash)
                group.start([self.device], self.workers)
                self.group = group  # its threads all started: ``stop`` may join them
                self.started = True

    def _crash(self, err: BaseException, device: int) -> None:
        # Only errors outside _make land here (a stream that cannot be made, say).
        with self.cond:
            self.crashes.append((err, device))
            self.cond.notify_all()

    def global_index(self, j: int) -> int:
        """The Generator-wide output index of this rank's ``j``-th output."""
        return self.start_k + self.world * j

    def for_batch(self, inputs: list[gpuarray], ks: Any) -> BatchState:
        """A state over some decoded samples of a streamed batch: output ``ks[r]`` shows
        ``inputs[r]`` (:class:`BatchState`)."""
        return BatchState(self, inputs, ks)

    def input_index(self, k: Any) -> Any:
        """The input output ``k`` shows (an int, or an int64 array for an array of ``k``)."""
        if self.sampler is not None:
            return self.sampler.sample_of(k)
        return k % len(self.inputs)

    def _want(self) -> int:
        """Outputs the next claim takes: a whole batch, or what is left of ``outputs``.

        With Operations that run Python (callables), the first claims ramp up (1, 3, 12,
        48, ... outputs: three times the outputs claimed so far) so the first ``next()`` does
        not wait for a whole batch of them. (Doubling, 1, 1, 2, 4, .., took nine claims to
        reach 256 outputs where this takes five: each claim's draws, groups and launches
        cost about as much for one output as for a hundred.)
        """
        n = min(self.grown, max(1, 3 * self.claimed)) if self.ramp else self.batch
        if self.outputs is None:
            return n
        return max(1, min(n, self.outputs - self.claimed))

    def _room(self) -> bool:
        """Whether the window has room for the next claim: outputs made ahead of ``next()``
        (the ones it has not handed out, ``ready`` among them) stay within ``depth``."""
        return len(self.ready) <= self._room_at()

    def _room_at(self) -> int:
        """The length ``ready`` must fall to for the next claim to have room (``_room``; held
        until ``tickets``, ``claimed`` or ``depth`` move, all under the lock)."""
        return self.tickets + self.depth - self.claimed - self._want()

    def _wake(self) -> None:
        """Wake the workers if the window has room (``take`` popped ``ready`` down to
        ``wake_at`` without the lock); else note the length that will (a claim since)."""
        with self.cond:
            if self._room():
                self.wake_at = -1
                self.cond.notify_all()
            else:
                self.wake_at = self._room_at()

    def _grow(self, made: list[tuple[Any, Any]]) -> None:
        """Let a ramped claim grow past ``batch`` (``GROWN``) as far as ``AHEAD_BYTES`` allows
        ``workers + 1`` claims of outputs as large as the largest made so far (its real
        shape and dtype; ``depth`` counts 8 bytes per input value, before any is made), and
        ``batch.BATCH_BYTES`` (a large device's share, ``_claim_bytes``) one claim's
        float64-sized working set (inputs or outputs, whichever hold more values)."""
        big, most = self.out_bytes, self.out_values
        seen: dict[tuple, Any] = {}  # shape -> dtype of the outputs counted
        for value, _ in made:
            # (an ndarray, return_to_host; or no value: an error; the test without a call)
            node = None if value is None or type(value) is np.ndarray else value._node
            if node is None:
                v, b = (0, 0) if value is None else (value.size, value.nbytes)
            elif node.shape in seen and seen[node.shape] is node.dtype:  # (counted: a
                continue  # group's outputs share one shape and dtype; groups interleave)
            else:
                seen[node.shape] = node.dtype
                v = _values(node.shape)
                b = node.dtype.itemsize * v
            big, most = max(big, b), max(most, v)
        if (big, most) == (self.out_bytes, self.out_values) or big <= 0:
            return
        self.out_bytes, self.out_values = big, most
        self.grown = max(self.batch, min(GROWN, AHEAD_BYTES // ((self.workers + 1) * big),
                                         self._claim_bytes() // (8 * most)))
        self.depth = max(self.depth0, (self.workers + 1) * self.grown)

    def _claim_bytes(self) -> int:
        """The bound on a grown claim's float64-sized working set: ``batch.BATCH_BYTES``, or
        ``1 / CLAIM_MEMORY_SHARE`` of the Generator's device's memory where that is more."""
        mem = runtime.memory_bytes(self.device) if isinstance(self.device, int) else None
        return max(batch.BATCH_BYTES, (mem or 0) // CLAIM_MEMORY_SHARE)

    def _worker(self, device: int, stream: Any) -> None:
        while True:
            with self.cond:
                while not self.stopped and not self._room() and (
                        self.outputs is None or self.claimed < self.outputs):
                    # (``take`` wakes it once ``ready`` is this short, or at its next lock)
                    self.wake_at = self._room_at()
                    self.cond.wait()
                if self.stopped or (self.outputs is not None and self.claimed >= self.outputs):
                    return
                k0, n = self.claimed, self._want()
                self.claimed += n
                # (for the other workers: a stale value would only wake them once for nothing)
                self.wake_at = self._room_at()
            try:
                if self.batch > 1:
                    made = self._make_batch(k0, n, device, stream)
                else:
                    made = [(self._make(k0, device, stream), None)]
            except Cancelled:
                return
            except BaseException as e:  # reported by next() for output k0
                made = [(None, e)]
            with self.cond:
                if not self.stopped:
                    results = self.results
                    for i, (value, err) in enumerate(made, k0):
                        results[i] = value if err is None else _Failed(i, err, device)
                    if self.ramp and not self.mixed and self.batch > 1:
                        self._grow(made)
                self.cond.notify_all()
            failed = made[-1][1] is not None
            # (the claim's (value, error) pairs freed now, not when the next claim replaces
            # them: until then each is a live young object that the collector's passes count
            # and traverse)
            del made
            if failed:
                return

    def _make(self, j: int, device: int, stream: Any) -> Any:
        k = self.global_index(j)
        src = self.inputs[self.input_index(k)]
        y = src.clone()  # this thread targets `device`, so the copy is made there
        apply_operations(y, self.operations, self.seed, k, device, stream, lambda: self.stopped)
        if self.return_to_host:
            return np.asarray(y)
        return y

    def _make_batch(self, j0: int, n: int, device: int, stream: Any) -> list[tuple[Any, Any]]:
        """This rank's outputs ``j0 .. j0 + n - 1`` (value, error) in order, up to the first
        error (:meth:`make_many`)."""
        # (``global_index`` of each j, as one range)
        return self.make_many(list(range(self.global_index(j0), self.global_index(j0 + n),
                                         self.world)), device, stream, self.return_to_host)

    def make_many(self, ks: list[int], device: int, stream: Any, to_host: bool = False,
                  recorded: bool = True) -> list[tuple[Any, Any]]:
        """Global outputs ``ks`` (value, error) in order, up to the first error.

        Recorded at once where the Operations allow it and no fault is armed
        (``batch_record``, ``recorded``); else each output records its Operations exactly as
        ``_make`` does (same sample and op indices, so the same values), those its coins
        skipped as gated off where they have an identity form (one group for every coin
        pattern); the kernels then run batched (``batch.materialize_batch``).
        """
        if self.mixed:
            from .batches import arena_recorder

            rec = arena_recorder(self) if recorded else None
            if rec is not None:
                return self._make_arena(rec, ks, device, stream, to_host)
        if self.batch <= 1 or self.mixed:
            return self._make_each(ks, device, stream, to_host)
        stacks = self.stacks_on(device, stream)
        # armed faults count checks per output and operation: only the per-output path has them
        if recorded and not faults.ARMED:
            from .batches import recorder

            rec = recorder(self)
            if rec is not None:
                return self._make_recorded(rec, ks, device, stream, to_host, stacks)
        ys, late = [], None
        for k in ks:
            y = self.inputs[self.input_index(k)].clone()
            try:
                record_operations(y, self.operations, self.seed, k, device,
                                  lambda: self.stopped, batch.LIFT_GATES)
            except StepError as err:
                late = err
                break
            ys.append(y)
        if self.stopped:
            raise Cancelled()
        try:
            errors = batch.materialize_batch(ys, stacks)
            sync(stream)
        except Exception as err:
            errors = [err] * len(ys)
        made: list[tuple[Any, Any]] = []
        for y, err in zip(ys, errors, strict=True):
            if err is not None:
                made.append((None, kernels_failed(self.operations, err)))
                return made
            try:
                made.append((np.asarray(y) if to_host else y, None))
            except Exception as e:
                made.append((None, e))
                return made
        if late is not None:
            made.append((None, late))
        return made

    def stacks_on(self, device: int, stream: Any) -> dict:
        """The inputs stacked on ``device`` (``batch.stack_inputs``), made once per device."""
        with self.stack_lock:
            stacks = self.stacks.get(device)
            if stacks is None:
                nodes = [x._node for x in self.inputs]
                stacks = self.stacks[device] = batch.stack_inputs(nodes, device)
                self.stacked_nodes[device] = nodes
                sync(stream)  # other workers' streams read the stack
        return stacks

    def _make_recorded(self, rec: Any, ks: list[int], device: int, stream: Any,
                       to_host: bool, stacks: dict) -> list[tuple[Any, Any]]:
        """:meth:`make_many` through ``batch_record``: outputs are views of the groups'
        batch buffers; outputs it leaves are made one by one, as before."""
        from .batch_record import RecordError

        try:
            groups, left = rec.groups(ks, device, stacks)
        except RecordError as err:
            return self.make_many(ks[:ks.index(err.k)], device, stream, to_host, False) + \
                [(None, err.err)]
        pk = batch.Pack(len(ks))
        for g in groups:
            g.pack(pk)
        values: list[Any] = [None] * len(ks)
        try:
            pk.upload(device)
            for g in groups:
                node = g.kernels()[-1].output
                for r, out in zip(g.index.tolist(), leaves(runtime.members(g.launch(pk)),
                                                           node.shape, node.dtype, device),
                                  strict=True):
                    values[r] = out
            sync(stream)
        except Exception as err:
            return [(None, kernels_failed(self.operations, err))]
        # (none left, the usual claim: no per-output path entered, no second sync)
        made = dict(zip(left, self.make_many([ks[r] for r in left], device, stream, False,
                                             False), strict=False)) if left else {}
        return self._outputs(ks, values, made, device, to_host)

    def _outputs(self, ks: list[int], values: list[Any], made: dict[int, tuple[Any, Any]],
                 device: int, to_host: bool) -> list[tuple[Any, Any]]:
        """The (output, error) pairs of a recorded or arena :meth:`make_many`: ``values[r]``
        the value made for output ``ks[r]`` in a batch, else ``made[r]`` its own; up to the
        first failure."""
        out: list[tuple[Any, Any]] = []
        inputs = self.inputs
        at = self.input_index(np.asarray(ks, dtype=np.int64)).tolist()
        # the batched outputs' sample indices, in order, under one lock
        batched = len(values) - values.count(None)
        sample = mprandom.sample_indices(batched)
        if batched == len(values) and not to_host and not targets.ANY:
            # (the usual claim: every output made in a batch, no targets to attach)
            return [(inputs[i]._new_like(v, s), None)
                    for s, i, v in zip(range(sample, sample + batched), at, values, strict=True)]
        for r, k in enumerate(ks):
            if values[r] is None:
                y, err = made.get(r, (None, None))
                if err is not None or y is None:
                    out.append((None, err or RuntimeError(f"output {k} was not made")))
                    return out
            else:
                src = inputs[at[r]]
                y = src._new_like(values[r], sample)
                sample += 1
                if not to_host and targets.ANY and targets.of(src._node) is not None:
                    # no graph carried them here: the output's targets by recording its
                    # operations once more, lazily (no kernel runs; ``batch_targets``)
                    (t,) = sample_targets(self, [k], device, tuple(y.shape[:2]))
                    targets.attach(y._node, t)
            out.append((np.asarray(y) if to_host else y, None))
        return out

    def _make_arena(self, rec: Any, ks: list[int], device: int, stream: Any,
                    to_host: bool) -> list[tuple[Any, Any]]:
        """:meth:`make_many` of inputs of several sizes as arena gathers (``batch_arena``):
        outputs of one size share a launch and a buffer (their views); the outputs the arena
        leaves (a warp clip, a crop outside the image) are made one by one, as before. Inputs
        with targets get theirs as ``Generator.batches`` computes them (``batch_targets``)."""
        from . import batch_arena

        values: list[Any] = [None] * len(ks)
        try:
            launches, left = rec.record(ks)
            if launches:
                outs, keep = batch_arena.native(launches, rec.arena(device), device)
                for L, buf in zip(launches, outs, strict=True):
                    for r, view in zip(L.pos.tolist(), runtime.members(buf), strict=True):
                        values[r] = leaf(runtime.reshape(view, L.shape), L.shape, L.dtype,
                                         device)
                sync(stream)
                del keep
        except Exception as err:
            return [(None, kernels_failed(self.operations, err))]
        made = dict(zip(left, self._make_each([ks[r] for r in left], device, stream, False),
                        strict=False))
        return self._outputs(ks, values, made, device, to_host)

    def _make_each(self, ks: list[int], device: int, stream: Any,
                   to_host: bool) -> list[tuple[Any, Any]]:
        """``make_many`` one output at a time (inputs of several shapes)."""
        made: list[tuple[Any, Any]] = []
        for k in ks:
            y = self.inputs[self.input_index(k)].clone()
            try:
                apply_operations(y, self.operations, self.seed, k, device, stream,
                                 lambda: self.stopped)
                made.append((np.asarray(y) if to_host else y, None))
            except Cancelled:
                raise
            except Exception as err:
                made.append((None, err))
                break
        return made

    def take(self) -> Any:
        """The next output (in order), or its error raised (the state then stops).

        Taking output ``k`` from ``results`` also moves the made outputs right after it to
        ``ready``: the calls after it pop them there without the lock (one lock a claim, not
        an output), and take it once more only where a pop leaves the window room for a worker
        waiting on it (``wake_at``), so the next claim is made while these are handed out."""
        ready = self.ready
        while ready and not self.stopped:
            try:
                value = ready.popleft()
            except IndexError:  # another thread took the last one
                break
            if len(ready) <= self.wake_at:
                # the window has room again: a worker waiting for it makes the next claim
                # while these are handed out (a worker that set ``wake_at`` just after this
                # pop is woken by the next one, or by the next take under the lock)
                self._wake()
            return value if type(value) is not _Failed else self._handed(value)
        with self.cond:
            if self.stopped:
                raise StopIteration
            if ready:  # (filled by another thread meanwhile)
                value = ready.popleft()
                if self._room():
                    self.cond.notify_all()
            else:
                if self.outputs is not None and self.tickets >= self.outputs:
                    raise StopIteration
                k = self.tickets
                self.tickets += 1
                if self._room():
                    # the window now has room for a worker's next claim (waking them on every
                    # output instead costs each wake-up a turn of the GIL)
                    self.cond.notify_all()
                while k not in self.results:
                    if self.stopped:
                        raise StopIteration
                    if self.crashes or (self.group is not None and not self.group.alive()):
                        err, device = self.crashes[0] if self.crashes else (None, -1)
                        self.results[k] = _Failed(k, err or RuntimeError("workers exited"),
                                                  device)
                        break
                    self.cond.wait(0.5)
                value = self.results.pop(k)
                results, j = self.results, self.tickets
                while j in results:
                    j += 1
                # (moved by ``map``: no Python call per output)
                ready.extend(map(results.pop, range(self.tickets, j)))
                self.tickets = j
                self.wake_at = self._room_at()  # (``tickets`` moved: the same room)
        return value if type(value) is not _Failed else self._handed(value)

    def _handed(self, failed: _Failed) -> Any:
        """Raise the error of a failed output as ``next()`` reports it (the state stops)."""
        self.stop()
        raise self.failure(self.global_index(failed.k), failed.err, failed.device)

    def failure(self, k: int, err: BaseException, device: int) -> PipelineError:
        """The PipelineError that reports ``err`` for global output ``k`` (chained); a
        KeyboardInterrupt in a worker is raised here as a KeyboardInterrupt."""
        i = self.input_index(k) if self.inputs else -1
        reraise_interrupt(getattr(err, "cause", err), f"Generator output {k} (input {i})")
        if isinstance(err, StepError):
            return step_failure(err, k, f"(input {i})", device)
        out = PipelineError(f"Generator worker on device {device} failed on output {k} "
                            f"(input {i}): {err!r}")
        out.__cause__ = err
        return out

    def stop(self, join: bool = True) -> None:
        with self.cond:
            self.stopped = True
            self.results.clear()
            self.ready.clear()
            self.cond.notify_all()
        if join and self.group is not None and threading.current_thread() not in \
                self.group.threads:
            # Workers check `stopped` between operations; a hung one is abandoned (daemon).
            self.group.join(time.monotonic() + 30.0)


class BatchState(GeneratorState):
    """Samples of one decoded batch of a streamed Generator as in-memory inputs, made by the
    machinery above: output ``ks[r]`` shows ``inputs[r]``, with its own draws."""

    plan_ahead = False  # the outputs after this batch are not its own
    compiles_ahead = False

    def __init__(self, parent: GeneratorState, inputs: list[gpuarray], ks: Any) -> None:
        super().__init__(inputs, parent.operations, parent.device, parent.seed, None,
                         parent.return_to_host, parent.rank, parent.world)
        karr = np.asarray(ks, dtype=np.int64).reshape(-1)
        order = np.argsort(karr, kind="stable")
        self._sorted, self._rows = karr[order], order
        # inputs decoded as regions of their samples (``data.region``; ``images_of`` marks
        # them): (n, 4) per input its region's place, for the arena recorder's first op
        marks = [x.__dict__.get("_region") for x in inputs]
        self.region = None if all(m is None for m in marks) else np.array(
            [(0, 0, *x.shape[:2]) if m is None else m for x, m in zip(inputs, marks,
                                                                      strict=True)],
            dtype=np.int64)

    def input_index(self, k: Any) -> Any:
        at = self._rows[np.searchsorted(self._sorted, k)]
        return int(at) if np.ndim(at) == 0 else at


class StreamState(GeneratorState):
    """``next()`` over a streamed source: chunks of ``CHUNK`` outputs, read and decoded ahead
    by a Loader (``batch_stream``), each made as a :class:`BatchState`."""

    CHUNK = 32
    compiles_ahead = False  # (its samples' shapes are known once decoded)

    def __init__(self, stream: Any, operations: list, device: int, seed: int,
                 outputs: int | None, return_to_host: bool, rank: int, world: int,
                 start: int) -> None:
        super().__init__([], operations, device, seed, outputs, return_to_host, rank, world,
                         stream.sampler, start)
        self.stream = stream
        self.batch = self.CHUNK
        self.workers = 1  # one decode thread feeds it; outputs are made in order
        self.ramp = False
        self.depth = 2 * self.CHUNK
        self.loader: Any = None

    def _plan(self, b: int) -> Any:
        j0 = b * self.CHUNK
        n = self.CHUNK if self.outputs is None else min(self.CHUNK, self.outputs - j0)
        if n <= 0:
            return None
        return self.start_k + self.world * (j0 + np.arange(n, dtype=np.int64))

    def start(self) -> None:
        if self.loader is None:
            self.loader = self.stream.loader(self._plan, self.device)
        super().start()

    def _make_batch(self, j0: int, n: int, device: int, stream: Any) -> list[tuple[Any, Any]]:
        from ..data.loader import wait_ready
        from .batch_stream import images_of

        db = self.loader.get(j0 // self.CHUNK)
        if db is None:
            raise Cancelled()
        wait_ready(db, stream)
        ks = db.ks.tolist()
        part = self.for_batch(images_of(db, list(range(len(ks))), device), ks)
        return part.make_many(ks, device, stream, self.return_to_host)

    def take(self) -> Any:
        try:
            return super().take()
        finally:
            self.stream.bad.warn_pending(stacklevel=4)

    def failure(self, k: int, err: BaseException, device: int) -> BaseException:
        from ..data.loader import BadSampleError

        if isinstance(err, BadSampleError):  # strict=True, or nothing could refill
            return err
        name = self.stream.source.name(int(self.sampler.sample_of(k)))
        reraise_interrupt(getattr(err, "cause", err), f"Generator output {k} ({name})")
        if isinstance(err, StepError):
            return step_failure(err, k, f"(sample {name!r})", device)
        out = PipelineError(f"Generator failed on output {k} (sample {name!r}) on device "
                            f"{device}: {type(err).__name__}: {err}")
        out.__cause__ = err
        return out

    def stop(self, join: bool = True) -> None:
        super().stop(join)
        if self.loader is not None:
            self.loader.close(join)
