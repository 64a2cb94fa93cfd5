"""``Pipeline``: apply a list of Operations to a list of inputs, in place, over the devices.

Thesis sections 4.4.2 / 9.5. One shared work queue per stage feeds every worker of every device
the stage uses, so faster devices take more inputs; an input keeps one worker (and its stream)
for all of a stage's operations. Connected pipelines form stages of one run: each finished input
is handed to the next stage at once, on the device thesis Algorithm 2 gives that stage.
Failures are all-or-nothing per input: an input is either untouched or fully processed.
Pipelines may run at once from several threads over shared inputs: a worker holds the input's
commit lock (``locks.py``) from reading its value to binding the result, so every update is
applied exactly once, in some serial order, and no lock order can deadlock.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from . import devices
from . import random as mprandom
from .array import ArgumentError, gpuarray
from .locks import commit_lock
from .operation import Operation
from .workers import (
    Cancelled,
    StepError,
    WorkerGroup,
    apply_operations,
    private_handle,
    reraise_interrupt,
    workers_per_device,
)

_serials = itertools.count(1)
_STOP = object()


class PipelineError(RuntimeError):
    """An Operation failed in a Pipeline or Generator worker (chained to the original error)."""


def check_inputs(inputs: Any, owner: str) -> list[gpuarray]:
    """``inputs`` as a new list of distinct gpuarrays, else ``ValueError`` naming the problem."""
    if not isinstance(inputs, (list, tuple)):
        raise ArgumentError(
            f"{owner} inputs must be a list of gpuarray/gpuimage, got {type(inputs).__name__}"
        )
    seen: dict[int, int] = {}
    for i, x in enumerate(inputs):
        if not isinstance(x, gpuarray):
            raise ArgumentError(
                f"{owner} inputs[{i}] must be a gpuarray/gpuimage, got {type(x).__name__}"
            )
        if id(x) in seen:  # two workers would mutate one object at once
            raise ArgumentError(f"{owner} inputs[{i}] is the same object as inputs[{seen[id(x)]}]")
        seen[id(x)] = i
    return list(inputs)


def check_operations(operations: Any, owner: str) -> list[Operation]:
    """``operations`` as a new list of Operations, else ``ValueError``."""
    if not isinstance(operations, (list, tuple)):
        raise ArgumentError(
            f"{owner} operations must be a list of Operation, got {type(operations).__name__}"
        )
    for j, op in enumerate(operations):
        if not isinstance(op, Operation):
            raise ArgumentError(
                f"{owner} operations[{j}] must be an Operation, got {type(op).__name__}"
            )
    return list(operations)


def check_methods(inputs: Sequence[gpuarray], operations: Sequence[Operation],
                  owner: str) -> None:
    """Every method-name Operation must exist on every input's type (a gpuarray has no rotate)."""
    for j, op in enumerate(operations):
        if op.method is None:
            continue
        for i, x in enumerate(inputs):
            if not callable(getattr(type(x), op.method, None)):
                raise ArgumentError(
                    f"{owner} operations[{j}] {op.method!r} is not a method of inputs[{i}] "
                    f"({type(x).__name__})"
                )


def check_seed(seed: Any, owner: str) -> int | None:
    """None or an int seed (Python or NumPy integer), as a Python int, else ``ValueError``."""
    if seed is None:
        return None
    try:
        return mprandom.as_seed(seed, f"{owner} seed")
    except ValueError as err:
        raise ArgumentError(f"{err} or None") from None


def check_device_arg(device: Any, owner: str) -> int | None:
    """None or a valid device index, else ``ValueError``."""
    if device is None:
        return None
    try:
        return devices.check_device(device, f"{owner} device")
    except ValueError as err:
        raise ArgumentError(str(err)) from None


