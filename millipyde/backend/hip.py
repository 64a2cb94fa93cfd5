"""The hip backend: AMD GPUs through numba-hip, which poses as ``numba.cuda``.

``selection.pick`` calls ``numba_hip.pose_as_cuda()`` before anything imports ``numba.cuda``,
so the generated ``@cuda.jit`` kernels and this class's numba.cuda calls reach HIP. What
numba-hip does not offer is switched off: the cached launch path (it drives numba-cuda's own
launch internals) and CuPy's pool (a CUDA CuPy cannot allocate AMD memory). Selection and code
generation are tested without AMD hardware; nothing here has run on an AMD GPU.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Capabilities
from .cuda import CudaBackend


class HipBackend(CudaBackend):
    """AMD GPUs (numba-hip posing as numba.cuda); untested on hardware."""

    name = "hip"
    visible_devices_var = "HIP_VISIBLE_DEVICES"
    staged_uploads = False  # numba-hip's driver module is not numba-cuda's

    def _wants_fast_launch(self) -> bool:
        return False

    def _capabilities(self) -> Capabilities:
        return replace(super()._capabilities(), nvidia_codecs=False, batched_copies=False,
                       shared_batches=None)  # (HIP's IPC: not tried)

    def _is_current(self, device: int) -> bool:
        return False  # always through numba-hip's own context switch

    def _cupy_pool(self) -> None:
        return None
