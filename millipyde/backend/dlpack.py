"""DLPack capsules of device buffers made here, with ctypes (no CuPy), and the consumer's
stream ordered after the producer's.

A capsule holds a ``DLManagedTensor`` (DLPack 0.8, capsule ``"dltensor"``) or a
``DLManagedTensorVersioned`` (DLPack 1.0, ``"dltensor_versioned"``, for a consumer whose
``max_version`` is 1 or more, under NumPy 2.1 or later: an older one makes no versioned capsule
to borrow from, and the consumer gets a ``DLManagedTensor``), laid out as NumPy's own exports
are: one ``PyMem_Malloc`` block, the struct, then the shape and the strides (elements),
``manager_ctx`` one reference to the owner (the buffer whose memory it is). The capsule's
destructor and the tensor's deleter are NumPy's (``numpy/_core/src/multiarray/dlpack.c``, taken
from a capsule NumPy makes once): the deleter takes the GIL, frees the block and drops
``manager_ctx``'s reference, in C, from whatever thread the consumer calls it; the destructor
calls the deleter of a capsule nobody consumed. No Python runs at either: a Python callback (a
ctypes ``CFUNCTYPE``) called while an exception unwinds a frame that held the consumer's tensor
would replace that exception with a ``SystemError``.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, NamedTuple

import numpy as np

#: DLPack device types (``DLDeviceType``)
CPU, CUDA = 1, 2
#: ``DLDataTypeCode`` by NumPy kind
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
#: the versioned tensor's ``flags``: its producer copied the data
IS_COPIED = 1 << 1
#: ``DLTensor``: data, device (type, id), ndim, dtype (code, bits, lanes), shape, strides,
#: byte_offset; 48 bytes
_TENSOR = "QiiiBBHQQQ"
#: ``DLManagedTensor``: the tensor, manager_ctx, deleter; 64 bytes
_MANAGED = "<" + _TENSOR + "QQ"
#: ``DLManagedTensorVersioned``: version (major, minor), manager_ctx, deleter, flags, the
#: tensor; 80 bytes
_VERSIONED = "<IIQQQ" + _TENSOR


class _Kind(NamedTuple):
    """What a capsule of one kind borrows from NumPy's: its name (a C string NumPy keeps for
    the life of the process), the capsule destructor, the tensor deleter."""

    name: int
    destructor: int
    deleter: int


class _Api:
    """The C API functions used, typed on a handle of their own (``ctypes.pythonapi``'s
    function objects are shared with every other user in the process)."""

    def __init__(self) -> None:
        api = ctypes.PyDLL(None)
        p, o, n = ctypes.c_void_p, ctypes.py_object, ctypes.c_size_t
        self.malloc = _typed(api.PyMem_Malloc, [n], p)
        self.free = _typed(api.PyMem_Free, [p], None)
        self.new = _typed(api.PyCapsule_New, [p, p, p], o)
        self.pointer = _typed(api.PyCapsule_GetPointer, [o, p], p)
        self.name = _typed(api.PyCapsule_GetName, [o], p)
        self.destructor = _typed(api.PyCapsule_GetDestructor, [o], p)
        self.incref = _typed(api.Py_IncRef, [o], None)


def _typed(fn: Any, argtypes: list[Any], restype: Any) -> Any:
    fn.argtypes, fn.restype = argtypes, restype
    return fn


_API: list[_Api] = []
_KINDS: dict[bool, _Kind | None] = {}
_LOCK = threading.Lock()


def _kind(versioned: bool) -> _Kind | None:
    """The borrowed parts of a capsule kind (``versioned``: DLPack 1.0), made on first use
    with the API (``_API``); None for a versioned one under a NumPy before 2.1, which makes
    none."""
    got = _KINDS.get(versioned)
    if got is None:
        with _LOCK:
            if not _API:
                _API.append(_Api())
            api = _API[0]
            if versioned not in _KINDS:
                a = np.empty(1, dtype=np.uint8)
                try:
                    cap = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
                except TypeError:
                    if not versioned:
                        raise
                    _KINDS[versioned] = None  # NumPy before 2.1: DLPack 0.8 capsules only
                    return None
                name = api.name(cap)
                managed = api.pointer(cap, name)
                at = 16 if versioned else 56  # the deleter's offset in the struct
                deleter = ctypes.c_void_p.from_address(managed + at).value
                _KINDS[versioned] = _Kind(name, api.destructor(cap), deleter)
                del cap  # (NumPy's destructor frees its own: nobody consumed it)
            got = _KINDS[versioned]
    return got


def dtype_code(dtype: np.dtype) -> tuple[int, int]:
    """DLPack's (type code, bits) of ``dtype``; ``BufferError`` where DLPack has none."""
    dtype = np.dtype(dtype)
    code = _CODES.get(dtype.kind)
    if code is None or not dtype.isnative or dtype.itemsize > (16 if code == 5 else 8):
        raise BufferError(f"DLPack has no type for dtype {dtype}")
    return code, dtype.itemsize * 8


