"""Per-device worker pools: threads with one stream each, as in thesis Figures 4.2 and 4.6.

Each Pipeline run or Generator gets its own group of daemon threads, ``workers_per_device()`` per
device, every thread launching on its own stream (streams are reused across runs through a
per-device pool). Threads per run, rather than threads shared by every run, are a deliberate
choice: a run can join exactly its own threads before it returns or raises, a downstream stage
waiting for items can never occupy a thread an upstream stage of another run needs, and a hung
worker is abandoned with its run instead of shrinking a shared pool forever.

A Pipeline run's threads (``WorkerGroup(pooled=True)``) are taken from the threads earlier runs
left idle, and new ones started only where none is idle: starting a thread made the run's
caller wait for it to be scheduled (0.3 ms for two on a 2-core host, before the first chunk
could start: bench/RESULTS.md), waking an idle one does not. The choice above holds: a run
joins its own workers (each signals the end of its target), a thread is idle only between
runs (never shared by two at once: a run that finds none idle starts one), and a hung worker's
thread is never idle again while it hangs. At most :data:`MAX_IDLE` wait, named
:data:`IDLE_NAME`.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import config, devices, faults
from .array import gpuarray
from .backend import ACTIVE
from .graph.ir.node import Node
from .operation import Operation

#: Threads (and streams) per GPU, as in the thesis (DEVICE_STREAM_COUNT).
GPU_WORKERS = 4
# Streams kept per device between runs; more are made when runs overlap.
_MAX_IDLE_STREAMS = 16


def workers_per_device(devices: int = 1, batched: bool = False) -> int:
    """Worker threads per device: ``MILLIPYDE_WORKERS``, else about 4 in all on GPUs, 1-2 on cpu.

    Launching is Python work under the GIL: with one GPU, 4 threads keep it fed; with more GPUs
    the threads compete for the GIL instead (measured on 4 H200s: 1 worker per device 0.224 s,
    4 per device 0.308 s for 100 5-op inputs; bench/RESULTS.md), so the total stays near 4.
    On the cpu backend a large launch already runs in a part per core, so a second thread only
    helps to overlap Python work (and small launches, one part each); when launches are
    serialized (no thread-safe Numba layer) one thread per virtual device is enough.

    ``batched``: a Generator whose worker makes a whole batch of outputs with one launch per
    kernel. On GPUs its kernels take a tenth of a batch's time and the rest is Python, so
    a second thread only contends for the GIL: one worker per device (figure-5.1 Generator on
    an H200: 3540-3974 img/s with 1 worker, 2891-3211 with 2, 1722-2519 with 4;
    bench/RESULTS.md).
    """
    n = config.workers()
    if n is not None:
        return n
    caps = ACTIVE.caps
    if caps.launches_on_streams and batched:
        return 1
    if caps.launches_on_streams:
        return max(1, GPU_WORKERS // max(1, devices))
    return 2 if caps.concurrent_launches else 1


class _StreamPool:
    """Idle streams per device; :func:`drop` (a Device reset) forgets them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[int, list[Any]] = {}
        self._generation: dict[int, int] = {}

    def acquire(self, device: int) -> tuple[Any, int]:
        with self._lock:
            gen = self._generation.get(device, 0)
            idle = self._idle.get(device)
            if idle:
                return idle.pop(), gen
        return ACTIVE.new_stream(device), gen

    def release(self, device: int, stream: Any, generation: int) -> None:
        if stream is None:
            return
        with self._lock:
            # A stream handed out before a reset belongs to the old state: let it go.
            if generation != self._generation.get(device, 0):
                return
            idle = self._idle.setdefault(device, [])
            if len(idle) < _MAX_IDLE_STREAMS:
                idle.append(stream)

    def drop(self, device: int) -> None:
        with self._lock:
            self._idle.pop(device, None)
            self._generation[device] = self._generation.get(device, 0) + 1

    def idle_count(self, device: int) -> int:
        with self._lock:
            return len(self._idle.get(device, ()))


STREAMS = _StreamPool()
devices.on_reset(STREAMS.drop)


def sync(stream: Any) -> None:
    """Wait for the work queued on ``stream`` (a no-op on the cpu backend)."""
    if stream is not None:
        stream.synchronize()


#: Idle Pipeline worker threads kept between runs (more are started when runs overlap).
MAX_IDLE = 16
#: The name of an idle Pipeline worker thread (a busy one has its run's worker's name).
IDLE_NAME = "millipyde-idle-worker"


class _Pooled:
    """A daemon thread that runs one worker's target at a time, idle in between."""

    __slots__ = ("go", "job", "thread")

    def __init__(self) -> None:
        self.go = threading.Lock()
        self.go.acquire()  # (released with each job)
        self.job: tuple | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True, name=IDLE_NAME)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            fn, args, done = self.job
            self.job = None
            ok = False
            try:
                fn(*args)
                ok = True
            finally:  # (an error escaping the target ends this thread: threading.excepthook)
                self.thread.name = IDLE_NAME
                back = ok and _POOL.back(self)
                done.release()  # (after it is idle again: the next run finds it)
            fn = args = done = None  # (an idle thread holds nothing of the run it ran)
            if not back:
                return


