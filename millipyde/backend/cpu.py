"""The cpu backend: buffers are C-contiguous NumPy arrays, kernels serial Numba loops in parts.

A "device" is a logical slot: ``MILLIPYDE_CPU_DEVICES`` of them, so every multi-device path of
the scheduler runs without a GPU. Launches are synchronous; there are no streams.

Generated kernels are compiled serial with a ``(part_, parts_)`` pair of parameters
(``graph.codegen.cpu_parts``): a launch of fewer than ``PARALLEL_MIN_ITEMS`` items (pixels,
elements) is one call in the calling thread; a larger one is cut into as many parts as Numba
has threads (``NUMBA_NUM_THREADS``), run at once by this backend's threads (the kernels
release the GIL). Numba's own parallel loops cost ~40-60% more compile time per kernel and a
thread pool's start per launch.

Large buffers (``BIG_BYTES`` and up: a training batch, a batch's arena of decoded images, its
stages) come from :class:`BigBuffers`, which hands a buffer out again once nothing refers to it:
malloc maps each such buffer afresh and the kernel zeroes every page at its first touch. The
pool keeps its buffers (up to ``BIG_KEEP_BYTES``) until the process ends or ``big.clear()``.
"""

from __future__ import annotations

import os
import sys
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


#: buffers of this many bytes and more come from :class:`BigBuffers`: glibc's malloc serves
#: them by ``mmap`` whatever it has freed (its dynamic threshold stops at 32 MiB on 64-bit
#: systems), so each one costs a page fault and a page cleared by the kernel per 4 KiB at its
#: first write: 12% of the process's CPU in ``clear_page`` streaming the ImageNet recipe
#: (bench/RESULTS.md, "Datasets on the cpu backend: ... large buffers reused")
BIG_BYTES = 32 << 20
#: the most bytes :class:`BigBuffers` keeps (in use and free together); past it a buffer is
#: allocated as before and not kept
BIG_KEEP_BYTES = 2 << 30


class BigBuffers:
    """Large host buffers handed out again once nothing refers to them.

    A buffer is kept as a flat ``uint8`` array and handed out as a view of it (every further
    view holds a reference to it, as NumPy makes each view's ``base`` the owning array): it
    is free again when its reference count is back to the pool's own. Free buffers of
    another size are dropped to make room for a new one within ``keep`` bytes.

    Parameters
    ----------
    keep : int
        The most bytes kept.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._bufs: list[np.ndarray] = []
        self._lock = threading.Lock()
        #: buffers handed out again, and allocated (kept or not)
        self.reused = 0
        self.made = 0

    def take(self, nbytes: int) -> np.ndarray:
        """A flat ``uint8`` buffer of ``nbytes`` bytes that nothing else refers to."""
        # (a free buffer's references while a loop looks at it: the pool's list, the loop's
        # name for it, getrefcount's argument)
        with self._lock:
            for buf in self._bufs:
                if buf.nbytes == nbytes and sys.getrefcount(buf) == 3:
                    self.reused += 1
                    return buf
            self.made += 1
            held = sum(b.nbytes for b in self._bufs)
            if held + nbytes > self.keep:
                kept = []
                for buf in self._bufs:
                    if held + nbytes > self.keep and sys.getrefcount(buf) == 3:
                        held -= buf.nbytes
                    else:
                        kept.append(buf)
                self._bufs = kept
            new = np.empty(nbytes, dtype=np.uint8)
            if held + nbytes <= self.keep:
                self._bufs.append(new)
            return new

    def clear(self) -> None:
        """Drop every buffer (those in use live on with their users)."""
        with self._lock:
            self._bufs = []


#: reference counts say when a buffer is free only where a thread cannot change them
#: unseen while the pool's lock is held: not in a free-threaded interpreter
_POOLED = getattr(sys, "_is_gil_enabled", lambda: True)()


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
        self.big = BigBuffers(BIG_KEEP_BYTES)
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
            dt = np.dtype(dtype)
            nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if nbytes < BIG_BYTES or not _POOLED:
                return np.empty(shape, dtype=dt)
            return self.big.take(nbytes).view(dt).reshape(shape)
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
        if tail and 0 < len(sources) <= len(dst) and dst.flags.c_contiguous and \
                {(s.shape, s.dtype) for s in sources} == {(tail, dst.dtype)}:
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
