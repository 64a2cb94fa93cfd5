"""``Pipeline``: apply a list of Operations to a list of inputs, in place, over the devices.

Thesis sections 4.4.2 / 9.5. A run (``pipeline.run``) groups each stage's inputs by (type,
device, shape, dtype) and records each chunk of a group once, as a batch (``chunks``,
the engine of ``Generator.batches``): one launch per kernel for the chunk, per-input
parameters and probability coins as data drawn from the same streams as per input, so the
outputs are the per-input ones. What a chunk cannot record (callable Operations, inputs with
pending work) runs per input. Chunks and inputs are spread over the stage's devices, a queue
per device; connected pipelines form stages of one run, and each finished chunk or input is
handed to the next stage at once, on the device thesis Algorithm 2 gives that stage.
Failures are all-or-nothing per input: an input is either untouched or fully processed.
Pipelines may run at once from several threads over shared inputs: every update lands on the
value the input holds when it is bound (``locks.py``), exactly once, and no lock order can
deadlock.

Where outputs live: on the device that computed them, which is the input's own device when
that device is one of the stage's; otherwise (a ``device=`` pin, or a chunk taken by another
device's idle worker) the input has moved to the computing device (``x.device`` says which).
A chunk's outputs stay one buffer of that device: each input holds its member of it, and its
own view is made when its value is first read.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Sequence
from typing import Any

from .. import config, devices
from .. import random as mprandom
from ..array import ArgumentError, gpuarray
from ..operation import Operation
from ..workers import PipelineError
from .processes import close as close_processes
from .run import Run

__all__ = ["Pipeline", "PipelineError", "assign_devices", "check_device_arg", "check_inputs",
           "check_methods", "check_operations", "check_seed", "close_processes"]

_serials = itertools.count(1)


def check_inputs(inputs: Any, owner: str) -> list[gpuarray]:
    """``inputs`` as a new list of distinct gpuarrays, else ``ValueError`` naming the problem."""
    return _checked_inputs(inputs, owner)[0]


def _checked_inputs(inputs: Any, owner: str) -> tuple[list[gpuarray], set[type]]:
    """:func:`check_inputs`, and the inputs' types (for :func:`check_methods`)."""
    if not isinstance(inputs, (list, tuple)):
        raise ArgumentError(
            f"{owner} inputs must be a list of gpuarray/gpuimage, got {type(inputs).__name__}"
        )
    # (once for the list where it is valid: its types, and its members counted, by identity:
    # a set of the inputs themselves where their types hash by identity, a third of the time
    # of a set of their ids; the loop below finds the first bad input only where there is one)
    types = set(map(type, inputs))
    if all(issubclass(t, gpuarray) for t in types) and len(
            set(inputs) if all(t.__hash__ is object.__hash__ for t in types)
            else set(map(id, inputs))) == len(inputs):
        return list(inputs), types
    seen: dict[int, int] = {}
    for i, x in enumerate(inputs):
        if not isinstance(x, gpuarray):
            raise ArgumentError(
                f"{owner} inputs[{i}] must be a gpuarray/gpuimage, got {type(x).__name__}"
            )
        if id(x) in seen:  # two workers would mutate one object at once
            raise ArgumentError(f"{owner} inputs[{i}] is the same object as inputs[{seen[id(x)]}]")
        seen[id(x)] = i
    return list(inputs), types


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
                  owner: str, types: set[type] | None = None) -> None:
    """Every method-name Operation must exist on every input's type (a gpuarray has no rotate);
    ``types``: the inputs' types, where known."""
    if types is None:
        types = set(map(type, inputs))
    if all(op.method is None or callable(getattr(t, op.method, None))
           for op in operations for t in types):
        return
    first: dict[type, int] = {}  # each input type once, at its first index
    for i, x in enumerate(inputs):
        first.setdefault(type(x), i)
    for j, op in enumerate(operations):
        if op.method is None:
            continue
        for t, i in sorted(first.items(), key=lambda e: e[1]):
            if not callable(getattr(t, op.method, None)):
                raise ArgumentError(
                    f"{owner} operations[{j}] {op.method!r} is not a method of inputs[{i}] "
                    f"({t.__name__})"
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
    processes : bool, optional
        Record and launch the chunks of each device in a worker process of that device (one
        GIL a device: ``pipeline.processes``), with the same outputs; None:
        ``MILLIPYDE_PIPELINE_PROCESSES`` (default off: measured against the threads, it does
        not pay, bench/RESULTS.md). Units a chunk cannot take, and
        backends without shared memory (HIP, CUDASIM), stay in this process. Workers start on
        first use and are kept; ``mp.pipeline.close_processes()`` stops them.

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
                 processes: bool | None = None, **kwargs: Any) -> None:
        if kwargs:
            raise ArgumentError(f"Pipeline got unknown keyword argument(s): {', '.join(kwargs)}")
        checked, types = _checked_inputs(inputs, "Pipeline")
        self.inputs: list[gpuarray] = checked
        self.operations: list[Operation] = check_operations(operations, "Pipeline")
        check_methods(self.inputs, self.operations, "Pipeline", types)
        self.device: int | None = check_device_arg(device, "Pipeline")
        self.seed: int | None = check_seed(seed, "Pipeline")
        if processes is not None and not isinstance(processes, bool):
            raise ArgumentError(f"Pipeline processes must be True, False or None, got "
                                f"{processes!r}")
        self.processes: bool | None = processes
        self._target = devices.target_device()  # thesis: a `with Device` scope pins it
        self._next: Pipeline | None = None
        self._prev: Pipeline | None = None
        self._lock = threading.Lock()
        self._serial = next(_serials)

    def uses_processes(self) -> bool:
        """Whether a run sends this pipeline's chunks to worker processes (``processes``,
        else ``MILLIPYDE_PIPELINE_PROCESSES``)."""
        return config.pipeline_processes() if self.processes is None else self.processes

    def explain(self, sample: int = 0) -> Any:
        """The fused plan (kernels, devices, bytes) of this pipeline's operations on one input.

        Records the operations on a private handle of ``inputs[sample]`` with that input's
        random draws; nothing runs (Python-callable Operations excepted) and no input changes.
        """
        from ..graph.explain import explain_operations

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

        Notes
        -----
        Each input then holds its output on the device that computed it (see the module's
        docstring: ``x.device`` says which); inputs of a chunk hold members of one buffer.
        """
        if timeout is not None and (isinstance(timeout, bool) or
                                    not isinstance(timeout, (int, float)) or not timeout > 0):
            raise ArgumentError(f"run timeout must be a positive number of seconds or None, "
                                f"got {timeout!r}")
        chain = self._chain()
        with contextlib.ExitStack() as stack:
            for p in chain:  # chains are linear, so locking in chain order cannot deadlock
                stack.enter_context(p._lock)
            _run_of(chain).execute(timeout)


def _run_of(chain: list[Pipeline]) -> Run:
    """The run of ``chain``: its devices (thesis Algorithm 2), and per stage its items (own
    inputs first, then the previous stage's items in their order; items an upstream stage
    delivered on an earlier run are not counted as own again), checked before anything runs."""
    items: list[list[gpuarray]] = []
    own: list[int] = []
    upstream: list[gpuarray] = []
    for p in chain:
        mine, types = _checked_inputs(p.inputs, "Pipeline")
        if upstream:
            ids = set(map(id, upstream))
            mine = [x for x in mine if id(x) not in ids]
        own.append(len(mine))
        upstream = mine + upstream
        check_methods(upstream, p.operations, "Pipeline",  # fail before anything runs
                      None if len(upstream) > len(mine) else types)
        items.append(upstream)
    return Run(chain, assign_devices(chain, devices.target_device()), items, own)
