"""GPU buffers from CuPy's stream-ordered memory pool, wrapped as numba-cuda device arrays.

CuPy's pool keeps one arena per stream: a block freed after work queued on a stream is only
handed out again to later work on the same stream, so stream order keeps reuse safe. The Numba
array holds the CuPy array as its owner, which returns the block to the pool when dropped.
"""

from __future__ import annotations

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
        cupy = self.cupy
        handle = stream_handle(stream)
        with cupy.cuda.Device(device):
            cp_stream = self._streams.get((device, handle))
            if cp_stream is None:
                cp_stream = _cupy_external(cupy, handle) if handle else cupy.cuda.Stream.null
                self._streams[(device, handle)] = cp_stream
            with cp_stream:
                arr = cupy.empty(shape, dtype=dtype)
        ctx = self._contexts.get(device)
        if ctx is None:
            ctx = self._contexts[device] = context(device)
        return self._wrap(arr, ctx)

    @staticmethod
    def _wrap(arr: Any, ctx: Any) -> Any:
        # numba.cuda.as_cuda_array would also wrap CuPy's current stream in a new Numba stream
        # object and look the context up again, per call: build the array directly instead
        from numba.cuda.cudadrv import devicearray, driver

        data = driver.MemoryPointer(ctx, driver.binding.CUdeviceptr(arr.data.ptr),
                                    size=arr.nbytes, owner=arr)
        return devicearray.DeviceNDArray(shape=arr.shape, strides=arr.strides, dtype=arr.dtype,
                                         gpu_data=data, stream=0)

    def clear(self) -> None:
        """Forget the cached streams and contexts (at exit, while the contexts exist)."""
        self._streams.clear()
        self._contexts.clear()
