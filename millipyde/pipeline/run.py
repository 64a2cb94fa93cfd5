"""One run of a chain of connected Pipelines: work units, device workers, commits, rollback.

Each stage's inputs become work units: chunks of inputs that record as one batch
(``pipeline.chunks``: inputs of one type, device, shape and dtype, Operations that are
recording methods) and single inputs that go the per-input way (callables, pending work,
anything a chunk cannot record). Units wait in one queue per device of the stage: a unit
whose inputs live on one of the stage's devices goes to that device's queue, and a worker
whose queue is empty takes units from the back of the longest other one (its inputs then come
by peer copies). On GPUs a stage of recording methods has one worker a device: it queues one
chunk's copies and kernels, then waits for the chunk before it and commits it, so the host
records a chunk while the device runs the last one. Other stages keep several workers a
device (``workers.workers_per_device``).

Commits are atomic per input. A chunk reads its inputs' values when it starts; when its
kernels are done, each input takes its output under its commit lock (``locks.py``; an input
with none, under ``member.LOCK``, which locks are made under) only if it still holds the
value the chunk read; an input something else changed meanwhile is processed again, per
input, from its new value. A single input is processed under its commit
lock from reading to binding, as before. Either way every update lands exactly once, in some
serial order, and a thread holds at most one commit lock at a time. An input is untouched or
fully processed whatever fails: a failed chunk binds nothing, and a failed run restores every
input it bound that the last stage did not finish.

Connected pipelines: each committed chunk or input is handed to the next stage at once (its
position there is after that stage's own inputs), where it is grouped again.
"""

from __future__ import annotations

import collections
import contextlib
import operator
import threading
import time
from typing import Any

from .. import devices, targets
from .. import random as mprandom
from ..array import bind_members, still_holds, values_of
from ..backend import ACTIVE as runtime  # the active backend
from ..graph.ir.member import Member
from ..locks import commit_lock
from ..workers import (
    STREAMS,
    Cancelled,
    FairLock,
    PipelineError,
    StepError,
    WorkerGroup,
    apply_operations,
    kernels_failed,
    private_handle,
    reraise_interrupt,
    workers_per_device,
)
from .chunks import ChunkFailure, Launched, StageChunks, chunk_sizes, group_key
from .processes import ProcessChunks

_STOP = object()


class _Unit:
    """Work of one stage: inputs at their positions; ``key`` their group (None: one input,
    per input); ``home`` the device their values live on; ``nodes`` the values they were
    grouped by (a value unchanged since keeps its group: no key to compute again)."""

    __slots__ = ("positions", "items", "key", "home", "nodes")

    def __init__(self, positions: list[int], items: list[Any], key: tuple | None,
                 home: int | None, nodes: list[Any] | None = None) -> None:
        self.positions, self.items, self.key, self.home = positions, items, key, home
        self.nodes = nodes


def _one_group(xs: list[Any], nodes: list[Any]) -> tuple | None:
    """The group key of every input where all of ``xs`` (values ``nodes``) are of one group
    the way :meth:`Run.units`'s loop finds it, else None (the loop decides). The common case
    checked with the least work an input (a fifth of the loop's): one type of input, and
    stored values with buffers, of one device, shape and dtype (compared by identity first:
    equal ones are mostly the same objects) where no value has targets; or members whose
    batches all give one key."""
    if not xs or len(set(map(type, xs))) != 1:
        return None
    first = nodes[0]
    kind = type(first)
    if kind is Member:  # (a member's key is its batch's: one lookup a batch)
        if set(map(type, nodes)) != {Member}:
            return None
        reps = dict(zip(map(_BATCH, nodes), nodes, strict=True))  # (a member of each batch)
        keys = {group_key(xs[0], m) for m in reps.values()}
        return keys.pop() if len(keys) == 1 else None
    if targets.ANY:
        return None
    dev, shape, dtype = first.device, first.shape, first.dtype
    for n in nodes:
        if type(n) is not kind or n.buffer is None or n.device != dev or (
                n.shape is not shape and n.shape != shape) or (
                n.dtype is not dtype and n.dtype != dtype):
            return None
    return group_key(xs[0], first)


_BATCH = operator.attrgetter("batch")


