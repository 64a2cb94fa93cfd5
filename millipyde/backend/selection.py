"""Choose the compute backend once per process: ``cuda``, ``hip``, ``cpu`` or ``cudasim``.

The choice must happen before anything imports ``numba.cuda``: CUDASIM is an import-time switch
in Numba, and numba-hip's ``pose_as_cuda()`` replaces ``numba.cuda`` itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from .. import config
from ..config import BACKENDS

__all__ = ["BACKENDS", "BackendError", "choose", "pick", "why"]


class BackendError(RuntimeError):
    """The requested backend cannot be used in this process."""


def choose(
    env: Mapping[str, str],
    cuda_usable: Callable[[], bool],
    hip_usable: Callable[[], bool],
) -> str:
    """Decide the backend from the environment and two probes (pure; tested without GPUs).

    ``MILLIPYDE_BACKEND`` wins when set; ``NUMBA_ENABLE_CUDASIM=1`` alone means ``cudasim``;
    otherwise a usable CUDA GPU, else a usable HIP GPU, else the CPU.
    """
    asked = config.backend(env)
    if asked == "cuda" and not cuda_usable():
        raise BackendError("MILLIPYDE_BACKEND=cuda but no usable CUDA GPU was found")
    if asked == "hip" and not hip_usable():
        raise BackendError("MILLIPYDE_BACKEND=hip but numba-hip or an AMD GPU is missing")
    if asked:
        return asked
    if env.get("NUMBA_ENABLE_CUDASIM", "0").strip() == "1":
        return "cudasim"
    if cuda_usable():
        return "cuda"
    if hip_usable():
        return "hip"
    return "cpu"


def why(name: str, env: Mapping[str, str], gpu_missing: Callable[[], str]) -> str:
    """Why ``choose`` gave ``name`` (for ``millipyde info``); ``gpu_missing()`` says what is
    missing for a GPU backend and is called only when the CPU was chosen by default."""
    asked = config.backend(env)
    if asked:
        return f"MILLIPYDE_BACKEND={asked}"
    if name == "cudasim":
        return "NUMBA_ENABLE_CUDASIM=1: the CUDA simulator"
    if name == "cuda":
        return "a usable CUDA GPU was found (numba-cuda)"
    if name == "hip":
        return "no usable CUDA GPU; numba-hip found an AMD GPU"
    return f"no usable GPU ({gpu_missing()}); set MILLIPYDE_BACKEND to choose"


def gpu_missing() -> str:
    """What this process lacks for the cuda and hip backends, in words."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            version("numba-cuda")
            cuda = "numba-cuda found no CUDA driver or GPU"
        except PackageNotFoundError:
            cuda = "numba-cuda is not installed: pip install 'millipyde[cuda]'"
    except Exception as exc:  # pragma: no cover - importlib.metadata is stdlib
        cuda = f"numba-cuda could not be checked: {exc}"
    try:
        import numba_hip  # noqa: F401

        hip = "numba-hip found no AMD GPU"
    except Exception:
        hip = "numba-hip is not installed"
    return f"{cuda}; {hip}"


def _cuda_usable() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        return False
    try:
        from numba import cuda
    except Exception:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


def _hip_usable() -> bool:
    if "numba.cuda" in sys.modules:
        # pose_as_cuda() has to run before numba.cuda is imported; too late now.
        return False
    try:
        import numba_hip  # noqa: F401
    except Exception:
        return False
    try:
        from hip import hip as _hip

        err, count = _hip.hipGetDeviceCount()
        return int(count) > 0
    except Exception:
        return False


def _activate(name: str) -> None:
    if name == "cudasim":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        from numba.core import config

        config.ENABLE_CUDASIM = True
        if "numba.cuda" in sys.modules and not _numba_cuda_is_sim():
            raise BackendError(
                "MILLIPYDE_BACKEND=cudasim needs the simulator switched on before numba.cuda "
                "is imported; set NUMBA_ENABLE_CUDASIM=1 in the environment"
            )
    elif name == "hip":
        import numba_hip

        numba_hip.pose_as_cuda()


def _numba_cuda_is_sim() -> bool:
    from numba import cuda

    return hasattr(cuda, "simulator_init")


def _probe_order() -> str:
    asked = config.backend()
    # Probing CUDA imports numba.cuda, which must not happen before cudasim/hip are switched on.
    if asked in ("cudasim", "hip", "cpu"):
        return choose(os.environ, lambda: False, _hip_usable if asked == "hip" else (lambda: False))
    if asked == "" and os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() == "1":
        return "cudasim"
    hip_first = _hip_usable() if asked in ("", "hip") else False
    return choose(os.environ, _cuda_usable, lambda: hip_first)


def pick() -> str:
    """Choose the backend for this process and switch Numba to it (call once, at import)."""
    name = _probe_order()
    _activate(name)
    return name
