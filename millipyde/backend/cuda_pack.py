"""The cuda backend's packed uploads (a part of ``CudaBackend``): a batch's per-member arrays
in one asynchronous copy from pinned memory, handed back as views stamped from prototypes.

``from_host`` copies from pageable NumPy memory: the driver stages the bytes and, for more than
a few KB, can wait for the stream to reach the copy, so a training batch's pack (~150 KB for a
batch of 256) can hold the worker until the previous batch's kernels have run. Here the bytes
go into a slot of a pinned ring (``staging.StagingRing``, slots sized for packs) and
``cuMemcpyHtoDAsync`` queues the copy on the caller's stream, so the host returns at once and
stream order puts the copy before the kernels that read it. The views are stamped from
per-layout prototypes (``pool.CupyPool.stamp``) instead of built by numba-cuda's constructor,
one per part.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import faults
from . import launcher
from .pool import LAYOUTS, stream_handle
from .staging import StagingRing

#: slots of a device's pack ring: a slot is written again once the copy that last read it
#: has run, so the host waits only when it is this many packs ahead of the GPU
PACK_SLOTS = 8
#: bytes of a pack slot at first (a larger pack makes a ring of larger slots)
PACK_SLOT_BYTES = 1 << 20
#: a pack's device buffer is a multiple of this many bytes
PACK_ROUND = 1 << 16


_DEVICE_ARRAY: list[type] = []
_U64 = np.dtype(np.uint64)


class _NoArray:
    """Stands for ``DeviceNDArray`` where numba-cuda has none: no array is one."""


def _device_array() -> type:
    """numba-cuda's ``DeviceNDArray`` (imported on first use)."""
    if not _DEVICE_ARRAY:
        from numba.cuda.cudadrv import devicearray

        # (the CUDA simulator's module has none: its arrays take numba's own reshape)
        _DEVICE_ARRAY.append(getattr(devicearray, "DeviceNDArray", _NoArray))
    return _DEVICE_ARRAY[0]


