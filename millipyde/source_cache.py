"""Python source written to the cache directory (``MILLIPYDE_CACHE_DIR``) and imported from
there, so that Numba's ``cache=True`` compiles of it land in that directory and a second
process loads them from disk. The generated kernels (``graph.codegen.loader``) and the
backend's compiled host code (``backend.cuda_jit``) both load through it."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from . import config
from .version import __version__

_lock = threading.RLock()  # (a module being imported may load another)


def cache_dir() -> Path:
    """Where generated sources live (``MILLIPYDE_CACHE_DIR`` or the user cache)."""
    return config.cache_dir() / f"gen-{__version__}"


def import_source(name: str, source: str) -> ModuleType:
    """Module ``name`` made from ``source``: the file written once (atomically, so processes
    sharing the directory never read half a file), imported, registered in ``sys.modules``."""
    with _lock:
        mod = sys.modules.get(name)
        if mod is not None:
            return mod
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{name}.py"
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import generated module {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
        return mod
