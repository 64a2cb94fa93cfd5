"""A Pipeline's chunks run by one worker process per device (``Pipeline(processes=True)``).

Why: a run's host work (grouping, stacking, recording, launches) runs under this process's
one GIL for every device's worker thread, so on several GPUs the devices wait for each other's
Python (bench/RESULTS.md, "Pipelines on four GPUs"). With ``processes=True`` each chunk
(``pipeline.chunks``) is recorded and launched by a persistent worker process of its device,
under a GIL of its own; this process keeps grouping, the output buffers and the commits.
Off by default: measured on two H200s against the threads, it does not pay (bench/RESULTS.md,
"On two H200s: the merged worker-process protocol").

The worker is a fresh interpreter (``childproc``: subprocess, never fork), one per device,
started on first use and kept for later runs; :func:`close` (and the interpreter's exit) stops
them. A chunk is one message each way on the worker's socket:

- ``chunk``: the stage's Operations and seed (pickled once per run and stage: Operations by
  their parts), the chunk's group key, positions and sample numbers; its inputs' memory
  (``STACK_IN_WORKER``, the default on GPUs: each input's allocation and offset, as two arrays and
  one bytes object of IPC handles; or one buffer where the inputs are rows of one already: a
  previous chunk's outputs, no copy) and, once the stage's output bytes an input are known
  (from its first reply: ``_LEARNED``), one output region allocated here. The worker stacks
  the chunk, records it exactly as :meth:`StageChunks.record` does here (same streams, same
  positions: the same outputs), launches it with each group's last kernel writing its rows
  into the region (:meth:`StageChunks.start`), and replies ``done`` with each group's rows,
  shape, dtype and offset once the chunk's event has fired; the commit is then the thread
  path's (``run.Run._commit``: members of the region, all-or-nothing per input, rollback on
  failure).
- Without a region large enough (a stage's first chunks) the worker replies ``planned``
  with the layout instead; this process allocates each group's buffer and sends it
  (``outputs``), and the worker launches and replies ``done``.

``run.Run`` keeps up to :data:`WINDOW` chunks a device in flight: the worker records and
launches the next ones while the device runs one, and replies each as its kernels finish.

Memory stays owned by this process, so a worker that dies or is stopped takes no output with
it. Shared memory is, on a GPU, an allocation exported by CUDA IPC (``cuIpcGetMemHandle``,
with the buffer's offset in it; the worker opens each allocation once and keeps it open,
:data:`KEEP_OPEN`; this process synchronizes its stream before a message names memory it
wrote or allocated: streams of two processes are not ordered); on the cpu backend, a
``memfd`` mapping passed over the socket (:class:`HostArena`): outputs are allocated in
such mappings, so one run's outputs are the next run's inputs without a copy, and inputs in
plain memory are copied into a mapping made for the message (slow: the cpu backend is there
to test the protocol).

Left to the thread path: stages that do not record chunks (callable Operations, per-input
units: pending work, targets), Operations that do not pickle, backends without shared memory
(HIP, CUDASIM). A failure in the worker raises ``PipelineError`` as the thread path does; a
worker that dies raises it naming the device and the worker's pid, and the next chunk for
that device starts a fresh worker.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from .. import childproc, devices, faults
from ..backend import ACTIVE as runtime
from ..graph.ir.member import Batch, Member
from ..graph.ir.node import stored
from ..workers import STREAMS, Cancelled, StepError, kernels_failed
from .chunks import ChunkFailure, Launched, StageChunks, rows_of, stack_values

#: seconds a worker has to start (an interpreter, the backend, a CUDA context)
START_SECONDS = 300.0
#: stages (runs x stages) whose recorders a worker keeps (each run sends its own)
KEEP_STAGES = 64
#: Send each input's memory and let the worker stack a chunk, where its inputs are not rows of
#: one buffer already (False: stack here, one region a chunk). Stacking here puts a kernel of
#: this process and a synchronize on the device between the worker's (contexts of two
#: processes take turns on a GPU; two H200s, 2026-11-29: processes lost 0.38-0.89x to threads
#: so); stacking there costs an IPC export per input allocation here (two driver calls) and an
#: open per allocation the worker has not seen yet (kept open: :data:`KEEP_OPEN`).
#: None: on GPUs only (on the cpu backend inputs in plain memory are copied into a mapping
#: for the message either way, and one stack here is the cheaper copy: 11.3 against 13.8 us
#: of this process's CPU an input, 2026-11-29).
STACK_IN_WORKER: bool | None = None
#: chunks a device's worker may hold at once (sent, not yet committed here): the worker records
#: and launches the next ones while the device runs one, and replies each as it completes
WINDOW = 4
#: CUDA IPC allocations a worker keeps open, and their bytes at most (opening one is a driver
#: call; the pool hands the same allocations out again run after run, and a fresh input is an
#: allocation of its own: part A's 2000 inputs a run are 2000). An open allocation the pool of
#: this process has freed stays held until closed, hence the bound in bytes.
KEEP_OPEN = 4096
KEEP_OPEN_BYTES = 16 << 30
#: byte alignment of each output group's rows in a chunk's output region
ALIGN = 256
#: output groups (coin patterns) a chunk's region has room to align (more: the second
#: exchange, outputs allocated here)
GROUPS = 64


class PipelineWorkerError(RuntimeError):
    """A Pipeline's worker process died, could not start or broke the protocol; the message
    names the device and the worker's pid."""


