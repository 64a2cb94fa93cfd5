"""The cudasim backend: numba-cuda's simulator, every GPU thread a Python thread.

It runs the same generated ``@cuda.jit`` kernels as the cuda backend, so the GPU code paths
are tested without a GPU. It has one device, no pool, no peer copies, no cached launch path,
and launches small blocks (each simulated thread costs ~200 us).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numpy as np

from .base import Backend, Capabilities, DeviceInfo
from .cpu import host_memory_bytes
from .cuda import CudaBackend
from .cuda_devices import UNCHANGED


class SimBackend(CudaBackend):
    """numba-cuda's CUDA simulator."""

    name = "cudasim"
    visible_devices_var = None
    simulated = True
    kernel_decorator = "@cuda.jit"
    SMALL_MAX = -1  # no upload is shared: the simulator's arrays are cheap host arrays
    BLOCK_1D = 64

    def _capabilities(self) -> Capabilities:
        return Capabilities(
            device_memory=True, grid_launches=True, shared_memory=True,
            launches_on_streams=True,
            kernel_language="numba-cuda", tuned_kernels=False, external_memory=False,
            peer_copies=False, concurrent_launches=True)

    def _wants_fast_launch(self) -> bool:
        return False

    #: numba's simulator runs one kernel at a time (its kernel context is a global: a kernel
    #: launched while another runs is called as a device function, and fails); launches from
    #: several threads (a Generator's workers, a batch mixer beside them) take turns
    _one_kernel = threading.Lock()

    def _launch(self, kernel: Any, device: int, args: tuple, *config: Any) -> None:
        with self._one_kernel:
            super()._launch(kernel, device, args, *config)

    def device_infos(self) -> list[DeviceInfo]:
        return [DeviceInfo(i, "cudasim", 1, 1) for i in range(self.device_count())]

    def peer_matrix(self, n: int) -> np.ndarray:
        return np.eye(n, dtype=bool)

    def memory_bytes(self, device: int) -> int | None:
        return host_memory_bytes()  # simulated arrays are host arrays

    def on_device(self, device: int) -> contextlib.AbstractContextManager[None]:
        return UNCHANGED

    def synchronize(self, device: int | None = None) -> None:
        self.cuda.synchronize()

    def current_stream(self) -> Any:
        s = getattr(self._tls, "stream", None)
        return self.cuda.default_stream() if s is None else s

    def record_event(self, stream: Any = None) -> Any:
        event = self.cuda.event()  # the simulator's events take no timing flag
        event.record(self.current_stream() if stream is None else stream)
        return event

    def _cupy_pool(self) -> None:
        return None

    def copy(self, buffer: Any, device: int, src_device: int, peer: bool = False) -> Any:
        out = self.empty(buffer.shape, buffer.dtype, device)
        out.copy_to_device(buffer, stream=self.current_stream())
        return out

    # the simulator's arrays slice as NumPy's do
    part = Backend.part
    members = Backend.members
    member_views = Backend.member_views
    stack_into = Backend.stack_into

    @staticmethod
    def _address(buffer: Any) -> int | None:
        # (the simulator's arrays wrap a NumPy array and have no CUDA array interface)
        host = getattr(buffer, "_ary", None)
        return host.ctypes.data if isinstance(host, np.ndarray) else None

    def shared_limit(self, device: int) -> int:
        return self.SHARED_DEFAULT

    def _grid_2d(self, h: int, w: int) -> tuple[tuple[int, int], tuple[int, int]]:
        block = (min(16, w), min(4, h))
        return ((w + block[0] - 1) // block[0], (h + block[1] - 1) // block[1]), block

    def shutdown(self) -> None:
        """Nothing to release: the simulator's memory is the host's."""
