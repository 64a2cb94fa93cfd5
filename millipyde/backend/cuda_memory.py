"""The cuda backend's memory (a part of ``CudaBackend``): allocations from CuPy's pool or
numba-cuda, copies between host and devices, small uploads shared and staged, array views."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import config, faults
from . import rawlaunch
from .pool import LAYOUTS, CupyPool, stream_handle
from .staging import StagingRing


class CudaMemory:
    """Allocation, copies, small uploads and views of ``CudaBackend``."""

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

    def copy_into(self, dst: Any, offset: int, src: Any, n: int) -> None:
        """One driver copy, without numba-cuda's slicing and checks (a streamed batch packs
        hundreds of decoded images per batch); the simulator and HIP take the generic copy."""
        if self.simulated or self.name != "cuda":
            super().copy_into(dst, offset, src, n)
            return
        from numba.cuda.cudadrv import driver

        item = np.dtype(dst.dtype).itemsize
        view = self.part(dst, offset * item, dst.dtype, (n,))
        stream = self.current_stream()
        driver.device_to_device(view, src, n * item, stream=stream if stream else 0)

    def copy_from_pointer(self, dst: Any, offset: int, ptr: int, nbytes: int) -> None:
        """Copy ``nbytes`` from device address ``ptr`` (memory another library owns: a
        decoded image) into ``dst`` at element ``offset``, on the current stream."""
        from numba.cuda.cudadrv import driver

        at = driver.device_pointer(dst) + offset * np.dtype(dst.dtype).itemsize
        stream = self.current_stream()
        if stream:
            driver.driver.cuMemcpyDtoDAsync(at, ptr, nbytes, driver._stream_handle(stream))
        else:
            driver.driver.cuMemcpyDtoD(at, ptr, nbytes)

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
        # (``math.prod`` of the ints: NumPy reductions per part cost more than the view)
        nbytes = max(int(math.prod(shape)), 1) * dtype.itemsize
        strides = tuple(int(math.prod(shape[i + 1:])) * dtype.itemsize
                        for i in range(len(shape)))
        return _device_view(buffer, shape, strides, dtype, offset, offset + nbytes)

    def interface(self, buffer: Any) -> dict:
        """numba-cuda's ``__cuda_array_interface__`` dict of ``buffer``, equal to it: the keys
        of its layout (shape, strides, typestr, version) copied from a template that
        numba-cuda's own property made for the first array of that layout, the data pointer
        and the stream read from the array as that property reads them. The property costs
        ~1.5 us an array (a ctypes pointer, its contiguity loop), this ~0.5 us (2-core dev
        machine). Arrays of other classes or memory kinds, and HIP's, get their own."""
        if self.name != "cuda":
            return super().interface(buffer)
        kinds = _FACE_KINDS or _face_kinds()
        if type(buffer) is not kinds[0] or not isinstance(buffer.gpu_data, kinds[1]):
            return buffer.__cuda_array_interface__  # (an empty array has no memory)
        key = (buffer.shape, buffer.strides, buffer.dtype)
        face = _FACES.get(key)
        if face is None:
            own = buffer.__cuda_array_interface__
            if len(_FACES) >= 4096:  # (bounded: layouts come from data)
                _FACES.clear()
            _FACES[key] = {k: v for k, v in own.items() if k not in ("data", "stream")}
            return own
        face = face.copy()
        face["data"] = (int(buffer.gpu_data.device_pointer), False)
        face["stream"] = int(s) if (s := buffer.stream) != 0 else None
        return face

    def members(self, buffer: Any) -> list[Any]:
        """Built as numba-cuda's own indexing builds them, without its context check per index.

        With :meth:`part`, that took a 64-output Generator batch's launch phase from 11.3 to
        7.9-8.4 ms on an H200 (bench/RESULTS.md). A pool buffer's members are stamped from
        their layout's prototype (``pool._Layouts.member_stamp``: no numba-cuda constructor
        per member).
        """
        view = self.member_views(buffer)
        return [view(m) for m in range(buffer.shape[0])]

    def member_views(self, buffer: Any) -> Callable[[int], Any]:
        """``view(m)`` (:meth:`members`, one at a time), the layout looked up once."""
        if not buffer.is_c_contiguous() or buffer.ndim < 2:
            return super().member_views(buffer)
        step = buffer.strides[0]
        shape = tuple(buffer.shape[1:])
        data = buffer.gpu_data
        if buffer.stream == 0 and step and 0 not in shape and self._cupy_pool() is not None:
            # (each member's memory keeps the buffer's, as numba-cuda's views do)
            return LAYOUTS.member_stamp(step, buffer.dtype, shape, int(data.device_pointer),
                                        data, data.context)
        return lambda m: _device_view(buffer, buffer.shape[1:], buffer.strides[1:],
                                      buffer.dtype, m * step, (m + 1) * step)

    def stack_into(self, dst: Any, sources: list[Any], stream: Any = None,
                   device: int | None = None) -> None:
        """``Backend.stack_into`` without a numba-cuda view or copy call per member: where
        ``device`` (``dst``'s) is given, one kernel on it that reads each source through a
        table of addresses (:func:`_stack_kernel`; the caller's contract: every source on
        ``device`` or on a device it has peer access to); else the copies in one
        driver call (:meth:`copy_addresses`; a copy between two devices is a peer copy by its
        addresses).
        A Pipeline chunk stacks 256 inputs: one call instead of 256, each of which handed the
        GIL to another device's worker and waited to get it back; and one launch instead of
        256 copies, each of which costs the driver CPU time of its own."""
        step = dst.strides[0] if dst.ndim else 0
        # (the sources are of one shape and dtype, the caller's contract: the first checked)
        if _memcpy_async() is None or not dst.is_c_contiguous() or not step or not sources or \
                len(sources) > dst.shape[0] or \
                int(sources[0].size) * sources[0].dtype.itemsize != step:
            return super().stack_into(dst, sources, stream)
        n = len(sources)
        stream = self.current_stream() if stream is None else stream
        # (one list comprehension: no generator resumed an input)
        srcs = np.array([int(src.gpu_data.device_pointer) for src in sources], dtype=np.uint64)
        if device is not None and self.name == "cuda" and not self.simulated and step % 4 == 0 and \
                n <= 65535 and not (srcs % 4).any():
            words = step // 4
            with self.using_stream(stream):
                table = self.upload_small(srcs, device)
            out = self.part(dst, 0, np.uint32, (n, words))
            blocks = max(1, min(-(-words // 256), 64))
            _stack_kernel()[(blocks, n), 256, stream](table, out)
            return
        base = int(dst.gpu_data.device_pointer)
        dsts = np.arange(base, base + n * step, step, dtype=np.uint64)
        sizes = np.full(n, step, dtype=np.uint64)
        self.copy_addresses(dsts, srcs, sizes, None, stream)

    def copy_addresses(self, dsts: np.ndarray, srcs: np.ndarray, sizes: np.ndarray,
                       device: int | None, stream: Any = None) -> None:
        """Device-to-device copies ``dsts[k] <- srcs[k]`` of ``sizes[k]`` bytes (device
        addresses, uint64; on ``device``, or None: anywhere, peer copies included) on
        ``stream`` (default: the current one), none overlapping: one
        driver call for all (``cuMemcpyBatchAsync``, CUDA >= 12.8) where the driver has it
        and the stream is not the legacy default one, else one ``cuMemcpyAsync`` each. A
        streamed batch packs 256 decoded images into its arena: one call instead of 256, each
        of which hands the GIL over.

        Raises
        ------
        CudaAPIError
            A copy the driver refuses.
        """
        n = len(dsts)
        if not n:
            return
        handle = stream_handle(self.current_stream() if stream is None else stream)
        dsts = np.ascontiguousarray(dsts, dtype=np.uint64)
        srcs = np.ascontiguousarray(srcs, dtype=np.uint64)
        sizes = np.ascontiguousarray(sizes, dtype=np.uint64)
        batch = _memcpy_batch() if handle and n > 1 else None
        if batch is not None:
            fn, fail_idx = batch
            # (location hints: the driver ignores them for memory it allocated, which every
            # address here is; a copy between two devices is a peer copy by its addresses)
            here = _MemLocation(1, 0 if device is None else int(device))
            attrs = _CopyAttributes(1, here, here, 0)
            idx = ctypes.c_size_t(0)
            args = [dsts.ctypes.data_as(ctypes.c_void_p), srcs.ctypes.data_as(ctypes.c_void_p),
                    sizes.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n),
                    ctypes.byref(attrs), ctypes.byref(idx), ctypes.c_size_t(1)]
            if fail_idx:  # CUDA 12.8's first form: the index of a failed copy
                args.append(ctypes.byref(ctypes.c_size_t(0)))
            rc = fn(*args, ctypes.c_void_p(handle))
            if not rc:
                COPY_BATCHES["one_call"] += 1
                return
            # refused as a whole (a driver or stream it does not serve): one call each
            # below, which raises where a copy itself is at fault; not tried again
            _BATCH[:] = [None]
        fn = _memcpy_async()
        COPY_BATCHES["each"] += 1
        for k in range(n):
            rc = fn(int(dsts[k]), int(srcs[k]), int(sizes[k]), handle)
            if rc:
                from numba.cuda.cudadrv.driver import CudaAPIError

                raise CudaAPIError(rc, f"cuMemcpyAsync failed with CUresult {rc}")


class _MemLocation(ctypes.Structure):
    """The driver's ``CUmemLocation``: type (1: a device) and id."""

    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _CopyAttributes(ctypes.Structure):
    """The driver's ``CUmemcpyAttributes``: the source read in stream order (1), location
    hints, flags."""

    _fields_ = [("srcAccessOrder", ctypes.c_int), ("srcLocHint", _MemLocation),
                ("dstLocHint", _MemLocation), ("flags", ctypes.c_uint)]


_BATCH: list[Any] = []
#: batches of :meth:`CudaMemory.copy_addresses` made in one driver call, and one call each
#: (reports: bench/bench_data.py)
COPY_BATCHES = {"one_call": 0, "each": 0}


def _memcpy_batch() -> tuple[Any, bool] | None:
    """The driver's ``cuMemcpyBatchAsync`` and whether it is CUDA 12.8's form (with a
    failure index before the stream), or None where the driver has none."""
    if not _BATCH:
        lib = rawlaunch.libcuda()
        got = None
        for name, fail_idx in (("cuMemcpyBatchAsync_v2", False), ("cuMemcpyBatchAsync", True)):
            fn = None if lib is None else getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                got = (fn, fail_idx)
                break
        _BATCH.append(got)
    return _BATCH[0]


#: numba-cuda's device array and memory classes (``CudaMemory.interface``), imported once
_FACE_KINDS: list[type] = []
#: a device array layout (shape, strides, dtype) -> its interface dict without data and stream
_FACES: dict[tuple, dict[str, Any]] = {}


def _face_kinds() -> list[type]:
    from numba.cuda.cudadrv import devicearray, driver

    _FACE_KINDS[:] = [devicearray.DeviceNDArray, driver.MemoryPointer]
    return _FACE_KINDS


def _device_view(buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], dtype: Any,
                 start: int, stop: int) -> Any:
    # what numba-cuda's own indexing builds (``_do_getitem``): an array over a view of the
    # parent's memory, which keeps the parent alive
    from numba.cuda.cudadrv import devicearray

    return devicearray.DeviceNDArray(shape=shape, strides=strides, dtype=dtype,
                                     stream=buffer.stream,
                                     gpu_data=buffer.gpu_data.view(start, stop))


_STACK: list[Any] = []


def _stack_kernel() -> Any:
    """``stack_words(table, out)``: ``out[m, i] = word i at address table[m]`` (uint32
    words; a block row per member, blocks striding over its words); compiled on first use."""
    if not _STACK:
        from numba import cuda, types
        from numba.core.extending import intrinsic

        @intrinsic
        def words_at(typingctx, address):
            sig = types.CPointer(types.uint32)(types.uint64)

            def codegen(context, builder, signature, args):
                return builder.inttoptr(args[0],
                                        context.get_value_type(signature.return_type))

            return sig, codegen

        @cuda.jit("void(uint64[::1], uint32[:, ::1])")
        def stack_words(table, out):
            m = cuda.blockIdx.y
            src = words_at(table[m])
            i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            stride = cuda.gridDim.x * cuda.blockDim.x
            n = out.shape[1]
            while i < n:
                out[m, i] = src[i]
                i += stride

        _STACK.append(stack_words)
    return _STACK[0]


_MEMCPY: list[Any] = []


def _memcpy_async() -> Any:
    """The driver's ``cuMemcpyAsync`` typed (dst, src, bytes, stream), or None (no driver)."""
    if not _MEMCPY:
        lib = rawlaunch.libcuda()
        fn = None if lib is None else getattr(lib, "cuMemcpyAsync", None)
        if fn is not None:
            fn.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
            fn.restype = ctypes.c_int
        _MEMCPY.append(fn)
    return _MEMCPY[0]