def assign_devices(chain: Sequence[Pipeline], run_target: int | None) -> list[list[int]]:
    """Devices of each stage: its own choice, else the target, else thesis Algorithm 2.

    A lone unpinned pipeline uses every device (best first). In a chain each unpinned pipeline
    gets the best device different from its neighbour's, so consecutive stages run on
    different devices when there are several.
    """
    fixed = [p.device if p.device is not None else p._target if p._target is not None
             else run_target for p in chain]
    if len(chain) == 1:
        return [[fixed[0]]] if fixed[0] is not None else [list(devices.RANKED)]
    ranked = devices.RANKED
    for s in range(len(chain) - 1):
        i, j = fixed[s], fixed[s + 1]
        if len(ranked) == 1:
            fixed[s] = ranked[0] if i is None else i
            fixed[s + 1] = ranked[0] if j is None else j
        elif i is None and j is None:
            fixed[s], fixed[s + 1] = ranked[0], ranked[1]
        elif j is None:
            fixed[s + 1] = next(d for d in ranked if d != i)
        elif i is None:
            fixed[s] = next(d for d in ranked if d != j)
    return [[d] for d in fixed]


class Pipeline:
    """Apply every Operation to every input, in place, scheduled across the devices.

    Parameters
    ----------
    inputs : list of gpuarray
        The arrays/images to transform (mutated in place by :meth:`run`).
    operations : list of Operation
        Applied in order to each input.
    device : int, optional
        Run only on this device. Otherwise the ``with mp.Device`` target at construction, else
        the target when :meth:`run` is called, else every device.
    seed : int, optional
        Seed of the random streams; the global seed (``mp.seed``) when run if None.

    Raises
    ------
    ValueError
        Inputs or operations not lists of the right kind, an invalid device, a bad seed, or an
        unknown keyword argument.

    Examples
    --------
    >>> import millipyde as mp
    >>> ops = [mp.Operation("rgb2grey"), mp.Operation("rotate", 30)]
    >>> p = mp.Pipeline(images, ops)  # doctest: +SKIP
    >>> p.run()  # doctest: +SKIP
    """

    def __init__(self, inputs: Any, operations: Any, device: Any = None, seed: Any = None,
                 **kwargs: Any) -> None:
        if kwargs:
            raise ArgumentError(f"Pipeline got unknown keyword argument(s): {', '.join(kwargs)}")
        self.inputs: list[gpuarray] = check_inputs(inputs, "Pipeline")
        self.operations: list[Operation] = check_operations(operations, "Pipeline")
        check_methods(self.inputs, self.operations, "Pipeline")
        self.device: int | None = check_device_arg(device, "Pipeline")
        self.seed: int | None = check_seed(seed, "Pipeline")
        self._target = devices.target_device()  # thesis: a `with Device` scope pins it
        self._next: Pipeline | None = None
        self._prev: Pipeline | None = None
        self._lock = threading.Lock()
        self._serial = next(_serials)

    def explain(self, sample: int = 0) -> Any:
        """The fused plan (kernels, devices, bytes) of this pipeline's operations on one input.

        Records the operations on a private handle of ``inputs[sample]`` with that input's
        random draws; nothing runs (Python-callable Operations excepted) and no input changes.
        """
        from .graph.explain import explain_operations

        if not 0 <= sample < len(self.inputs):
            raise ArgumentError(f"Pipeline.explain sample must be in 0..{len(self.inputs) - 1}")
        seed = mprandom.global_seed() if self.seed is None else self.seed
        return explain_operations(self.inputs[sample], self.operations, seed, sample, copy=False,
                                  title=f"{self!r} input {sample}")

    def __repr__(self) -> str:
        ops = ", ".join(op.name for op in self.operations)
        where = f"device={self.device}" if self.device is not None else "device=None"
        return f"<Pipeline #{self._serial}: {len(self.inputs)} inputs, [{ops}], {where}>"

    def connect_to(self, pipeline: Pipeline) -> None:
        """Send this pipeline's outputs to `pipeline` as each is done (chains of any length).

        After a run, `pipeline.inputs` lists its own inputs followed by this pipeline's
        outputs, in this pipeline's input order.

        Raises
        ------
        ValueError
            `pipeline` is not a Pipeline, is this one, would close a cycle, or is already fed by
            another pipeline.
        """
        if not isinstance(pipeline, Pipeline):
            raise ArgumentError(f"connect_to needs a Pipeline, got {type(pipeline).__name__}")
        p: Pipeline | None = pipeline
        while p is not None:
            if p is self:
                raise ArgumentError("connect_to would make a cycle of pipelines")
            p = p._next
        if pipeline._prev is not None and pipeline._prev is not self:
            raise ArgumentError(f"{pipeline!r} is already fed by {pipeline._prev!r}")
        if self._next is not None:
            self._next._prev = None
        self._next, pipeline._prev = pipeline, self

    def _chain(self) -> list[Pipeline]:
        chain, p = [], self
        while p is not None:
            chain.append(p)
            p = p._next
        return chain

    def run(self, timeout: float | None = None) -> None:
        """Run every operation on every input, and every connected pipeline; return when done.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait; past it, workers are told to stop, unfinished inputs are restored
            and ``TimeoutError`` is raised.

        Raises
        ------
        PipelineError
            An Operation failed; the message names the operation, input index and device, and
            the original exception is chained. Inputs are untouched or fully processed.
        KeyboardInterrupt
            Raised in an Operation (or while waiting): re-raised as such after the rollback.
        TimeoutError
            `timeout` passed.
        """
        if timeout is not None and (isinstance(timeout, bool) or
                                    not isinstance(timeout, (int, float)) or not timeout > 0):
            raise ArgumentError(f"run timeout must be a positive number of seconds or None, "
                                f"got {timeout!r}")
        chain = self._chain()
        with contextlib.ExitStack() as stack:
            for p in chain:  # chains are linear, so locking in chain order cannot deadlock
                stack.enter_context(p._lock)
            _Run(chain).execute(timeout)


