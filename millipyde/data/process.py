"""Reading and decoding in a worker process: the training process's GIL left to training.

In one process, the threads that read files, the decode call and the training side's Python
(the batch engine's record and launches, torch) share one GIL: nvImageCodec's batched decode
takes the GIL back about twice an image and waits for it each time another thread runs Python,
so inside the pipeline a decode of 256 images took 3-4x as long as alone (bench/RESULTS.md,
"the decode call inside the pipeline"). A :class:`ProcessLoader` serves the same batches as
:class:`~millipyde.data.loader.Loader` (same samples, order, labels, refills, bad-file
warnings, errors) from a worker process of its own, which runs that ``Loader`` (its read-ahead
threads and decode thread) under its own GIL.

The worker is a fresh interpreter (``python -c ...run_worker(FD)``: started with
``subprocess``, never forked, so a CUDA context of the training process is never copied, and
the training script is not imported again as multiprocessing's spawn would). One socket pair
carries pickled messages both ways. The worker decodes each batch into a *slot*: a byte arena
it owns, the batch's images at aligned offsets, exported to the training process once:

- on a GPU, device memory shared by CUDA IPC (``cuIpcGetMemHandle`` through numba-cuda's
  ``get_ipc_handle``); the decoded images (nvImageCodec's own allocations, or Pillow's
  uploads) are copied into the slot in one driver call (``copy_addresses``), on the worker's
  stream, synchronised before the batch is announced;
- on the cpu backend, host memory: an anonymous ``memfd`` mapped by both processes, its
  descriptor passed over the socket (``SCM_RIGHTS``), so nothing is left in ``/dev/shm``
  whatever way either process ends.

The training process wraps the slot's images without copying (``decode.DeviceImage`` over the
device addresses; NumPy arrays over the mapping), each holding the batch's *lease*. When the
last of them goes (after the batch's kernels have read it: the batch engine keeps a decoded
batch until its batch's event has fired), the lease is returned: on a GPU once an event recorded
on the legacy default stream after that (every blocking stream's work queued before it, the
batch's kernels included) has completed, on the host at once. Slots are made as needed, sized
to the batch (at most :data:`MAX_SLOTS`); the worker decodes at most ``ahead`` batches beyond
the one asked for.

Failures: an error of a batch (``strict``, or a bad sample nothing could replace) is raised by
:meth:`ProcessLoader.get` for that batch, as the in-process Loader raises it; a worker that
dies, or cannot start, raises :class:`DecodeWorkerError` naming the stream and the worker
(pid, exit status). :meth:`ProcessLoader.close` stops the worker and waits for it (killed after
:data:`STOP_SECONDS`); a worker whose training process goes away sees its socket close and
exits.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import math
import mmap
import os
import pickle
import signal
import socket
import sys
import threading
import time
import weakref
from multiprocessing import reduction
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import childproc, config
from ..backend import ACTIVE as runtime
from . import decode as decode_mod
from . import fileread
from . import loader as loader_mod
from . import region as region_mod
from .loader import BadSampleError, BadSamples, DecodedBatch
from .readahead import MAX_ITEMS, READ_THREADS, WINDOW_BYTES

#: slots (decoded batches held by the worker or leased to the training process) at most
MAX_SLOTS = 12
#: alignment of each image in a slot (bytes)
ALIGN = 256
#: seconds close() waits for the worker to exit before it is killed
STOP_SECONDS = childproc.STOP_SECONDS
#: seconds a worker has to start (import, backend, decoder) before it counts as failed
START_SECONDS = 300.0


class DecodeWorkerError(RuntimeError):
    """A decode worker process died, could not start, or broke the protocol; the message names
    the stream and the worker."""


def supported() -> bool:
    """Whether this backend can take batches from a worker process: the cpu backend (host
    memory) and the cuda backend on a GPU (CUDA IPC), on Linux."""
    if not hasattr(os, "memfd_create") or not hasattr(socket, "send_fds"):
        return False
    return runtime.caps.shared_batches is not None


#: ``decode_process`` where a Generator does not say (and ``MILLIPYDE_DECODE_PROCESS`` is not
#: set): "auto", a worker on the cuda backend for streams of at least :data:`AUTO_SAMPLES` a
#: rank's epoch, the training process otherwise. On H200s the folder through a worker made
#: 0.97-1.42x the in-process rate, faster in 8 of 10 pairs of rows on 2026-11-29 (bench/
#: RESULTS.md: in one process the decode call waits for the GIL), at ~3.5-4 s of start per iterator
#: (a Python, a CUDA context, a decoder); on the cpu backend Pillow's threads release the GIL
#: while they decode, and a worker only adds its start.
DEFAULT: bool | str = "auto"
#: the fewest samples in a rank's epoch for which "auto" takes a worker: one start per epoch
#: (~4 s) is then at most ~5% of an epoch at the worker's ~12-13k img/s
AUTO_SAMPLES = 50_000


def use_process(choice: Any, samples: int | None = None) -> bool:
    """Whether a stream decodes in a worker process, for the Generator's ``decode_process``
    (True, False, ``"auto"``; or None: ``MILLIPYDE_DECODE_PROCESS`` = ``1`` / ``0`` /
    ``auto``, else :data:`DEFAULT`). ``"auto"``: on the cuda backend, for a rank's epoch of
    at least :data:`AUTO_SAMPLES` (``samples``; None: any).

    Raises
    ------
    ValueError
        True (or ``1``) where the backend cannot (:func:`supported`), or an unknown value.
    """
    if choice is None:
        choice = config.decode_process()
        if choice is None:
            choice = DEFAULT
    if choice == "auto":
        return runtime.caps.shared_batches == "cuda_ipc" and supported() and \
            (samples is None or samples >= AUTO_SAMPLES)
    if choice and not supported():
        raise ValueError(f"decode_process=True: the {runtime.name} backend cannot take batches "
                         "from a worker process (the cpu backend and CUDA GPUs on Linux can)")
    return bool(choice)


# -- the training process's side ---------------------------------------------------------------
class ProcessLoader:
    """Decoded batches of ``plan`` made by a worker process (see the module doc); the
    interface of :class:`~millipyde.data.loader.Loader` (``get``, ``close``, ``stats``).

    Parameters
    ----------
    source, sampler, plan, decoder, device, bad, strict, ahead, threads, window, first
        As :class:`~millipyde.data.loader.Loader`'s, except ``decoder``: the choice
        (``"auto"``, ``"pillow"``, ``"nvimgcodec"``), made into a decoder in the worker.
    name : str
        What errors call the stream (the source and the rank).

    Raises
    ------
    DecodeWorkerError
        The source or sampler cannot be sent to a process (a custom source that does not
        pickle), or the worker cannot be started.
    """

    def __init__(self, source: Any, sampler: Any, plan: Any, decoder: str, device: int,
                 bad: BadSamples, *, strict: bool = False, ahead: int | None = None,
                 threads: int = READ_THREADS, window: int = WINDOW_BYTES, first: int = 0,
                 name: str = "", region: Any = None) -> None:
        self.source, self.sampler, self.plan = source, sampler, plan
        self.device, self.bad, self.strict = device, bad, strict
        self.first = int(first)
        self.ahead = max(1, int(loader_mod.AHEAD if ahead is None else ahead))
        self.name = name or repr(source)
        self.host = runtime.caps.shared_batches == "host"
        self._most = MAX_SLOTS
        #: the worker's Loader's seconds (read wait, decode, other) and batches, as
        #: ``Loader.stats``; and the training side's wait for batches
        self.stats = {"read_wait_s": 0.0, "decode_s": 0.0, "other_s": 0.0, "batches": 0,
                      "decode_first_s": 0.0, "wait_s": 0.0, "px_regions": 0, "px_whole": 0}
        #: the worker's decoder and read-ahead, as far as reports need them (``name``,
        #: ``on_gpu``, ``on_host``; ``peak``), updated with each batch
        self.decoder = SimpleNamespace(name=decoder, on_gpu=None, on_host=None)
        self.reader = SimpleNamespace(peak=0, nogil_reads=None)  # the worker's, per batch
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._ready: dict[int, Any] = {}
        self._end: int | None = None
        self._want = self.first
        self._told_want = -1
        self._planned = self.first  # next batch whose plan is sent
        self._plan_done = False
        self._plan_sizes: dict[int, int] = {}  # batch -> samples, for batches from _want on
        self._receiver = childproc.Receiver(self._cond)  # (one thread reads the socket)
        self._stopped = False
        self._dead: BaseException | None = None
        self._slots: dict[int, Any] = {}  # slot id -> its mapping in this process
        self._gens: dict[int, int] = {}  # slot id -> generation (a slot remade: a new one)
        self._returned: collections.deque = collections.deque()  # leases gone: (sid, gen)
        self._leased: set[int] = set()  # slots whose batch's arrays live here
        self._pending: list[tuple[Any, list[int]]] = []  # (event, slot ids) to release
        try:
            settings = pickle.dumps({
                "source": source, "sampler": sampler, "decoder": decoder, "device": device,
                "strict": strict, "ahead": self.ahead, "threads": threads, "window": window,
                "first": self.first, "known": sorted(bad.known), "backend": runtime.name,
                "host": self.host,
                "max_slots": self._most,
                # the worker reads files as this process would (the bench switches it)
                "nogil_reads": fileread.ENABLED, "hold_readers": loader_mod.HOLD_READERS,
                "hold_stock": loader_mod.HOLD_STOCK_BATCHES,
                "decode_lanes": loader_mod.DECODE_LANES, "segments": loader_mod.SEGMENTS,
                "switch_interval": loader_mod.SWITCH_INTERVAL,
                "nvimgcodec_api": decode_mod.nvimgcodec_api(),
                "capi_compiled": decode_mod.CAPI_COMPILED,
                "regions_in_decode": decode_mod.REGIONS_IN_DECODE,
                "one_pass": decode_mod.ONE_PASS,
                "parse_in_readers": loader_mod.PARSE_IN_READERS,
                "cut_whole": region_mod.CUT_WHOLE,
                # the first op's regions (``training.region_plan.RegionPlan``, which pickles
                # as its Operation's method and arguments and the seed)
                "region": region,
                "name": self.name}, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:
            raise DecodeWorkerError(
                f"decode worker of {self.name}: the source or sampler cannot be sent to a "
                f"process ({type(err).__name__}: {err}); use decode_process=False") from err
        self._proc, self._sock, self._conn = childproc.spawn(
            "millipyde.data.process", "run_worker", runtime.name,
            f"decode worker of {self.name}", DecodeWorkerError)
        self._started = time.monotonic()
        self._alive_seen = False
        self.worker = f"decode worker pid {self._proc.pid}"
        try:
            self._send(("config", settings))
            self._send_plans()
        except OSError as err:  # it died at once: said by the first get()
            self._lost(err)
        # collected without close(): the worker is told to stop and sees its socket close
        self._finalizer = weakref.finalize(self, childproc.stop, self._proc, self._conn,
                                           self._sock, False)

    # -- messages -------------------------------------------------------------------------
    def _send(self, msg: Any) -> None:
        with self._send_lock:
            self._conn.send(msg)

    def _send_plans(self) -> None:
        """The plans the worker may need, in one message: its read-ahead threads ask for a
        plan while they hold the read-ahead's lock, so a plan not yet here would stop its
        decode thread too. Batch ``want`` is asked for; the worker packs at most ``ahead``
        more, its decode thread decodes at most ``ahead`` past that, and its readers read at
        most ``MAX_ITEMS`` samples past what it took: so every batch up to ``want + 2 *
        ahead + 1`` and then ``MAX_ITEMS`` more samples are sent."""
        want = self._want
        for b in [b for b in self._plan_sizes if b < want]:
            del self._plan_sizes[b]
        far = want + 2 * self.ahead + 2
        beyond = sum(n for b, n in self._plan_sizes.items() if b >= far)
        out = []
        while not self._plan_done and (self._planned < far or beyond <= MAX_ITEMS):
            ks = self.plan(self._planned)
            if ks is None:
                out.append((self._planned, None))
                self._plan_done = True
                break
            ks = np.asarray(ks, dtype=np.int64)
            self._plan_sizes[self._planned] = len(ks)
            if self._planned >= far:
                beyond += len(ks)
            out.append((self._planned, ks))
            self._planned += 1
        if out:
            self._send(("plans", out))

    def _flush_returns(self) -> None:
        """Leases that went: released to the worker (on a GPU once the device's blocking
        streams have passed the point where they went)."""
        if self._stopped:
            return
        sids = []
        while self._returned:
            sid, gen = self._returned.popleft()
            if self._gens.get(sid) == gen:
                sids.append(sid)
                self._leased.discard(sid)
        if sids:
            if self.host:
                self._send(("release", sids))
            else:
                from numba import cuda

                with runtime.on_device(self.device):
                    ev = cuda.event(timing=False)
                    ev.record(cuda.default_stream())
                self._pending.append((ev, sids))
        while self._pending and self._pending[0][0].query():
            _, done = self._pending.pop(0)
            self._send(("release", done))

    def _pump(self, timeout: float) -> None:
        """One round: returned leases, plans and the batch asked for sent; messages received
        (waiting up to ``timeout`` for one)."""
        try:
            self._flush_returns()
            self._send_plans()
            if self._want != self._told_want:
                self._told_want = self._want
                self._send(("want", self._want))
            got = self._conn.poll(timeout)
            while got:
                msg = self._conn.recv()
                self._handle(msg)
                got = self._conn.poll(0)
        except (EOFError, OSError) as err:  # the socket closed: by close(), or the end
            self._lost(err)
            return
        except ValueError as err:  # ("handle is closed": close() meanwhile)
            if not self._stopped:
                raise
            self._lost(err)
            return
        if self._proc.poll() is not None:
            self._dead = self._death()

    def _lost(self, err: BaseException) -> None:
        """The socket failed: what the worker sent before it went (its ``fatal`` reason) is
        read, then it is dead."""
        if self._stopped:
            return
        with contextlib.suppress(Exception):
            while self._dead is None and self._conn.poll(0):
                self._handle(self._conn.recv())
        if self._dead is None:
            self._dead = self._death()
        self._dead.__cause__ = err

    def _death(self) -> DecodeWorkerError:
        how = childproc.how_it_ended(self._proc)
        return DecodeWorkerError(f"the {self.worker} of stream {self.name} {how} (its "
                                 "output above says why where it could)")

    def _handle(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "alive":
            self._alive_seen = True
        elif kind == "slot":
            _, sid, cap, payload = msg
            self._open_slot(sid, cap, payload)
        elif kind == "batch":
            _, b, sid, ks, samples, offsets, shapes, dtypes, bad, stats = msg
            for sample, name, why in bad:
                self.bad.add_reason(sample, name, why)
            for key in ("read_wait_s", "decode_s", "other_s", "batches", "decode_first_s",
                        "px_regions", "px_whole"):
                self.stats[key] = stats[key]
            for key in stats:  # the lane calls' segments (``loader.SEGMENTS``)
                if key.startswith(("seg_", "part_")):
                    self.stats[key] = stats[key]
            self.decoder.name = stats["decoder"]
            self.decoder.on_gpu, self.decoder.on_host = stats["on_gpu"], stats["on_host"]
            self.reader.peak = stats["read_peak"]
            self.reader.nogil_reads = stats.get("nogil_reads")
            with self._cond:
                self._ready[b] = self._wrap(sid, ks, samples, offsets, shapes, dtypes,
                                            stats.get("regions"))
                self._cond.notify_all()
        elif kind == "end":
            with self._cond:
                self._end = msg[1]
                self._cond.notify_all()
        elif kind == "error":
            _, b, bad, err = msg
            for sample, name, why in bad:
                self.bad.add_reason(sample, name, why)
            with self._cond:
                self._ready[b] = _as_exception(err)
                self._cond.notify_all()
        elif kind == "fatal":
            self._dead = DecodeWorkerError(f"the {self.worker} of stream {self.name} "
                                           f"failed: {msg[1]}")
        else:
            self._dead = DecodeWorkerError(f"the {self.worker} of stream {self.name} sent "
                                           f"an unknown message {kind!r}")

    def _open_slot(self, sid: int, cap: int, payload: Any) -> None:
        self._gens[sid] = self._gens.get(sid, 0) + 1
        if self.host:
            fd = reduction.recv_handle(self._conn)
            try:
                m = mmap.mmap(fd, cap)
            finally:
                os.close(fd)
            base = np.frombuffer(m, np.uint8)
            self._slots[sid] = HostSlot(m, base, int(base.ctypes.data))
        else:
            old = self._slots.pop(sid, None)  # made again larger: the old one is free
            if old is not None:
                with contextlib.suppress(Exception):
                    old.handle.close()
            with runtime.on_device(self.device):
                arr = payload.open()
            from numba.cuda.cudadrv import driver

            self._slots[sid] = DeviceSlot(payload, arr, int(driver.device_pointer(arr)))

    def _wrap(self, sid: int, ks: np.ndarray, samples: np.ndarray, offsets: list,
              shapes: list, dtypes: list, regions: np.ndarray | None = None) -> DecodedBatch:
        """Batch arrays over slot ``sid`` (no copy), each holding the batch's lease."""
        slot = self._slots[sid]
        lease = Lease(slot)
        weakref.finalize(lease, self._returned.append, (sid, self._gens[sid]))
        self._leased.add(sid)
        arrays: list[Any] = []
        if self.host:
            for off, shape, dt in zip(offsets, shapes, dtypes, strict=True):
                arrays.append(np.asarray(HostView(lease, slot.addr + off, shape, dt)))
        else:
            from .decode import DeviceImage

            for off, shape, dt in zip(offsets, shapes, dtypes, strict=True):
                ptr = slot.addr + off
                arrays.append(DeviceImage(DeviceView(lease, ptr, shape, dt), shape, ptr,
                                          dtype=dt))
        src = self.source
        labels = None if src.labels is None else src.labels[samples]
        targets = None
        if src.has_targets:
            targets = [src.targets(int(s), tuple(a.shape[:2]))
                       for s, a in zip(samples.tolist(), arrays, strict=True)]
        return DecodedBatch(ks, samples, arrays, labels, targets, None, regions)

    # -- the consumer ---------------------------------------------------------------------
    def get(self, b: int) -> DecodedBatch | None:
        """Decoded batch ``b`` (asked in order), or None past the end of the plan.

        Raises
        ------
        BadSampleError
            ``strict`` and a bad sample, or a bad sample nothing could replace.
        DecodeWorkerError
            The worker died or failed (naming the stream and the worker).
        """
        t0 = time.perf_counter()
        starved_since = None
        with self._cond:
            self._want = max(self._want, b)
            while b not in self._ready:
                if self._end is not None and b >= self._end:
                    return None
                if self._stopped:
                    raise RuntimeError("the loader was closed")
                if self._dead is not None:
                    raise self._dead
                if not self._alive_seen and time.monotonic() - self._started > START_SECONDS:
                    raise DecodeWorkerError(f"the {self.worker} of stream {self.name} did "
                                            f"not start within {START_SECONDS:.0f} s")
                if not self._receiver.turn(self._pump):
                    continue
                if b not in self._ready and len(self._leased) >= self._most:
                    # every slot leased: a lease in a reference cycle goes with a collection
                    now = time.monotonic()
                    starved_since = starved_since or now
                    if now - starved_since > 1.0:
                        starved_since = now
                        gc.collect()
            got = self._ready.pop(b)
            self._want = max(self._want, b + 1)
        self.stats["wait_s"] += time.perf_counter() - t0
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self, join: bool = True) -> None:
        """Stop the worker (waiting for it to exit: ``join``) and drop the batches made ahead.
        Arrays of batches already handed out stay readable on the cpu backend (the mapping
        goes with the last of them); on a GPU, the worker's memory goes with it."""
        with self._cond:
            if self._stopped and not join:
                return
            self._stopped = True
            self._ready.clear()
            self._cond.notify_all()
        if join:
            self._finalizer.detach()
            if not self.host and self._slots:
                # the mappings close before the worker frees the memory (the other order is
                # undefined in CUDA), once no queued kernel can still read them
                with contextlib.suppress(Exception), runtime.on_device(self.device):
                    runtime.synchronize(self.device)
                for slot in self._slots.values():
                    with contextlib.suppress(Exception):
                        slot.handle.close()
            self._slots.clear()
            childproc.stop(self._proc, self._conn, self._sock, True)
        else:
            self._finalizer()

    def __del__(self) -> None:
        if getattr(self, "_finalizer", None) is not None:  # (not when __init__ failed)
            self.close(join=False)


