"""GPU buffers from CuPy's stream-ordered memory pool, wrapped as numba-cuda device arrays.

CuPy's pool keeps one arena per stream: a block freed after work queued on a stream is only
handed out again to later work on the same stream, so stream order keeps reuse safe. The Numba
array holds CuPy's memory pointer as its owner, which returns the block to the pool when
dropped.

Per call only the raw block is asked of the pool (``cupy.cuda.alloc``: no CuPy array) and the
Numba array is stamped from a prototype of its (shape, dtype) (``_Layouts``): numba-cuda's
constructor (shape checks, a layout object, sizes) runs once per layout, not per allocation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def stream_handle(stream: Any) -> int:
    """The raw handle of a numba-cuda stream (0 for the default stream)."""
    handle = getattr(stream, "handle", None)
    value = getattr(handle, "value", handle)
    return int(value or 0)


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


class CupyPool:
    """Allocations through CuPy's pool on the stream the caller launches on."""

    def __init__(self, cupy: Any) -> None:
        self.cupy = cupy
        self._streams: dict[tuple[int, int], Any] = {}
        self._contexts: dict[int, Any] = {}

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype, device: int, stream: Any,
                 context: Callable[[int], Any]) -> Any:
        """A device array of ``shape`` on ``device``, ordered on ``stream``.

        ``context(device)`` gives the device's numba-cuda context (called once per device).
        """
        block = self._block(LAYOUTS.nbytes(shape, dtype), device, stream_handle(stream))
        return LAYOUTS.stamp(shape, dtype, block.ptr, block, self._context(device, context))

    def _block(self, nbytes: int, device: int, handle: int) -> Any:
        with self.cupy.cuda.Device(device):
            return self._block_current(nbytes, device, handle)

    def _block_current(self, nbytes: int, device: int, handle: int) -> Any:
        # ``device`` is the runtime's current device (its context is the thread's current)
        cp_stream = self._streams.get((device, handle))
        if cp_stream is None:
            cupy = self.cupy
            cp_stream = _cupy_external(cupy, handle) if handle else cupy.cuda.Stream.null
            self._streams[(device, handle)] = cp_stream
        with cp_stream:
            return self.cupy.cuda.alloc(nbytes)

    def _context(self, device: int, context: Callable[[int], Any]) -> Any:
        ctx = self._contexts.get(device)
        if ctx is None:
            ctx = self._contexts[device] = context(device)
        return ctx

    def allocator(self, shape: tuple[int, ...], dtype: np.dtype, device: int,
                  context: Callable[[int], Any]) -> Callable[[int], Any]:
        """``allocate`` of one layout on one device, the stream's raw handle given per call:
        its bytes, prototype and context worked out once (a replay launch allocates so).

        The caller must have the device's context current (a replay launch checks that
        first): the runtime's current device is then ``device`` and is not set again.
        """
        from numba.cuda.cudadrv import devicearray, driver

        nbytes = LAYOUTS.nbytes(shape, dtype)
        ctx = self._context(device, context)
        proto = LAYOUTS.proto(shape, dtype, ctx)
        block_of = self._block_current
        array, pointer = devicearray.DeviceNDArray, driver.MemoryPointer
        cu_ptr = driver.binding.CUdeviceptr
        alloc = self.cupy.cuda.alloc
        streams = self._streams
        # CuPy's current stream (a C-level call): when it already is the one asked for (the
        # same object: the null stream for the default one), it is not entered again
        current = getattr(self.cupy.cuda, "get_current_stream", None)
        # what ``MemoryPointer(ctx, ptr, size=nbytes, owner=block)`` sets, but the pointer
        # and its owner: a new one is this and three attributes, without its ``__init__``
        memory = vars(pointer(ctx, cu_ptr(0), size=nbytes))
        memory = {k: v for k, v in memory.items()
                  if k not in ("device_pointer", "handle", "_owner")}

        def allocate(handle: int) -> Any:
            cp_stream = streams.get((device, handle))
            if cp_stream is None:
                block = block_of(nbytes, device, handle)  # (caches the stream)
            elif current is not None and current() is cp_stream:
                block = alloc(nbytes)
            else:
                with cp_stream:
                    block = alloc(nbytes)
            arr = object.__new__(array)
            arr.__dict__.update(proto)
            ptr = object.__new__(pointer)
            d = ptr.__dict__
            d.update(memory)
            d["device_pointer"] = d["handle"] = cu_ptr(block.ptr)
            d["_owner"] = block
            arr.gpu_data = ptr
            return arr

        return allocate

    @staticmethod
    def _wrap(arr: Any, ctx: Any) -> Any:
        # numba.cuda.as_cuda_array would also wrap CuPy's current stream in a new Numba stream
        # object and look the context up again, per call: build the array directly instead
        from numba.cuda.cudadrv import devicearray, driver

        data = driver.MemoryPointer(ctx, driver.binding.CUdeviceptr(arr.data.ptr),
                                    size=arr.nbytes, owner=arr)
        return devicearray.DeviceNDArray(shape=arr.shape, strides=arr.strides, dtype=arr.dtype,
                                         gpu_data=data, stream=0)

    @staticmethod
    def stamp(shape: tuple[int, ...], dtype: np.dtype, ptr: int, owner: Any, ctx: Any) -> Any:
        """What ``_wrap`` builds for a C-contiguous block at ``ptr``, from its layout's
        prototype (``_Layouts``)."""
        return LAYOUTS.stamp(shape, dtype, ptr, owner, ctx)

    def clear(self) -> None:
        """Forget the cached streams and contexts (at exit, while the contexts exist)."""
        self._streams.clear()
        self._contexts.clear()


