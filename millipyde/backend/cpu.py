"""The cpu backend: buffers are C-contiguous NumPy arrays, kernels ``@njit(parallel=True)`` loops.

A "device" is a logical slot: ``MILLIPYDE_CPU_DEVICES`` of them, so every multi-device path of
the scheduler runs without a GPU. Launches are synchronous; there are no streams.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from .. import config, faults
from .base import Backend, Capabilities, DeviceInfo


def _threadsafe_layer() -> bool:
    """Use a thread-safe Numba threading layer so virtual devices can launch concurrently."""
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


def host_memory_bytes() -> int | None:
    """The host's physical memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


class CpuBackend(Backend):
    """NumPy buffers and parallel Numba loops on the host."""

    name = "cpu"
    codegen_target = "cpu"
    kernel_decorator = "@njit(parallel=True, nogil=True, cache=True, error_model='numpy')"
    device_decorator = "njit(cache=False, error_model='numpy')"
    scalars_in_array = True

    def __init__(self) -> None:
        super().__init__()
        # Without tbb or OpenMP, Numba's workqueue layer aborts when two threads run parallel
        # kernels at once: serialize launches instead.
        self._launch_lock = None if _threadsafe_layer() else threading.Lock()
        self.caps = Capabilities(
            device_memory=False, grid_launches=False, shared_memory=False,
            launches_on_streams=False,
            kernel_language="numba-cpu", tuned_kernels=False, external_memory=False,
            peer_copies=False, concurrent_launches=self._launch_lock is None)

    def device_count(self) -> int:
        return config.cpu_devices()

    def device_infos(self) -> list[DeviceInfo]:
        n = self.device_count()
        cores = max(1, (os.cpu_count() or 1) // n)
        return [DeviceInfo(i, f"cpu:{i}", cores, 1) for i in range(n)]

    def memory_bytes(self, device: int) -> int | None:
        return host_memory_bytes()  # the logical devices share the host's memory

    def empty(self, shape: tuple[int, ...], dtype: Any, device: int) -> Any:
        try:
            faults.check("alloc", device)
            return np.empty(shape, dtype=dtype)
        except (MemoryError, faults.InjectedOutOfMemory) as err:
            raise self._oom(shape, dtype, device, err) from err

    def from_host(self, array: np.ndarray, device: int) -> Any:
        return np.ascontiguousarray(array).copy()

    def to_host(self, buffer: Any) -> np.ndarray:
        return np.array(buffer, copy=True)

    def copy(self, buffer: Any, device: int, src_device: int, peer: bool = False) -> Any:
        return np.array(buffer, copy=True)

    def upload_small(self, array: np.ndarray, device: int) -> Any:
        return array

    def stack_into(self, dst: Any, sources: list[Any], stream: Any = None) -> None:
        for i, src in enumerate(sources):
            dst[i] = src.reshape(dst.shape[1:])

    def _run_cpu(self, kernel: Any, args: tuple) -> None:
        if self._launch_lock is None:
            kernel(*args)
        else:
            with self._launch_lock:
                kernel(*args)

    def launch_2d(self, kernel: Any, h: int, w: int, device: int, *args: Any) -> None:
        if h == 0 or w == 0 or self._recorded(kernel, device, args):
            return
        self._run_cpu(kernel, args)

    def launch_grid(self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...],
                    device: int, *args: Any, shared: int = 0) -> None:
        # GPU variants are never picked here (caps.shared_memory is False)
        raise RuntimeError("launch_grid needs a backend with thread blocks; this is the cpu")

    def launch_blocks(self, kernel: Any, blocks: int, threads: int, device: int,
                      *args: Any) -> None:
        if not self._recorded(kernel, device, args):
            self._run_cpu(kernel, args)
