"""Replay launches through compiled host code (``jit_launch``), the state they run on, and the
switch that turns them off.

``RawBound2D`` and ``RawCopy`` (``cuda_bound``) spend most of their Python on ctypes: a
context check (~0.8 us on an H200's host), the block's writes and a ``cuLaunchKernelEx`` call
whose ctypes marshalling comes on top of the driver's own cost. Here those are one Numba call
each, over a ``State``: one uint64 array holding the driver's addresses, the context, the
launch configuration, the ``kernelParams`` pointers and the parameter block. The compiled
functions are loaded at the first replay launch that can use them, never at import; anything
that keeps them from loading (no Numba host compiler, a driver library that is not a ctypes
one, as in tests with a Python fake) leaves the ctypes path in use.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

#: replay launches through the compiled host code where it loads (False: the ctypes calls, as
#: before; read per call)
ENABLED = True

#: a replay launch's calls through ctypes before it takes the compiled call (read when it is
#: bound). The compiled call saves ~0.8 us per op (H200 host, A/B in one process); a process's
#: first one costs 0.1-0.2 s (Numba's host target starting, the code loaded from disk), which
#: pays back only after ~200,000 ops: a script of a few hundred ops never takes it
AFTER = 1024

_module: ModuleType | None = None
_failed = False
_lock = threading.Lock()


def functions() -> ModuleType | None:
    """The compiled functions (``jit_launch`` imported from the kernel cache directory), or
    None where they cannot be had or ``ENABLED`` is off."""
    global _module, _failed
    if not ENABLED or _failed:
        return None
    if _module is None:
        with _lock:
            if _module is None and not _failed:
                try:
                    import hashlib

                    from ..source_cache import import_source

                    text = (Path(__file__).parent / "jit_launch.py").read_text()
                    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
                    _module = import_source(f"millipyde_host_jit_launch_{digest}", text)
                except Exception:  # noqa: BLE001 - no compiled path: the ctypes one stays
                    _failed = True
    return _module


def loaded() -> bool:
    """Whether the compiled functions are loaded already (and ``ENABLED``)."""
    return ENABLED and _module is not None


def address(fn: Any) -> int | None:
    """The address of a ctypes function object, or None (not a ctypes function: a fake)."""
    try:
        return ctypes.cast(fn, ctypes.c_void_p).value or None
    except (ctypes.ArgumentError, TypeError):
        return None


def _words(lib: Any, name: str) -> tuple[int, int] | None:
    """``cuCtxGetCurrent``'s and ``name``'s addresses in ``lib``, or None."""
    get, call = address(getattr(lib, "cuCtxGetCurrent", None)), address(getattr(lib, name, None))
    return None if get is None or call is None else (get, call)


def launch_state(lib: Any, context: int, handle: int, config: tuple[int, ...], shared: int,
                 layout_size: int, slots: int, src_at: int, dst_at: int,
                 table_at: int | None) -> tuple[ModuleType, np.ndarray, int] | None:
    """The ``State`` of one bound launch: (the compiled functions, the uint64 array, the byte
    offset of its parameter block), or None where ``lib`` has no ``cuLaunchKernelEx`` to call
    by address or the compiled functions are not at hand.

    ``config`` is grid + block (six ints); ``src_at``/``dst_at``/``table_at`` are byte
    offsets into the block (8-aligned slots, as ``rawlaunch`` lays them out).
    """
    got = _words(lib, "cuLaunchKernelEx")
    j = None if got is None else functions()
    if j is None:
        return None

    n = max(slots, 1)
    block_at = j.HEAD + n  # word of the block's start
    state = np.zeros(block_at + max(layout_size + 7, 8) // 8, np.uint64)
    base = state.ctypes.data
    state[j.GET], state[j.CALL] = got
    state[j.CONTEXT], state[j.FUNCTION], state[j.POINTERS] = context, handle, j.HEAD
    state[j.SRC], state[j.DST] = block_at + src_at // 8, block_at + dst_at // 8
    state[j.TABLE] = 0 if table_at is None else block_at + table_at // 8
    conf = state[j.CONFIG:j.CONFIG + 4].view(np.uint32)  # seven uint32, then the stream
    conf[:6] = config
    conf[6] = shared
    state[j.HEAD:j.HEAD + n] = base + 8 * (block_at + np.arange(n, dtype=np.uint64))
    return j, state, 8 * block_at


def copy_state(lib: Any, context: int) -> tuple[ModuleType, np.ndarray] | None:
    """The compiled functions and the ``State`` of a replayed copy (the context check and
    ``cuMemcpyDtoDAsync_v2``), or None (``launch_state``)."""
    got = _words(lib, "cuMemcpyDtoDAsync_v2")
    j = None if got is None else functions()
    if j is None:
        return None

    state = np.zeros(j.HEAD, np.uint64)
    state[j.GET], state[j.CALL] = got
    state[j.CONTEXT] = context
    return j, state
