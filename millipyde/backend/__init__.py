"""The compute backend of this process, chosen once at import: ``ACTIVE``.

``selection.pick`` decides between cuda, hip, cpu and cudasim (``MILLIPYDE_BACKEND``, else
probing) and switches Numba over before anything imports ``numba.cuda``; the matching class of
``cpu.py``, ``cuda.py``, ``hip.py`` or ``sim.py`` is then built. Layers above use ``ACTIVE``'s
methods (buffers, copies, launches, streams, limits) and ask ``ACTIVE.caps`` what it can do.
"""

from __future__ import annotations

import atexit
import importlib

from .base import Backend, Capabilities, DeviceInfo, DeviceMemoryError
from .selection import BACKENDS, BackendError, pick

__all__ = ["ACTIVE", "BACKENDS", "Backend", "BackendError", "Capabilities", "DeviceInfo",
           "DeviceMemoryError", "backend", "backend_class"]

_CLASSES = {"cpu": ("cpu", "CpuBackend"), "cuda": ("cuda", "CudaBackend"),
            "hip": ("hip", "HipBackend"), "cudasim": ("sim", "SimBackend")}


def backend_class(name: str) -> type[Backend]:
    """The class implementing backend ``name`` (importing it does not switch Numba over)."""
    if name not in _CLASSES:
        raise ValueError(f"backend {name!r} is not one of {', '.join(BACKENDS)}")
    module, cls = _CLASSES[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


ACTIVE: Backend = backend_class(pick())()
atexit.register(ACTIVE.shutdown)


def backend() -> str:
    """Return the active backend: ``"cuda"``, ``"hip"``, ``"cpu"`` or ``"cudasim"``."""
    return ACTIVE.name
