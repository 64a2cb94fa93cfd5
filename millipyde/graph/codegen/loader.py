"""Write generated kernel source to the cache directory and import it, one compile per text.

Generated files are named by the SHA-1 of their text (with the scalar kernels' source digest and
the target) and compiled with ``cache=True``, so a second process pays no compile.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

from ... import source_cache
from . import heap  # noqa: F401  (counts compile time; Numba's errors without colorama)
from .cpu_devices import limit_inlining
from .cpu_parts import split_loops
from .target import RINT_CLIP, RINT_CLIP_CPU

#: the op definitions, whose scalar kernels generated text calls by name (read as files: code
#: generation never imports the op definitions)
_OPS_DIR = Path(__file__).resolve().parents[2] / "ops"

#: the generated modules imported in this process, by name (precompiling reads what it loaded)
LOADED: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Where generated kernel sources live (``MILLIPYDE_CACHE_DIR`` or the user cache)."""
    return source_cache.cache_dir()


#: the float helpers the scalar kernels and generated text call (``kernels.fmath``)
_FMATH = _OPS_DIR.parent / "kernels" / "fmath.py"


def _kernel_sources_digest() -> str:
    # Generated files embed calls to the scalar kernels (and to the helpers they call): their
    # text is part of the cache key.
    h = hashlib.sha1()
    for path in sorted(_OPS_DIR.rglob("*.py")):
        h.update(path.relative_to(_OPS_DIR).as_posix().encode())
        h.update(path.read_bytes())
    h.update(_FMATH.read_bytes())
    return h.hexdigest()[:12]


#: the op definitions' digest, part of every generated module's cache key
KERNEL_DIGEST = _kernel_sources_digest()


def load(source: str, target: str) -> ModuleType:
    """Write ``source`` to the cache dir (once) and import it; thread-safe, one compile.

    On the cpu target parallel kernels become serial ones run in parts (``cpu_parts``), a
    pixelwise op's function called in many places is called, not inlined
    (``cpu_devices.limit_inlining``), and ``_rint_clip`` rounds with one instruction
    (``target.RINT_CLIP_CPU``)."""
    if target == "cpu":
        source = limit_inlining(split_loops(source)).replace(RINT_CLIP, RINT_CLIP_CPU)
    digest = hashlib.sha1((source + KERNEL_DIGEST + target).encode()).hexdigest()
    name = f"millipyde_gen_{target}_{digest[:20]}"
    mod = LOADED.get(name)
    if mod is None:
        mod = LOADED.setdefault(name, source_cache.import_source(name, source))
    return mod