class _Layouts:
    """numba-cuda device arrays made from a per-(shape, dtype) prototype.

    A ``DeviceNDArray`` is plain data once built (shape, strides, dtype, size, a layout
    object, its memory): every array of one C-contiguous layout shares all of it but the
    memory, so a new one is the prototype's attributes and a new ``MemoryPointer``.
    """

    # a training batch's groups make a new layout for every member count they meet (pack
    # views, kernel outputs): ~1,100 for the figure-5.1 chain, so at 1,024 the cache was
    # cleared and rebuilt every few hundred batches (bench/RESULTS.md, 2026-11-23)
    _MAX = 4096

    def __init__(self) -> None:
        self._protos: dict[tuple[tuple[int, ...], np.dtype], dict] = {}
        self._sizes: dict[tuple[tuple[int, ...], np.dtype], int] = {}
        self._memory: dict[int, tuple[Any, tuple]] = {}  # id(context) -> (it, stamp kinds)

    def clear(self) -> None:
        """Forget every prototype and size; they are made again as layouts are met."""
        self._protos.clear()
        self._sizes.clear()

    def nbytes(self, shape: tuple[int, ...], dtype: np.dtype) -> int:
        """Bytes of a C-contiguous array of ``shape`` and ``dtype``."""
        got = self._sizes.get((shape, dtype))
        if got is None:
            got = math.prod(map(int, shape)) * dtype.itemsize
            if len(self._sizes) >= self._MAX:
                self._sizes.clear()
            self._sizes[(shape, dtype)] = got
        return got

    def proto(self, shape: tuple[int, ...], dtype: np.dtype, ctx: Any) -> dict:
        """The attributes, all but the memory, of a C-contiguous device array of ``shape`` and
        ``dtype``."""
        proto = self._protos.get((shape, dtype))
        if proto is None:
            proto = _described(shape, dtype) if _DESCRIBE and math.prod(shape) else None
            if proto is None:
                proto = _constructed(shape, dtype, ctx)
            if len(self._protos) >= self._MAX:
                self._protos.clear()
            self._protos[(shape, dtype)] = proto
        return proto

    def stamp(self, shape: tuple[int, ...], dtype: np.dtype, ptr: int, owner: Any,
              ctx: Any) -> Any:
        """A C-contiguous device array of ``shape`` and ``dtype`` over ``ptr`` (kept alive
        by ``owner``) in numba-cuda context ``ctx``."""
        return self.stamp_parts([(0, dtype, shape)], ptr, owner, ctx)[0]

    def stamp_parts(self, parts: list[tuple[int, Any, tuple[int, ...]]], base: int,
                    owner: Any, ctx: Any) -> list[Any]:
        """Per part (byte offset, dtype, shape) a C-contiguous device array at ``base +
        offset`` (``stamp``), None for an empty part. The pointer's attributes are set as
        ``MemoryPointer``'s constructor sets them, taken from one it built: no call per part
        but the driver pointer's (a batch's pack has ~10 parts)."""
        kinds = self._memory_of(ctx)
        protos, sizes = self._protos, self._sizes
        out: list[Any] = []
        for off, dtype, shape in parts:
            if 0 in shape:
                out.append(None)
                continue
            nbytes = sizes.get((shape, dtype)) or self.nbytes(shape, dtype)
            proto = protos.get((shape, dtype)) or self.proto(shape, dtype, ctx)
            out.append(_stamped(kinds, proto, base + off, nbytes, owner))
        return out

    def member_stamp(self, step: int, dtype: np.dtype, shape: tuple[int, ...], base: int,
                     owner: Any, ctx: Any) -> Callable[[int], Any]:
        """``stamp(m)``: ``stamp_parts``' part ``m`` of the parts of one non-empty ``shape``
        and ``dtype``, ``step`` bytes apart from ``base`` (the members of a batch buffer), the
        layout looked up once."""
        kinds = self._memory_of(ctx)
        nbytes = self.nbytes(shape, dtype)
        proto = self.proto(shape, dtype, ctx)
        return lambda m: _stamped(kinds, proto, base + m * step, nbytes, owner)

    def _memory_of(self, ctx: Any) -> tuple:
        """What ``MemoryPointer``'s constructor sets in context ``ctx`` and the classes a
        stamp makes (``_stamped``), made once per context (a pack is stamped every batch)."""
        from numba.cuda.cudadrv import devicearray, driver

        got = self._memory.get(id(ctx))
        if got is None or got[0] is not ctx:
            cu_ptr = driver.binding.CUdeviceptr
            memory = vars(driver.MemoryPointer(ctx, cu_ptr(0), size=0))
            got = self._memory[id(ctx)] = (ctx, (memory, driver.MemoryPointer,
                                                 devicearray.DeviceNDArray, cu_ptr))
        return got[1]