class _StageQueue:
    """Units of one stage, a queue per device; empty queues take from the longest other."""

    def __init__(self, device_list: list[int], cancel: threading.Event) -> None:
        self.queues: dict[int, collections.deque] = {d: collections.deque()
                                                     for d in device_list}
        self.cond = threading.Condition()
        self.cancel = cancel
        self.closed = False
        self._next = 0

    def put(self, units: list[_Unit]) -> None:
        with self.cond:
            order = list(self.queues)
            for u in units:
                q = self.queues.get(u.home)
                if q is None:  # inputs on a device this stage does not use: round robin
                    q = self.queues[order[self._next % len(order)]]
                    self._next += 1
                q.append(u)
            self.cond.notify_all()

    def take(self, device: int, block: bool) -> Any:
        """The next unit for ``device``'s worker; ``_STOP`` when the stage is over or
        cancelled; None when nothing is there now and not ``block``."""
        with self.cond:
            while True:
                if self.cancel.is_set():
                    return _STOP
                own = self.queues[device]
                if own:
                    return own.popleft()
                # an idle worker takes from the back of the longest other queue, but leaves a
                # busy device its next unit (no peer copies for work its owner is about to do)
                other = max(self.queues.values(), key=len)
                if len(other) > 1:
                    return other.pop()
                if self.closed:
                    return _STOP
                if not block:
                    return None
                self.cond.wait()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


