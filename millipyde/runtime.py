"""Buffers, copies, streams and launches for the active backend.

On ``cpu`` a buffer is a C-contiguous ``numpy.ndarray`` and a "device" is a logical slot (the cpu
backend exposes ``MILLIPYDE_CPU_DEVICES`` of them). On ``cuda``, ``hip`` and ``cudasim`` it is a
Numba device array allocated inside that device's context.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import launcher
from ._backend import NAME as BACKEND
from ._backend import is_gpu_like

GPU = is_gpu_like()
SIM = BACKEND == "cudasim"
TARGET = "cuda" if GPU else "cpu"

if GPU:
    from numba import cuda
else:  # pragma: no cover - exercised by the cpu backend only
    cuda = None

_tls = threading.local()


def _threadsafe_cpu_layer() -> bool:
    """Use a thread-safe Numba threading layer so virtual devices can launch concurrently."""
    if GPU:
        return True
    import numba

    if os.environ.get("NUMBA_THREADING_LAYER"):
        return os.environ["NUMBA_THREADING_LAYER"].lower() in ("tbb", "omp", "safe", "threadsafe")
    for mod in ("numba.np.ufunc.omppool", "numba.np.ufunc.tbbpool"):
        try:
            __import__(mod)
        except Exception:
            continue
        numba.config.THREADING_LAYER = "threadsafe"
        return True
    return False


# Without tbb or OpenMP, Numba's workqueue layer aborts when two threads run parallel kernels
# at once: serialize CPU launches instead.
_cpu_launch_lock = None if _threadsafe_cpu_layer() else threading.Lock()


class DeviceMemoryError(MemoryError):
    """A device allocation failed; the message names the device and the bytes asked."""


def env_int(name: str, default: int | None, lo: int = 1, hi: int = 64) -> int | None:
    """An integer setting from the environment, checked to lie in [lo, hi] (``ValueError``)."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if not lo <= n <= hi:
        raise ValueError(f"{name}={n} must be between {lo} and {hi}")
    return n


def _cpu_device_count() -> int:
    return env_int("MILLIPYDE_CPU_DEVICES", 1)


def physical_device_count() -> int:
    """Number of devices the backend can address."""
    if not GPU:
        return _cpu_device_count()
    return len(cuda.gpus)