def supported() -> bool:
    """Whether the active backend can run chunks in worker processes: the cpu backend (host
    memory) and CUDA GPUs (CUDA IPC), on Linux."""
    return childproc.can_share_host() and not runtime.simulated and \
        runtime.caps.shared_batches in ("host", "cuda_ipc")


# -- shared memory: regions and places ------------------------------------------------------
class HostArena:
    """Host memory shared with the workers: a ``memfd`` mapping. NumPy arrays over it
    (``np.asarray(arena)`` and its views) hold it; its descriptor is kept to send it again."""

    __slots__ = ("fd", "mapping", "size", "__array_interface__", "__weakref__")

    def __init__(self, nbytes: int) -> None:
        self.fd, self.mapping = childproc.host_arena(nbytes, "millipyde-pipeline")
        self.size = len(self.mapping)
        addr = int(np.frombuffer(self.mapping, np.uint8).ctypes.data)
        self.__array_interface__ = {"data": (addr, False), "shape": (self.size,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            os.close(self.fd)

    @staticmethod
    def of(array: np.ndarray) -> HostArena | None:
        """The arena ``array`` is a view of, else None."""
        b = array
        while isinstance(b, np.ndarray):
            b = b.base
        return b if type(b) is HostArena else None


class Exports:
    """The regions of one message and each array's place in them: ``(region, offset, shape,
    dtype, strides)``. Host regions are arenas (arrays in none are copied into one made for
    the message, :meth:`seal`); device regions are allocations, one IPC handle each."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.host = runtime.caps.shared_batches == "host"
        self.regions: list[Any] = []  # host: arena; device: (handle bytes, allocation size)
        self._index: dict[Any, int] = {}
        self._on: int | None = None  # the device current in :meth:`add_all`
        self._copies: list[tuple[np.ndarray, int]] = []
        self._copied = 0
        self._copy_region = -1

    def add(self, buf: Any, device: int) -> tuple:
        """``buf``'s place (``buf`` on ``device``: exported, or on the host copied at
        :meth:`seal`)."""
        shape, dtype = tuple(buf.shape), np.dtype(buf.dtype)
        strides = tuple(buf.strides)
        if self.host:
            arena = HostArena.of(buf)
            if arena is None:  # not shared: copied into the message's arena
                if self._copy_region < 0:
                    self._copy_region = len(self.regions)
                    self.regions.append(None)
                at = self._copied
                self._copies.append((buf, at))
                self._copied += -(-buf.nbytes // 64) * 64
                return (self._copy_region, at, shape, dtype, _c_strides(shape, dtype))
            r = self._region(id(arena), arena)
            at = int(buf.ctypes.data) - arena.__array_interface__["data"][0]
            return (r, at, shape, dtype, strides)
        # the allocation's IPC handle and ``buf``'s offset in it (what numba-cuda's
        # ``get_ipc_handle`` makes, its device's identity looked up once)
        if device == self._on:
            key, offset, size = _export(buf.gpu_data)
        else:
            with runtime.on_device(device):
                key, offset, size = _export(buf.gpu_data)
        r = self._region(key, (size, device))
        return (r, offset, shape, dtype, strides)

    def add_all(self, bufs: list[Any], devs: list[int]) -> Any:
        """The places of ``bufs`` (on ``devs``), as :meth:`add` gives them, or where they share
        shape, dtype and strides (a chunk's inputs) as one ``("each", regions, offsets,
        shape, dtype, strides)`` (two arrays: one pickled object a chunk, not one an input)."""
        if self.host:
            places = [self.add(b, d) for b, d in zip(bufs, devs, strict=True)]
        else:
            with runtime.on_device(self.device):
                self._on = self.device
                try:
                    places = [self.add(b, d) for b, d in zip(bufs, devs, strict=True)]
                finally:
                    self._on = None
        first = places[0][2:]
        if any(p[2:] != first for p in places):
            return places
        return ("each", np.array([p[0] for p in places], np.int32),
                np.array([p[1] for p in places], np.int64), *first)

    def _region(self, key: Any, payload: Any) -> int:
        r = self._index.get(key)
        if r is None:
            r = self._index[key] = len(self.regions)
            self.regions.append(payload if self.host else (key, payload))
        return r

    def seal(self) -> tuple[list[Any], list[int]]:
        """The regions as sent (host: sizes, and the descriptors to pass in order; device: one
        ``("ipc", handles' bytes, allocation sizes, each one's device as an index into the
        devices' identities, the identities)``), the copies made."""
        if not self.host:
            # (handles as one bytes object, sizes as one array: the worker makes an
            # ``IpcHandle`` only of allocations it has not opened yet, directly where it has
            # peer access to the allocation's device, else staged)
            devs = sorted({d for _, (_, d) in self.regions})
            return [("ipc", b"".join(k for k, _ in self.regions),
                     np.array([n for _, (n, _) in self.regions], np.int64),
                     np.array([devs.index(d) for _, (_, d) in self.regions], np.int16),
                     [_identity(d) for d in devs])], []
        if self._copies:
            arena = HostArena(self._copied)
            base = np.asarray(arena)
            for buf, at in self._copies:
                dst = base[at:at + buf.nbytes].view(buf.dtype).reshape(buf.shape)
                np.copyto(dst, buf)
            self.regions[self._copy_region] = arena
            self._copies = []
        return [a.size for a in self.regions], [a.fd for a in self.regions]

    def output(self, shape: tuple, dtype: np.dtype) -> tuple[Any, tuple]:
        """A new ``shape`` buffer on the device (host: in an arena of its own), and its
        place."""
        if self.host:
            dtype = np.dtype(dtype)
            n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            buf = np.asarray(HostArena(n))[:n].view(dtype).reshape(shape)
        else:  # (as ``batch_group`` allocates a batch buffer)
            make = getattr(runtime, "empty_batched", runtime.empty)
            buf = make(shape, dtype, self.device)
        return buf, self.add(buf, self.device)


_IDENTITY: dict[int, dict] = {}


def _identity(device: int) -> dict:
    got = _IDENTITY.get(device)
    if got is None:
        from numba import cuda

        with runtime.on_device(device):
            got = _IDENTITY[device] = cuda.current_context().device.get_device_identity()
    return got


def _export(mem: Any) -> tuple[bytes, int, int]:
    """``mem``'s allocation exported (its device current): its IPC handle's bytes, ``mem``'s
    offset in it and its size (``cuMemGetAddressRange`` and ``cuIpcGetMemHandle``; the handle
    is the allocation's, the same for every buffer in it)."""
    from numba.cuda.cudadrv import driver

    base, end = driver.device_extents(mem)
    handle = driver.driver.cuIpcGetMemHandle(base)
    return bytes(handle.reserved), int(mem.device_pointer_value) - base, end - base


def _c_strides(shape: tuple, dtype: np.dtype) -> tuple:
    out, step = [], np.dtype(dtype).itemsize
    for n in reversed(shape):
        out.append(step)
        step *= int(n)
    return tuple(reversed(out))


def _span(shape: tuple, strides: tuple, dtype: np.dtype) -> int:
    if 0 in shape:
        return 0
    return sum((int(n) - 1) * int(s) for n, s in zip(shape, strides, strict=True)) + \
        np.dtype(dtype).itemsize


#: the worker's open CUDA IPC allocations: handle bytes -> [IpcHandle, its memory, chunks
#: using it]; the least recently used unused ones closed past :data:`KEEP_OPEN`
_OPEN: collections.OrderedDict[bytes, list] = collections.OrderedDict()


_OPEN_BYTES = [0]  # their sizes' sum


def _close_unused() -> None:
    """Close the least recently used allocations no chunk uses, down to the bounds."""
    if len(_OPEN) <= KEEP_OPEN and _OPEN_BYTES[0] <= KEEP_OPEN_BYTES:
        return
    for key in [k for k, v in _OPEN.items() if v[2] == 0]:
        if len(_OPEN) <= KEEP_OPEN and _OPEN_BYTES[0] <= KEEP_OPEN_BYTES:
            break
        h = _OPEN.pop(key)[0]
        _OPEN_BYTES[0] -= h.size
        with contextlib.suppress(Exception):
            h.close()


class Opened:
    """The worker's view of one message's regions (let go with :meth:`close`): host mappings
    of this message's descriptors, or CUDA IPC allocations, each opened once and kept
    (:data:`KEEP_OPEN`)."""

    def __init__(self, regions: list[Any], fds: list[int], host: bool, device: int) -> None:
        self.host, self.device = host, device
        self.maps: list[Any] = []
        self._keys: list[bytes] = []
        if host:
            import mmap

            for size, fd in zip(regions, fds, strict=True):
                try:
                    self.maps.append(mmap.mmap(fd, size))
                finally:
                    os.close(fd)
        elif regions:
            from numba import cuda
            from numba.cuda.cudadrv.driver import IpcHandle

            _, keys, sizes, on, idents = regions[0]
            with runtime.on_device(device):
                ctx = cuda.current_context()
                for i, (size, d) in enumerate(zip(sizes.tolist(), on.tolist(), strict=True)):
                    key = keys[64 * i:64 * (i + 1)]
                    got = _OPEN.get(key)
                    if got is None:  # (a MemoryPointer at the allocation; the handle made
                        # as numba-cuda unpickles one)
                        h = IpcHandle._rebuild(key, size, idents[d], 0)
                        got = _OPEN[key] = [h, h.open(ctx), 0]
                        _OPEN_BYTES[0] += size
                    else:
                        _OPEN.move_to_end(key)
                    got[2] += 1
                    self.maps.append(got[1])
                    self._keys.append(key)

    def array(self, place: tuple) -> Any:
        r, at, shape, dtype, strides = place
        if self.host:
            return np.ndarray(shape, dtype, buffer=self.maps[r], offset=at, strides=strides)
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        mem = self.maps[r].view(at, at + _span(shape, strides, dtype))
        return DeviceNDArray(shape, strides, dtype, gpu_data=mem)

    def close(self) -> None:
        """Let the mappings go (their arrays must be gone, and no work queued on them): host
        mappings closed, IPC allocations kept open for later messages (up to
        :data:`KEEP_OPEN`)."""
        for key in self._keys:
            got = _OPEN.get(key)
            if got is not None:
                got[2] -= 1
        if self._keys:
            self._keys, self.maps = [], []
            _close_unused()
        self.maps = []


# -- this process's side --------------------------------------------------------------------
class _Worker:
    """The worker process of one device: its socket, the replies received, its death."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.host = runtime.caps.shared_batches == "host"
        t0 = time.perf_counter()
        self.proc, self.sock, self.conn = childproc.spawn(
            "millipyde.pipeline.processes", "run_worker", runtime.name,
            f"the pipeline worker of device {device}", PipelineWorkerError)
        self.name = f"pipeline worker of device {device} (pid {self.proc.pid})"
        self.started = time.monotonic()
        self.start_s: float | None = None  # seconds to its first reply (the cold start)
        self._t0 = t0
        self.stages: collections.OrderedDict[int, None] = collections.OrderedDict()  # sent
        self.replies: dict[int, tuple] = {}
        self.cond = threading.Condition()
        self.send_lock = threading.Lock()
        self.stage_lock = threading.Lock()
        self.receiver = childproc.Receiver(self.cond)
        self.dead: PipelineWorkerError | None = None
        # messages sent and received, chunks sent (``messages``: a probe's count)
        self.counts = [0, 0, 0]
        self.send(("hello", device, self.host))

    def send(self, msg: tuple, fds: list[int] = ()) -> None:
        """Send ``msg`` and then the descriptors ``fds`` (as one)."""
        try:
            with self.send_lock:
                self.conn.send(msg)
                self.counts[0] += 1
                self.counts[2] += msg[0] == "chunk"
                for fd in fds:
                    childproc.send_fd(self.conn, fd, self.proc.pid)
        except (OSError, ValueError) as err:
            self._lost(err)
            raise self.dead from err

    def _lost(self, err: BaseException) -> None:
        if self.dead is None:
            self.dead = PipelineWorkerError(f"the {self.name} {childproc.how_it_ended(self.proc)}"
                                            " (its output above says why where it could)")
            self.dead.__cause__ = err

    def wait(self, cid: int) -> tuple:
        """The reply to chunk ``cid`` (replies to others are kept for their askers)."""
        with self.cond:
            while True:
                got = self.replies.pop(cid, None)
                if got is not None:
                    return got
                if self.dead is not None:
                    raise self.dead
                if self.start_s is None and time.monotonic() - self.started > START_SECONDS:
                    self.dead = PipelineWorkerError(f"the {self.name} did not start within "
                                                    f"{START_SECONDS:.0f} s")
                    raise self.dead
                self.receiver.turn(self._receive)

    def _receive(self, timeout: float) -> None:
        try:
            got = self.conn.poll(timeout)
            while got:
                msg = self.conn.recv()
                with self.cond:
                    self.counts[1] += 1
                    if msg[0] == "alive":
                        self.start_s = time.perf_counter() - self._t0
                    elif msg[0] == "fatal":
                        self.dead = PipelineWorkerError(f"the {self.name} failed: {msg[1]}")
                    else:
                        self.replies[msg[1]] = msg
                got = self.conn.poll(0)
        except (EOFError, OSError, ValueError) as err:
            with self.cond:
                self._lost(err)
            return
        if self.proc.poll() is not None:
            with self.cond:
                self._lost(EOFError("the worker's socket closed"))

    def ready(self) -> float:
        """Wait for the worker to have started; its start in seconds."""
        cid = next(_cids)
        self.send(("ping", cid))
        self.wait(cid)
        return self.start_s or 0.0

    def close(self, wait: bool = True) -> None:
        childproc.stop(self.proc, self.conn, self.sock, wait)


_cids = itertools.count(1)
_tokens = itertools.count(1)
_WORKERS: dict[int, _Worker] = {}
_workers_lock = threading.Lock()


def worker_for(device: int) -> _Worker:
    """The live worker of ``device``, started if there is none (or the last one died)."""
    with _workers_lock:
        w = _WORKERS.get(device)
        if w is not None and w.dead is None:
            return w
        if w is not None:
            w.close(wait=False)
        w = _WORKERS[device] = _Worker(device)
        return w


def start(devices: list[int]) -> dict[int, float]:
    """Start (or find) the workers of ``devices`` and wait for them; per device the seconds
    its worker took to start (its cold start; 0 where it was running)."""
    ws = {d: worker_for(d) for d in devices}
    return {d: w.ready() for d, w in ws.items()}


def workers() -> dict[int, int]:
    """The running workers: device -> pid."""
    with _workers_lock:
        return {d: w.proc.pid for d, w in _WORKERS.items() if w.dead is None}


def messages() -> dict[int, tuple[int, int, int]]:
    """Per device, its running worker's messages sent, received and chunks sent so far."""
    with _workers_lock:
        return {d: tuple(w.counts) for d, w in _WORKERS.items() if w.dead is None}


def close() -> None:
    """Stop every Pipeline worker process and wait for them to exit (later runs with
    ``processes=True`` start new ones)."""
    with _workers_lock:
        ws = list(_WORKERS.values())
        _WORKERS.clear()
    for w in ws:
        w.close(wait=True)


atexit.register(close)


class _InWorker:
    """A chunk sent to a worker, the ``event`` of its :class:`Launched`: ``synchronize``
    waits for the worker's reply and gives the :class:`Launched` its values (members of the
    chunk's output region; a chunk sent without a region large enough is given its output
    buffers first, the protocol's second exchange)."""

    __slots__ = ("owner", "worker", "cid", "stream", "positions", "launched", "region", "key")

    def __init__(self, owner: ProcessChunks, worker: _Worker, cid: int, stream: Any,
                 positions: list[int], region: Any) -> None:
        self.owner, self.worker, self.cid, self.stream = owner, worker, cid, stream
        self.positions = positions
        self.launched: Launched | None = None
        self.region = region  # the flat output buffer sent with the chunk (None: none)
        self.key: tuple = ()

    def synchronize(self) -> None:
        self.owner.finished(self)


def _rebuilt(err: Any) -> BaseException:
    if isinstance(err, BaseException):
        return err
    kind, text = err
    return RuntimeError(f"{kind}: {text}")


def _dumps(obj: Any) -> bytes:
    """``obj`` pickled, Operations by their parts (``distributed.tasks.reduce_operation``:
    an Operation holds a lock, and its call counter is per process)."""
    import copyreg
    import io

    from ..distributed.tasks import reduce_operation
    from ..operation import Operation

    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    p.dispatch_table = {**copyreg.dispatch_table, Operation: reduce_operation}
    p.dump(obj)
    return buf.getvalue()


#: learned output bytes an input, per stage (its pickled Operations and seed) and group key:
#: a chunk's output region is sent with it (no second exchange) once its stage's first reply
#: told the size
_LEARNED: dict[tuple[bytes, tuple], int] = {}
_learned_lock = threading.Lock()


class ProcessChunks:
    """A stage's chunks launched by the devices' workers: :meth:`launch` is
    :meth:`StageChunks.launch`'s (``run.Run`` calls one or the other)."""

    def __init__(self, chunks: StageChunks, blob: bytes) -> None:
        self.chunks = chunks
        self.operations = chunks.operations
        self.token = next(_tokens)
        self.blob = blob

    @property
    def window(self) -> int:
        """Chunks a device may have in flight (``run.Run`` keeps this many before it commits:
        :data:`WINDOW`)."""
        return max(1, WINDOW)

    @staticmethod
    def of(chunks: StageChunks) -> ProcessChunks | None:
        """The process launcher of a stage that records chunks, or None where it cannot go
        to a worker (no chunks, a backend without shared memory, Operations that do not
        pickle: the thread path)."""
        if not chunks.enabled or not supported():
            return None
        try:
            blob = _dumps((chunks.operations, chunks.seed))
        except Exception:
            return None
        return ProcessChunks(chunks, blob)

    def takes(self, key: tuple | None, x: Any) -> bool:
        return self.chunks.takes(key, x)

    def launch(self, key: tuple, positions: list[int], xs: list[Any], nodes: list[Any],
               device: int, stream: Any, copy_stream: Callable[[], Any],
               cancelled: Callable[[], bool]) -> Launched:
        """Send the chunk to ``device``'s worker (see the module doc): one message, its
        inputs' memory and, once the stage's output size an input is known, the region its
        outputs go to; what :meth:`StageChunks.launch` returns, its values filled when its
        event (the worker's reply) is waited for. Raises :class:`ChunkFailure` or
        ``workers.Cancelled``."""
        n = len(xs)
        span = (positions[0], positions[-1], n)
        if cancelled():
            raise Cancelled()
        region = out_place = None
        try:
            ex = Exports(device)
            each = runtime.caps.shared_batches != "host" if STACK_IN_WORKER is None \
                else STACK_IN_WORKER
            stack = rows_of(nodes, device) if each else None
            synced = False
            if each and stack is None:  # each input's memory: the worker stacks
                place: Any = ex.add_all([v.view() if type(v) is Member else v.buffer
                                         for v in nodes], [v.device for v in nodes])
            else:  # one buffer of the inputs (no copy where they are rows of one already)
                if stack is None:
                    stack = stack_values(nodes, device, stream, copy_stream)
                    synced = True
                place = ex.add(stack, device)
            per = _LEARNED.get((self.blob, key))
            if per is not None:
                region, out_place = ex.output((n * per + ALIGN * min(n, GROUPS),), np.uint8)
                synced = True
            if synced and stream is not None and runtime.caps.launches_on_streams:
                stream.synchronize()  # (the worker's streams are not ordered with ours)
            regions, fds = ex.seal()
        except Exception as err:
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        try:
            w = worker_for(device)
            with w.stage_lock:  # (sent and noted in one order: the worker's)
                if self.token not in w.stages:
                    w.send(("stage", self.token, self.blob, dict(faults.ARMED)))
                    w.stages[self.token] = None
                    if len(w.stages) > KEEP_STAGES:  # (as the worker forgets them)
                        w.stages.popitem(last=False)
            cid = next(_cids)
            w.send(("chunk", cid, self.token, (key[0], device, key[2], key[3]), positions,
                    [x._sample for x in xs], regions, place, out_place), fds)
        except PipelineWorkerError as err:
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        chunk = _InWorker(self, w, cid, stream, positions, region)
        chunk.launched = Launched([None] * n, [], chunk, (stack, ex), nodes)
        chunk.key = key
        return chunk.launched

    def _learn(self, key: tuple, n: int, layout: list) -> None:
        """Note the output bytes an input of ``layout`` (a chunk of ``n`` inputs)."""
        per = max((_row_bytes(shape, dtype) for _, shape, dtype, *_ in layout), default=0)
        at = (self.blob, key)
        with _learned_lock:
            if per > _LEARNED.get(at, -1):
                if len(_LEARNED) > 4 * KEEP_STAGES:
                    _LEARNED.clear()
                _LEARNED[at] = per

    def finished(self, chunk: _InWorker) -> None:
        """Wait for the worker's reply to ``chunk`` and give its :class:`Launched` the values:
        members of the region sent with it, or (reply ``planned``: no region or one too
        small) of buffers allocated here now and sent (the worker then launches and replies
        ``done``). Raises :class:`ChunkFailure`."""
        w, cid, positions, launched = chunk.worker, chunk.cid, chunk.positions, chunk.launched
        device = w.device
        n = len(positions)
        span = (positions[0], positions[-1], n)
        try:
            msg = w.wait(cid)
        except PipelineWorkerError as err:
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        if msg[0] == "failed":
            _, _, pos, what, err, whole = msg
            raise ChunkFailure(pos, StepError(what, _rebuilt(err)), span if whole else None)
        key = chunk.key
        if msg[0] == "planned":
            _, _, layout, left = msg
            self._learn(key, n, layout)
            bufs = self._outputs(chunk, layout)
            try:
                msg = w.wait(cid)
            except PipelineWorkerError as err:
                raise ChunkFailure(positions[0], kernels_failed(self.operations, err),
                                   span) from err
            if msg[0] != "done":
                raise _rebuilt(msg[4]) if msg[0] == "failed" else PipelineWorkerError(
                    f"the {w.name} sent {msg[0]!r} for a chunk's outputs")
            launched.left = list(left)
            launched.keep = (*launched.keep, bufs)
            return
        if msg[0] != "done" or chunk.region is None:
            raise PipelineWorkerError(f"the {w.name} sent {msg[0]!r} for a chunk")
        _, _, layout, left = msg
        values, region = launched.values, chunk.region
        for rows, shape, dtype, at in layout:
            rows = rows.tolist()
            k = len(rows)
            buf = runtime.part(region, at, dtype, (k, *shape))
            ms = Batch(buf, shape, dtype, device, runtime.member_views(buf)).members(k)
            if k == n and rows[0] == 0 and rows[-1] == n - 1:  # (every input, in order)
                launched.values = values = ms
                continue
            for r, value in zip(rows, ms, strict=True):
                values[r] = value
        launched.left = list(left)
        launched.keep = (*launched.keep, region)

    def _outputs(self, chunk: _InWorker, layout: list) -> list[Any]:
        """The second exchange: ``chunk``'s output buffers allocated here (per group of
        ``layout``) and sent; its :class:`Launched` given its values. Raises
        :class:`ChunkFailure`."""
        w, cid, positions, launched = chunk.worker, chunk.cid, chunk.positions, chunk.launched
        device = w.device
        span = (positions[0], positions[-1], len(positions))
        out = Exports(device)
        places, bufs = [], []
        try:
            for rows, shape, dtype, *_ in layout:
                rows = rows.tolist()
                buf, place = out.output((len(rows), *shape), dtype)
                bufs.append(buf)
                places.append(place)
                b = Batch(buf, shape, dtype, device, runtime.member_views(buf))
                for r, value in zip(rows, b.members(len(rows)), strict=True):
                    launched.values[r] = value
            stream = chunk.stream
            if stream is not None and runtime.caps.launches_on_streams:
                stream.synchronize()  # (the pool's last use of the memory is done)
            regions, fds = out.seal()
            w.send(("outputs", cid, regions, places), fds)
        except PipelineWorkerError as err:
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        except Exception as err:
            with contextlib.suppress(Exception):  # the worker lets the chunk go (and its reply)
                w.send(("outputs", cid, [], []))
                w.wait(cid)
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        return [out, bufs]


def _row_bytes(shape: tuple, dtype: Any) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


# -- the worker process's side -------------------------------------------------------------
def _picklable(err: BaseException) -> Any:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return (type(err).__name__, str(err))


class _Server:
    """The worker's state: its device and stream, the stages it was sent, chunks between
    their two exchanges and chunks whose kernels are queued."""

    def __init__(self, conn: Connection, device: int, host: bool, stream: Any) -> None:
        self.conn, self.device, self.host = conn, device, host
        self.stream = stream if runtime.caps.launches_on_streams else None
        self.stages: collections.OrderedDict[int, StageChunks] = collections.OrderedDict()
        self.planned: dict[int, tuple] = {}  # cid -> (stage token, opened inputs, Recorded)
        self.queued: collections.deque = collections.deque()  # (cid, opened..., launched)

    def fds(self, regions: list[Any]) -> list[int]:
        return [childproc.receive_fd(self.conn) for _ in regions] if self.host else []

    def handle(self, msg: tuple) -> bool:
        kind = msg[0]
        if kind == "stop":
            return False
        if kind == "ping":
            self.conn.send(("pong", msg[1]))
        elif kind == "stage":
            _, token, blob, armed = msg
            ops, seed = pickle.loads(blob)
            self.stages[token] = StageChunks(ops, seed)
            while len(self.stages) > KEEP_STAGES:
                self.stages.popitem(last=False)
            faults.ARMED.clear()  # (tests: the faults armed where the run started)
            faults.ARMED.update(armed)
        elif kind == "chunk":
            self.chunk(*msg[1:])
        elif kind == "outputs":
            self.outputs(*msg[1:])
        else:
            raise PipelineWorkerError(f"unknown message {kind!r}")
        return True

    def chunk(self, cid: int, token: int, key: tuple, positions: list[int], samples: list[int],
              regions: list[Any], place: tuple | list[tuple], out: tuple | None) -> None:
        """Record chunk ``cid`` and, where its output region ``out`` holds its outputs, launch
        it there (replied ``done`` when its kernels are done: :meth:`finish_one`); else reply
        its layout (``planned``) and wait for buffers (:meth:`outputs`)."""
        opened = Opened(regions, self.fds(regions), self.host, self.device)
        try:
            stage = self.stages[token]
            cls, device, shape, dtype = key
            # the inputs: rows of the stack (members of a batch: ``chunks.stack_values``
            # takes it as it is), or each input's memory, stacked there; the handles only
            # carry type and sample (the recorder reads the stacked values)
            if place[0] == "each":  # each input's memory (``STACK_IN_WORKER``)
                _, rs, ats, *layout = place
                nodes = [stored(opened.array((r, at, *layout)), shape, dtype, device)
                         for r, at in zip(rs.tolist(), ats.tolist(), strict=True)]
            elif isinstance(place, list):  # (inputs of several layouts)
                nodes = [stored(opened.array(p), shape, dtype, device) for p in place]
            else:
                stack = opened.array(place)
                nodes = Batch(stack, shape, dtype, device,
                              runtime.member_views(stack)).members(len(positions))
            xs = []
            for sample in samples:
                y = cls.__new__(cls)
                y._node, y._pinned, y._sample, y._opcount = None, None, sample, 0
                y._bind(stored(None, shape, dtype, device))
                xs.append(y)
            stage.takes(key, xs[0])  # (its draw rules, as decided where the run is)
            got = stage.record(key, positions, xs, nodes, device, self.stream,
                               lambda: self.stream, lambda: False)
        except BaseException as err:
            opened.close()
            self._failed(cid, token, positions[0], err)
            return
        layout, at = [], 0
        for g in got.groups:
            node = g.kernels()[-1].output
            shape, dtype = tuple(node.shape), np.dtype(node.dtype)
            layout.append((g.index, shape, dtype, at))
            at += -(-len(g.index) * _row_bytes(shape, dtype) // ALIGN) * ALIGN
        if out is None or at > out[2][0]:
            self.planned[cid] = (token, opened, got)
            self.conn.send(("planned", cid, layout, list(got.left)))
            return
        region = opened.array(out)
        try:
            launched = self.stages[token].start(
                got, self.stream, [runtime.part(region, a, dt, (len(rows), *shape))
                                   for rows, shape, dt, a in layout])
        except BaseException as err:
            self._finish(opened, None, None)
            self._failed(cid, token, got.span[0], err)
            return
        self.queued.append((cid, opened, None, launched, (layout, list(got.left))))

    def _failed(self, cid: int, token: int, position: int, err: BaseException) -> None:
        """Reply that chunk ``cid`` failed: a :class:`ChunkFailure`'s input and step, else the
        whole chunk's kernels."""
        if isinstance(err, ChunkFailure):
            self.conn.send(("failed", cid, err.position, err.err.what,
                            _picklable(err.err.cause), err.span is not None))
            return
        stage = self.stages.get(token)
        what = kernels_failed(stage.operations if stage is not None else [], err).what
        self.conn.send(("failed", cid, position, what, _picklable(err), True))

    def outputs(self, cid: int, regions: list[Any], places: list[tuple]) -> None:
        """Launch chunk ``cid``'s kernels into this process's output buffers (none: let the
        chunk go)."""
        token, opened, got = self.planned.pop(cid)
        dst = Opened(regions, self.fds(regions), self.host, self.device)
        if len(places) != len(got.groups):
            self._finish(opened, dst, None)
            self.conn.send(("failed", cid, got.span[0], "", ("RuntimeError", "no outputs"),
                            True))
            return
        try:
            launched = self.stages[token].start(got, self.stream,
                                                [dst.array(place) for place in places])
        except BaseException as err:
            self._finish(opened, dst, None)
            self._failed(cid, token, got.span[0], err)
            return
        self.queued.append((cid, opened, dst, launched, None))

    def oldest_done(self) -> bool:
        """Whether the oldest queued chunk's kernels are done (its event has fired; no event:
        the backend launches synchronously)."""
        event = self.queued[0][3].event
        return event is None or event.query()

    def finish_one(self) -> None:
        """Wait for the oldest chunk's kernels, close its mappings, say it is done."""
        cid, opened, dst, launched, reply = self.queued.popleft()
        try:  # (this chunk's kernels: the ones queued after it run on)
            if launched.event is not None:
                launched.event.synchronize()
            elif self.stream is not None:
                self.stream.synchronize()
        except BaseException as err:
            self._finish(opened, dst, launched)
            self.conn.send(("failed", cid, 0, "", _picklable(err), True))
            return
        self._finish(opened, dst, launched)
        self.conn.send(("done", cid) if reply is None else ("done", cid, *reply))

    @staticmethod
    def _finish(opened: Opened, dst: Opened | None, launched: Launched | None) -> None:
        if launched is not None:  # (its arrays over the mappings go first)
            launched.keep = ()
            launched.values = []
        if dst is not None:
            dst.close()
        opened.close()


def worker_main(fd: int) -> int:
    """The worker process (:func:`run_worker`): chunks of the messages it is sent, until
    stopped or its parent's end of the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    conn = Connection(fd)
    try:
        _, device, host = conn.recv()
    except (EOFError, OSError):
        return 0
    try:
        device = int(device)
        stream, _ = STREAMS.acquire(device)  # (as a Pipeline's worker thread takes one)
        server = _Server(conn, device, bool(host), stream)
        conn.send(("alive", os.getpid()))
        with runtime.on_device(device), runtime.using_stream(stream), \
                devices.targeting(device):
            while True:
                # a chunk whose kernels are done is replied at once; else messages first (the
                # next chunk is recorded while the device runs the last)
                if server.queued and (server.oldest_done() or not conn.poll(0)):
                    server.finish_one()
                    continue
                if not server.handle(conn.recv()):
                    break
    except (EOFError, OSError):
        return 0
    except BaseException as err:
        import traceback

        traceback.print_exc()
        with contextlib.suppress(Exception):
            conn.send(("fatal", f"{type(err).__name__}: {err}"))
        return 1
    return 0


def run_worker(fd: int) -> None:
    """The worker process's entry point: :func:`worker_main`, then the process ends."""
    code = worker_main(fd)
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