def _as_exception(err: Any) -> BaseException:
    if isinstance(err, BaseException):
        return err
    kind, text = err
    if kind == "BadSampleError":
        return BadSampleError(text)
    return RuntimeError(f"{kind}: {text}")


class HostSlot:
    """A slot's mapping in the training process (cpu backend)."""

    __slots__ = ("mapping", "base", "addr")

    def __init__(self, mapping: mmap.mmap, base: np.ndarray, addr: int) -> None:
        self.mapping, self.base, self.addr = mapping, base, addr


class DeviceSlot:
    """A slot's IPC mapping in the training process (GPU)."""

    __slots__ = ("handle", "array", "addr")

    def __init__(self, handle: Any, array: Any, addr: int) -> None:
        self.handle, self.array, self.addr = handle, array, addr


class Lease:
    """One batch's hold on its slot: every array of the batch keeps it; when it goes, the
    slot goes back to the worker (see the module doc). It keeps the slot's mapping alive."""

    __slots__ = ("slot", "__weakref__")

    def __init__(self, slot: Any) -> None:
        self.slot = slot


class HostView:
    """``__array_interface__`` of one image in a host slot: ``np.asarray`` of it is an array
    whose base is this object (views of it too), which holds the lease."""

    __slots__ = ("lease", "__array_interface__")

    def __init__(self, lease: Lease, addr: int, shape: tuple, dtype: str) -> None:
        self.lease = lease
        self.__array_interface__ = {"data": (addr, False), "shape": tuple(shape),
                                    "typestr": np.dtype(dtype).str, "version": 3}


