"""Small host->device copies without a blocking sync: a pinned staging ring per device.

``DeviceNDArray.copy_to_device`` from pageable NumPy memory makes the driver stage the bytes
and wait: ~0.1 ms per 2 KB table on an H200 (bench/RESULTS.md), paid on every op whose table or
parameters changed. Here the bytes go into a slot of a page-locked ring and the copy is queued
with ``cuMemcpyHtoDAsync`` on the caller's stream, so the host returns at once and stream order
puts the copy before the kernel that reads it. Each slot carries an event recorded right after
its copy; a slot is written again only once that event has completed (the host waits only when
it runs a whole ring ahead of the GPU).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np


class StagingRing:
    """``slots`` pinned slots of ``slot_bytes`` on one device, used round robin."""

    def __init__(self, cuda: Any, slots: int = 64, slot_bytes: int = 65536) -> None:
        from numba.cuda.cudadrv import driver

        self._driver = driver
        self._cuda = cuda
        self.slots = slots
        self.slot_bytes = slot_bytes
        self._host = cuda.pinned_array(slots * slot_bytes, dtype=np.uint8)
        self._base = int(self._host.ctypes.data)
        self._events: list[Any] = [None] * slots
        self._next = 0
        self._lock = threading.Lock()

    def copy(self, dst: Any, array: np.ndarray, stream: Any) -> None:
        """Queue a copy of C-contiguous ``array`` into device array ``dst`` on ``stream``
        (the device's context current); ``array`` may change as soon as this returns."""
        self.copy_parts(dst, [(0, array)], array.nbytes, stream)

    def copy_parts(self, dst: Any, parts: list[tuple[int, np.ndarray]], nbytes: int,
                   stream: Any) -> None:
        """Queue a copy of ``nbytes`` into device array ``dst`` on ``stream`` (the device's
        context current), each C-contiguous array of ``parts`` at its byte offset (written
        straight into the pinned slot: no host buffer of their own first); bytes no part
        covers are left as they are. The arrays may change as soon as this returns."""
        n = nbytes
        if n > self.slot_bytes:
            raise ValueError(f"array of {n} B does not fit a {self.slot_bytes} B staging slot")
        if n == 0:
            return
        drv = self._driver
        with self._lock:
            i = self._next
            self._next = (i + 1) % self.slots
            event = self._events[i]
            if event is not None:
                event.synchronize()  # the copy that last read this slot; normally long done
            else:
                event = self._events[i] = self._cuda.event(timing=False)
            off = i * self.slot_bytes
            host = self._host
            for at, a in parts:
                put(host, off + at, a)
            drv.driver.cuMemcpyHtoDAsync(drv.device_pointer(dst), self._base + off, n,
                                         drv._stream_handle(stream))
            event.record(stream)


def put(host: np.ndarray, at: int, a: np.ndarray) -> None:
    """Copy array ``a`` into the uint8 buffer ``host`` from byte ``at`` on, in C order (a
    strided ``a``, columns of a wider array, in one copy, not through a contiguous one)."""
    if a.flags.c_contiguous:
        # (a 1-D array, a group's stack indices or radii, viewed as bytes in one call)
        host[at:at + a.nbytes] = (a if a.ndim == 1 else a.reshape(-1)).view(np.uint8)
    else:
        host[at:at + a.nbytes].view(a.dtype).reshape(a.shape)[...] = a
