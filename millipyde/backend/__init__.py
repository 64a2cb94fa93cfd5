"""The compute backend of this process, chosen once at import: ``ACTIVE``.

``selection.pick`` decides between cuda, hip, cpu and cudasim (``MILLIPYDE_BACKEND``, else
probing) and switches Numba over before anything imports ``numba.cuda``; the matching class of
``cpu.py``, ``cuda.py``, ``hip.py`` or ``sim.py`` is then built. Layers above use ``ACTIVE``'s
methods (buffers, copies, launches, streams, limits) and ask ``ACTIVE.caps`` what it can do.
"""

from __future__ import annotations

import atexit

from .base import Backend, Capabilities, DeviceInfo, DeviceMemoryError
from .cpu import CpuBackend
from .cuda import CudaBackend
from .hip import HipBackend
from .selection import BACKENDS, BackendError, pick
from .sim import SimBackend

__all__ = ["ACTIVE", "BACKENDS", "Backend", "BackendError", "Capabilities", "DeviceInfo",
           "DeviceMemoryError", "backend", "backend_class"]

# the classes import nothing of numba.cuda until one is built, so importing all four is safe
# before ``pick`` has switched Numba to the simulator or to numba-hip
_CLASSES: dict[str, type[Backend]] = {"cpu": CpuBackend, "cuda": CudaBackend,
                                      "hip": HipBackend, "cudasim": SimBackend}


def backend_class(name: str) -> type[Backend]:
    """The class implementing backend ``name``."""
    if name not in _CLASSES:
        raise ValueError(f"backend {name!r} is not one of {', '.join(BACKENDS)}")
    return _CLASSES[name]


ACTIVE: Backend = backend_class(pick())()
atexit.register(ACTIVE.shutdown)


def backend() -> str:
    """Return the active backend: ``"cuda"``, ``"hip"``, ``"cpu"`` or ``"cudasim"``."""
    return ACTIVE.name
