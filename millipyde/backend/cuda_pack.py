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

from .pool import _LAYOUTS
from .staging import StagingRing

#: slots of a device's pack ring: a slot is written again once the copy that last read it
#: has run, so the host waits only when it is this many packs ahead of the GPU
PACK_SLOTS = 8
#: bytes of a pack slot at first (a larger pack makes a ring of larger slots)
PACK_SLOT_BYTES = 1 << 20


_protos: dict[tuple, dict] = {}  # (shape, dtype) -> a prototype's attributes (``_Layouts``)
_DEVICE_ARRAY: list[type] = []


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
    """``upload_pack``, and ``flat`` / ``reshape`` without numba-cuda's constructor, of
    ``CudaBackend``."""

    def flat(self, buffer: Any) -> Any:
        """A 1-D view of a contiguous buffer (``reshape``)."""
        return buffer if buffer.ndim == 1 else self.reshape(buffer, (buffer.size,))

    def reshape(self, buffer: Any, shape: tuple[int, ...]) -> Any:
        """A view of a C-contiguous device array with another shape, stamped from its layout's
        prototype over the same memory (numba-cuda's ``reshape`` builds its layout objects
        anew: a batch's launches took ~30 of them); anything else as numba-cuda does it."""
        shape = tuple(shape)
        if buffer.shape == shape:
            return buffer
        if type(buffer) is not _device_array():
            return buffer.reshape(*shape)
        d = buffer.__dict__
        if d["stream"] != 0 or d["size"] == 0 or not d["_dummy"].is_c_contig:
            return buffer.reshape(*shape)
        proto = _protos.get((shape, d["dtype"]))
        if proto is None or d["size"] != proto["size"]:
            if min(shape, default=0) < 0 or math.prod(shape) != d["size"]:
                return buffer.reshape(*shape)  # numba-cuda raises as it does
            proto = _LAYOUTS.proto(shape, buffer.dtype, buffer.gpu_data.context)
            if len(_protos) >= 4096:
                _protos.clear()
            _protos[(shape, buffer.dtype)] = proto
        arr = object.__new__(_device_array())
        arr.__dict__.update(proto)
        arr.gpu_data = d["gpu_data"]
        return arr

    def upload_pack(self, host: np.ndarray, parts: list[tuple[int, Any, tuple[int, ...]]],
                    device: int) -> list[Any]:
        """Views on ``device`` of the arrays laid out in the uint8 array ``host`` (one pinned
        asynchronous copy on the current stream; ``host`` may change once this returns)."""
        pool = self._cupy_pool()
        if not self.staged_uploads or pool is None or host.nbytes == 0:
            return super().upload_pack(host, parts, device)
        with self.on_device(device):
            stream = self.current_stream()
            buf = self.empty((host.nbytes,), np.uint8, device)
            self._pack_ring(device, host.nbytes).copy(buf, host, stream)
            ctx = pool._context(device, self._context)
            base = int(buf.gpu_data.device_pointer)
            return [pool.stamp(shape, np.dtype(dtype), base + off, buf, ctx)
                    if 0 not in shape else self.empty(shape, dtype, device)
                    for off, dtype, shape in parts]

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
