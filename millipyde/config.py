"""Every ``MILLIPYDE_*`` environment variable, read and checked here and nowhere else.

Each setting is a function that reads the environment when called, so a test that sets a
variable (``monkeypatch.setenv``) sees its value at the next call. Settings read once per
process (the backend, the cached launch path, the GPU pool) are read by their owner at import;
the two the per-op path consults (fusion, GPU variants) are read once through :func:`once`
(an environment read costs ~1 us, twice per op), and :func:`refresh` reads them again.
README.md's table says which. A bad value raises ``ValueError`` naming the variable.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

BACKENDS = ("cuda", "hip", "cpu", "cudasim")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

#: name -> (default, meaning); README.md has one table of them (tests/test_config.py checks).
VARIABLES: dict[str, tuple[str, str]] = {
    "MILLIPYDE_BACKEND": ("auto", "cuda, hip, cpu or cudasim; read once at import"),
    "MILLIPYDE_CACHE_DIR": ("~/.cache/millipyde", "where generated kernel sources are kept"),
    "MILLIPYDE_CPU_DEVICES": ("1", "virtual devices of the cpu backend (1-64); read at import"),
    "MILLIPYDE_WORKERS": ("auto", "worker threads per device (1-64)"),
    "MILLIPYDE_GENERATOR_BATCH": ("64", "outputs a Generator makes per batch (1-65535; 1: off)"),
    "MILLIPYDE_FUSION": ("1", "0 turns kernel fusion off; read once (config.refresh() again)"),
    "MILLIPYDE_GPU_VARIANTS": ("1", "0 forces the generic kernels on real GPUs; read once "
                               "(config.refresh() again)"),
    "MILLIPYDE_GPU_POOL": ("1", "0: plain cudaMalloc instead of CuPy's pool; read once"),
    "MILLIPYDE_FAST_LAUNCH": ("1", "0: every launch through numba-cuda's dispatcher; read at "
                              "import"),
    "MILLIPYDE_MAX_IMAGE_PIXELS": ("89478485", "largest image decoded (decompression-bomb "
                                   "limit; Pillow's default)"),
    "MILLIPYDE_DASK_THREADS": ("auto", "threads per worker of an embedded Dask cluster (1-64)"),
    "MILLIPYDE_DASK_CHUNK": ("auto", "outputs per Dask task of distributed.process (1-65535)"),
    "MILLIPYDE_DECODE_PROCESS": ("auto", "1: streamed sources read and decoded in a worker "
                                 "process, 0: in this one; auto: a worker on cuda for "
                                 "epochs of 50,000 samples or more a rank"),
    "MILLIPYDE_PIPELINE_PROCESSES": ("0", "1: a Pipeline's chunks recorded and launched by one "
                                     "worker process per device (Pipeline(processes=))"),
    "MILLIPYDE_SETTLE_HEAP": ("1", "0: no full garbage collection after a Generator's output "
                              "whose making compiled kernels"),
    "MILLIPYDE_NVIMGCODEC_API": ("c", "c: nvImageCodec's C API through ctypes decodes (two GIL "
                                 "releases a batch, one with region boxes); python: its Python "
                                 "binding"),
    "MILLIPYDE_DECODE_REGION": ("1", "0: streamed samples decoded whole even where the first "
                                "op's window needs only a region of each; read at import"),
}


def _raw(name: str, env: Mapping[str, str] | None) -> str | None:
    if name not in VARIABLES:  # a typo here would silently read nothing
        raise KeyError(f"{name} is not a millipyde setting")
    value = (os.environ if env is None else env).get(name)
    return None if value is None or not value.strip() else value.strip()


def flag(name: str, default: bool = True, env: Mapping[str, str] | None = None) -> bool:
    """A boolean setting: 1/true/yes/on or 0/false/no/off (any case); ``ValueError`` else."""
    raw = _raw(name, env)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean: use 1 or 0")


def integer(name: str, default: int | None, lo: int, hi: int,
            env: Mapping[str, str] | None = None) -> int | None:
    """An integer setting checked to lie in [lo, hi] (``ValueError`` naming the variable)."""
    raw = _raw(name, env)
    if raw is None:
        return default
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if not lo <= n <= hi:
        raise ValueError(f"{name}={n} must be between {lo} and {hi}")
    return n


def backend(env: Mapping[str, str] | None = None) -> str:
    """``MILLIPYDE_BACKEND`` lower-cased, or "" when unset (the backend is then probed)."""
    raw = _raw("MILLIPYDE_BACKEND", env)
    asked = "" if raw is None else raw.lower()
    if asked and asked not in BACKENDS:
        raise ValueError(f"MILLIPYDE_BACKEND={asked!r} is not one of {', '.join(BACKENDS)}")
    return asked


def cache_dir() -> Path:
    """``MILLIPYDE_CACHE_DIR``, else ``~/.cache/millipyde``."""
    raw = _raw("MILLIPYDE_CACHE_DIR", None)
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "millipyde"


def cpu_devices() -> int:
    """``MILLIPYDE_CPU_DEVICES``: virtual devices of the cpu backend."""
    return integer("MILLIPYDE_CPU_DEVICES", 1, 1, 64)


def workers() -> int | None:
    """``MILLIPYDE_WORKERS``: worker threads per device, None to let the scheduler decide."""
    return integer("MILLIPYDE_WORKERS", None, 1, 64)


def generator_batch(default: int) -> int:
    """``MILLIPYDE_GENERATOR_BATCH``: outputs per Generator batch."""
    return integer("MILLIPYDE_GENERATOR_BATCH", default, 1, 65535)


def fusion() -> bool:
    """``MILLIPYDE_FUSION``: kernel fusion on (the default) or off."""
    return flag("MILLIPYDE_FUSION")


def decode_region() -> bool:
    """``MILLIPYDE_DECODE_REGION``: decode only the region a first window op reads (default)."""
    return flag("MILLIPYDE_DECODE_REGION")


def settle_heap() -> bool:
    """``MILLIPYDE_SETTLE_HEAP``: one full collection after an output whose making compiled."""
    return flag("MILLIPYDE_SETTLE_HEAP")


def gpu_variants() -> bool:
    """``MILLIPYDE_GPU_VARIANTS``: the hand-tuned GPU kernels where the backend has them."""
    return flag("MILLIPYDE_GPU_VARIANTS")


def gpu_pool() -> bool:
    """``MILLIPYDE_GPU_POOL``: allocate GPU buffers from CuPy's pool when CuPy imports."""
    return flag("MILLIPYDE_GPU_POOL")