class Run:
    """One execution of a chain of pipelines (stage s = chain[s]; ``device_lists[s]`` its
    devices)."""

    def __init__(self, chain: list[Any], device_lists: list[list[int]],
                 items: list[list[Any]], own: list[int]) -> None:
        self.chain = chain
        self.devices = device_lists
        self.seeds = [p.seed if p.seed is not None else mprandom.global_seed() for p in chain]
        # stage s processes its own inputs, then the previous stage's items in their order
        self.items = items
        self.own = own
        # each input's value as the run starts, read once: grouped from (``execute``) and
        # restored by a rollback (:meth:`_original`; a one-stage run, whose rollback restores
        # none, drops it once its units are queued)
        self.read = [values_of(stage) for stage in items]
        self.done: set[int] = set()
        # what this run last bound to each input (rollback restores only its own commits) and
        # the inputs one of its workers holds the commit lock of
        self.committed: dict[int, Any] = {}
        self.claimed: set[int] = set()
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.errors: list[tuple[int, int, int, BaseException, tuple | None]] = []
        self.chunks = [StageChunks(p.operations, seed)
                       for p, seed in zip(chain, self.seeds, strict=True)]
        # stages whose chunks go to the devices' worker processes (``processes``); None: here
        self.procs = [ProcessChunks.of(c) if p.uses_processes() else None
                      for p, c in zip(chain, self.chunks, strict=True)]
        busy = len({d for stage in self.devices for d in stage})
        per = workers_per_device(busy)
        # one worker a device records chunks best (more only contend for the GIL); stages
        # that work per input keep the per-input count
        self.per_device = [1 if c.enabled and (runtime.caps.launches_on_streams or
                                               w is not None) else per
                           for c, w in zip(self.chunks, self.procs, strict=True)]
        self.queues = [_StageQueue(d, self.cancel) for d in self.devices]
        # The host work of recording workers (record and launch a chunk, commit one), one
        # worker at a time: a worker's driver calls release the GIL, and with several devices'
        # workers waiting for it every release handed it to another thread and cost the
        # caller a wait to get it back (a chunk's launch took twice its one-device time on
        # four GPUs: bench/RESULTS.md). Waiting for a chunk's kernels is outside it. Taken in
        # turn (``FairLock``): a worker launching its next chunk queues behind another device's
        # worker that waits to launch its first.
        # (a stage whose chunks go to worker processes does little host work here: none)
        self.host = [FairLock() if c.enabled and runtime.caps.launches_on_streams
                     and len(d) > 1 and w is None else contextlib.nullcontext()
                     for c, d, w in zip(self.chunks, self.devices, self.procs, strict=True)]
        self.window = [1 if w is None else w.window for w in self.procs]
        self.alive = [n * len(d) for n, d in zip(self.per_device, self.devices, strict=True)]

    # -- units ----------------------------------------------------------------------------
    def units(self, stage: int, positions: list[int], xs: list[Any],
              values: list[Any] | None = None) -> list[_Unit]:
        """``xs`` (at ``positions`` of ``stage``) as chunks of their groups and single inputs;
        ``values``: their values if just read (``array.values_of``), else read here."""
        chunks = self.chunks[stage]
        devs = self.devices[stage]
        groups: dict[tuple, tuple[list[int], list[Any], list[Any]]] = {}
        singles: list[_Unit] = []
        # (an input bound to an unread member is grouped, checked and stacked by the member:
        # its node is made only where it is read.) Inputs come in runs of one group (rows of
        # one batch, clones of one image): the key of a member of the batch the input before
        # was keyed by is that input's, and a key equal to the last one is that group's, so
        # only an input starting a new run pays the group lookup and ``takes``. A stored node
        # (a fresh image) of the last key's type, device, shape and dtype is ``group_key``'s
        # case written out: that key's, with no call.
        # A run of inputs of one group is added to its lists by slices where it ends, not an
        # input at a time.
        nodes = values_of(xs) if values is None else values
        if len(nodes) != len(xs) or len(positions) != len(xs):
            raise ValueError("units: positions, inputs and values differ in length")
        key = _one_group(xs, nodes)
        if key is not None and chunks.takes(key, xs[0]):  # (the loop's result, in C loops)
            return self._cut({key: (positions, xs, nodes)}, devs)
        got: tuple[list[int], list[Any], list[Any]] | None = None
        last_key: tuple | None = None
        last_batch: Any = None
        last_type: type | None = None
        last_dev = last_shape = last_dtype = None
        start = 0  # the first input of the run ``got`` takes
        for i, node in enumerate(nodes):
            x = xs[i]
            if got is None or type(x) is not last_type or (
                    node.batch is not last_batch if type(node) is Member else
                    last_key is None or node.buffer is None or node.device != last_dev or
                    node.dtype is not last_dtype or (node.shape is not last_shape and
                                                     node.shape != last_shape) or targets.ANY):
                key = group_key(x, node)
                if key is None or key != last_key:
                    if got is not None:  # (the run before ends here)
                        got[0].extend(positions[start:i])
                        got[1].extend(xs[start:i])
                        got[2].extend(nodes[start:i])
                    last_key = last_batch = None
                    if not chunks.takes(key, x):
                        got = None
                        singles.append(_Unit([positions[i]], [x], None, node.device))
                        continue
                    got = groups.get(key)
                    if got is None:
                        got = groups[key] = ([], [], [])
                    start = i
                    last_key = key
                    last_dev, last_shape, last_dtype = key[1:]
                last_batch = node.batch if type(node) is Member else None
                last_type = type(x)
        if got is not None:
            got[0].extend(positions[start:])
            got[1].extend(xs[start:])
            got[2].extend(nodes[start:])
        return self._cut(groups, devs) + singles

    @staticmethod
    def _cut(groups: dict[tuple, tuple[list[int], list[Any], list[Any]]],
             devs: list[int]) -> list[_Unit]:
        """Each group's (positions, inputs, values) cut into chunks (``chunk_sizes``)."""
        homes = {key[1] for key in groups if key[1] in devs}
        spread = max(1, len(devs) // max(1, len(homes)))
        out: list[_Unit] = []
        for key, (ps, gx, gn) in groups.items():
            at = 0
            for n in chunk_sizes(len(ps), key[2], spread):
                out.append(_Unit(ps[at:at + n], gx[at:at + n], key, key[1], gn[at:at + n]))
                at += n
        return out

    # -- workers --------------------------------------------------------------------------
    def _worker(self, stage: int, device: int, stream: Any) -> None:
        q = self.queues[stage]
        copy: list[Any] = []  # the copy stream of peer copies, acquired on first use
        # chunks launched and not yet committed, oldest first: one here (the next chunk is
        # launched before the last is waited for), ``window`` for a worker process's
        # (``processes.WINDOW``: it records and launches the next ones meanwhile)
        inflight: collections.deque[tuple[_Unit, Launched]] = collections.deque()
        window = self.window[stage]
        try:
            while True:
                unit = q.take(device, block=not inflight)
                if unit is None:  # nothing queued now: finish the oldest chunk in flight
                    self._finish(stage, *inflight.popleft(), device, stream)
                    continue
                if unit is _STOP:
                    break
                if unit.key is None:
                    while inflight:
                        self._finish(stage, *inflight.popleft(), device, stream)
                    if not self._single(stage, unit.positions[0], unit.items[0], device,
                                        stream):
                        break
                    continue
                with self.host[stage]:
                    launched = self._launch(stage, unit, device, stream, copy)
                if launched is not None:
                    inflight.append((unit, launched))
                while len(inflight) > window or (launched is None and inflight):
                    self._finish(stage, *inflight.popleft(), device, stream)
                if launched is None and self.cancel.is_set():
                    break
            while inflight:
                self._finish(stage, *inflight.popleft(), device, stream)
        finally:
            if copy:
                STREAMS.release(device, *copy[0])
            with self.lock:
                self.alive[stage] -= 1
                last = self.alive[stage] == 0
            if last and stage + 1 < len(self.chain):
                self.queues[stage + 1].close()

    def _copy_stream(self, device: int, copy: list[Any]) -> Any:
        if not copy:
            copy.append(STREAMS.acquire(device))
        return copy[0][0]

    def _launch(self, stage: int, unit: _Unit, device: int, stream: Any,
                copy: list[Any]) -> Launched | None:
        """Queue a chunk's kernels; None when it failed (reported), was cancelled, or went
        per input. Inputs whose value changed since they were grouped go per input first."""
        if self.cancel.is_set():
            return None
        if not still_holds(unit.items, unit.nodes):  # (one pass: nothing changed, as a rule)
            positions, xs, nodes = [], [], []
            key = unit.key
            for pos, x, grouped in zip(unit.positions, unit.items, unit.nodes, strict=True):
                node = x._value()
                if node is grouped or group_key(x, node) == key:
                    positions.append(pos)
                    xs.append(x)
                    nodes.append(node)
                elif not self._single(stage, pos, x, device, stream):
                    return None
            if not xs:
                return None
            unit.positions, unit.items, unit.nodes = positions, xs, nodes
        positions, xs, nodes = unit.positions, unit.items, unit.nodes
        try:
            launcher = self.procs[stage] or self.chunks[stage]
            launched = launcher.launch(unit.key, positions, xs, nodes, device, stream,
                                       lambda: self._copy_stream(device, copy),
                                       self.cancel.is_set)
        except Cancelled:
            return None
        except ChunkFailure as err:
            self._fail(stage, err.position, device, err.err, err.span)
            return None
        return launched

    def _finish(self, stage: int, unit: _Unit | None, launched: Launched | None,
                device: int, stream: Any) -> None:
        """Wait for a chunk's kernels, bind each input its output (if it still holds the value
        the chunk read), hand them on; inputs left or changed meanwhile go per input."""
        if launched is None or unit is None:
            return
        try:
            launched.wait()
        except ChunkFailure as err:  # (a worker process's chunk: its record is waited for here)
            self._fail(stage, err.position, device, err.err, err.span)
            return
        except Exception as err:
            ops = self.chain[stage].operations
            self._fail(stage, unit.positions[0], device, kernels_failed(ops, err),
                       (unit.positions[0], unit.positions[-1], len(unit.positions)))
            return
        with self.host[stage]:
            self._commit(stage, unit, launched, device, stream)

    def _commit(self, stage: int, unit: _Unit, launched: Launched, device: int,
                stream: Any) -> None:
        """Bind each input of a finished chunk its output (see :meth:`_finish`): only to an
        input that still holds the value the chunk read (one changed meanwhile goes again, per
        input), under the input's commit lock and the run's."""
        values, nodes, items = launched.values, launched.nodes, unit.items
        again: list[int] = []  # (left to the per-input path, or changed meanwhile)
        bound: list[int] = []
        busy: list[int] = []
        # under the run's lock once, each input's commit lock only tried: one another thread
        # holds is waited for below, without the run's lock (never held while waiting for a
        # commit lock: locks.py). ``cancel`` is checked once: a rollback sets it under the
        # run's lock before it reads ``committed``, so it sees every bind of this section.
        with self.lock:
            if self.cancel.is_set():
                return
            try:
                bind_members(items, nodes, values, bound, again, busy)
            finally:  # (what was bound is noted whatever stops the loop: a rollback sees it)
                if len(bound) == len(items):  # (every input: the chunk's own lists)
                    self._committed(stage, items, values)
                else:
                    self._committed(stage, [items[r] for r in bound], [values[r] for r in bound])
        for r in busy:
            x = items[r]
            with commit_lock(x), self.lock:
                if self.cancel.is_set():
                    return
                if not x._holds(nodes[r]):
                    again.append(r)
                    continue
                x._bind_member(values[r])
                bound.append(r)
                self._committed(stage, [x], [values[r]])
        if stage + 1 < len(self.chain) and bound:
            if len(bound) == len(items) and not busy:  # (all, in order: the unit's lists)
                self._hand_on(stage, unit.positions, items)
            else:
                self._hand_on(stage, [unit.positions[r] for r in bound],
                              [items[r] for r in bound])
        for r in sorted(again):
            if not self._single(stage, unit.positions[r], items[r], device, stream):
                return

    def _committed(self, stage: int, xs: list[Any], values: list[Any]) -> None:
        """Note what this run bound to ``xs`` (a rollback restores only its own commits) and,
        in the last stage, that they are done; under the run's lock."""
        ids = list(map(id, xs))
        self.committed.update(zip(ids, values, strict=True))
        if stage + 1 == len(self.chain):
            self.done.update(ids)

    def _hand_on(self, stage: int, positions: list[int], xs: list[Any]) -> None:
        """Queue committed inputs of ``stage`` for the next stage (grouped again there)."""
        off = self.own[stage + 1]
        self.queues[stage + 1].put(self.units(stage + 1, [off + p for p in positions], xs))

    def _single(self, stage: int, pos: int, x: Any, device: int, stream: Any) -> bool:
        """Apply the stage's operations to ``x`` per input, under its commit lock; False: stop
        working (the run failed or was cancelled)."""
        with commit_lock(x):  # claim: no other update of x can start or land until commit
            with self.lock:
                if self.cancel.is_set():
                    return False
                self.claimed.add(id(x))
            try:
                y = private_handle(x)
                try:
                    apply_operations(y, self.chain[stage].operations, self.seeds[stage], pos,
                                     device, stream, self.cancel.is_set)
                except Cancelled:
                    return False
                except StepError as err:
                    self._fail(stage, pos, device, err)
                    return False
                with self.lock:  # commit, unless the run was cancelled (and restored) meanwhile
                    if self.cancel.is_set():
                        return False
                    x._bind(y._node)
                    self._committed(stage, [x], [y._node])
            finally:
                with self.lock:
                    self.claimed.discard(id(x))
        if stage + 1 < len(self.chain):
            self._hand_on(stage, [pos], [x])
        return True

    def _fail(self, stage: int, pos: int, device: int, err: BaseException,
              span: tuple | None = None) -> None:
        with self.lock:
            self.errors.append((stage, pos, device, err, span))
        self.cancel.set()
        for q in self.queues:  # wake every waiting worker
            q.wake()

    # -- driver ---------------------------------------------------------------------------
    def execute(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        units = []
        for s in range(len(self.chain)):  # own inputs of later stages can start at once
            n = len(self.items[s]) if s == 0 else self.own[s]
            units.append(self.units(s, list(range(n)), self.items[s][:n], self.read[s][:n]))
        self._settle_sources(units)
        for q, stage in zip(self.queues, units, strict=True):
            q.put(stage)
        del units, stage  # (the queues alone hold the units, and the values they read)
        self.queues[0].close()
        if len(self.chain) == 1 and not any(self.procs):
            # One stage: every input it binds is done at once, so a rollback restores none
            # (:meth:`_rollback`) and the values as the run found them are needed no more. Each
            # is held by its unit alone from here, and released with it by the worker that
            # finished it (after its kernels, while the device runs the next chunk), not all
            # at once on this thread after the run (1.7-2.7 ms for 2000 inputs on an H200's
            # host: bench/RESULTS.md). (Worker processes keep them: a child may read them.)
            self.read = []
        groups = []
        try:
            for s, devs in enumerate(self.devices):
                g = WorkerGroup(f"pipeline{self.chain[s]._serial}",
                                lambda d, st, s=s: self._worker(s, d, st),
                                lambda err, d, s=s: self._fail(s, -1, d, err), pooled=True)
                groups.append(g)
                g.start(devs, self.per_device[s])
            finished = all(g.join(deadline) for g in groups)
        except BaseException:  # KeyboardInterrupt while waiting: stop, restore, re-raise
            self.cancel.set()
            self._rollback(groups)
            raise
        if not finished:
            self.cancel.set()
            for q in self.queues:
                q.wake()
            left = self._rollback(groups)
            inputs = len({id(x) for stage in self.items for x in stage})
            raise TimeoutError(
                f"{self.chain[0]!r} did not finish within {timeout} s: {len(self.done)} of "
                f"{inputs} inputs done, the others restored; {left} stuck worker "
                "thread(s) abandoned"
            )
        if self.errors:
            self._rollback(groups)
            self._raise_first()
        for s in range(1, len(self.chain)):
            self.chain[s].inputs[:] = self.items[s]

    def _settle_sources(self, units: list[list[_Unit]] | None = None) -> None:
        """Wait for the devices that hold stage inputs another device may take: streams of
        two devices are not ordered, and a chunk's peer copies read the values directly; and
        for every device holding inputs where a worker process reads them (its streams are
        not ordered with this process's). ``units``: each stage's units of its own inputs
        (:meth:`units`, of ``read``), where made."""
        if not runtime.caps.launches_on_streams:
            return
        every = {d for devs in self.devices for d in devs}
        # (as the run starts: nothing has run yet; a member's device read from its batch)
        if units is None:
            homes = {v.batch.device if type(v) is Member else v.device
                     for stage in self.read for v in stage
                     if v is not None and (type(v) is Member or v.buffer is not None)}
        else:
            # Every value is some unit's (a stage's items are its own inputs and the stage
            # before's): a chunk's home is its values' device (values with buffers, or
            # members: a member's batch's), a single's read from its value as above. A dozen
            # units, not a set over every input (0.3-0.35 ms for 2000 inputs on an H200's
            # host: bench/RESULTS.md).
            homes = set()
            for stage in units:
                for u in stage:
                    if u.key is not None:
                        homes.add(u.home)
                        continue
                    homes.update(v.batch.device if type(v) is Member else v.device
                                 for v in values_of(u.items)
                                 if type(v) is Member or v.buffer is not None)
        if len(every) > 1 or homes - every or any(self.procs):
            for d in sorted(homes):
                devices.synchronize(d)

    def _original(self) -> dict[int, Any]:
        """Each input's value as the run started, by id (made only for a rollback that
        restores some: a one-stage run's ``read`` is dropped once its units are queued)."""
        return {id(x): v for stage, vs in zip(self.items, self.read, strict=True)
                for x, v in zip(stage, vs, strict=True)}

    def _rollback(self, groups: list[WorkerGroup]) -> int:
        """Restore every input not fully done; join what can be joined; threads left behind.

        Workers commit under ``self.lock`` only while not cancelled, so after this no worker,
        however late, can touch an input again: stuck ones are safely abandoned. Only this run's
        own commits are undone, under the input's commit lock (another run's later update is
        left alone), except where one of this run's stuck workers holds that lock: it will
        never commit, so the input is restored without it.
        """
        with self.lock:
            self.cancel.set()
            pending = [x for stage in self.items for x in stage if id(x) not in self.done
                       and id(x) in self.committed]
        for q in self.queues:
            q.wake()
        original = self._original() if pending else {}
        for x in pending:
            with self.lock:
                ours = id(x) in self.claimed
            lock = contextlib.nullcontext() if ours else commit_lock(x)
            with lock:
                if x._holds(self.committed[id(x)]):
                    x._bind_value(original[id(x)])
        grace = time.monotonic() + 0.5  # workers notice `cancel` between operations
        for g in groups:
            g.join(grace)
        return sum(len(g.alive()) for g in groups)

    def _raise_first(self) -> None:
        stage, pos, device, err, span = self.errors[0]
        where = f" (stage {stage + 1} of {len(self.chain)})" if len(self.chain) > 1 else ""
        p = self.chain[stage]
        more = f"; {len(self.errors) - 1} more failure(s)" if len(self.errors) > 1 else ""
        batch = "" if span is None else \
            f" (a batch of {span[2]} inputs, {span[0]}..{span[1]}, none of them changed)"
        if isinstance(err, StepError):
            cause = err.cause
            msg = (f"{p!r}{where}: {err.what} failed on input {pos}{batch} on device {device}: "
                   f"{type(cause).__name__}: {cause}{more}")
        else:
            cause = err
            msg = f"{p!r}{where}: a worker on device {device} failed: {err!r}{more}"
        reraise_interrupt(cause, msg)
        raise PipelineError(msg) from cause