class _Run:
    """One execution of a chain of pipelines (stage s = chain[s])."""

    def __init__(self, chain: list[Pipeline]) -> None:
        self.chain = chain
        self.devices = assign_devices(chain, devices.target_device())
        self.seeds = [p.seed if p.seed is not None else mprandom.global_seed() for p in chain]
        # Stage s processes its own inputs, then the previous stage's items in their order.
        # Items an upstream stage delivered on an earlier run are not counted as "own" again.
        self.items: list[list[gpuarray]] = []
        self.own: list[int] = []
        upstream: list[gpuarray] = []
        for p in chain:
            ids = {id(x) for x in upstream}
            own = [x for x in check_inputs(p.inputs, "Pipeline") if id(x) not in ids]
            self.own.append(len(own))
            upstream = own + upstream
            check_methods(upstream, p.operations, "Pipeline")  # fail before anything runs
            self.items.append(upstream)
        self.original = {id(x): x._node for stage in self.items for x in stage}
        self.done: set[int] = set()
        # what this run last bound to each input (rollback restores only its own commits) and
        # the inputs one of its workers holds the commit lock of
        self.committed: dict[int, Any] = {}
        self.claimed: set[int] = set()
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.errors: list[tuple[int, int, int, StepError | BaseException]] = []
        busy = len({d for stage in self.devices for d in stage})
        self.per_device = workers_per_device(busy)
        self.queues = [queue.SimpleQueue() for _ in chain]
        self.alive = [self.per_device * len(d) for d in self.devices]

    # -- workers --------------------------------------------------------------------------
    def _worker(self, stage: int, device: int, stream: Any) -> None:
        q = self.queues[stage]
        try:
            while not self.cancel.is_set():
                task = q.get()
                if task is _STOP or self.cancel.is_set():
                    break
                pos, x = task
                last_stage = stage + 1 == len(self.chain)
                if not self._claim_and_commit(stage, pos, x, device, stream):
                    break
                if not last_stage:
                    self.queues[stage + 1].put((self.own[stage + 1] + pos, x))
        finally:
            with self.lock:
                self.alive[stage] -= 1
                last = self.alive[stage] == 0
            if last and stage + 1 < len(self.chain):
                self._stop_stage(stage + 1)

    def _claim_and_commit(self, stage: int, pos: int, x: gpuarray, device: int,
                          stream: Any) -> bool:
        """Apply the stage's operations to ``x`` under its commit lock; False: stop working."""
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
                    self.committed[id(x)] = y._node
                    if stage + 1 == len(self.chain):
                        self.done.add(id(x))
            finally:
                with self.lock:
                    self.claimed.discard(id(x))
        return True

    def _stop_stage(self, stage: int) -> None:
        for _ in range(self.per_device * len(self.devices[stage])):
            self.queues[stage].put(_STOP)

    def _fail(self, stage: int, pos: int, device: int, err: BaseException) -> None:
        with self.lock:
            self.errors.append((stage, pos, device, err))
        self.cancel.set()
        for s in range(len(self.chain)):  # wake every waiting worker
            self._stop_stage(s)

    # -- driver ---------------------------------------------------------------------------
    def execute(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for pos, x in enumerate(self.items[0]):
            self.queues[0].put((pos, x))
        self._stop_stage(0)
        for s in range(1, len(self.chain)):  # own inputs of later stages can start at once
            for pos in range(self.own[s]):
                self.queues[s].put((pos, self.items[s][pos]))
        groups = []
        try:
            for s, devs in enumerate(self.devices):
                g = WorkerGroup(f"pipeline{self.chain[s]._serial}",
                                lambda d, st, s=s: self._worker(s, d, st),
                                lambda err, d, s=s: self._fail(s, -1, d, err))
                groups.append(g)
                g.start(devs, self.per_device)
            finished = all(g.join(deadline) for g in groups)
        except BaseException:  # KeyboardInterrupt while waiting: stop, restore, re-raise
            self.cancel.set()
            self._rollback(groups)
            raise
        if not finished:
            self.cancel.set()
            for s in range(len(self.chain)):
                self._stop_stage(s)
            left = self._rollback(groups)
            raise TimeoutError(
                f"{self.chain[0]!r} did not finish within {timeout} s: {len(self.done)} of "
                f"{len(self.original)} inputs done, the others restored; {left} stuck worker "
                "thread(s) abandoned"
            )
        if self.errors:
            self._rollback(groups)
            self._raise_first()
        for s in range(1, len(self.chain)):
            self.chain[s].inputs[:] = self.items[s]

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
        for x in pending:
            with self.lock:
                ours = id(x) in self.claimed
            lock = contextlib.nullcontext() if ours else commit_lock(x)
            with lock:
                if x._node is self.committed[id(x)]:
                    x._bind(self.original[id(x)])
        grace = time.monotonic() + 0.5  # workers notice `cancel` between operations
        for g in groups:
            g.join(grace)
        return sum(len(g.alive()) for g in groups)

    def _raise_first(self) -> None:
        stage, pos, device, err = self.errors[0]
        where = f" (stage {stage + 1} of {len(self.chain)})" if len(self.chain) > 1 else ""
        p = self.chain[stage]
        more = f"; {len(self.errors) - 1} more failure(s)" if len(self.errors) > 1 else ""
        if isinstance(err, StepError):
            cause = err.cause
            msg = (f"{p!r}{where}: {err.what} failed on input {pos} on device {device}: "
                   f"{type(cause).__name__}: {cause}{more}")
        else:
            cause = err
            msg = f"{p!r}{where}: a worker on device {device} failed: {err!r}{more}"
        reraise_interrupt(cause, msg)
        raise PipelineError(msg) from cause