def fast_launch() -> bool:
    """``MILLIPYDE_FAST_LAUNCH``: the cached launch path under numba-cuda's dispatcher."""
    return flag("MILLIPYDE_FAST_LAUNCH")


def dask_threads() -> int | None:
    """``MILLIPYDE_DASK_THREADS``: threads per worker of an embedded Dask cluster, or None."""
    return integer("MILLIPYDE_DASK_THREADS", None, 1, 64)


def dask_chunk() -> int | None:
    """``MILLIPYDE_DASK_CHUNK``: outputs per task of ``distributed.process``, or None."""
    return integer("MILLIPYDE_DASK_CHUNK", None, 1, 65535)


def max_image_pixels() -> int | None:
    """``MILLIPYDE_MAX_IMAGE_PIXELS``: the decompression-bomb limit, or None for the default."""
    return integer("MILLIPYDE_MAX_IMAGE_PIXELS", None, 1, 2**62)


#: values of settings read through ``once``, by reader; ``refresh`` forgets them (the per-op
#: replay reads it directly: a dict lookup, not a call)
ONCE_VALUES: dict[Callable[[], Any], Any] = {}
_once_lock = threading.Lock()
_on_refresh: list[Callable[[], None]] = []


def once(read: Callable[[], Any]) -> Any:
    """``read()`` (a setting above) on the first call, the same value after, until
    :func:`refresh`: for the settings the per-op path consults."""
    try:
        return ONCE_VALUES[read]
    except KeyError:
        value = read()  # a bad value raises here, each time it is asked for
        with _once_lock:
            ONCE_VALUES[read] = value
        return value


def on_refresh(callback: Callable[[], None]) -> None:
    """Call ``callback()`` after each :func:`refresh` (caches built from a setting's value)."""
    _on_refresh.append(callback)


def refresh() -> None:
    """Read the settings kept by :func:`once` again at their next use (after changing
    ``os.environ`` in a running process)."""
    with _once_lock:
        ONCE_VALUES.clear()
    for callback in list(_on_refresh):
        callback()


def decode_process() -> bool | str | None:
    """``MILLIPYDE_DECODE_PROCESS``: True / False, ``"auto"``, or None where it is unset."""
    raw = _raw("MILLIPYDE_DECODE_PROCESS", None)
    if raw is None or raw.lower() == "auto":
        return None if raw is None else "auto"
    return flag("MILLIPYDE_DECODE_PROCESS")


def pipeline_processes() -> bool:
    """``MILLIPYDE_PIPELINE_PROCESSES``: whether a Pipeline that does not say runs its chunks
    in one worker process per device (default off)."""
    return flag("MILLIPYDE_PIPELINE_PROCESSES", False)


def nvimgcodec_api() -> str:
    """``MILLIPYDE_NVIMGCODEC_API``: ``"c"`` (the default) or ``"python"``."""
    raw = _raw("MILLIPYDE_NVIMGCODEC_API", None)
    if raw is None:
        return "c"
    if raw.lower() not in ("python", "c"):
        raise ValueError(f"MILLIPYDE_NVIMGCODEC_API={raw!r}: use python or c")
    return raw.lower()


def environment_for_backend(name: str) -> dict[str, str]:
    """This process's environment with ``MILLIPYDE_BACKEND`` set to ``name``: for a child
    process that must take the backend this one took (a decode worker)."""
    return {**os.environ, "MILLIPYDE_BACKEND": name}