class _Unchanged:
    """The context of ``on_device`` when the device is already current: nothing to do."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


_UNCHANGED = _Unchanged()


def on_device(device: int) -> contextlib.AbstractContextManager[None]:
    """Make ``device`` current for allocations and launches in this thread."""
    if not GPU or SIM or getattr(_tls, "device", None) == device:
        # already current in this thread: pushing the context again costs numba-cuda a
        # dozen driver calls, and a generator-based context manager ~6 us per launch
        return _UNCHANGED
    return _switch_device(device)


@contextlib.contextmanager
def _switch_device(device: int) -> Iterator[None]:
    prev = getattr(_tls, "device", None)
    with cuda.gpus[device]:
        _tls.device = device
        try:
            yield
        finally:
            _tls.device = prev


_default_streams: dict[int, Any] = {}


def current_stream() -> Any:
    """The stream this thread launches on (set by Pipeline workers), or the default stream."""
    s = getattr(_tls, "stream", None)
    if s is None and GPU:
        device = getattr(_tls, "device", None)
        if device is None or SIM:
            return cuda.default_stream()
        # numba-cuda builds a new stream object, looking the context up, on every call
        # (~10 us); a device's default stream is the same one every time
        s = _default_streams.get(device)
        if s is None:
            s = _default_streams[device] = cuda.default_stream()
    return s


@contextlib.contextmanager
def using_stream(stream: Any) -> Iterator[None]:
    """Launch and copy on ``stream`` inside the block (per thread)."""
    prev = getattr(_tls, "stream", None)
    _tls.stream = stream
    try:
        yield
    finally:
        _tls.stream = prev


def new_stream(device: int) -> Any:
    """A fresh stream on ``device`` (None on the cpu backend)."""
    if not GPU:
        return None
    with on_device(device):
        return cuda.stream()


def _oom(shape: tuple[int, ...], dtype: np.dtype, device: int, err: BaseException) -> Exception:
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return DeviceMemoryError(
        f"out of memory on device {device} ({BACKEND}): could not allocate {nbytes} bytes "
        f"for an array of shape {tuple(shape)} and dtype {np.dtype(dtype)}: {err}"
    )


_POOL_UNSET = object()
_pool_mod: Any = _POOL_UNSET


def _cupy_pool() -> Any:
    """CuPy, when it imports and the pool is wanted (real GPU; ``MILLIPYDE_GPU_POOL`` != 0)."""
    global _pool_mod
    if _pool_mod is _POOL_UNSET:
        mod = None
        if GPU and not SIM and os.environ.get("MILLIPYDE_GPU_POOL", "1") != "0":
            try:
                import cupy

                mod = cupy
            except Exception:  # no CuPy: plain cudaMalloc through Numba
                mod = None
        _pool_mod = mod
    return _pool_mod


def _stream_handle(stream: Any) -> int:
    handle = getattr(stream, "handle", None)
    value = getattr(handle, "value", handle)
    return int(value or 0)


def _pooled(shape: tuple[int, ...], dtype: np.dtype, device: int, cupy: Any) -> Any:
    # CuPy's pool keeps one arena per stream: a block freed after work queued on this stream is
    # only handed out again to later work on the same stream, so stream order keeps it safe.
    # The Numba array holds the CuPy array as its owner, which returns the block when dropped.
    handle = _stream_handle(current_stream())
    with cupy.cuda.Device(device):
        stream = _cupy_streams.get((device, handle))
        if stream is None:
            stream = _cupy_external(cupy, handle) if handle else cupy.cuda.Stream.null
            _cupy_streams[(device, handle)] = stream
        with stream:
            arr = cupy.empty(shape, dtype=dtype)
    return _wrap_pooled(arr, device)


class _StreamRef:
    """A raw stream handle offered through the CUDA stream protocol."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _cupy_external(cupy: Any, handle: int) -> Any:
    """CuPy's view of a Numba stream (CuPy 14 deprecates ``ExternalStream`` for this)."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_StreamRef(handle))
    return cupy.cuda.ExternalStream(handle)


_cupy_streams: dict[tuple[int, int], Any] = {}
_contexts: dict[int, Any] = {}


def _wrap_pooled(arr: Any, device: int) -> Any:
    # numba.cuda.as_cuda_array would also wrap CuPy's current stream in a new Numba stream
    # object and look the context up again, per call: build the array directly instead
    from numba.cuda.cudadrv import devicearray, driver

    ctx = _contexts.get(device)
    if ctx is None:
        with on_device(device):
            ctx = _contexts[device] = cuda.current_context()
    data = driver.MemoryPointer(ctx, driver.binding.CUdeviceptr(arr.data.ptr), size=arr.nbytes,
                                owner=arr)
    return devicearray.DeviceNDArray(shape=arr.shape, strides=arr.strides, dtype=arr.dtype,
                                     gpu_data=data, stream=0)


def empty(shape: tuple[int, ...], dtype: np.dtype, device: int) -> Any:
    """An uninitialised buffer on ``device`` (pooled through CuPy on real GPUs when present)."""
    from . import faults

    try:
        faults.check("alloc", device)
        if not GPU:
            return np.empty(shape, dtype=dtype)
        cupy = _cupy_pool()
        if cupy is not None and int(np.prod(shape, dtype=np.int64)) > 0:
            return _pooled(tuple(int(s) for s in shape), np.dtype(dtype), device, cupy)
        with on_device(device):
            return cuda.device_array(shape, dtype=dtype, stream=current_stream())
    except (MemoryError, faults.InjectedOutOfMemory) as err:
        raise _oom(shape, dtype, device, err) from err
    except Exception as err:  # numba-cuda raises CudaAPIError for OOM
        if "OUT_OF_MEMORY" in str(err).upper().replace(" ", "_"):
            raise _oom(shape, dtype, device, err) from err
        raise


def from_host(array: np.ndarray, device: int) -> Any:
    """Copy a host array to ``device`` (the host array is never kept or modified)."""
    array = np.ascontiguousarray(array)
    if not GPU:
        return array.copy()
    buf = empty(array.shape, array.dtype, device)
    with on_device(device):
        buf.copy_to_device(array, stream=current_stream())
    return buf


def to_host(buffer: Any) -> np.ndarray:
    """A host copy of ``buffer`` (waits for the work that produces it)."""
    if not GPU:
        return np.array(buffer, copy=True)
    stream = current_stream()
    out = buffer.copy_to_host(stream=stream)
    stream.synchronize()
    return out


def copy(buffer: Any, device: int, src_device: int, peer: bool = False) -> Any:
    """A deep copy of ``buffer`` on ``device``: a peer copy where ``peer`` says the two devices
    can (``devices.can_peer``), else staged through the host."""
    if not GPU:
        return np.array(buffer, copy=True)
    out = empty(buffer.shape, buffer.dtype, device)
    if device == src_device or SIM:
        with on_device(device):
            out.copy_to_device(buffer, stream=current_stream())
        return out
    # work that produced the source on its device's default stream must be done: streams of
    # two devices are not ordered with each other (Pipeline workers sync their own stream)
    with on_device(src_device):
        cuda.default_stream().synchronize()
        host = None if peer else buffer.copy_to_host()
    if host is None:
        with on_device(device):
            out.copy_to_device(buffer, stream=current_stream())
        return out
    with on_device(device):
        out.copy_to_device(host, stream=current_stream())
    return out


_SMALL_CACHE_MAX = 256
_small_cache: dict[tuple, Any] = {}
_small_lock = threading.Lock()


def upload_small(array: np.ndarray, device: int) -> Any:
    """Kernel arguments (LUTs, taps, parameters): host arrays on the cpu, device arrays on GPUs.

    Kernels only read these, so identical arrays uploaded on the same device and stream are
    shared (a bounded cache; the stream in the key keeps the upload ordered before its users).
    """
    if not GPU:
        return array
    array = np.ascontiguousarray(array)
    stream = current_stream()
    key = None
    if not SIM and array.nbytes <= 65536:
        key = (device, _stream_handle(stream), array.dtype.str, array.shape, array.tobytes())
        with _small_lock:
            hit = _small_cache.get(key)
        if hit is not None:
            return hit
    buf = empty(array.shape, array.dtype, device)
    with on_device(device):
        buf.copy_to_device(array, stream=stream)
    if key is not None:
        with _small_lock:
            if len(_small_cache) >= _SMALL_CACHE_MAX:
                _small_cache.pop(next(iter(_small_cache)))
            _small_cache[key] = buf
    return buf


_warm: set[tuple] = set()
_first_launch_lock = threading.Lock()
# Dynamic shared memory any block gets; a kernel must opt in to more, per device. The
# executor sizes its tiles within it; bench/tile_ablation.py tries larger ones.
SHARED_DEFAULT = 48 * 1024
_opted_in: set[tuple] = set()
_shared_limits: dict[int, int] = {}


def shared_limit(device: int) -> int:
    """Most dynamic shared memory one block may use on ``device`` (opting in past 48 KB)."""
    if not GPU or SIM:
        return SHARED_DEFAULT
    if device not in _shared_limits:
        with on_device(device):
            dev = cuda.get_current_device()
            _shared_limits[device] = int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    return _shared_limits[device]


def _opt_in_shared(kernel: Any, device: int, args: tuple) -> None:
    # the limit is an attribute of the compiled kernel on one device: compile (or load) it for
    # these argument types and raise its dynamic shared memory ceiling to the device's opt-in
    # maximum, less what the kernel declares statically
    from numba.cuda.cudadrv.driver import binding, driver

    compiled = kernel._compile_for_args(*args)
    compiled.bind()
    fn = compiled._codelibrary.get_cufunc()
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, shared_limit(device) - compiled.shared_mem_per_block,
                                fn.handle, fn.device.id)


def _type_key(args: tuple) -> tuple:
    return tuple((a.dtype.str, a.ndim) if hasattr(a, "dtype") and hasattr(a, "ndim")
                 else type(a).__name__ for a in args)


def _launch(kernel: Any, device: int, args: tuple, *config: Any) -> None:
    shared = config[3] if len(config) > 3 else 0
    if not SIM and launcher.ENABLED and launcher.launch(kernel, device, args, *config[:3],
                                                        shared):
        return
    # numba-cuda compiles and loads a kernel's module on its first launch for a signature and
    # device; two threads doing that at once trip its module table ("key already in
    # dictionary"), so first launches go one at a time.
    key = (id(kernel), device, _type_key(args))  # warm per device; the lock is global
    big = shared > SHARED_DEFAULT
    if key in _warm and (not big or key in _opted_in):
        kernel[config](*args)
    else:
        with _first_launch_lock:
            if big and key not in _opted_in:
                if shared > shared_limit(device):
                    raise ValueError(f"kernel {getattr(kernel, '__name__', kernel)} asks for "
                                     f"{shared} B of shared memory per block; device {device}"
                                     f" allows {shared_limit(device)}")
                _opt_in_shared(kernel, device, args)
                _opted_in.add(key)
            kernel[config](*args)
            _warm.add(key)
    if not SIM and launcher.ENABLED and not launcher.known(kernel, device, args):
        launcher.remember(kernel, device, args,
                          shared_limit(device) if key in _opted_in else SHARED_DEFAULT)


def _run_cpu(kernel: Any, args: tuple) -> None:
    if _cpu_launch_lock is None:
        kernel(*args)
    else:
        with _cpu_launch_lock:
            kernel(*args)


def launch_2d(kernel: Any, h: int, w: int, device: int, *args: Any) -> None:
    """Run a generated 2-D kernel over an ``h`` x ``w`` output on ``device``."""
    if h == 0 or w == 0:
        return
    if not GPU:
        _run_cpu(kernel, args)
        return
    if SIM:
        block = (min(16, w), min(4, h))
        grid = ((w + block[0] - 1) // block[0], (h + block[1] - 1) // block[1])
    else:
        block = (32, 8)
        grid = (min((w + 31) // 32, 65535), min((h + 7) // 8, 65535))
    with on_device(device):
        _launch(kernel, device, args, grid, block, current_stream())


def launch_grid(kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], device: int,
                *args: Any, shared: int = 0) -> None:
    """Run a GPU kernel with an explicit grid, block and dynamic shared memory (bytes)."""
    if not GPU:  # pragma: no cover - GPU variants are never picked on the cpu backend
        raise RuntimeError("launch_grid needs a GPU backend")
    if 0 in grid:
        return
    with on_device(device):
        _launch(kernel, device, args, grid, block, current_stream(), shared)


def launch_1d(kernel: Any, n: int, device: int, *args: Any) -> None:
    """Run a generated flat kernel over ``n`` elements on ``device``."""
    if n == 0:
        return
    block = 64 if SIM else 256
    launch_blocks(kernel, min((n + block - 1) // block, 4096), block, device, *args)


def launch_blocks(kernel: Any, blocks: int, threads: int, device: int, *args: Any) -> None:
    """Run a kernel with an explicit 1-D grid (the CPU runs the loop itself)."""
    if not GPU:
        _run_cpu(kernel, args)
        return
    with on_device(device):
        _launch(kernel, device, args, blocks, threads, current_stream())


def flat(buffer: Any) -> Any:
    """A 1-D view of a contiguous buffer."""
    return buffer.reshape(buffer.size) if buffer.ndim != 1 else buffer


def synchronize(device: int | None = None) -> None:
    """Wait for all work on ``device`` (every device when None)."""
    if not GPU:
        return
    if SIM:
        cuda.synchronize()
        return
    devices = range(len(cuda.gpus)) if device is None else [device]
    for d in devices:
        with cuda.gpus[d]:
            cuda.synchronize()


def as_3d(buffer: Any) -> Any:
    """View a 2-D buffer as (h, w, 1) so every kernel sees (h, w, channels)."""
    if buffer.ndim == 3:
        return buffer
    return buffer.reshape(buffer.shape[0], buffer.shape[1], 1)


def part(buffer: Any, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    """A C-contiguous ``dtype`` array of ``shape`` at byte ``offset`` of a 1-D uint8 buffer.

    On real GPUs built directly, without numba-cuda's context checks in slicing, ``view`` and
    ``reshape`` (see :func:`members`).
    """
    dtype = np.dtype(dtype)
    nbytes = max(int(np.prod(shape, dtype=np.int64)), 1) * dtype.itemsize
    if not GPU or SIM:
        return buffer[offset:offset + nbytes].view(dtype).reshape(shape)
    strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize
                    for i in range(len(shape)))
    return _device_view(buffer, shape, strides, dtype, offset, offset + nbytes)


def _device_view(buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], dtype: Any,
                 start: int, stop: int) -> Any:
    # what numba-cuda's own indexing builds (``_do_getitem``): an array over a view of the
    # parent's memory, which keeps the parent alive
    from numba.cuda.cudadrv import devicearray

    return devicearray.DeviceNDArray(shape=shape, strides=strides, dtype=dtype,
                                     stream=buffer.stream,
                                     gpu_data=buffer.gpu_data.view(start, stop))


def members(buffer: Any) -> list[Any]:
    """Views ``buffer[0], buffer[1], ...`` of a C-contiguous batch buffer.

    On real GPUs they are built as numba-cuda's own indexing builds them, without its context
    check per index. With :func:`part`, that took a 64-output Generator batch's launch phase
    from 11.3 to 7.9-8.4 ms on an H200 (bench/RESULTS.md).
    """
    if not GPU or SIM or not buffer.is_c_contiguous() or buffer.ndim < 2:
        return [buffer[m] for m in range(buffer.shape[0])]
    step = buffer.strides[0]
    return [_device_view(buffer, buffer.shape[1:], buffer.strides[1:], buffer.dtype, m * step,
                         (m + 1) * step) for m in range(buffer.shape[0])]


def reshape(buffer: Any, shape: tuple[int, ...]) -> Any:
    """A view of a contiguous buffer with another shape."""
    if tuple(buffer.shape) == tuple(shape):
        return buffer
    return buffer.reshape(*shape)


def _shutdown() -> None:
    """At exit (thesis: ``Py_AtExit``): finish queued work and drop cached device objects while
    the CUDA contexts still exist, so nothing is freed during interpreter teardown."""
    if not GPU or SIM:
        return
    try:
        synchronize()
    except Exception:
        pass  # a failed device already reported its error; exit anyway
    with _small_lock:
        _small_cache.clear()
    _cupy_streams.clear()
    _contexts.clear()
    # numba-cuda's exit-time finalizers unload every kernel module; after several devices
    # loaded modules concurrently that double-freed a library handle and aborted the process
    # (4 H200s, bench/RESULTS.md). The driver releases everything at process exit anyway, so
    # leave the queued releases undone.
    for d in range(len(cuda.gpus)):
        try:
            with cuda.gpus[d]:
                cuda.current_context().deallocations._disable_count += 1
        except Exception:
            pass  # best effort at exit


atexit.register(_shutdown)