class DeviceView:
    """``__cuda_array_interface__`` of one image in a device slot (``DeviceImage`` keeps it
    as its image, and the lease with it)."""

    __slots__ = ("lease", "__cuda_array_interface__")

    def __init__(self, lease: Lease, ptr: int, shape: tuple, dtype: str) -> None:
        self.lease = lease
        self.__cuda_array_interface__ = {"data": (int(ptr), False), "shape": tuple(shape),
                                         "typestr": np.dtype(dtype).str, "strides": None,
                                         "version": 3}


# -- the worker process's side -----------------------------------------------------------------
class _Recording(BadSamples):
    """The worker's bad samples, each also logged to be sent with the next batch."""

    def __init__(self, known: list[int]) -> None:
        super().__init__()
        self.known.update(int(k) for k in known)
        self.log: list[tuple[int, str, str]] = []

    def add_reason(self, sample: int, name: str, why: str) -> None:
        super().add_reason(sample, name, why)
        with self._lock:
            self.log.append((int(sample), name, why))

    def drain(self) -> list[tuple[int, str, str]]:
        with self._lock:
            out, self.log = self.log, []
        return out


class _Inbox:
    """What the training process sent: plans, the batch it asks for, released slots, stop."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.on_stop: Any = None  # called once stopped (the Loader's close, not joined)
        self.plans: dict[int, Any] = {}
        self.want = 0
        self.free: set[int] = set()
        self.stopped = False

    def plan(self, b: int) -> Any:
        """Batch ``b``'s plan (waits for it); None past the end, or once stopped."""
        with self.cond:
            while b not in self.plans and not self.stopped:
                self.cond.wait()
            return None if self.stopped else self.plans[b]

    def drop_plans(self, below: int) -> None:
        with self.cond:
            for b in [b for b in self.plans if b < below]:
                del self.plans[b]

    def receive(self, conn: Connection) -> None:
        """The receiving thread: until stop, or the training process's end of the socket
        closes."""
        try:
            while True:
                msg = conn.recv()
                with self.cond:
                    kind = msg[0]
                    if kind == "plans":
                        self.plans.update(msg[1])
                    elif kind == "want":
                        self.want = max(self.want, msg[1])
                    elif kind == "release":
                        self.free.update(msg[1])
                    elif kind == "stop":
                        self.stopped = True
                    self.cond.notify_all()
                    if self.stopped:
                        break
        except (EOFError, OSError):
            pass
        finally:
            with self.cond:
                self.stopped = True
                self.cond.notify_all()
                stop = self.on_stop
            if stop is not None:
                stop()


