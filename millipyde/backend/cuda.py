"""The cuda backend: numba-cuda device arrays, CuPy's pool, the cached launch path, peer copies.

``CudaBackend`` is assembled from its parts: devices, contexts and streams
(``cuda_devices``), memory (``cuda_memory``), packed uploads (``cuda_pack``) and launches
(``cuda_launch``). ``hip.py`` (numba-hip posing as ``numba.cuda``) and ``sim.py`` (the CUDA
simulator) derive from it and switch off what they lack.
"""

from __future__ import annotations

import threading
from typing import Any

from .base import Backend, Capabilities
from .cuda_devices import CudaDevices
from .cuda_launch import CudaLaunches
from .cuda_memory import CudaMemory
from .cuda_pack import CudaPacks
from .pool import CupyPool
from .staging import StagingRing


class CudaBackend(CudaDevices, CudaMemory, CudaPacks, CudaLaunches, Backend):
    """NVIDIA GPUs through numba-cuda."""

    name = "cuda"
    codegen_target = "cuda"
    visible_devices_var = "CUDA_VISIBLE_DEVICES"
    kernel_decorator = "@cuda.jit(cache=True)"
    device_decorator = "cuda.jit(device=True, forceinline=True)"
    #: bytes of kernel arguments (LUTs, taps) below which identical uploads are shared
    SMALL_MAX = 65536
    _SMALL_CACHE_MAX = 256
    #: small uploads go through a pinned ring with asynchronous copies (``staging.py``)
    staged_uploads = True

    def __init__(self) -> None:
        super().__init__()
        from numba import cuda

        self.cuda = cuda
        self.caps = self._capabilities()
        self.fast_launch = self._wants_fast_launch()
        self._default_streams: dict[int, Any] = {}
        # streams that are never destroyed (``take_stream``): free ones per (device,
        # blocking), and each one's key
        self._kept_streams: dict[tuple[int, bool], list[Any]] = {}
        self._stream_kinds: dict[int, tuple[int, bool]] = {}
        self._kept_lock = threading.Lock()
        self._pool: CupyPool | None | bool = False  # False: not looked for yet
        self._small_cache: dict[tuple, Any] = {}
        self._small_lock = threading.Lock()
        self._warm: set[tuple] = set()
        self._opted_in: set[tuple] = set()
        self._shared_limits: dict[int, int] = {}
        self._rings: dict[int, StagingRing] = {}
        self._ctx_handles: dict[int, int] = {}

    def _capabilities(self) -> Capabilities:
        return Capabilities(
            device_memory=True, grid_launches=True, shared_memory=True,
            launches_on_streams=True,
            kernel_language="numba-cuda", tuned_kernels=True, external_memory=True,
            peer_copies=True, concurrent_launches=True, nvidia_codecs=True,
            batched_copies=True, shared_batches="cuda_ipc")

    def _wants_fast_launch(self) -> bool:
        # the cached path drives numba-cuda's own launch internals (``launcher.py``)
        return True

    def shutdown(self) -> None:
        """At exit (thesis: ``Py_AtExit``): finish queued work and drop cached device objects
        while the CUDA contexts still exist, so nothing is freed during interpreter teardown."""
        try:
            self.synchronize()
        except Exception:
            pass  # a failed device already reported its error; exit anyway
        with self._small_lock:
            self._small_cache.clear()
            self._rings.clear()
            self._constants.clear()
        if self._pool:
            self._pool.clear()
        # numba-cuda's exit-time finalizers unload every kernel module; after several devices
        # loaded modules concurrently that double-freed a library handle and aborted the
        # process (4 H200s, bench/RESULTS.md). The driver releases everything at process exit
        # anyway, so leave the queued releases undone.
        for d in range(len(self.cuda.gpus)):
            try:
                with self.cuda.gpus[d]:
                    self.cuda.current_context().deallocations._disable_count += 1
            except Exception:
                pass  # best effort at exit
