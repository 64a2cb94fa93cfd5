"""DLPack capsules made with ctypes (``backend/dlpack.py``) and the GPU path of
``gpuarray.__dlpack__``, without a GPU: capsules of host memory that NumPy consumes (both
kinds, lifetimes, layouts), the stream protocol against a stand-in driver, and the
gpuarray's capsule read back field by field on the cpu backend told it has external memory.
The real capsule's round trip through PyTorch on a GPU: ``test_interop_dlpack_gpu.py``."""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import struct
import weakref

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE, dlpack


class _Owner:
    """A weak-referenceable owner of a host array (what a device buffer is to a capsule)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a


class _Exporter:
    """An object NumPy's ``from_dlpack`` takes: its capsule made by ``dlpack.capsule``."""

    def __init__(self, a: np.ndarray, owner: object, versioned: bool) -> None:
        self.a, self.owner, self.versioned = a, owner, versioned

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        a = self.a
        strides = tuple(s // a.itemsize for s in a.strides)
        return dlpack.capsule(a.ctypes.data, a.shape, strides, a.dtype, (dlpack.CPU, 0),
                              self.owner, versioned=self.versioned)

    def __dlpack_device__(self):
        return (dlpack.CPU, 0)


def _api():
    api = ctypes.PyDLL(None)
    name = api.PyCapsule_GetName
    name.argtypes, name.restype = [ctypes.py_object], ctypes.c_void_p
    ptr = api.PyCapsule_GetPointer
    ptr.argtypes, ptr.restype = [ctypes.py_object, ctypes.c_void_p], ctypes.c_void_p
    return name, ptr


def _read(cap) -> dict:
    """A capsule's fields, read from its memory."""
    name_of, pointer_of = _api()
    name = name_of(cap)
    kind = ctypes.string_at(name)
    at = pointer_of(cap, name)
    versioned = kind == b"dltensor_versioned"
    out = {"kind": kind}
    base = at
    if versioned:
        major, minor, ctx, _, flags = struct.unpack("<IIQQQ", ctypes.string_at(at, 32))
        out.update(version=(major, minor), ctx=ctx, flags=flags)
        base = at + 32
    data, dev_type, dev_id, ndim, code, bits, lanes, shp, std, off = struct.unpack(
        "<QiiiBBHQQQ", ctypes.string_at(base, 48))
    if not versioned:
        out["ctx"] = struct.unpack("<Q", ctypes.string_at(base + 48, 8))[0]
    out.update(data=data, device=(dev_type, dev_id), dtype=(code, bits, lanes),
               byte_offset=off,
               shape=struct.unpack(f"<{ndim}q", ctypes.string_at(shp, 8 * ndim)) if ndim else (),
               strides=struct.unpack(f"<{ndim}q", ctypes.string_at(std, 8 * ndim)) if ndim
               else ())
    return out


@pytest.mark.parametrize("versioned", [False, True])
@pytest.mark.parametrize(("dtype", "shape"), [
    (np.uint8, (5, 7, 3)), (np.float64, (4, 6)), (np.bool_, (9,)), (np.int16, (2, 3, 4)),
    (np.float16, (3, 3)), (np.complex64, (2, 5)), (np.uint32, ()),
])
def test_numpy_consumes_the_capsule(versioned, dtype, shape) -> None:
    a = np.arange(int(np.prod(shape)) or 1).astype(dtype).reshape(shape)
    got = np.from_dlpack(_Exporter(a, _Owner(a), versioned))
    assert got.shape == a.shape and got.dtype == a.dtype
    np.testing.assert_array_equal(got, a)
    assert got.ctypes.data == a.ctypes.data  # the same memory: no copy


@pytest.mark.parametrize("versioned", [False, True])
def test_strided_views_keep_their_strides(versioned) -> None:
    base = np.arange(6 * 8 * 3, dtype=np.int32).reshape(6, 8, 3)
    a = base[1::2, ::3, ::-1]
    got = np.from_dlpack(_Exporter(a, _Owner(base), versioned))
    np.testing.assert_array_equal(got, a)
    assert got.strides == a.strides


@pytest.mark.parametrize("versioned", [False, True])
def test_the_owner_lives_until_the_consumer_lets_go(versioned) -> None:
    a = np.arange(12.0)
    owner = _Owner(a)
    alive = weakref.ref(owner)
    got = np.from_dlpack(_Exporter(a, owner, versioned))
    del owner, a
    gc.collect()
    assert alive() is not None  # the consumer's array holds it
    assert got[5] == 5.0
    del got
    assert alive() is None  # the deleter let it go


@pytest.mark.parametrize("versioned", [False, True])
def test_an_unconsumed_capsule_lets_its_owner_go(versioned) -> None:
    owner = _Owner(np.zeros(3))
    alive = weakref.ref(owner)
    cap = _Exporter(owner.a, owner, versioned).__dlpack__()
    del owner
    assert alive() is not None
    del cap
    assert alive() is None


def test_the_capsule_fields() -> None:
    owner = _Owner(None)
    cap = dlpack.capsule(0x7F00_0000_0100, (4, 5, 3), None, np.dtype(np.uint8),
                         (dlpack.CUDA, 3), owner, versioned=True, flags=dlpack.IS_COPIED)
    f = _read(cap)
    assert f["kind"] == b"dltensor_versioned" and f["version"] == (1, 0)
    assert f["flags"] == dlpack.IS_COPIED and f["ctx"] == id(owner)
    assert f["data"] == 0x7F00_0000_0100 and f["byte_offset"] == 0
    assert f["device"] == (dlpack.CUDA, 3) and f["dtype"] == (1, 8, 1)
    assert f["shape"] == (4, 5, 3) and f["strides"] == (15, 3, 1)
    legacy = _read(dlpack.capsule(64, (), None, np.dtype(np.float32), (dlpack.CUDA, 0),
                                  owner))
    assert legacy["kind"] == b"dltensor" and legacy["shape"] == () and legacy["ctx"] == id(owner)
    assert legacy["dtype"] == (2, 32, 1)


def test_types_dlpack_has_not_are_refused() -> None:
    for bad in (np.dtype("U3"), np.dtype(">i4"), np.dtype(np.longdouble), np.dtype("O")):
        if bad == np.dtype(np.float64):
            continue  # (a platform whose long double is a double)
        with pytest.raises(BufferError, match="dtype"):
            dlpack.capsule(64, (2,), None, bad, (dlpack.CUDA, 0), object())


# -- the stream protocol ----------------------------------------------------------------------
@pytest.mark.parametrize(("stream", "handle"), [(None, 1), (1, 1), (2, 2), (0x7F00AB, 0x7F00AB),
                                                (-1, None)])
def test_the_consumer_stream(stream, handle) -> None:
    assert dlpack.consumer_stream(stream) == handle


@pytest.mark.parametrize(("stream", "err"), [(0, ValueError), (-2, ValueError),
                                             ("1", TypeError), (True, TypeError),
                                             (1.0, TypeError)])
def test_bad_consumer_streams_are_refused(stream, err) -> None:
    with pytest.raises(err, match="stream"):
        dlpack.consumer_stream(stream)


class _Driver:
    """A stand-in driver recording ``dlpack.order``'s calls, its answers given."""

    def __init__(self, query: int = 600, create: int = 0, record: int = 0, wait: int = 0):
        self.calls: list[tuple] = []
        self.rc = {"query": query, "create": create, "record": record, "wait": wait}

    def cuStreamQuery(self, s):  # noqa: N802  (the driver's names)
        self.calls.append(("query", s))
        return self.rc["query"]

    def cuEventCreate(self, ref, flags):  # noqa: N802
        ref._obj.value = 0xE1
        self.calls.append(("create", flags))
        return self.rc["create"]

    def cuEventRecord(self, event, s):  # noqa: N802
        self.calls.append(("record", event.value, s))
        return self.rc["record"]

    def cuStreamWaitEvent(self, s, event, flags):  # noqa: N802
        self.calls.append(("wait", s, event.value, flags))
        return self.rc["wait"]

    def cuEventDestroy_v2(self, event):  # noqa: N802
        self.calls.append(("destroy", event.value))
        return 0


def test_one_stream_needs_no_order() -> None:
    for producer, consumer in ((0, 1), (1, 1), (2, 2), (0xAB, 0xAB)):
        lib = _Driver()
        assert dlpack.order(lib, producer, consumer) and lib.calls == []


def test_a_finished_producer_needs_no_event() -> None:
    lib = _Driver(query=0)
    assert dlpack.order(lib, 0xAB, 1)
    assert lib.calls == [("query", 0xAB)]


def test_a_busy_producer_is_waited_for_on_the_gpu() -> None:
    lib = _Driver()
    assert dlpack.order(lib, 0, 0xCD)
    assert lib.calls == [("query", 0), ("create", 2), ("record", 0xE1, 0),
                         ("wait", 0xCD, 0xE1, 0), ("destroy", 0xE1)]


@pytest.mark.parametrize("fail", ["query", "create", "record", "wait"])
def test_a_refusing_driver_leaves_it_to_the_caller(fail) -> None:
    lib = _Driver(**{fail: 1})
    assert not dlpack.order(lib, 0xAB, 0xCD)
    made = [c for c in lib.calls if c[0] == "create"]
    destroyed = [c for c in lib.calls if c[0] == "destroy"]
    assert len(destroyed) == (len(made) if fail != "create" else 0)


# -- gpuarray.__dlpack__'s GPU path, on the cpu backend ---------------------------------------
@pytest.fixture
def device_path(monkeypatch):
    """The cpu backend told it has external memory: host buffers described as device ones;
    ``hand_over``'s calls recorded."""
    if mp.backend() != "cpu":
        pytest.skip("the cpu backend's host buffers stand in for device ones")
    handed: list[tuple] = []

    def interface(buf):
        face = buf.__array_interface__
        return {"shape": face["shape"], "strides": face["strides"], "data": face["data"],
                "typestr": face["typestr"], "stream": None, "version": 3}

    monkeypatch.setattr(ACTIVE, "caps", dataclasses.replace(ACTIVE.caps, external_memory=True))
    monkeypatch.setattr(ACTIVE, "interface", interface)
    monkeypatch.setattr(ACTIVE, "hand_over", lambda stream, device: handed.append((stream,
                                                                                    device)))
    return handed


def _image(seed: int = 0) -> mp.gpuimage:
    return mp.gpuimage(np.random.default_rng(seed).integers(0, 256, (6, 8, 3), dtype=np.uint8))


def test_the_gpu_capsule_describes_the_buffer(device_path) -> None:
    x = _image()
    x.fliplr()  # pending: run by the export
    cap = x.__dlpack__(stream=7)
    buf = x._node.buffer
    f = _read(cap)
    assert f["kind"] == b"dltensor" and f["device"] == (dlpack.CUDA, x.device)
    assert f["data"] == buf.ctypes.data and f["shape"] == (6, 8, 3)
    assert f["strides"] == (24, 3, 1) and f["dtype"] == (1, 8, 1)
    assert f["ctx"] == id(buf)  # the buffer, not the image, is kept
    assert device_path == [(7, x.device)]
    assert x.__cuda_array_interface__["data"][0] == f["data"]  # the kept dict, reused


def test_the_gpu_capsule_keeps_the_buffer_after_the_image_changes(device_path) -> None:
    x = _image(1)
    want = np.asarray(x).copy()
    buf = x._materialize()
    alive = weakref.ref(buf)
    cap = x.__dlpack__(max_version=(1, 0))
    assert _read(cap)["kind"] == b"dltensor_versioned" and _read(cap)["flags"] == 0
    x.fliplr()
    np.asarray(x)
    del buf, x
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(alive(), want)
    del cap  # nobody consumed it: its owner goes with it
    assert alive() is None


def test_the_gpu_capsule_of_a_copy(device_path) -> None:
    x = _image(2)
    cap = x.__dlpack__(max_version=(1, 2), copy=True)
    f = _read(cap)
    assert f["flags"] == dlpack.IS_COPIED
    assert f["data"] != x._materialize().ctypes.data


def test_other_devices_asked_for(device_path) -> None:
    x = _image(3)
    host = np.from_dlpack(_Host(x))
    np.testing.assert_array_equal(host, np.asarray(x))
    with pytest.raises(BufferError, match="dl_device"):
        x.__dlpack__(dl_device=(dlpack.CPU, 0), copy=False)
    with pytest.raises(BufferError, match="dl_device"):
        x.__dlpack__(dl_device=(dlpack.CUDA, x.device + 1))


class _Host:
    """Asks ``x`` for a host capsule, as a consumer on the CPU passing ``dl_device`` does."""

    def __init__(self, x) -> None:
        self.x = x

    def __dlpack__(self, **kw):
        return self.x.__dlpack__(dl_device=(dlpack.CPU, 0))

    def __dlpack_device__(self):
        return (dlpack.CPU, 0)


class _Stream:
    """A stand-in numba-cuda stream: a handle, and its synchronizations counted."""

    def __init__(self, handle: int) -> None:
        self.handle, self.synced = handle, 0

    def synchronize(self) -> None:
        self.synced += 1


@pytest.fixture
def cuda_stand_in(monkeypatch):
    """The cuda backend's ``hand_over`` over a stand-in driver and thread state."""
    import contextlib
    import threading

    from millipyde.backend import cuda_devices
    from millipyde.backend.cuda import CudaBackend

    b = CudaBackend.__new__(CudaBackend)
    b._tls = threading.local()
    monkeypatch.setattr(b, "on_device", lambda device: contextlib.nullcontext())
    lib = _Driver()
    monkeypatch.setattr(cuda_devices, "_DRIVER", [lib])
    return b, lib


def test_hand_over_orders_the_consumer_after_this_threads_stream(cuda_stand_in) -> None:
    b, lib = cuda_stand_in
    b.hand_over(None, 0)  # the default stream handed to the legacy one: one stream
    b.hand_over(-1, 0)  # no ordering asked for
    assert lib.calls == []
    s = b._tls.stream = _Stream(0xAB)
    b.hand_over(2, 0)
    assert lib.calls == [("query", 0xAB), ("create", 2), ("record", 0xE1, 0xAB),
                         ("wait", 2, 0xE1, 0), ("destroy", 0xE1)]
    assert s.synced == 0  # ordered on the GPU, the host not blocked
    lib.rc["wait"] = 1
    b.hand_over(None, 0)
    assert s.synced == 1  # the driver refused: this thread's stream alone synchronized


def test_hand_over_without_a_driver_synchronizes_the_stream(cuda_stand_in, monkeypatch) -> None:
    from millipyde.backend import cuda_devices

    b, _ = cuda_stand_in
    monkeypatch.setattr(cuda_devices, "_DRIVER", [None])
    s = b._tls.stream = _Stream(0xAB)
    b.hand_over(0xCD, 0)
    assert s.synced == 1


# -- NumPy before 2.1 (no versioned capsule to borrow from) -----------------------------------
class _OldArray(np.ndarray):
    """An array as NumPy 1.26 and 2.0 make them: ``__dlpack__`` takes ``stream`` alone."""

    def __dlpack__(self, *, stream=None):
        return np.ndarray.__dlpack__(self, stream=stream)


class _OldNumPy:
    """``numpy`` as ``dlpack`` sees it under NumPy 1.26 or 2.0: its arrays ``_OldArray``s."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(*args, **kwargs):
        return np.empty(*args, **kwargs).view(_OldArray)

    @staticmethod
    def asarray(*args, **kwargs):
        return np.asarray(*args, **kwargs).view(_OldArray)


@pytest.fixture
def numpy_before_2_1(monkeypatch):
    """``dlpack`` and ``gpuarray`` under a NumPy with no versioned capsule (before 2.1); the
    capsule kinds borrowed anew."""
    import millipyde.array

    monkeypatch.setattr(dlpack, "np", _OldNumPy())
    monkeypatch.setattr(millipyde.array, "np", _OldNumPy())
    monkeypatch.setattr(dlpack, "_KINDS", {})


def test_a_versioned_capsule_asked_of_an_older_numpy_is_a_legacy_one(numpy_before_2_1) -> None:
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    owner = _Owner(a)
    alive = weakref.ref(owner)
    exporter = _Exporter(a, owner, versioned=True)
    assert _read(exporter.__dlpack__())["kind"] == b"dltensor"  # (the consumer reads its name)
    got = np.from_dlpack(exporter)
    np.testing.assert_array_equal(got, a)
    del owner, exporter, got
    gc.collect()
    assert alive() is None


def test_gpu_and_host_capsules_under_an_older_numpy(numpy_before_2_1, device_path) -> None:
    x = _image(4)
    own = _read(x.__dlpack__(max_version=(1, 0)))
    assert own["kind"] == b"dltensor" and own["data"] == x._materialize().ctypes.data
    copied = _read(x.__dlpack__(max_version=(1, 0), copy=True))
    assert copied["kind"] == b"dltensor" and copied["data"] != own["data"]
    host = x.__dlpack__(max_version=(1, 0), dl_device=(dlpack.CPU, 0))
    assert _read(host)["kind"] == b"dltensor"
    np.testing.assert_array_equal(np.from_dlpack(_Capsule(host)), np.asarray(x))


class _Capsule:
    """A capsule made already, handed to NumPy's ``from_dlpack`` (host memory)."""

    def __init__(self, cap) -> None:
        self.cap = cap

    def __dlpack__(self, **kw):
        return self.cap

    def __dlpack_device__(self):
        return (dlpack.CPU, 0)


def test_complex_types_dlpack_has_not_are_refused() -> None:
    assert dlpack.dtype_code(np.dtype(np.complex128)) == (5, 128)
    wide = np.dtype(np.clongdouble)
    if wide.itemsize > 16:  # (a platform whose long double is wider than a double)
        with pytest.raises(BufferError, match="dtype"):
            dlpack.dtype_code(wide)


def test_a_copy_asked_of_a_host_backend() -> None:
    """``copy=True`` on the host backends: the capsule's memory is not the array's buffer (a
    consumer writing to it, as torch may, leaves the array alone)."""
    if mp.backend() != "cpu":
        pytest.skip("the cpu backend exports its buffer itself where no copy is asked for")
    x = _image(5)
    buf = x._materialize()
    assert _read(x.__dlpack__())["data"] == buf.ctypes.data  # (no copy asked: none made)
    cap = x.__dlpack__(copy=True)
    assert _read(cap)["data"] != buf.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(_Capsule(cap)), np.asarray(x))
