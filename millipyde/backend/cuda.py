"""The cuda backend: numba-cuda device arrays, CuPy's pool, the cached launch path, peer copies.

``hip.py`` (numba-hip posing as ``numba.cuda``) and ``sim.py`` (the CUDA simulator) derive from
this class and switch off what they lack.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import config, faults
from . import launcher
from .base import Backend, Capabilities, DeviceInfo
from .pool import CupyPool, stream_handle
from .staging import StagingRing


def _type_key(args: tuple) -> tuple:
    return tuple((a.dtype.str, a.ndim) if hasattr(a, "dtype") and hasattr(a, "ndim")
                 else type(a).__name__ for a in args)


class _Unchanged:
    """The context of ``on_device`` when the device is already current: nothing to do."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


_UNCHANGED = _Unchanged()


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


class CudaBackend(Backend):
    """NVIDIA GPUs through numba-cuda."""

    name = "cuda"
    codegen_target = "cuda"
    visible_devices_var = "CUDA_VISIBLE_DEVICES"
    kernel_decorator = "@cuda.jit(cache=True)"
    device_decorator = "cuda.jit(device=True, inline=True)"
    #: bytes of kernel arguments (LUTs, taps) below which identical uploads are shared
    SMALL_MAX = 65536
    _SMALL_CACHE_MAX = 256
    #: small uploads go through a pinned ring with asynchronous copies (``staging.py``)
    staged_uploads = True

    def __init__(self) -> None:
        super().__init__()
        from numba import cuda

        self.cuda = cuda
        self.caps = self._capabilities()
        self.fast_launch = self._wants_fast_launch()
        self._default_streams: dict[int, Any] = {}
        self._pool: CupyPool | None | bool = False  # False: not looked for yet
        self._small_cache: dict[tuple, Any] = {}
        self._small_lock = threading.Lock()
        self._warm: set[tuple] = set()
        self._first_launch_lock = threading.Lock()
        self._opted_in: set[tuple] = set()
        self._shared_limits: dict[int, int] = {}
        self._rings: dict[int, StagingRing] = {}
        self._ctx_handles: dict[int, int] = {}

    def _capabilities(self) -> Capabilities:
        return Capabilities(
            device_memory=True, grid_launches=True, shared_memory=True,
            launches_on_streams=True,
            kernel_language="numba-cuda", tuned_kernels=True, external_memory=True,
            peer_copies=True, concurrent_launches=True)

    def _wants_fast_launch(self) -> bool:
        # the cached path drives numba-cuda's own launch internals (``launcher.py``)
        return True

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
            return _UNCHANGED
        if current is None and self._is_current(device):
            # the thread's own context (numba-cuda leaves the first device's current) is the
            # one asked for: adopt it for the block instead of a push and pop per op
            return _Adopted(self._tls, device)
        return self._switch_device(device)

    def _is_current(self, device: int) -> bool:
        """Whether ``device``'s context is the current one of this thread."""
        from numba.cuda.cudadrv.driver import driver

        handle = self._ctx_handles.get(device)
        if handle is None:
            with self._switch_device(device):
                handle = self._ctx_handles[device] = int(self.cuda.current_context().handle)
        return int(driver.cuCtxGetCurrent()) == handle

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

    def new_stream(self, device: int) -> Any:
        with self.on_device(device):
            return self.cuda.stream()

    def record_event(self, stream: Any = None) -> Any:
        event = self.cuda.event(timing=False)
        event.record(self.current_stream() if stream is None else stream)
        return event

    def wait_event(self, event: Any, stream: Any = None) -> None:
        event.wait(self.current_stream() if stream is None else stream)

    # -- memory ------------------------------------------------------------------------
    def _cupy_pool(self) -> CupyPool | None:
        """CuPy's pool, when CuPy imports and ``MILLIPYDE_GPU_POOL`` allows it."""
        if self._pool is False:
            pool = None
            if config.gpu_pool():
                try:
                    import cupy

                    pool = CupyPool(cupy)
                except Exception:  # no CuPy: plain cudaMalloc through Numba
                    pool = None
            self._pool = pool
        return self._pool

    def empty(self, shape: tuple[int, ...], dtype: Any, device: int) -> Any:
        try:
            faults.check("alloc", device)
            pool = self._cupy_pool()
            if pool is not None and math.prod(shape) > 0:
                return pool.allocate(tuple(int(s) for s in shape), np.dtype(dtype), device,
                                     self.current_stream(), self._context)
            with self.on_device(device):
                return self.cuda.device_array(shape, dtype=dtype, stream=self.current_stream())
        except (MemoryError, faults.InjectedOutOfMemory) as err:
            raise self._oom(shape, dtype, device, err) from err
        except Exception as err:  # numba-cuda raises CudaAPIError for OOM
            if "OUT_OF_MEMORY" in str(err).upper().replace(" ", "_"):
                raise self._oom(shape, dtype, device, err) from err
            raise

    def _context(self, device: int) -> Any:
        """numba-cuda's context of ``device``."""
        with self.on_device(device):
            return self.cuda.current_context()

    def from_host(self, array: np.ndarray, device: int) -> Any:
        array = np.ascontiguousarray(array)
        buf = self.empty(array.shape, array.dtype, device)
        with self.on_device(device):
            buf.copy_to_device(array, stream=self.current_stream())
        return buf

    def to_host(self, buffer: Any) -> np.ndarray:
        stream = self.current_stream()
        out = buffer.copy_to_host(stream=stream)
        stream.synchronize()
        return out

    def copy(self, buffer: Any, device: int, src_device: int, peer: bool = False) -> Any:
        out = self.empty(buffer.shape, buffer.dtype, device)
        if device == src_device:
            with self.on_device(device):
                out.copy_to_device(buffer, stream=self.current_stream())
            return out
        # work that produced the source on its device's default stream must be done: streams
        # of two devices are not ordered with each other (Pipeline workers sync their own)
        with self.on_device(src_device):
            self.cuda.default_stream().synchronize()
            host = None if peer else buffer.copy_to_host()
        with self.on_device(device):
            out.copy_to_device(buffer if host is None else host, stream=self.current_stream())
        return out

    def upload_small(self, array: np.ndarray, device: int) -> Any:
        """Kernels only read these, so identical arrays uploaded on the same device and stream
        are shared (a bounded cache; the stream in the key keeps the upload ordered before its
        users)."""
        array = np.ascontiguousarray(array)
        stream = self.current_stream()
        key = None
        if array.nbytes <= self.SMALL_MAX:
            key = (device, stream_handle(stream), array.dtype.str, array.shape, array.tobytes())
            with self._small_lock:
                hit = self._small_cache.get(key)
            if hit is not None:
                return hit
        buf = self.empty(array.shape, array.dtype, device)
        with self.on_device(device):
            if self.staged_uploads and array.nbytes <= self.SMALL_MAX:
                self._ring(device).copy(buf, array, stream)
            else:
                buf.copy_to_device(array, stream=stream)
        if key is not None:
            with self._small_lock:
                if len(self._small_cache) >= self._SMALL_CACHE_MAX:
                    self._small_cache.pop(next(iter(self._small_cache)))
                self._small_cache[key] = buf
        return buf

    def _ring(self, device: int) -> StagingRing:
        """The pinned staging ring of ``device`` (made on first use; its context current)."""
        ring = self._rings.get(device)
        if ring is None:
            with self._small_lock:
                ring = self._rings.get(device)
                if ring is None:
                    ring = self._rings[device] = StagingRing(self.cuda, 64, self.SMALL_MAX)
        return ring

    # -- views -------------------------------------------------------------------------
    def part(self, buffer: Any, offset: int, dtype: Any, shape: tuple[int, ...]) -> Any:
        """Built directly, without numba-cuda's context checks in slicing, ``view`` and
        ``reshape`` (see :meth:`members`)."""
        dtype = np.dtype(dtype)
        nbytes = max(int(np.prod(shape, dtype=np.int64)), 1) * dtype.itemsize
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize
                        for i in range(len(shape)))
        return _device_view(buffer, shape, strides, dtype, offset, offset + nbytes)

    def members(self, buffer: Any) -> list[Any]:
        """Built as numba-cuda's own indexing builds them, without its context check per index.

        With :meth:`part`, that took a 64-output Generator batch's launch phase from 11.3 to
        7.9-8.4 ms on an H200 (bench/RESULTS.md).
        """
        if not buffer.is_c_contiguous() or buffer.ndim < 2:
            return super().members(buffer)
        step = buffer.strides[0]
        return [_device_view(buffer, buffer.shape[1:], buffer.strides[1:], buffer.dtype,
                             m * step, (m + 1) * step) for m in range(buffer.shape[0])]

    # -- launches and limits -----------------------------------------------------------
    def shared_limit(self, device: int) -> int:
        """Most dynamic shared memory one block may use on ``device`` (opting in past 48 KB)."""
        if device not in self._shared_limits:
            with self.on_device(device):
                dev = self.cuda.get_current_device()
                self._shared_limits[device] = int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        return self._shared_limits[device]

    def _opt_in_shared(self, kernel: Any, device: int, args: tuple) -> None:
        # the limit is an attribute of the compiled kernel on one device: compile (or load) it
        # for these argument types and raise its dynamic shared memory ceiling to the device's
        # opt-in maximum, less what the kernel declares statically
        from numba.cuda.cudadrv.driver import binding, driver

        compiled = kernel._compile_for_args(*args)
        compiled.bind()
        fn = compiled._codelibrary.get_cufunc()
        attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.cuKernelSetAttribute(attr, self.shared_limit(device)
                                    - compiled.shared_mem_per_block, fn.handle, fn.device.id)

    def _launch(self, kernel: Any, device: int, args: tuple, *config: Any) -> None:
        if self._recorded(kernel, device, args):
            return
        shared = config[3] if len(config) > 3 else 0
        fast = self.fast_launch and launcher.ENABLED  # ENABLED: MILLIPYDE_FAST_LAUNCH
        if fast and launcher.launch(kernel, device, args, *config[:3], shared):
            return
        # numba-cuda compiles and loads a kernel's module on its first launch for a signature
        # and device; two threads doing that at once trip its module table ("key already in
        # dictionary"), so first launches go one at a time.
        key = (id(kernel), device, _type_key(args))  # warm per device; the lock is global
        big = shared > self.SHARED_DEFAULT
        if key in self._warm and (not big or key in self._opted_in):
            kernel[config](*args)
        else:
            with self._first_launch_lock:
                if big and key not in self._opted_in:
                    if shared > self.shared_limit(device):
                        raise ValueError(
                            f"kernel {getattr(kernel, '__name__', kernel)} asks for {shared} B "
                            f"of shared memory per block; device {device} allows "
                            f"{self.shared_limit(device)}")
                    self._opt_in_shared(kernel, device, args)
                    self._opted_in.add(key)
                kernel[config](*args)
                self._warm.add(key)
        if fast and not launcher.known(kernel, device, args):
            launcher.remember(kernel, device, args, self.shared_limit(device)
                              if key in self._opted_in else self.SHARED_DEFAULT)

    #: threads of a 2-D launch's block, (x, y)
    BLOCK_2D = (32, 8)

    def _grid_2d(self, h: int, w: int) -> tuple[tuple[int, int], tuple[int, int]]:
        bx, by = self.BLOCK_2D
        return (min((w + bx - 1) // bx, 65535), min((h + by - 1) // by, 65535)), (bx, by)

    def launch_2d(self, kernel: Any, h: int, w: int, device: int, *args: Any) -> None:
        if h == 0 or w == 0:
            return
        grid, block = self._grid_2d(h, w)
        with self.on_device(device):
            self._launch(kernel, device, args, grid, block, self.current_stream())

    def launch_grid(self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...],
                    device: int, *args: Any, shared: int = 0) -> None:
        if 0 in grid:
            return
        with self.on_device(device):
            self._launch(kernel, device, args, grid, block, self.current_stream(), shared)

    def launch_blocks(self, kernel: Any, blocks: int, threads: int, device: int,
                      *args: Any) -> None:
        with self.on_device(device):
            self._launch(kernel, device, args, blocks, threads, self.current_stream())

    def shutdown(self) -> None:
        """At exit (thesis: ``Py_AtExit``): finish queued work and drop cached device objects
        while the CUDA contexts still exist, so nothing is freed during interpreter teardown."""
        try:
            self.synchronize()
        except Exception:
            pass  # a failed device already reported its error; exit anyway
        with self._small_lock:
            self._small_cache.clear()
            self._rings.clear()
            self._constants.clear()
        if self._pool:
            self._pool.clear()
        # numba-cuda's exit-time finalizers unload every kernel module; after several devices
        # loaded modules concurrently that double-freed a library handle and aborted the
        # process (4 H200s, bench/RESULTS.md). The driver releases everything at process exit
        # anyway, so leave the queued releases undone.
        for d in range(len(self.cuda.gpus)):
            try:
                with self.cuda.gpus[d]:
                    self.cuda.current_context().deallocations._disable_count += 1
            except Exception:
                pass  # best effort at exit


def _device_view(buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], dtype: Any,
                 start: int, stop: int) -> Any:
    # what numba-cuda's own indexing builds (``_do_getitem``): an array over a view of the
    # parent's memory, which keeps the parent alive
    from numba.cuda.cudadrv import devicearray

    return devicearray.DeviceNDArray(shape=shape, strides=strides, dtype=dtype,
                                     stream=buffer.stream,
                                     gpu_data=buffer.gpu_data.view(start, stop))
