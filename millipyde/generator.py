"""``Generator``: an iterator of freshly augmented copies of its inputs (thesis 4.4.3 / 9.6).

Output ``k`` is input ``k % n`` cloned onto the Generator's device and passed through the
Operations with random streams keyed on ``(seed, k, operation index)``, so outputs do not depend
on which worker made them. Device workers fill a bounded window ahead of ``next()``; outputs are
delivered strictly in order and the inputs are never modified.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

from . import devices
from . import random as mprandom
from .array import ArgumentError, gpuarray
from .graph.exec import batch
from .pipeline import (
    PipelineError,
    check_device_arg,
    check_inputs,
    check_methods,
    check_operations,
    check_seed,
)
from .workers import (
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


class _State:
    """What the workers share with the Generator (kept apart so ``__del__`` can run)."""

    def __init__(self, inputs: list[gpuarray], operations: list, device: int, seed: int,
                 outputs: int | None, return_to_host: bool) -> None:
        self.inputs = inputs
        self.operations = operations
        self.device = device
        self.seed = seed
        self.outputs = outputs
        self.return_to_host = return_to_host
        # same-shape inputs: a worker makes `batch` outputs at once, one launch per kernel
        self.batch = batch.batch_size([x._node for x in inputs])
        self.workers = workers_per_device(batched=self.batch > 1)
        self.depth = 2 * self.workers  # outputs made ahead of next(): bounded memory
        if self.batch > 1:
            # a worker starts the next batch while next() hands out the last one
            self.depth = max(self.depth, (self.workers + 1) * self.batch)
        self.stacks: dict | None = None
        self.stack_lock = threading.Lock()
        self.cond = threading.Condition()
        self.claimed = 0  # next output index a worker will make
        self.tickets = 0  # next output index a next() call will return
        self.results: dict[int, tuple[Any, BaseException | None, int]] = {}
        self.stopped = False
        self.crashes: list[tuple[BaseException, int]] = []
        self.group: WorkerGroup | None = None

    def start(self) -> None:
        if self.group is None:
            self.group = WorkerGroup("generator", self._worker, self._crash)
            self.group.start([self.device], self.workers)

    def _crash(self, err: BaseException, device: int) -> None:
        # Only errors outside _make land here (a stream that cannot be made, say).
        with self.cond:
            self.crashes.append((err, device))
            self.cond.notify_all()

    def _want(self) -> int:
        """Outputs the next claim takes: a whole batch, or what is left of ``outputs``."""
        if self.outputs is None:
            return self.batch
        return max(1, min(self.batch, self.outputs - self.claimed))

    def _worker(self, device: int, stream: Any) -> None:
        while True:
            with self.cond:
                while not self.stopped and self.claimed + self._want() > \
                        self.tickets + self.depth and (
                        self.outputs is None or self.claimed < self.outputs):
                    self.cond.wait()
                if self.stopped or (self.outputs is not None and self.claimed >= self.outputs):
                    return
                k0, n = self.claimed, self._want()
                self.claimed += n
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
                    for i, (value, err) in enumerate(made):
                        self.results[k0 + i] = (value, err, device)
                self.cond.notify_all()
            if made[-1][1] is not None:
                return

    def _make(self, k: int, device: int, stream: Any) -> Any:
        src = self.inputs[k % len(self.inputs)]
        y = src.clone()  # this thread targets `device`, so the copy is made there
        apply_operations(y, self.operations, self.seed, k, device, stream, lambda: self.stopped)
        if self.return_to_host:
            return np.asarray(y)
        return y

    def _make_batch(self, k0: int, n: int, device: int, stream: Any) -> list[tuple[Any, Any]]:
        """Outputs ``k0 .. k0 + n - 1`` (value, error) in order, up to the first error.

        Each output records its Operations exactly as ``_make`` does (same sample and op
        indices, so the same values), those its coins skipped as gated off where they have an
        identity form (one group for every coin pattern); the kernels then run batched
        (``batch.materialize_batch``).
        """
        with self.stack_lock:
            if self.stacks is None:
                self.stacks = batch.stack_inputs([x._node for x in self.inputs], device)
                sync(stream)  # other workers' streams read the stack
        ys, late = [], None
        for k in range(k0, k0 + n):
            y = self.inputs[k % len(self.inputs)].clone()
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
            errors = batch.materialize_batch(ys, self.stacks)
            sync(stream)
        except Exception as err:
            errors = [err] * len(ys)
        made: list[tuple[Any, Any]] = []
        for y, err in zip(ys, errors, strict=True):
            if err is not None:
                made.append((None, kernels_failed(self.operations, err)))
                return made
            try:
                made.append((np.asarray(y) if self.return_to_host else y, None))
            except Exception as e:
                made.append((None, e))
                return made
        if late is not None:
            made.append((None, late))
        return made

    def take(self) -> Any:
        with self.cond:
            if self.stopped or (self.outputs is not None and self.tickets >= self.outputs):
                raise StopIteration
            k = self.tickets
            self.tickets += 1
            if self.claimed + self._want() <= self.tickets + self.depth:
                # the window now has room for a worker's next claim (waking them on every
                # output instead costs each wake-up a turn of the GIL)
                self.cond.notify_all()
            while k not in self.results:
                if self.stopped:
                    raise StopIteration
                if self.crashes or (self.group is not None and not self.group.alive()):
                    err, device = self.crashes[0] if self.crashes else (None, -1)
                    self.results[k] = (None, err or RuntimeError("workers exited"), device)
                    break
                self.cond.wait(0.5)
            value, err, device = self.results.pop(k)
        if err is None:
            return value
        self.stop()
        i = k % len(self.inputs)
        reraise_interrupt(getattr(err, "cause", err), f"Generator output {k} (input {i})")
        if isinstance(err, StepError):
            raise PipelineError(
                f"Generator: {err.what} failed on output {k} (input {i}) on device {device}: "
                f"{type(err.cause).__name__}: {err.cause}"
            ) from err.cause
        raise PipelineError(f"Generator worker on device {device} failed on output {k} "
                            f"(input {i}): {err!r}") from err

    def stop(self, join: bool = True) -> None:
        with self.cond:
            self.stopped = True
            self.results.clear()
            self.cond.notify_all()
        if join and self.group is not None and threading.current_thread() not in \
                self.group.threads:
            # Workers check `stopped` between operations; a hung one is abandoned (daemon).
            self.group.join(time.monotonic() + 30.0)


class Generator:
    """Iterator of augmented copies of `inputs`, cycling through them in order.

    Parameters
    ----------
    inputs : list of gpuarray, or str / os.PathLike
        Arrays/images (never modified), or a directory of images (``mp.images_from_path``).
    operations : list of Operation
        Applied in order to each copy.
    device : int, optional
        Device that makes the outputs. Otherwise the ``with mp.Device`` target at construction,
        else the recommended (best) device, as in the thesis.
    outputs : int, optional
        Number of outputs before ``StopIteration``; None (default) never stops.
    return_to_host : bool, default False
        Yield NumPy ndarrays instead of gpuarrays/gpuimages.
    seed : int, optional
        Seed of the random streams; the global seed (``mp.seed``) at construction if None.
    client : distributed.Client, optional
        Make the outputs on this Dask cluster (``millipyde.distributed``): yielded in order
        as host ndarrays, a bounded window ahead. A directory is read by the workers;
        gpuarray inputs are scattered to them once, here. `device` must then be None.

    Raises
    ------
    ValueError
        Any invalid argument (also an empty or missing directory, or an unknown keyword).

    Examples
    --------
    >>> import millipyde as mp
    >>> ops = [mp.Operation("random_rotate", -30, 30), mp.Operation("fliplr", probability=0.5)]
    >>> with mp.Generator("examples/images", ops, outputs=3) as gen:  # doctest: +SKIP
    ...     batch = list(gen)
    """

    def __init__(self, inputs: Any, operations: Any, device: Any = None, outputs: Any = None,
                 return_to_host: Any = False, seed: Any = None, client: Any = None,
                 **kwargs: Any) -> None:
        self._state: _State | None = None
        if kwargs:
            raise ArgumentError(f"Generator got unknown keyword argument(s): {', '.join(kwargs)}")
        if client is not None:  # outputs made on a Dask cluster (millipyde.distributed)
            from ._distributed_generator import attach_generator

            attach_generator(self, inputs, operations, device, outputs, return_to_host, seed,
                             client)
            return
        if isinstance(inputs, (str, os.PathLike)):
            from .io import images_from_path

            try:
                inputs = images_from_path(inputs)
            except (FileNotFoundError, NotADirectoryError) as err:
                raise ArgumentError(f"Generator inputs: {err}") from err
        items = check_inputs(inputs, "Generator")
        if not items:
            raise ArgumentError("Generator needs at least one input")
        ops = check_operations(operations, "Generator")
        check_methods(items, ops, "Generator")
        dev = check_device_arg(device, "Generator")
        if dev is None:
            dev = devices.get_current_device()  # the `with Device` target, else the best device
        if outputs is not None and (isinstance(outputs, bool) or
                                    not isinstance(outputs, (int, np.integer)) or outputs < 0):
            raise ArgumentError(f"Generator outputs must be an int >= 0 or None, got {outputs!r}")
        if not isinstance(return_to_host, (bool, np.bool_)):
            raise ArgumentError(f"Generator return_to_host must be a bool, got "
                                f"{type(return_to_host).__name__}")
        seed = check_seed(seed, "Generator")
        for x in items:
            # Settle pending work once, here, so workers only ever clone stored values.
            x._materialize()
        self.device: int = dev
        self.outputs: int | None = None if outputs is None else int(outputs)
        self.return_to_host: bool = bool(return_to_host)
        self.seed: int = mprandom.global_seed() if seed is None else seed
        self._state = _State(items, ops, dev, self.seed, self.outputs, self.return_to_host)

    @property
    def inputs(self) -> list[gpuarray]:
        """The inputs outputs are copied from (a new list; the arrays themselves)."""
        return list(self._state.inputs)

    @property
    def operations(self) -> list:
        """The Operations applied to each output (a new list)."""
        return list(self._state.operations)

    def explain(self, output: int = 0) -> Any:
        """The fused plan (kernels, devices, bytes) that produces output number ``output``."""
        from .graph.explain import explain_operations

        items = self._state.inputs
        x = items[output % len(items)]
        return explain_operations(x, self._state.operations, self.seed, output, copy=True,
                                  title=f"Generator output {output}")

    def __iter__(self) -> Generator:
        return self

    def __next__(self) -> Any:
        """The next augmented copy (a gpuarray/gpuimage, or an ndarray with return_to_host).

        Raises
        ------
        StopIteration
            After `outputs` outputs, or once closed.
        PipelineError
            An Operation failed (chained, naming the operation, output, input and device); the
            Generator is closed.
        """
        st = self._state
        st.start()
        return st.take()

    def close(self) -> None:
        """Stop the workers and drop prefetched outputs; ``next()`` then raises StopIteration."""
        if self._state is not None:
            self._state.stop()

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # No join here: __del__ may run at awkward times; workers exit on their own.
        state = getattr(self, "_state", None)
        if state is not None:
            state.stop(join=False)

    def __repr__(self) -> str:
        st = self._state
        n = "infinite" if self.outputs is None else self.outputs
        return (f"<Generator: {len(st.inputs)} inputs, "
                f"[{', '.join(op.name for op in st.operations)}], device={self.device}, "
                f"outputs={n}>")
