"""The cuda backend's devices, contexts and streams (a part of ``CudaBackend``).

``on_device`` makes a device's context current for a block, at no cost when it already is;
streams and events order the work queued on them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import rawlaunch
from .base import DeviceInfo
from .pool import stream_handle


class _Unchanged:
    """The context of ``on_device`` when the device is already current: nothing to do."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


#: the one _Unchanged context (the simulator's on_device returns it as well)
UNCHANGED = _Unchanged()

#: each device's total memory in bytes (None: the driver does not say), asked once
_TOTAL_MEMORY: dict[int, int | None] = {}


class _Adopted:
    """The context of ``on_device`` when the thread's current context already is the device's:
    only the thread's record of its device changes, for the block."""

    __slots__ = ("_tls", "_device")

    def __init__(self, tls: threading.local, device: int) -> None:
        self._tls, self._device = tls, device

    def __enter__(self) -> None:
        self._tls.device = self._device

    def __exit__(self, *exc: object) -> bool:
        self._tls.device = None
        return False


class CudaDevices:
    """Devices, peer access, the current context and streams of ``CudaBackend``."""

    # -- devices -----------------------------------------------------------------------
    def device_count(self) -> int:
        return len(self.cuda.gpus)

    def device_infos(self) -> list[DeviceInfo]:
        cuda, infos = self.cuda, []
        for i in range(self.device_count()):
            with cuda.gpus[i]:
                dev = cuda.get_current_device()
                name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
                infos.append(
                    DeviceInfo(i, name, int(dev.MULTIPROCESSOR_COUNT), int(dev.CLOCK_RATE)))
        return infos

    def memory_bytes(self, device: int) -> int | None:
        got = _TOTAL_MEMORY.get(device, False)
        if got is False:
            try:
                with self.cuda.gpus[device]:
                    got = int(self.cuda.current_context().get_memory_info().total)
            except Exception:  # a driver (or numba-hip) without the query: unknown, no bound
                got = None
            _TOTAL_MEMORY[device] = got  # (a device's total does not change)
        return got

    def peer_matrix(self, n: int) -> np.ndarray:
        m = np.eye(n, dtype=bool)
        for i in range(n):
            for j in range(n):
                if i != j:
                    m[i, j] = self._enable_peer(i, j)
        return m

    def _enable_peer(self, i: int, j: int) -> bool:
        cuda = self.cuda
        try:
            with cuda.gpus[i]:
                ctx = cuda.current_context()
                if not ctx.can_access_peer(j):
                    return False
            with cuda.gpus[j]:
                peer = cuda.current_context()
            with cuda.gpus[i]:
                try:
                    ctx.enable_peer_access(peer.handle)
                except Exception as err:  # already enabled is fine
                    if "ALREADY_ENABLED" not in str(err).upper().replace(" ", "_"):
                        raise
            return True
        except Exception:
            # no peer path: copies between these two devices are staged through the host
            return False

    def on_device(self, device: int) -> contextlib.AbstractContextManager[None]:
        current = getattr(self._tls, "device", None)
        if current == device:
            # already current in this thread: pushing the context again costs numba-cuda a
            # dozen driver calls, and a generator-based context manager ~6 us per launch
            return UNCHANGED
        if current is None and self._is_current(device):
            # the thread's own context (numba-cuda leaves the first device's current) is the
            # one asked for: adopt it for the block instead of a push and pop per op
            return _Adopted(self._tls, device)
        return self._switch_device(device)

    def _is_current(self, device: int) -> bool:
        """Whether ``device``'s context is the current one of this thread."""
        handle = self._ctx_handles.get(device)
        if handle is None:
            with self._switch_device(device):
                handle = self._ctx_handles[device] = int(self.cuda.current_context().handle)
        current = rawlaunch.current_context()
        if current is None:
            from numba.cuda.cudadrv.driver import driver

            current = int(driver.cuCtxGetCurrent())
        return current == handle

    @contextlib.contextmanager
    def _switch_device(self, device: int) -> Iterator[None]:
        prev = getattr(self._tls, "device", None)
        with self.cuda.gpus[device]:
            self._tls.device = device
            try:
                yield
            finally:
                self._tls.device = prev

    def synchronize(self, device: int | None = None) -> None:
        cuda = self.cuda
        for d in range(len(cuda.gpus)) if device is None else [device]:
            if self._sync_current(d):
                continue
            with cuda.gpus[d]:
                cuda.synchronize()

    def _sync_current(self, device: int) -> bool:
        """Synchronize ``device`` without a context push when its context is already current
        in this thread (the push and pop cost numba-cuda a dozen driver calls); False when not
        current (the caller switches)."""
        from numba.cuda.cudadrv.driver import driver

        if not self._is_current(device):
            return False
        driver.cuCtxSynchronize()
        return True

    # -- streams and events ------------------------------------------------------------
    def current_stream(self) -> Any:
        s = getattr(self._tls, "stream", None)
        if s is None:
            device = getattr(self._tls, "device", None)
            if device is None:
                return self.cuda.default_stream()
            # numba-cuda builds a new stream object, looking the context up, on every call
            # (~10 us); a device's default stream is the same one every time
            s = self._default_streams.get(device)
            if s is None:
                s = self._default_streams[device] = self.cuda.default_stream()
        return s

    def stream_on(self, device: int) -> Any:
        """What ``current_stream()`` gives inside ``on_device(device)``, without entering it;
        None where that stream is not known yet (before the device's first launch)."""
        s = getattr(self._tls, "stream", None)
        return self._default_streams.get(device) if s is None else s

    def new_stream(self, device: int, blocking: bool = True) -> Any:
        with self.on_device(device):
            if blocking:
                return self.cuda.stream()
            # numba-cuda makes only streams that wait for the legacy default stream (and
            # that it waits for); a non-blocking one runs beside the work queued there
            from numba.cuda.cudadrv import driver as drv

            ctx = self.cuda.current_context()
            flags = drv.binding.CUstream_flags.CU_STREAM_NON_BLOCKING.value
            handle = drv.driver.cuStreamCreate(flags)
            return drv.Stream(handle, finalizer=drv._stream_finalizer(ctx.deallocations,
                                                                      handle))

    def take_stream(self, device: int, blocking: bool = True) -> Any:
        """A stream of ``device`` that is never destroyed: taken from this process's kept
        streams (made where none is free), handed back by :meth:`give_stream`.

        nvImageCodec frees a decoded image on the stream it was decoded on
        (``cudaFreeAsync``), whenever the image goes. A numba-cuda stream is destroyed by a
        ``weakref.finalize`` callback, and a cyclic garbage collection runs such callbacks
        before it tears the cycle down: a stream in a cycle with the images decoded on it
        (a traceback's frames holding a batch, say) was destroyed first, and the images'
        frees then met a dead handle (segmentation faults in the collector, in whichever
        thread ran it). Kept streams have no finalizer; they are few (one per Loader
        running at once) and go with the process."""
        key = (device, bool(blocking))
        with self._kept_lock:
            free = self._kept_streams.setdefault(key, [])
            if free:
                return free.pop()
        if self.simulated:  # the simulator's streams hold nothing
            s = self.new_stream(device, blocking)
        else:
            with self.on_device(device):
                from numba.cuda.cudadrv import driver as drv

                flags = 0 if blocking else \
                    drv.binding.CUstream_flags.CU_STREAM_NON_BLOCKING.value
                s = drv.Stream(drv.driver.cuStreamCreate(flags))  # (no finalizer)
        with self._kept_lock:
            self._stream_kinds[id(s)] = key
        return s

    def give_stream(self, stream: Any) -> None:
        """Hand back a stream of :meth:`take_stream` for the next taker (never destroyed)."""
        key = self._stream_kinds.get(id(stream))
        if key is None:
            raise ValueError(f"give_stream: {stream!r} was not made by take_stream")
        with self._kept_lock:
            self._kept_streams[key].append(stream)

    def pool_release_threshold(self, device: int, nbytes: int | None = None) -> int:
        """The release threshold of ``device``'s current memory pool (the pool
        ``cudaMallocAsync`` draws from: nvImageCodec's decoded images), set to ``nbytes``
        where given; the value before. At the driver's default of 0 the pool gives all its
        free memory back to the device at every synchronisation, and the next allocations
        map it again."""
        import ctypes

        lib = ctypes.CDLL("libcuda.so.1")
        pool = ctypes.c_void_p()
        rc = lib.cuDeviceGetMemPool(ctypes.byref(pool), ctypes.c_int(device))
        attr = ctypes.c_int(4)  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        old = ctypes.c_uint64()
        rc = rc or lib.cuMemPoolGetAttribute(pool, attr, ctypes.byref(old))
        if not rc and nbytes is not None:
            rc = lib.cuMemPoolSetAttribute(pool, attr, ctypes.byref(ctypes.c_uint64(nbytes)))
        if rc:
            raise RuntimeError(f"device {device}: the memory pool's release threshold could "
                               f"not be read or set (CUresult {rc})")
        return int(old.value)

    def record_event(self, stream: Any = None) -> Any:
        event = self.cuda.event(timing=False)
        event.record(self.current_stream() if stream is None else stream)
        return event

    def wait_event(self, event: Any, stream: Any = None) -> None:
        event.wait(self.current_stream() if stream is None else stream)

    def hand_over(self, stream: Any, device: int) -> None:
        """DLPack's stream protocol: the consumer's stream (``dlpack.consumer_stream``) made to
        wait, on the GPU, for what this thread queued so far on its stream (where the value
        was just computed): nothing where that is the same stream or has nothing left to run,
        else an event (``dlpack.order``); where the driver refuses, this thread's stream is
        synchronized (before: the whole device, through CuPy). Values handed out by
        Generators, batches and Pipelines are complete: their workers synchronize first."""
        from . import dlpack

        consumer = dlpack.consumer_stream(stream)
        if consumer is None:
            return  # the consumer asked for no ordering
        s = getattr(self._tls, "stream", None)
        # no stream set: numba-cuda's default stream, whose handle is 0 (the legacy default
        # stream; ``current_stream()`` without a device would build a stream object for it)
        producer = 0 if s is None else stream_handle(s)
        if dlpack.same_stream(producer, consumer):
            return
        lib = _driver()
        with self.on_device(device):
            if lib is not None and dlpack.order(lib, producer, consumer):
                return
            (self.current_stream() if s is None else s).synchronize()


_DRIVER: list[Any] = []


def _driver() -> Any:
    """The driver library with ``dlpack.order``'s calls typed, or None (no driver)."""
    if not _DRIVER:
        from . import dlpack

        lib = rawlaunch.libcuda()
        _DRIVER.append(None if lib is None else dlpack.typed_driver(lib))
    return _DRIVER[0]
