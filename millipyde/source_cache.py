"""Python source written to the cache directory (``MILLIPYDE_CACHE_DIR``) and imported from
there, so that Numba's ``cache=True`` compiles of it land in that directory and a second
process loads them from disk. The generated kernels (``graph.codegen.loader``) and the
backend's compiled host code (``backend.cuda_jit``) both load through it.

Processes sharing the directory compile each function of such a module once: a compile holds
a lock file of the function's own (``fcntl.flock``), so a process asking for a function another
is compiling waits for it and then loads the result from the disk cache instead of compiling
it a second time (pytest-xdist workers running neighbouring tests, data-loading or warmup
processes started together).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

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
        _compile_once_across_processes(mod, d)
        return mod


try:
    import fcntl
except ImportError:  # (Windows: no lock; each process compiles what it does not find on disk)
    fcntl = None  # type: ignore[assignment]

#: the lock files this process holds (a nested compile of a function whose lock it holds
#: already must not wait for itself)
_held: set[Path] = set()


@contextlib.contextmanager
def _compile_lock(path: Path) -> Iterator[None]:
    """Hold the lock file ``path`` (created if missing) against other processes; a no-op where
    the file system refuses locks."""
    if fcntl is None or path in _held:
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # (a file system without flock: compile unlocked)
            yield
            return
        _held.add(path)
        try:
            yield
        finally:
            _held.discard(path)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _compile_once_across_processes(mod: ModuleType, directory: Path) -> None:
    """Make each disk-cached Numba CPU function of ``mod`` compile under a lock of its own.

    Numba's ``Dispatcher.compile`` looks in the disk cache before it compiles: under the lock,
    a process that waited finds there what the other one saved. The lock is taken inside
    Numba's process-wide compiler lock, so one thread of a process waits at a time and a
    compile's nested compiles take their locks in call order (no cycle between processes)."""
    from numba.core.caching import NullCache
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import CPUDispatcher

    for attr, disp in list(vars(mod).items()):
        if (not isinstance(disp, CPUDispatcher) or isinstance(disp._cache, NullCache)
                or getattr(disp.py_func, "__module__", None) != mod.__name__):
            continue
        lock = directory / f"{mod.__name__}.{attr}.lock"

        def compile(sig: Any, _compile: Any = disp.compile, _lock: Path = lock) -> Any:
            with global_compiler_lock, _compile_lock(_lock):
                return _compile(sig)

        disp.compile = compile