def _stamped(kinds: tuple, proto: dict, address: int, nbytes: int, owner: Any) -> Any:
    """A device array of ``proto``'s layout over ``address`` (``nbytes``), kept alive by
    ``owner``; ``kinds`` from ``_Layouts._memory_of``: the pointer's attributes, the
    pointer's and the array's classes, the driver pointer's."""
    memory, pointer, array, cu_ptr = kinds
    ptr = object.__new__(pointer)
    d = ptr.__dict__
    d.update(memory)
    d["device_pointer"] = d["handle"] = cu_ptr(address)
    d["size"] = d["_cuda_memsize_"] = nbytes
    d["_owner"] = owner
    arr = object.__new__(array)
    arr.__dict__.update(proto)
    arr.gpu_data = ptr
    return arr


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for s in reversed(shape):
        out.append(step)
        step *= max(int(s), 1)
    return tuple(reversed(out))


def _null(driver: Any, ctx: Any) -> Any:
    return driver.MemoryPointer(ctx, driver.binding.CUdeviceptr(0), size=0)


def _constructed(shape: tuple[int, ...], dtype: np.dtype, ctx: Any) -> dict:
    """A prototype (``_Layouts.proto``) from numba-cuda's own constructor."""
    from numba.cuda.cudadrv import devicearray, driver

    strides = _c_strides(shape, dtype.itemsize)
    a = devicearray.DeviceNDArray(shape=shape, strides=strides, dtype=dtype,
                                  gpu_data=_null(driver, ctx), stream=0)
    return {k: v for k, v in vars(a).items() if k != "gpu_data"}


#: Prototypes of non-empty layouts written out (``_described``) instead of constructed; set
#: False on the first one if numba-cuda's constructor builds other attributes
_DESCRIBE = True


def _described(shape: tuple[int, ...], dtype: np.dtype) -> dict | None:
    """What ``_constructed`` gives for a non-empty C-contiguous layout, written out: the
    layout object (``dummyarray.Array``: its dims, extent and flags as ``from_desc``
    computes them for a C-contiguous array at offset 0) and the array's attributes.

    numba-cuda's constructor costs ~16 us (2-core dev machine; ~30-50 us on the GPU hosts)
    and a training batch meets ~10 new layouts a batch in its first hundreds of batches
    (every new member count of a group: bench/RESULTS.md, 2026-11-23); this ~3 us.
    None (and ``_constructed`` from then on) when the first one checked differs.
    """
    from numba.cuda.cudadrv import dummyarray

    itemsize = dtype.itemsize
    shape = tuple(map(int, shape))
    strides = _c_strides(shape, itemsize)
    nbytes = math.prod(shape) * itemsize
    dims = tuple([dummyarray.Dim(0, n * st, n, st, False)
                  for n, st in zip(shape, strides, strict=True)])
    f_contig, step = True, itemsize  # (C-contiguous by construction; F as numba checks it)
    for n, st in zip(shape, strides, strict=True):
        if n != 1:
            if st != step:
                f_contig = False
                break
            step *= n
    layout = object.__new__(dummyarray.Array)
    layout.__dict__.update(dims=dims, ndim=len(shape), shape=shape, strides=strides,
                           itemsize=itemsize, size=nbytes // itemsize,
                           extent=dummyarray.Extent(0, nbytes),
                           flags={"C_CONTIGUOUS": True, "F_CONTIGUOUS": f_contig})
    proto = {"ndim": len(shape), "_dummy": layout, "shape": shape, "strides": strides,
             "dtype": dtype, "size": nbytes // itemsize, "alloc_size": nbytes, "stream": 0}
    if not _CHECKED:
        _CHECKED.append(_same(proto, _constructed(shape, dtype, None)))
    return proto if _CHECKED[0] else _off()


_CHECKED: list[bool] = []  # whether the first written-out prototype equals the constructed


def _same(mine: dict, theirs: dict) -> bool:
    """Whether two prototypes hold equal attributes, their layout objects' too."""
    if mine.keys() != theirs.keys():
        return False
    a, b = mine["_dummy"], theirs["_dummy"]
    if type(a) is not type(b) or vars(a).keys() != vars(b).keys():
        return False
    for name, value in vars(b).items():
        got = getattr(a, name)
        if name == "dims":
            if [tuple(getattr(d, s) for s in type(d).__slots__) for d in got] != \
                    [tuple(getattr(d, s) for s in type(d).__slots__) for d in value]:
                return False
        elif got != value:
            return False
    return all(mine[k] == v for k, v in theirs.items() if k != "_dummy")


def _off() -> None:
    global _DESCRIBE
    _DESCRIBE = False


#: the process's one set of layout prototypes (the cuda backend's memory and batch packs read it)
LAYOUTS = _Layouts()