class _Slots:
    """The worker's slots (see the module doc): made when needed, sized to the batch."""

    def __init__(self, conn: Connection, inbox: _Inbox, device: int, host: bool,
                 parent: int, most: int) -> None:
        self.conn, self.inbox, self.device, self.host = conn, inbox, device, host
        self.most = max(1, int(most))
        self.parent = parent
        self.caps: dict[int, int] = {}
        self.held: dict[int, Any] = {}  # sid -> (fd, mmap, array) or device array
        self.stream: Any = None
        if not host:
            self.stream = runtime.take_stream(device)  # the process's, never destroyed

    def acquire(self, nbytes: int) -> int | None:
        """A free slot of at least ``nbytes`` (made, or remade larger, where none is); None
        once stopped."""
        inbox = self.inbox
        with inbox.cond:
            while True:
                if inbox.stopped:
                    return None
                fits = [s for s in inbox.free if self.caps[s] >= nbytes]
                if fits:
                    sid = min(fits, key=lambda s: self.caps[s])
                    inbox.free.discard(sid)
                    return sid
                if len(self.caps) < self.most:
                    sid = len(self.caps)
                    break
                if inbox.free:  # free, too small: made again larger
                    sid = min(inbox.free)
                    inbox.free.discard(sid)
                    break
                inbox.cond.wait()
        self._make(sid, nbytes)
        return sid

    def _make(self, sid: int, nbytes: int) -> None:
        cap = max(1 << 20, int(math.ceil(nbytes * 1.25 / (1 << 20))) << 20)
        self.held.pop(sid, None)  # a slot made again: the old memory goes
        self.caps[sid] = cap
        if self.host:
            fd = os.memfd_create(f"millipyde-decode-slot-{sid}", os.MFD_CLOEXEC)
            os.ftruncate(fd, cap)
            m = mmap.mmap(fd, cap)
            self.held[sid] = (m, np.frombuffer(m, np.uint8))
            self.conn.send(("slot", sid, cap, None))
            reduction.send_handle(self.conn, fd, self.parent)
            os.close(fd)
        else:
            from numba import cuda

            with runtime.on_device(self.device):
                arr = cuda.device_array((cap,), dtype=np.uint8)
                handle = arr.get_ipc_handle()
            self.held[sid] = arr
            self.conn.send(("slot", sid, cap, handle))

    def pack(self, sid: int, db: DecodedBatch, offsets: list[int]) -> None:
        """``db``'s images into slot ``sid`` at ``offsets`` (complete when this returns)."""
        if self.host:
            _, base = self.held[sid]
            for a, off in zip(db.arrays, offsets, strict=True):
                a = np.ascontiguousarray(a)
                base[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
            return
        from numba.cuda.cudadrv import driver

        base = int(driver.device_pointer(self.held[sid]))
        n = len(db.arrays)
        dsts = np.empty(n, np.uint64)
        srcs = np.empty(n, np.uint64)
        sizes = np.empty(n, np.uint64)
        for i, (a, off) in enumerate(zip(db.arrays, offsets, strict=True)):
            ptr = getattr(a, "device_ptr", None)
            dsts[i] = base + off
            srcs[i] = ptr if ptr is not None else int(driver.device_pointer(a))
            sizes[i] = int(a.size) * np.dtype(a.dtype).itemsize
        with runtime.on_device(self.device):
            if db.ready is not None:
                runtime.wait_event(db.ready, self.stream)
            runtime.copy_addresses(dsts, srcs, sizes, self.device, self.stream)
            self.stream.synchronize()


def _layout(arrays: list) -> tuple[list[int], int]:
    """Aligned offsets of ``arrays`` in a slot, and the bytes they take."""
    offsets, at = [], 0
    for a in arrays:
        offsets.append(at)
        at += -(-int(a.size) * np.dtype(a.dtype).itemsize // ALIGN) * ALIGN
    return offsets, at


def _picklable(err: BaseException) -> Any:
    try:
        pickle.dumps(err)
        return err
    except Exception:
        return (type(err).__name__, str(err))


def worker_main(fd: int) -> int:
    """The worker process (:func:`run_worker`): the Loader of the
    configuration it is sent, its batches into slots, until stopped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the training process stops it
    conn = Connection(fd)
    parent = os.getppid()
    try:
        kind, blob = conn.recv()
    except (EOFError, OSError):
        return 0
    try:
        cfg = pickle.loads(blob)
    except Exception as err:
        with contextlib.suppress(Exception):
            conn.send(("fatal", f"it could not rebuild the source and sampler it was sent "
                                f"({type(err).__name__}: {err}); a source's class must be "
                                "importable by another Python process (defined in a module, "
                                "not in the script run as __main__), else use "
                                "decode_process=False"))
        return 1
    inbox = _Inbox()
    receiver = threading.Thread(target=inbox.receive, args=(conn,), daemon=True,
                                name="millipyde-decode-inbox")
    receiver.start()
    loader = None
    try:
        from .decode import make_decoder
        from .loader import Loader

        device = int(cfg["device"])
        fileread.ENABLED = bool(cfg.get("nogil_reads", fileread.ENABLED))
        loader_mod.HOLD_READERS = bool(cfg.get("hold_readers", loader_mod.HOLD_READERS))
        loader_mod.HOLD_STOCK_BATCHES = int(cfg.get("hold_stock",
                                                    loader_mod.HOLD_STOCK_BATCHES))
        loader_mod.DECODE_LANES = int(cfg.get("decode_lanes", loader_mod.DECODE_LANES))
        loader_mod.SEGMENTS = bool(cfg.get("segments", loader_mod.SEGMENTS))
        loader_mod.SWITCH_INTERVAL = float(cfg.get("switch_interval",
                                                   loader_mod.SWITCH_INTERVAL))
        decode_mod.NVIMGCODEC_API = cfg.get("nvimgcodec_api", decode_mod.NVIMGCODEC_API)
        decode_mod.CAPI_COMPILED = bool(cfg.get("capi_compiled", decode_mod.CAPI_COMPILED))
        decode_mod.REGIONS_IN_DECODE = bool(cfg.get("regions_in_decode",
                                                    decode_mod.REGIONS_IN_DECODE))
        decode_mod.ONE_PASS = bool(cfg.get("one_pass", decode_mod.ONE_PASS))
        loader_mod.PARSE_IN_READERS = bool(cfg.get("parse_in_readers",
                                                   loader_mod.PARSE_IN_READERS))
        region_mod.CUT_WHOLE = bool(cfg.get("cut_whole", region_mod.CUT_WHOLE))
        bad = _Recording(cfg["known"])
        decoder = make_decoder(cfg["decoder"], device)
        plan = cfg.get("region")  # (unpickled: rebuilt by the module that defines it)
        loader = Loader(cfg["source"], cfg["sampler"], inbox.plan, decoder, device, bad,
                        strict=cfg["strict"], ahead=cfg["ahead"], threads=cfg["threads"],
                        window=cfg["window"], first=cfg["first"], region=plan)
        slots = _Slots(conn, inbox, device, cfg["host"], parent, cfg["max_slots"])
        with inbox.cond:
            inbox.on_stop = lambda: loader.close(join=False)
            stopped = inbox.stopped
        if stopped:
            return 0
        conn.send(("alive",))
        for b in itertools.count(cfg["first"]):
            with inbox.cond:  # at most `ahead` batches past the one asked for
                while not inbox.stopped and b >= inbox.want + cfg["ahead"] + 1:
                    inbox.cond.wait()
                if inbox.stopped:
                    break
            try:
                db = loader.get(b)
            except BaseException as err:  # the batch's error: raised by the training side
                if inbox.stopped:
                    break
                conn.send(("error", b, bad.drain(), _picklable(err)))
                break
            if db is None:
                conn.send(("end", b))
                break
            offsets, nbytes = _layout(db.arrays)
            sid = slots.acquire(nbytes)
            if sid is None:
                break
            slots.pack(sid, db, offsets)
            on_gpu, on_host = loader.decoded()
            conn.send(("batch", b, sid, db.ks, db.samples, offsets,
                       [tuple(int(d) for d in a.shape) for a in db.arrays],
                       [np.dtype(a.dtype).str for a in db.arrays], bad.drain(),
                       {**loader.stats, "decoder": decoder.name,
                        "on_gpu": on_gpu, "on_host": on_host,
                        "read_peak": loader.reader.peak,
                        "nogil_reads": loader.reader.nogil_reads, "regions": db.regions}))
            del db
            inbox.drop_plans(b)
        with inbox.cond:  # wait for stop (or the socket's end): batches stay leased till then
            while not inbox.stopped:
                inbox.cond.wait()
    except BaseException as err:
        if inbox.stopped:  # told to stop (or the training process went): nothing to say
            return 0
        import traceback

        traceback.print_exc()
        with contextlib.suppress(Exception):
            conn.send(("fatal", f"{type(err).__name__}: {err}"))
        return 1
    finally:
        with inbox.cond:
            inbox.stopped = True
            inbox.cond.notify_all()
        if loader is not None:
            loader.close()
    return 0


def run_worker(fd: int) -> None:
    """The worker process's entry point: :func:`worker_main`, then the process ends without
    the interpreter's teardown (the decoder's native objects have ended processes with a
    segmentation fault at exit: bench/RESULTS.md, datasets)."""
    code = worker_main(fd)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