class _Pool:
    """Idle :class:`_Pooled` threads (of this process: a forked child starts with none)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Pooled] = []
        self.pid = os.getpid()

    def run(self, name: str, fn: Callable[..., None], args: tuple,
            done: threading.Lock) -> threading.Thread:
        """Run ``fn(*args)`` on an idle thread (one started if none is), named ``name``;
        ``done`` (held) is released when it returns."""
        with self.lock:
            w = self.idle.pop() if self.idle and self.pid == os.getpid() else None
        if w is None:
            w = _Pooled()
        w.thread.name = name
        w.job = (fn, args, done)
        w.go.release()
        return w.thread

    def back(self, w: _Pooled) -> bool:
        """Keep ``w`` idle (False: enough are, or this is a forked child: let it end)."""
        with self.lock:
            if len(self.idle) < MAX_IDLE and self.pid == os.getpid():
                self.idle.append(w)
                return True
        return False

    def forget(self) -> None:
        """In a forked child: the parent's threads are not here."""
        self.lock = threading.Lock()
        self.idle = []
        self.pid = os.getpid()

    def idle_count(self) -> int:
        with self.lock:
            return len(self.idle)


_POOL = _Pool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.forget)


def idle_workers() -> int:
    """Idle Pipeline worker threads (see the module's docstring)."""
    return _POOL.idle_count()


class WorkerGroup:
    """The threads of one run: ``target(device, stream)`` on every worker, errors to ``on_error``.

    Parameters
    ----------
    name : str
        Used in thread names (visible in pytest-timeout's stack dumps).
    target : callable
        ``target(device, stream)``: the worker's loop. It runs with ``device`` current, as this
        thread's target device, and with ``stream`` as its launch stream.
    on_error : callable
        Called with an exception that escaped ``target`` (a bug, or KeyboardInterrupt-like
        events), so no exception is left to ``threading.excepthook``.
    pooled : bool
        Run the workers on idle threads of earlier groups where there are (see the module's
        docstring); ``threads`` then lists threads that outlive the group: :meth:`alive`
        says which still run its workers.
    """

    def __init__(self, name: str, target: Callable[[int, Any], None],
                 on_error: Callable[[BaseException, int], None], pooled: bool = False) -> None:
        self.name = name
        self.target = target
        self.on_error = on_error
        self.pooled = pooled
        self.threads: list[threading.Thread] = []
        self._done: list[threading.Lock] = []  # (pooled: each held until its worker returns)

    def start(self, device_list: Sequence[int], per_device: int | None = None) -> None:
        """Start ``per_device`` workers (default :func:`workers_per_device`) on each device."""
        n = workers_per_device() if per_device is None else per_device
        # Every thread waits at ``gate`` until all are started: ``Thread.start`` returns only
        # once its thread has run, and a thread that went on to its work kept the GIL while
        # the caller waited to start the next (a Pipeline's second device got its first
        # chunk milliseconds after the first's: bench/RESULTS.md).
        gate = threading.Event()
        try:
            # Interleave devices so the best-ranked device's workers do not all start first.
            for k in range(n):
                for d in device_list:
                    name = f"millipyde-{self.name}-dev{d}-w{k}"
                    if self.pooled:
                        done = threading.Lock()
                        done.acquire()
                        self.threads.append(_POOL.run(name, self._main, (d, gate), done))
                        self._done.append(done)
                        continue
                    t = threading.Thread(target=self._main, args=(d, gate), daemon=True,
                                         name=name)
                    self.threads.append(t)
                    t.start()
        finally:  # (threads started before a failure to start one still run)
            gate.set()

    def _main(self, device: int, gate: threading.Event) -> None:
        gate.wait()
        try:
            stream, gen = STREAMS.acquire(device)
        except BaseException as err:
            self.on_error(err, device)
            return
        try:
            with ACTIVE.on_device(device), ACTIVE.using_stream(stream), \
                    devices.targeting(device):
                self.target(device, stream)
        except BaseException as err:
            self.on_error(err, device)
        finally:
            STREAMS.release(device, stream, gen)

    def join(self, deadline: float | None) -> bool:
        """Join every thread until ``deadline`` (a ``time.monotonic()`` value); all joined?
        (Pooled: every worker returned?)"""
        if self.pooled:
            for done in self._done:
                left = -1 if deadline is None else max(0.0, deadline - time.monotonic())
                if not done.acquire(timeout=left):
                    return False
                done.release()  # (done for good: a later join or :meth:`alive` sees it)
            return True
        for t in self.threads:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            t.join(left)
            if t.is_alive():
                return False
        return True

    def alive(self) -> list[threading.Thread]:
        """Threads still running (pooled: still running a worker of this group)."""
        if self.pooled:
            return [t for t, done in zip(self.threads, self._done, strict=True)
                    if done.locked()]
        return [t for t in self.threads if t.is_alive()]


