"""Write generated kernel source to the cache directory and import it, one compile per text.

Generated files are named by the SHA-1 of their text (with the scalar kernels' source digest and
the target) and compiled with ``cache=True``, so a second process pays no compile.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from types import ModuleType

from ... import source_cache
from ...kernels import color, filters, geometry, intensity, noise

_modules: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Where generated kernel sources live (``MILLIPYDE_CACHE_DIR`` or the user cache)."""
    return source_cache.cache_dir()


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
    mod = _modules.get(name)
    if mod is None:
        mod = _modules.setdefault(name, source_cache.import_source(name, source))
    return mod
