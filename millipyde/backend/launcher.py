"""A cached launch path under numba-cuda's dispatcher for kernels already compiled and loaded.

``kernel[grid, block, stream, shared](*args)`` costs 0.04-0.15 ms of host time per call: the
dispatcher types every argument, builds a launch configuration and a stream object, looks the
context and the loaded function up, and marshals each array through a memory-view shim. The
executor launches the same few kernels with the same kinds of arguments again and again, so
after a kernel's first launch on a device (through the dispatcher, which compiles and loads it)
this module keeps, per kernel, device and argument kinds: the loaded function and one packer per
argument built from the compiled signature. A later launch packs the arguments as numba-cuda's
``_Kernel._prepare_args`` does and calls the same ``cuda.core`` launch.

Only C-contiguous device arrays and scalars (bool, integers, floats) take this path; anything
else goes through the dispatcher. ``MILLIPYDE_FAST_LAUNCH=0`` turns it off (benchmarks compare
the two in one run).
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import config
from . import rawlaunch
from .pool import stream_handle

ENABLED = config.fast_launch()
#: launch through ``rawlaunch`` (the driver, one packed block) where a template exists; off,
#: the cached path calls ``cuda.core``'s launch (benchmarks compare the two in one run)
DIRECT = True

_SCALARS = (bool, int, float)
_entries: dict[tuple, tuple[Any, tuple | None]] = {}
_configs: dict[tuple, Any] = {}
_streams: dict[int, tuple[Any, Any]] = {}
_lock = threading.Lock()
_CONFIGS_MAX = 4096
_ENTRIES_MAX = 4096


def _arg_key(a: Any) -> Any:
    """What decides the compiled signature for ``a``, or None when this path cannot take it."""
    t = type(a)
    if t is int:
        # numba types a Python int as int64 unless it does not fit
        return t if -(2**63) <= a < 2**63 else None
    if t in _SCALARS or isinstance(a, np.generic):
        return t
    dummy = getattr(a, "_dummy", None)
    if dummy is None:
        return None
    if not dummy.is_c_contig or a.size == 0:
        return None
    return (a.dtype.str, a.ndim)


#: per tuple of argument types: the positions whose kind is more than their type (arrays,
#: ints, NumPy scalars); a float or bool is its type, already in the tuple
_checks: dict[tuple[type, ...], tuple[int, ...]] = {}
_PLAIN = (float, bool)


def kind_key(args: tuple) -> tuple | None:
    """The argument kinds of one launch, or None when one of them needs the dispatcher.

    The tuple of the arguments' types (one C-level ``map``) keys it, plus the kinds of the
    few arguments a type does not decide: a gather's two dozen float scalars cost no Python
    call each.
    """
    types_ = tuple(map(type, args))
    idx = _checks.get(types_)
    if idx is None:
        idx = tuple(i for i, t in enumerate(types_) if t not in _PLAIN)
        with _lock:
            if len(_checks) >= _CONFIGS_MAX:
                _checks.clear()
            _checks[types_] = idx
    key = [types_]
    for i in idx:
        k = _arg_key(args[i])
        if k is None:
            return None
        key.append(k)
    return tuple(key)


def _array_packer(out: list, a: Any) -> None:
    # numba-cuda's Array ABI: meminfo, parent, nitems, itemsize, data, shape..., strides...
    out += (0, 0, a.size, a.dtype.itemsize, int(a.gpu_data.device_pointer))
    out += a.shape
    out += a.strides


def _packer(ty: Any) -> Callable[[list, Any], None] | None:
    from numba.core import types

    if isinstance(ty, types.Array):
        return _array_packer if ty.layout == "C" else None
    if ty == types.boolean:
        return lambda out, v: out.append(bool(v))
    if ty == types.float64:
        return lambda out, v: out.append(ctypes.c_double(v))
    if ty == types.float32:
        return lambda out, v: out.append(ctypes.c_float(v))
    if isinstance(ty, types.Integer):
        c_type = getattr(ctypes, f"c_{ty}")
        return lambda out, v: out.append(c_type(v))
    return None


def remember(kernel: Any, device: int, args: tuple, shared_max: int) -> None:
    """After the dispatcher launched ``kernel`` on ``device`` (current): keep its fast path.

    ``shared_max``: the most dynamic shared memory per block the function may be launched
    with (48 KB unless the caller opted it in to more); larger launches use the dispatcher.
    """
    kinds = kind_key(args)
    if kinds is None:
        return
    entry: tuple | None = None
    # (numba keeps a dispatcher per launch configuration for launch-config-sensitive kernels)
    compiled = (None if getattr(kernel, "_launch_config_sensitive", False)
                else kernel._compile_for_args(*args))  # the overload just launched
    if (compiled is not None and not getattr(compiled, "debug", False)
            and not compiled.cooperative and not getattr(compiled, "extensions", None)):
        packers = tuple(_packer(t) for t in compiled.argument_types)
        if None not in packers:
            cufunc = compiled._codelibrary.get_cufunc()
            entry = (cufunc.kernel, packers, shared_max,
                     rawlaunch.template(cufunc.handle, compiled.argument_types))
    with _lock:
        if len(_entries) >= _ENTRIES_MAX:
            for k in [k for k, v in _entries.items() if v[0]() is None]:
                del _entries[k]
        # the weak reference tells a live kernel from a new one at a recycled id
        _entries[(id(kernel), device, kinds)] = (weakref.ref(kernel), entry)


def _config(grid: Any, block: Any, shared: int) -> Any:
    ck = (grid, block, shared)
    config = _configs.get(ck)
    if config is None:
        from numba.cuda import dispatcher as _d

        flag = "is_cooperative" if _d.CUDA_CORE_GE_1_0 else "cooperative_launch"
        config = _d.LaunchConfig(grid=grid, block=block, shmem_size=shared, **{flag: False})
        with _lock:
            if len(_configs) >= _CONFIGS_MAX:
                _configs.clear()
            _configs[ck] = config
    return config


def _core_stream(stream: Any) -> Any:
    held = _streams.get(id(stream))
    if held is None or held[0]() is not stream:
        from numba.cuda.cudadrv import driver

        # a weak reference: a Pipeline's worker streams must still be freed when it ends
        held = (weakref.ref(stream), driver._to_core_stream(stream))
        with _lock:
            if len(_streams) >= _CONFIGS_MAX:
                _streams.clear()
            _streams[id(stream)] = held
    return held[1]


def _held(kernel: Any, device: int, kinds: tuple) -> tuple | None:
    held = _entries.get((id(kernel), device, kinds))
    return held if held is not None and held[0]() is kernel else None


def _entry(kernel: Any, device: int, args: tuple) -> tuple | None:
    kinds = kind_key(args)
    held = None if kinds is None else _held(kernel, device, kinds)
    return None if held is None else held[1]


def known(kernel: Any, device: int, args: tuple) -> bool:
    """Whether ``remember`` already decided about this kernel, device and argument kinds."""
    kinds = kind_key(args)
    return kinds is None or _held(kernel, device, kinds) is not None


def launch(kernel: Any, device: int, args: tuple, grid: Any, block: Any, stream: Any,
           shared: int = 0) -> bool:
    """Launch through the cached path; False (nothing launched) when there is none."""
    entry = _entry(kernel, device, args)
    if entry is None or shared > entry[2]:
        return False
    if DIRECT and entry[3] is not None:
        entry[3].launch(args, rawlaunch.dims(grid), rawlaunch.dims(block), shared,
                        stream_handle(stream))
        return True
    from numba.cuda import dispatcher as _d

    _d.launch(_core_stream(stream), _config(grid, block, shared), entry[0],
              *_pack(entry[1], args))
    return True


def _pack(packers: tuple, args: tuple) -> list:
    out: list = []
    for pack, a in zip(packers, args, strict=True):
        pack(out, a)
    return out


def prepared_args(kernel: Any, args: tuple) -> list:
    """The values numba-cuda's own ``_Kernel.launch`` would pass, for tests to compare with."""
    compiled = kernel._compile_for_args(*args)
    out: list = []
    for t, v in zip(compiled.argument_types, args, strict=True):
        compiled._prepare_args(t, v, 0, [], out)
    return out


def template_of(kernel: Any, device: int, args: tuple) -> rawlaunch.Template | None:
    """The driver-level template kept for this kernel, device and argument kinds, or None."""
    entry = _entry(kernel, device, args)
    return None if entry is None else entry[3]


def shared_max(kernel: Any, device: int, args: tuple) -> int:
    """The most dynamic shared memory the cached path launches this kernel with (-1: none)."""
    entry = _entry(kernel, device, args)
    return -1 if entry is None else entry[2]


def raw_args(kernel: Any, device: int, args: tuple) -> tuple | None:
    """The slots the driver-level launch passes for ``args`` (None without a template)."""
    entry = _entry(kernel, device, args)
    return None if entry is None or entry[3] is None else entry[3].unpack(args)


def packed_args(kernel: Any, device: int, args: tuple) -> list | None:
    """The values the cached path passes for ``args`` (None when it has no entry)."""
    entry = _entry(kernel, device, args)
    return None if entry is None else _pack(entry[1], args)
