"""The cpu backend: buffers are C-contiguous NumPy arrays, kernels serial Numba loops in parts.

A "device" is a logical slot: ``MILLIPYDE_CPU_DEVICES`` of them, so every multi-device path of
the scheduler runs without a GPU. Launches are synchronous; there are no streams.

Generated kernels are compiled serial with a ``(part_, parts_)`` pair of parameters
(``graph.codegen.cpu_parts``): a launch of fewer than ``PARALLEL_MIN_ITEMS`` items (pixels,
elements) is one call in the calling thread; a larger one is cut into as many parts as Numba
has threads (``NUMBA_NUM_THREADS``), run at once by this backend's threads (the kernels
release the GIL). Numba's own parallel loops cost ~40-60% more compile time per kernel and a
thread pool's start per launch.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
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


#: launches of fewer items (pixels, elements) run in one part, in the calling thread: a hand-off
#: to the part threads costs tens of microseconds, about what a kernel spends on 30k pixels
PARALLEL_MIN_ITEMS = 1 << 15


def split_kernel(kernel: Any) -> bool:
    """Whether ``kernel`` is a generated kernel that runs in parts (``part_, parts_`` last)."""
    fn = getattr(kernel, "py_func", None)
    code = getattr(fn, "__code__", None)
    return (code is not None and code.co_argcount >= 2
            and code.co_varnames[code.co_argcount - 1] == "parts_")


class CpuBackend(Backend):
    """NumPy buffers and parallel Numba loops on the host."""

    name = "cpu"
    codegen_target = "cpu"
    # what the generators write; ``cpu_parts`` compiles it serial, run in parts
    kernel_decorator = "@njit(parallel=True, nogil=True, cache=True, error_model='numpy')"
    # (one shared dispatcher per function: ``graph.codegen.cpu_devices``)
    device_decorator = "cpu_devices.device"
    scalars_in_array = True

    def __init__(self) -> None:
        super().__init__()
        # Without tbb or OpenMP, Numba's workqueue layer aborts when two threads run parallel
        # kernels at once: serialize launches instead.
        self._launch_lock = None if _threadsafe_layer() else threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pool_lock = threading.Lock()
        self.caps = Capabilities(
            device_memory=False, grid_launches=False, shared_memory=False,
            launches_on_streams=False,
            kernel_language="numba-cpu", tuned_kernels=False, external_memory=False,
            peer_copies=False, concurrent_launches=self._launch_lock is None,
            shared_batches="host")

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

    def stack_into(self, dst: Any, sources: list[Any], stream: Any = None,
                   device: int | None = None) -> None:
        tail = dst.shape[1:]
        if tail and 0 < len(sources) <= len(dst) and dst.flags.c_contiguous and all(
                s.shape == tail and s.dtype == dst.dtype for s in sources):
            # one copy in C: an assignment per member cost 2.4 us of Python a 32 x 32 RGB
            # member, this 0.4 (a Pipeline chunk stacks its inputs)
            np.concatenate(sources, axis=0, out=dst[:len(sources)].reshape((-1, *tail[1:])))
            return
        for i, src in enumerate(sources):
            dst[i] = src.reshape(tail)

    def _parts_pool(self, threads: int) -> ThreadPoolExecutor:
        """The threads that run a large launch's parts but the first (made again after a
        fork: a child process inherits the pool's object, not its threads)."""
        with self._pool_lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(max(1, threads - 1),
                                                thread_name_prefix="millipyde-cpu-part")
                self._pool_pid = os.getpid()
            return self._pool

    def _run_cpu(self, kernel: Any, args: tuple, items: int) -> None:
        if not split_kernel(kernel):
            if self._launch_lock is None:
                kernel(*args)
            else:
                with self._launch_lock:
                    kernel(*args)
            return
        import numba

        parts = numba.config.NUMBA_NUM_THREADS if items >= PARALLEL_MIN_ITEMS else 1
        if parts <= 1:
            kernel(*args, 0, 1)
            return
        pool = self._parts_pool(parts)
        others: list[Future] = [pool.submit(kernel, *args, k, parts) for k in range(1, parts)]
        try:
            kernel(*args, 0, parts)
            # a part no pool thread has started yet (they are busy with another thread's
            # launch: a Pipeline's two workers launch at once) runs here instead of waiting
            for k, f in enumerate(others, 1):
                if f.cancel():
                    kernel(*args, k, parts)
        finally:
            # every part has ended before the launch returns (or raises its first error)
            errors = [f.exception() for f in others if not f.cancelled()]
        for err in errors:
            if err is not None:
                raise err

    def _recorded_parts(self, kernel: Any, device: int, args: tuple) -> bool:
        # a recorded launch carries the part arguments the real one passes (their types
        # are part of the compiled signature)
        return self._recorded(kernel, device, args + (0, 1) if split_kernel(kernel) else args)

    def launch_2d(self, kernel: Any, h: int, w: int, device: int, *args: Any) -> None:
        if h == 0 or w == 0 or self._recorded_parts(kernel, device, args):
            return
        self._run_cpu(kernel, args, h * w)

    def launch_grid(self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...],
                    device: int, *args: Any, shared: int = 0) -> None:
        # GPU variants are never picked here (caps.shared_memory is False)
        raise RuntimeError("launch_grid needs a backend with thread blocks; this is the cpu")

    def launch_blocks(self, kernel: Any, blocks: int, threads: int, device: int,
                      *args: Any) -> None:
        if not self._recorded_parts(kernel, device, args):
            self._run_cpu(kernel, args, blocks * threads)
