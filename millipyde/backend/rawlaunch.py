"""Launches straight through the driver's ``cuLaunchKernel``, with a pre-packed parameter block.

``cuda.core.launch`` (what numba-cuda and ``launcher.py``'s first cached path call) builds a
parameter holder from Python objects on every launch: ~15-20 us for a kernel with a few dozen
flattened arguments. A ``Template`` is made once per compiled kernel and device: a ``struct``
layout with one 8-byte slot per flattened argument (numba-cuda's ABI: an array is meminfo,
parent, nitems, itemsize, data, shape..., strides...) and the array of pointers to those slots
that ``cuLaunchKernel`` takes. A launch packs the values into the block with one
``struct.pack_into`` and makes one ctypes call (the driver copies the parameters before it
returns, so the block is reused at once, under a lock).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy as np

_SCALAR_CODES = {
    "bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i",
    "uint32": "I", "int64": "q", "uint64": "Q", "float32": "f", "float64": "d",
}
_libcuda: Any = None
_lib_lock = threading.Lock()


def libcuda() -> Any:
    """The driver library with ``cuLaunchKernel`` typed, or None where it does not load."""
    global _libcuda
    if _libcuda is None:
        with _lib_lock:
            if _libcuda is None:
                try:
                    _libcuda = typed(ctypes.CDLL("libcuda.so.1"))
                except (OSError, AttributeError):
                    _libcuda = False
    return _libcuda or None


def typed(lib: Any) -> Any:
    """``lib`` (a driver library, or a fake one in tests) with the functions the launches
    call typed."""
    fn = lib.cuLaunchKernel
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    get = lib.cuCtxGetCurrent
    get.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    get.restype = ctypes.c_int
    try:
        # untyped: its four arguments are passed as ready ctypes objects
        lib.cuLaunchKernelEx.restype = ctypes.c_int
    except AttributeError:  # a driver before CUDA 12
        pass
    copy = lib.cuMemcpyDtoDAsync_v2  # (replayed clones, ``RawCopy``)
    copy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    copy.restype = ctypes.c_int
    return lib


class LaunchConfig(ctypes.Structure):
    """The driver's ``CUlaunchConfig`` (``cuLaunchKernelEx``'s first argument), no
    attributes: the same launch as ``cuLaunchKernel`` with these dimensions and stream."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


#: replay launches through ``cuLaunchKernelEx`` where the driver has it (False: through
#: ``cuLaunchKernel``, as before; read when a replay launch is bound)
LAUNCH_EX = True


def launch_ex(lib: Any) -> Any:
    """``lib``'s ``cuLaunchKernelEx`` (untyped: called with ctypes objects made once), or None
    where the driver has none or ``LAUNCH_EX`` is off. Its four arguments cost ctypes a
    fraction of what ``cuLaunchKernel``'s eleven typed ones do."""
    return getattr(lib, "cuLaunchKernelEx", None) if LAUNCH_EX else None


def current_context() -> int | None:
    """The handle of this thread's current CUDA context (0: none), or None where the driver
    library does not load: one ctypes call, where numba-cuda's wrapper costs a few us."""
    lib = libcuda()
    if lib is None:
        return None
    out = ctypes.c_void_p()
    rc = lib.cuCtxGetCurrent(ctypes.byref(out))
    if rc:
        from numba.cuda.cudadrv.driver import CudaAPIError

        raise CudaAPIError(rc, f"cuCtxGetCurrent failed with CUresult {rc}")
    return out.value or 0


def _codes(ty: Any) -> tuple[str, int] | None:
    """(struct codes, array ndim or -1) of one argument type, or None if not supported."""
    from numba.core import types

    if isinstance(ty, types.Array):
        return ("q" * (5 + 2 * ty.ndim), ty.ndim) if ty.layout == "C" else None
    if ty == types.boolean:
        return "?", -1
    code = _SCALAR_CODES.get(str(ty))
    return (code, -1) if code is not None else None