class FairLock:
    """A lock handed to its waiters in the order they came (a context manager).

    ``threading.Lock`` lets the thread that releases it take it again at once, ahead of
    threads already waiting: a Pipeline worker that launches a chunk and then its next one
    held the run's host lock twice in a row while another device's worker waited, so that
    device's first chunk launched only after two of the first device's (bench/RESULTS.md).
    Here a release with waiters hands the lock to the one that waited longest.
    """

    __slots__ = ("_state", "_held", "_waiters")

    def __init__(self) -> None:
        self._state = threading.Lock()  # guards ``_held`` and ``_waiters``
        self._held = False
        self._waiters: collections.deque[threading.Lock] = collections.deque()

    def __enter__(self) -> FairLock:
        with self._state:
            if not self._held:
                self._held = True
                return self
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the holder that hands the lock over
        return self

    def __exit__(self, *exc: object) -> None:
        with self._state:
            if self._waiters:
                self._waiters.popleft().release()  # (still held: by the waiter now)
            else:
                self._held = False


class PipelineError(RuntimeError):
    """An Operation failed in a Pipeline or Generator worker (chained to the original error)."""


class StepError(Exception):
    """An operation failed on an item: ``what`` names the operation(s), ``__cause__`` the error."""

    def __init__(self, what: str, cause: BaseException) -> None:
        super().__init__(what)
        self.what = what
        self.cause = cause


def reraise_interrupt(cause: BaseException, msg: str) -> None:
    """A KeyboardInterrupt raised in a worker reaches the caller as a KeyboardInterrupt (the
    message says where; the original is chained), not wrapped in PipelineError."""
    if isinstance(cause, KeyboardInterrupt):
        raise KeyboardInterrupt(msg) from cause


class Cancelled(Exception):
    """The run was stopped (another worker failed, or a timeout) while this item was in work."""


def private_handle(x: gpuarray, value: Node | None = None) -> gpuarray:
    """A second handle on ``x``'s current value (or on ``value``, ``x``'s value left unread):
    work on it, then commit with ``x._bind``.

    Nodes are immutable values, so this costs nothing, and ``x`` itself is only ever rebound
    once, to a fully computed value: a failed, cancelled or abandoned worker cannot leave it
    half-written. The handle keeps ``x``'s type and sample number (no global counter is used).
    """
    y = type(x).__new__(type(x))
    y._node = None
    y._pinned = None
    y._sample = x._sample
    y._opcount = 0
    y._bind(x._node if value is None else value)
    return y


def record_operations(x: gpuarray, operations: Sequence[Operation], seed: int, sample: int,
                      device: int, cancelled: Callable[[], bool], lift: bool = False) -> None:
    """Record every Operation on ``x`` for ``device`` (nothing runs yet but Python callables).

    ``lift``: record Operations the coin skipped as gated off (see :meth:`Operation.apply`);
    only for outputs that ``graph.exec.batch.materialize_batch`` computes.

    The fault point ``operation:<name>`` is checked before each Operation (so Python callables
    can be faulted too). Raises :class:`StepError` naming the failed Operation, or
    :class:`Cancelled`.
    """
    x._pinned = device  # thesis Algorithm 1: every method first moves x to this device
    try:
        x._placed()  # move even when no Operation touches x (e.g. a pure hand-off stage)
        for j, op in enumerate(operations):
            try:
                faults.check(f"operation:{op.name}", device)
                if cancelled():
                    raise Cancelled()
                op.apply(x, seed, sample, j, lift)
            except (Cancelled, StepError):
                raise
            except BaseException as err:
                raise StepError(f"operation {j} ({op.name!r})", err) from err
    finally:
        x._pinned = None


def kernels_failed(operations: Sequence[Operation], err: BaseException) -> StepError:
    """The :class:`StepError` for a failure while running the fused kernels of ``operations``."""
    names = ", ".join(repr(op.name) for op in operations) or "(none)"
    return StepError(f"the fused kernels of operations {names}", err)


def apply_operations(x: gpuarray, operations: Sequence[Operation], seed: int, sample: int,
                     device: int, stream: Any, cancelled: Callable[[], bool]) -> None:
    """Apply every Operation to ``x`` on ``device``, run the fused kernels and wait for them.

    See :func:`record_operations`; errors from running the kernels raise a :class:`StepError`
    naming the Operations whose fused kernels failed.
    """
    record_operations(x, operations, seed, sample, device, cancelled)
    if cancelled():
        raise Cancelled()
    try:
        x._materialize()
        sync(stream)
    except BaseException as err:
        raise kernels_failed(operations, err) from err