class CudaPacks:
    """``upload_parts``, ``flat`` / ``reshape`` without numba-cuda's constructor, and the
    batch engine's launches (``launch_batched``) of ``CudaBackend``."""

    def launch_batched(self, kernel: Any, grid: tuple[int, int, int],
                       block: tuple[int, int, int], device: int, args: tuple,
                       shared: int = 0) -> bool:
        """``launch_grid`` of a batched kernel (``graph.exec.batch_launch``) straight through
        its driver template; False (nothing launched) where the general path must take it.

        The batch engine launches the same few kernels with arrays it made C-contiguous itself
        (pool allocations, stamped pack views, their ``flat`` views): per kernel, device and
        argument types the template is looked up once (``launcher.template_of``, after the
        kernel's first launch went through the general path), and a launch checks only each
        array's dtype and rank against the first, not the general path's kinds per argument.
        Taken only with ``device`` already this thread's (a worker inside ``on_device``) and
        no launch recording; ``shared`` bytes of dynamic shared memory only up to what the
        general path launches the kernel with (``launcher.shared_max``).
        """
        tls = self._tls
        if getattr(tls, "device", None) != device or \
                getattr(tls, "recording", None) is not None or \
                not (launcher.ENABLED and launcher.DIRECT):
            return False
        key = (id(kernel), device, tuple(map(type, args)))
        got = _batched.get(key)
        if got is None or got[0]() is not kernel:
            got = _batched_entry(kernel, device, args, key)
        template, layouts = got[1], got[2]
        if template is None or shared > got[3]:
            return False
        for i, dt, nd in layouts:
            a = args[i]
            if a.dtype != dt or a.ndim != nd or a.size == 0:
                return False
        s = getattr(tls, "stream", None)
        stream = self._default_streams.get(device) if s is None else s
        if stream is None:
            return False
        template.launch_values(template.values(args), grid, block, shared,
                               stream_handle(stream))
        return True

    def flat(self, buffer: Any) -> Any:
        """A 1-D view of a contiguous buffer (``reshape``), kept on a numba-cuda array once
        made: a batch flattens its stack and each kernel output more than once (the kernel
        that writes it, the one that reads it)."""
        if buffer.ndim == 1:
            return buffer
        d = getattr(buffer, "__dict__", None)
        got = None if d is None else d.get("_mp_flat")
        if got is None:
            got = self.reshape(buffer, (buffer.size,))
            if got is not buffer and d is not None and \
                    type(buffer) is (_DEVICE_ARRAY[0] if _DEVICE_ARRAY else _device_array()):
                d["_mp_flat"] = got
        return got

    def reshape(self, buffer: Any, shape: tuple[int, ...]) -> Any:
        """A view of a C-contiguous device array with another shape, stamped from its layout's
        prototype over the same memory (numba-cuda's ``reshape`` builds its layout objects
        anew: a batch's launches took ~30 of them); anything else as numba-cuda does it."""
        shape = tuple(shape)
        if buffer.shape == shape:
            return buffer
        if type(buffer) is not (_DEVICE_ARRAY[0] if _DEVICE_ARRAY else _device_array()):
            return buffer.reshape(*shape)
        d = buffer.__dict__
        if d["stream"] != 0 or d["size"] == 0 or not d["_dummy"].is_c_contig:
            return buffer.reshape(*shape)
        proto = LAYOUTS._protos.get((shape, d["dtype"]))
        if proto is None or d["size"] != proto["size"]:
            if min(shape, default=0) < 0 or math.prod(shape) != d["size"]:
                return buffer.reshape(*shape)  # numba-cuda raises as it does
            proto = LAYOUTS.proto(shape, buffer.dtype, buffer.gpu_data.context)
        arr = object.__new__(_DEVICE_ARRAY[0])
        arr.__dict__.update(proto)
        arr.gpu_data = d["gpu_data"]
        return arr

    def words(self, buffer: Any) -> Any:
        """``Backend.words`` (a 1-D uint8 buffer as uint64 words, kept on it), the view
        stamped from its layout's prototype over the same memory as ``reshape`` stamps it
        (numba-cuda's ``view`` constructs one: a batch's writers and first gathers view their
        new output buffers so every batch); anything else as the base does it."""
        d = getattr(buffer, "__dict__", None)
        got = None if d is None else d.get("_mp_words")
        if got is not None:
            return got
        if type(buffer) is not (_DEVICE_ARRAY[0] if _DEVICE_ARRAY else _device_array()) or \
                d["stream"] != 0 or d["ndim"] != 1 or d["dtype"] != np.uint8 or \
                d["size"] == 0 or not d["_dummy"].is_c_contig:
            return super().words(buffer)
        if d["size"] % 8 or int(d["gpu_data"].device_pointer) % 8:
            return None
        shape = (d["size"] // 8,)
        proto = LAYOUTS._protos.get((shape, _U64)) or \
            LAYOUTS.proto(shape, _U64, buffer.gpu_data.context)
        got = object.__new__(_DEVICE_ARRAY[0])
        got.__dict__.update(proto)
        got.gpu_data = d["gpu_data"]
        d["_mp_words"] = got
        return got

    def upload_parts(self, parts: list[tuple[int, np.ndarray]], nbytes: int,
                     device: int) -> list[Any]:
        """``Backend.upload_parts`` with one pinned asynchronous copy on the current stream:
        the arrays written straight into a slot of the pack ring (``StagingRing.copy_parts``;
        they may change once this returns), their views stamped from their layouts."""
        pool = self._cupy_pool()
        if not self.staged_uploads or pool is None or nbytes == 0:
            return super().upload_parts(parts, nbytes, device)
        with self.on_device(device):
            stream = self.current_stream()
            # (rounded up: a batch's pack size varies, so an exact size would be a new
            # layout and pool allocator nearly every batch; these are a few, kept)
            buf = self.empty_batched((-(-nbytes // PACK_ROUND) * PACK_ROUND,), np.uint8,
                                     device)
            self._pack_ring(device, nbytes).copy_parts(buf, parts, nbytes, stream)
            ctx = pool._context(device, self._context)
            layout = [(off, a.dtype, a.shape) for off, a in parts]
            views = LAYOUTS.stamp_parts(layout, int(buf.gpu_data.device_pointer), buf, ctx)
            for i, (_, dtype, shape) in enumerate(layout):
                if views[i] is None:  # an empty part: an array of its own
                    views[i] = self.empty(shape, dtype, device)
            return views

    def parts(self, buffer: Any, layout: list[tuple[int, Any, tuple[int, ...]]],
              device: int) -> list[Any]:
        """``Backend.parts`` stamped from their layouts as ``upload_parts``' views are
        (``pool._Layouts.stamp_parts``: no numba-cuda constructor per view; an empty part an
        array of its own), where the pool is on; else as the base makes them."""
        pool = self._cupy_pool()
        if pool is None or \
                type(buffer) is not (_DEVICE_ARRAY[0] if _DEVICE_ARRAY else _device_array()):
            return super().parts(buffer, layout, device)
        ctx = pool._context(device, self._context)
        views = LAYOUTS.stamp_parts(layout, int(buffer.gpu_data.device_pointer), buffer, ctx)
        for i, (_, dtype, shape) in enumerate(layout):
            if views[i] is None:
                views[i] = self.empty(shape, dtype, device)
        return views

    def empty_batched(self, shape: tuple[int, ...], dtype: Any, device: int) -> Any:
        """``empty`` of the batch engine's buffers inside ``on_device(device)``: through the
        pool's allocator of the layout (``CupyPool.allocator``, kept per layout) on the
        thread's stream, without entering the device again; anything else (another device
        current, no pool, an empty shape, an armed fault, a failed allocation) as ``empty``."""
        tls = self._tls
        pool = self._cupy_pool()
        if pool is None or faults.ARMED or getattr(tls, "device", None) != device:
            return self.empty(shape, dtype, device)
        s = getattr(tls, "stream", None)
        stream = self._default_streams.get(device) if s is None else s
        key = (shape, dtype, device)
        alloc = _allocators.get(key)
        if alloc is None:
            if stream is None or math.prod(shape) == 0:
                return self.empty(shape, dtype, device)
            alloc = pool.allocator(tuple(int(v) for v in shape), np.dtype(dtype), device,
                                   self._context)
            if len(_allocators) >= 1024:
                _allocators.clear()
            _allocators[key] = alloc
        try:
            return alloc(stream_handle(stream))
        except MemoryError:
            return self.empty(shape, dtype, device)  # fails as the backend reports it

    def _pack_ring(self, device: int, nbytes: int) -> StagingRing:
        """The pinned pack ring of ``device`` with slots of at least ``nbytes`` (its context
        current). A ring outgrown is kept: copies from it may still be queued."""
        rings = self.__dict__.setdefault("_pack_rings", {})
        ring = rings.get(device)
        if ring is None or ring.slot_bytes < nbytes:
            with self._small_lock:
                ring = rings.get(device)
                if ring is None or ring.slot_bytes < nbytes:
                    size = PACK_SLOT_BYTES
                    while size < nbytes:
                        size *= 2
                    if ring is not None:
                        self.__dict__.setdefault("_pack_rings_old", []).append(ring)
                    ring = rings[device] = StagingRing(self.cuda, PACK_SLOTS, size)
        return ring


#: (id(kernel), device, argument types) -> ``_batched_entry`` of ``launch_batched``
_batched: dict[tuple, tuple] = {}


def _batched_entry(kernel: Any, device: int, args: tuple, key: tuple) -> tuple:
    """What ``launch_batched`` keeps for ``key``: (the kernel's weak reference, its driver
    template or None (the general path), per array argument (position, dtype, ndim), the most
    dynamic shared memory it may be launched with)."""
    import weakref

    template, shared = None, -1
    if launcher.ENABLED and launcher.kind_key(args) is not None:
        shared = launcher.shared_max(kernel, device, args)
        if shared >= 0:
            template = launcher.template_of(kernel, device, args)
    layouts = () if template is None else tuple(
        (i, args[i].dtype, args[i].ndim) for i, k in enumerate(template.kinds) if k >= 0)
    got = (weakref.ref(kernel), template, layouts, shared)
    if template is not None or launcher.known(kernel, device, args):
        # (not known yet: its first launch through the general path is still to come)
        if len(_batched) >= 1024:
            _batched.clear()
        _batched[key] = got
    return got


_allocators: dict[tuple, Any] = {}  # (shape, dtype, device) -> ``CupyPool.allocator``