#: (shape, strides, dtype) -> the packed shape and strides, ndim, type code, bits
_LAYOUTS: dict[tuple, tuple[bytes, int, int, int]] = {}


def _layout(shape: tuple[int, ...], strides: tuple[int, ...] | None,
            dtype: np.dtype) -> tuple[bytes, int, int, int]:
    key = (shape, strides, dtype)
    got = _LAYOUTS.get(key)
    if got is None:
        code, bits = dtype_code(dtype)
        n = len(shape)
        if strides is None:
            strides = c_strides(shape)
        elif len(strides) != n:
            raise ValueError(f"capsule: strides {strides} do not match shape {shape}")
        if len(_LAYOUTS) >= 4096:  # (bounded: layouts come from data)
            _LAYOUTS.clear()
        got = _LAYOUTS[key] = (struct.pack(f"<{2 * n}q", *shape, *strides), n, code, bits)
    return got


def capsule(data: int, shape: tuple[int, ...], strides: tuple[int, ...] | None, dtype: np.dtype,
            device: tuple[int, int], owner: Any, versioned: bool = False,
            flags: int = 0) -> Any:
    """A DLPack capsule of the array at device address ``data``.

    Parameters
    ----------
    data : int
        Address of the first element (``byte_offset`` is 0, as NumPy and PyTorch export).
    shape, strides : tuple of int
        The array's shape and strides, strides in elements (None: C-contiguous).
    dtype : numpy.dtype
    device : (int, int)
        DLPack's (device type, device id): ``(CUDA, ordinal)`` or ``(CPU, 0)``.
    owner : object
        Kept alive (one reference) until the consumer's deleter call, or the capsule's end if
        nobody consumes it: the buffer whose memory ``data`` is.
    versioned : bool
        A ``DLManagedTensorVersioned`` (DLPack 1.0) rather than a ``DLManagedTensor``, where
        NumPy makes one (2.1 or later; before, a ``DLManagedTensor``, flags dropped).
    flags : int
        The versioned tensor's flags (``IS_COPIED``).
    """
    kind = _KINDS.get(versioned) or _kind(versioned)
    if kind is None:  # (a NumPy before 2.1: the standard lets a producer answer a consumer's
        # ``max_version`` with an unversioned capsule, whose name the consumer checks)
        versioned, kind = False, _KINDS.get(False) or _kind(False)
    api = _API[0]
    tail, n, code, bits = _layout(shape, strides, dtype)
    head = 80 if versioned else 64
    mem = api.malloc(head + 16 * n)
    if not mem:
        raise MemoryError("capsule: PyMem_Malloc failed")
    at = mem + head if n else 0
    if versioned:
        blob = struct.pack(_VERSIONED, 1, 0, id(owner), kind.deleter, flags, data, device[0],
                           device[1], n, code, bits, 1, at, at + 8 * n if n else 0, 0) + tail
    else:
        blob = struct.pack(_MANAGED, data, device[0], device[1], n, code, bits, 1, at,
                           at + 8 * n if n else 0, 0, id(owner), kind.deleter) + tail
    ctypes.memmove(mem, blob, len(blob))
    try:
        cap = api.new(mem, kind.name, kind.destructor)
    except BaseException:
        api.free(mem)
        raise
    api.incref(owner)  # manager_ctx's reference: dropped by the deleter
    return cap


