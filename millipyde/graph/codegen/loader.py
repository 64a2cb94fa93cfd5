"""Write generated kernel source to the cache directory and import it, one compile per text.

Generated files are named by the SHA-1 of their text (with the scalar kernels' source digest and
the target) and compiled with ``cache=True``, so a second process pays no compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from ... import config
from ...kernels import color, filters, geometry, intensity, noise
from ...version import __version__

_lock = threading.RLock()
_modules: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Where generated kernel sources live (``MILLIPYDE_CACHE_DIR`` or the user cache)."""
    return config.cache_dir() / f"gen-{__version__}"


def _kernel_sources_digest() -> str:
    # Generated files embed calls to the scalar kernels: their text is part of the cache key.
    h = hashlib.sha1()
    for mod in (color, filters, geometry, intensity, noise):
        h.update(inspect.getsource(mod).encode())
    return h.hexdigest()[:12]


_KERNEL_DIGEST = _kernel_sources_digest()


def load(source: str, target: str) -> ModuleType:
    """Write ``source`` to the cache dir (once) and import it; thread-safe, one compile."""
    digest = hashlib.sha1((source + _KERNEL_DIGEST + target).encode()).hexdigest()
    name = f"millipyde_gen_{target}_{digest[:20]}"
    with _lock:
        mod = _modules.get(name)
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
            raise ImportError(f"cannot import generated kernel module {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        _modules[name] = mod
        return mod