class Template:
    """The parameter block of one compiled kernel on one device."""

    def __init__(self, handle: int, kinds: tuple[int, ...], fmt: str, slots: int) -> None:
        self.handle = ctypes.c_void_p(handle)
        self.kinds = kinds  # per argument: array ndim, or -1 for a scalar
        self.codes: tuple[str, ...] = ()  # per slot: its struct code and padding
        self.layout = struct.Struct(fmt)
        self.block = ctypes.create_string_buffer(8 * max(slots, 1))
        base = ctypes.addressof(self.block)
        self.pointers = (ctypes.c_void_p * max(slots, 1))(*[base + 8 * i for i in range(slots)])
        self.lock = threading.Lock()
        # arrays first, scalars after (every generated kernel's order): the scalars go in as
        # one slice, no per-argument branch
        arrays = sum(1 for k in kinds if k >= 0)
        self.lead = arrays if all(k >= 0 for k in kinds[:arrays]) else -1

    def values(self, args: tuple) -> list:
        """The flattened argument values in slot order."""
        out: list = []
        m = self.lead
        if m >= 0:
            if len(args) != len(self.kinds):
                raise ValueError(f"{len(args)} arguments for a kernel of {len(self.kinds)}")
            for a in args[:m]:
                out += getattr(a, "__dict__", _NONE).get("_mp_slots") or array_values(a)
            out += args[m:]
            return out
        for ndim, a in zip(self.kinds, args, strict=True):
            if ndim < 0:
                out.append(a)
            else:
                out += array_values(a)
        return out

    def launch(self, args: tuple, grid: tuple[int, int, int], block: tuple[int, int, int],
               shared: int, stream: int) -> None:
        """Queue one launch on ``stream`` (a raw handle) in the current context."""
        self.launch_values(self.values(args), grid, block, shared, stream)

    def slots(self) -> list[int]:
        """The first slot of each argument (an array takes ``5 + 2 * ndim``, a scalar one)."""
        out, at = [], 0
        for ndim in self.kinds:
            out.append(at)
            at += 1 if ndim < 0 else 5 + 2 * ndim
        return out

    def launch_values(self, vals: list, grid: tuple[int, int, int],
                      block: tuple[int, int, int], shared: int, stream: int) -> None:
        """``launch`` of arguments already flattened in slot order (``values``)."""
        lib = libcuda()
        with self.lock:
            self.layout.pack_into(self.block, 0, *vals)
            rc = lib.cuLaunchKernel(self.handle, *grid, *block, shared, stream,
                                    self.pointers, None)
        if rc:
            from numba.cuda.cudadrv.driver import CudaAPIError

            raise CudaAPIError(rc, f"cuLaunchKernel failed with CUresult {rc}")

    def unpack(self, args: tuple) -> tuple:
        """What a launch with ``args`` would pass, slot by slot (for tests)."""
        block = bytearray(self.layout.size)
        self.layout.pack_into(block, 0, *self.values(args))
        return self.layout.unpack(bytes(block))


_NONE: dict = {}


def array_values(a: Any) -> tuple:
    """An array argument's slots (meminfo, parent, nitems, itemsize, data, shape...,
    strides...), kept on the array once made: a device array's memory and layout are fixed
    when it is made, and a batch passes the same arrays (the stack, the constants, a
    kernel's output to the next kernel) to several launches."""
    d = getattr(a, "__dict__", None)
    got = None if d is None else d.get("_mp_slots")
    if got is None:
        got = (0, 0, a.size, a.dtype.itemsize, int(a.gpu_data.device_pointer), *a.shape,
               *a.strides)
        if d is not None:
            d["_mp_slots"] = got
    return got


def template(cufunc_handle: Any, argument_types: tuple) -> Template | None:
    """A template for a compiled kernel, or None when an argument type is not supported or the
    driver library is not at hand (the caller keeps ``cuda.core``'s launch)."""
    if libcuda() is None:
        return None
    return build(cufunc_handle, argument_types)


def build(cufunc_handle: Any, argument_types: tuple) -> Template | None:
    """The template of ``argument_types`` for ``cufunc_handle`` (None: a type not supported);
    no driver needed, so tests and benches build the same layout as launches."""
    kinds, per_slot = [], []
    for ty in argument_types:
        got = _codes(ty)
        if got is None:
            return None
        codes, ndim = got
        per_slot += [c + "x" * (8 - struct.calcsize("<" + c)) for c in codes]
        kinds.append(ndim)
    t = Template(int(cufunc_handle), tuple(kinds), "<" + "".join(per_slot), len(per_slot))
    t.codes = tuple(per_slot)
    return t


_dims: dict[Any, tuple[int, int, int]] = {}


def dims(v: Any) -> tuple[int, int, int]:
    """A grid or block as three unsigned ints."""
    if isinstance(v, list):
        v = tuple(v)
    got = _dims.get(v)
    if got is None:
        t = (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)
        got = t + (1,) * (3 - len(t))
        if len(_dims) < 4096:
            _dims[v] = got
    return got