def host_capsule(a: np.ndarray, max_version: Any) -> Any:
    """NumPy's capsule of ``a``, a fresh host copy: DLPack 1.0 (flagged copied) where
    ``max_version`` asks for it and NumPy makes one (2.1 or later), else 0.8 (a NumPy before
    2.1 takes neither ``max_version`` nor ``copy``)."""
    if max_version is not None and _kind(True) is not None:
        return a.__dlpack__(max_version=max_version, copy=True)
    return a.__dlpack__()


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides, in elements, of a C-contiguous array of ``shape``."""
    out, step = [], 1
    for s in reversed(shape):
        out.append(step)
        step *= max(int(s), 1)
    return tuple(reversed(out))


# -- the consumer's stream --------------------------------------------------------------------
#: the driver's stream handles of the legacy and the per-thread default streams, and the
#: array API's ``stream`` values for them
LEGACY, PER_THREAD = 1, 2
_NOT_READY = 600  # CUDA_ERROR_NOT_READY
_EVENT_DISABLE_TIMING = 2


def consumer_stream(stream: Any) -> int | None:
    """The driver handle of the array API's ``stream`` argument of ``__dlpack__`` for CUDA:
    None or 1 the legacy default stream, 2 the per-thread default stream, a larger integer a
    stream's handle; None for -1 (the consumer asks for no ordering). 0 is refused (the
    standard disallows it: it could mean None, 1 or 2)."""
    if stream is None:
        return LEGACY
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"__dlpack__: stream must be an int or None, got {stream!r}")
    if stream == -1:
        return None
    if stream < -1 or stream == 0:
        raise ValueError(f"__dlpack__: stream must be None, -1, 1, 2 or a stream handle, "
                         f"got {stream}")
    return stream


def same_stream(producer: int, consumer: int) -> bool:
    """Whether driver handles ``producer`` and ``consumer`` name one stream (0 and 1 both
    the legacy default stream)."""
    return producer == consumer or (producer == 0 and consumer == LEGACY)


def order(lib: Any, producer: int, consumer: int) -> bool:
    """Make work queued later on stream ``consumer`` wait for what is queued so far on stream
    ``producer`` (driver handles; 0 the legacy default stream), without blocking the host:
    nothing where they are one stream or the producer has nothing left to run, else an
    event recorded on the producer that the consumer waits for. ``lib``: the driver library
    typed by :func:`typed_driver`. False where the driver refused a call (the caller then
    synchronizes the producer)."""
    if same_stream(producer, consumer):
        return True
    rc = lib.cuStreamQuery(producer)
    if rc == 0:
        return True  # everything queued on it has run: the value is complete
    if rc != _NOT_READY:
        return False
    event = ctypes.c_void_p()
    if lib.cuEventCreate(ctypes.byref(event), _EVENT_DISABLE_TIMING):
        return False
    try:
        return not (lib.cuEventRecord(event, producer)
                    or lib.cuStreamWaitEvent(consumer, event, 0))
    finally:
        lib.cuEventDestroy_v2(event)  # (released once the wait is done: the driver's rule)


def typed_driver(lib: Any) -> Any:
    """``lib`` (the driver library, or a stand-in in tests) with :func:`order`'s calls typed:
    stream handles as pointers, not C ints."""
    p = ctypes.c_void_p
    _typed(lib.cuStreamQuery, [p], ctypes.c_int)
    _typed(lib.cuEventCreate, [ctypes.POINTER(p), ctypes.c_uint], ctypes.c_int)
    _typed(lib.cuEventRecord, [p, p], ctypes.c_int)
    _typed(lib.cuStreamWaitEvent, [p, p, ctypes.c_uint], ctypes.c_int)
    _typed(lib.cuEventDestroy_v2, [p], ctypes.c_int)
    return lib
