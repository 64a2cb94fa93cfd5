"""Pool arrays stamped from a per-layout prototype (``backend/pool.py``) are what numba-cuda's
constructor builds (no device needed: the arrays are only described, never read)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from millipyde.backend.pool import LAYOUTS, CupyPool


def _fake_cupy_array(shape: tuple[int, ...], dtype: np.dtype, ptr: int) -> SimpleNamespace:
    ref = np.empty(shape, dtype)
    return SimpleNamespace(data=SimpleNamespace(ptr=ptr), shape=ref.shape, strides=ref.strides,
                           dtype=ref.dtype, nbytes=ref.nbytes)


@pytest.mark.parametrize("shape, dtype", [((512, 512, 3), np.uint8), ((7, 5), np.float64),
                                          ((3,), np.int32), ((), np.float32),
                                          ((2, 3, 4, 1), np.uint16)])
def test_a_stamped_array_is_the_constructed_one(shape, dtype):
    dtype = np.dtype(dtype)
    for ptr in (4096, 1 << 40):  # the second from the cached prototype
        owner = object()
        want = CupyPool._wrap(_fake_cupy_array(shape, dtype, ptr), None)
        got = CupyPool.stamp(shape, dtype, ptr, owner, None)
        a, b = vars(got), vars(want)
        assert sorted(a) == sorted(b)
        for name in b:
            if name not in ("gpu_data", "_dummy"):
                assert a[name] == b[name], name
        assert got._dummy.shape == want._dummy.shape
        assert got._dummy.strides == want._dummy.strides
        assert got.is_c_contiguous() and got.nbytes == want.nbytes
        assert int(got.gpu_data.device_pointer) == ptr
        assert got.gpu_data.size == want.gpu_data.size
        assert got.gpu_data._owner is owner  # the pool block lives as long as the array


def test_stamped_arrays_share_no_memory_object():
    dtype = np.dtype(np.uint8)
    a = CupyPool.stamp((4, 4), dtype, 4096, object(), None)
    b = CupyPool.stamp((4, 4), dtype, 8192, object(), None)
    assert a.gpu_data is not b.gpu_data
    assert int(a.gpu_data.device_pointer) != int(b.gpu_data.device_pointer)


class _FakeCupy:
    """Just what ``CupyPool`` asks of CuPy: device and stream blocks and raw allocations."""

    def __init__(self) -> None:
        self.entered: list = []
        self.next_ptr = 1 << 20
        fake = self

        class Device:
            def __init__(self, device: int) -> None:
                self.device = device

            def __enter__(self) -> None:
                fake.entered.append(("device", self.device))

            def __exit__(self, *exc: object) -> None:
                fake.entered.append(("device exit", self.device))

        class Stream:
            def __init__(self, handle: int) -> None:
                self.handle = handle

            def __enter__(self) -> None:
                fake.entered.append(("stream", self.handle))

            def __exit__(self, *exc: object) -> None:
                fake.entered.append(("stream exit", self.handle))

            @staticmethod
            def from_external(ref: object) -> Stream:
                return Stream(ref.handle)

        Stream.null = Stream(0)

        def alloc(nbytes: int) -> SimpleNamespace:
            fake.next_ptr += 4096
            fake.entered.append(("alloc", nbytes))
            return SimpleNamespace(ptr=fake.next_ptr, nbytes=nbytes)

        self.cuda = SimpleNamespace(Device=Device, Stream=Stream, alloc=alloc)


@pytest.mark.parametrize("handle", [0, 0x5000])
def test_a_layouts_allocator_allocates_what_allocate_does(handle):
    cupy = _FakeCupy()
    pool = CupyPool(cupy)
    stream = SimpleNamespace(handle=SimpleNamespace(value=handle))
    shape, dtype = (6, 5, 3), np.dtype(np.uint8)
    want = pool.allocate(shape, dtype, 1, stream, lambda d: None)
    steps = list(cupy.entered)
    cupy.entered.clear()
    got = pool.allocator(shape, dtype, 1, lambda d: None)(handle)
    assert steps == [("device", 1), ("stream", handle), ("alloc", 90),
                     ("stream exit", handle), ("device exit", 1)]
    # the caller has the device's context current: the runtime's device is not set again
    assert cupy.entered == steps[1:-1]
    a, b = vars(got), vars(want)
    assert sorted(a) == sorted(b)
    for name in b:
        if name != "gpu_data":
            assert a[name] is b[name] or a[name] == b[name], name
    assert int(got.gpu_data.device_pointer) == int(want.gpu_data.device_pointer) + 4096
    assert got.gpu_data.size == want.gpu_data.size == 90
    assert got.gpu_data._owner.ptr == int(got.gpu_data.device_pointer)


def test_an_allocators_memory_objects_are_the_constructed_ones():
    """The allocator builds each ``MemoryPointer`` without its ``__init__``: the same
    attributes as a constructed one, the block's address, the block as owner; the stream is
    entered on every call, the first one and those after (cached)."""
    cupy = _FakeCupy()
    pool = CupyPool(cupy)
    shape, dtype = (4, 3), np.dtype(np.float32)
    want = pool.allocate(shape, dtype, 0, SimpleNamespace(handle=None), lambda d: None)
    allocate = pool.allocator(shape, dtype, 0, lambda d: None)
    for _ in range(3):
        cupy.entered.clear()
        got = allocate(0x42)
        assert cupy.entered == [("stream", 0x42), ("alloc", 48), ("stream exit", 0x42)]
        a, b = vars(got.gpu_data), vars(want.gpu_data)
        assert sorted(a) == sorted(b)
        for name in b:
            if name not in ("device_pointer", "handle", "_owner"):
                assert a[name] == b[name], name
        assert type(got.gpu_data) is type(want.gpu_data)
        assert int(got.gpu_data.handle) == int(got.gpu_data.device_pointer)
        assert got.gpu_data._owner.ptr == int(got.gpu_data.device_pointer)
        assert got.gpu_data.owner is got.gpu_data._owner


def test_an_allocator_enters_no_stream_already_current():
    """Where CuPy's current stream already is the one asked for, the allocation is made
    without entering it (the same pool arena: CuPy keys it on the current stream)."""
    cupy = _FakeCupy()
    current = []
    cupy.cuda.get_current_stream = lambda: current[0]
    pool = CupyPool(cupy)
    allocate = pool.allocator((4, 3), np.dtype(np.uint8), 0, lambda d: None)
    allocate(0x42)  # the first call on a stream caches it, through the general block
    current.append(pool._streams[(0, 0x42)])
    cupy.entered.clear()
    allocate(0x42)
    assert cupy.entered == [("alloc", 12)]
    current[0] = cupy.cuda.Stream.null  # another stream current: entered as before
    cupy.entered.clear()
    allocate(0x42)
    assert cupy.entered == [("stream", 0x42), ("alloc", 12), ("stream exit", 0x42)]


def test_stamped_parts_are_what_numbas_constructors_build():
    from numba.cuda.cudadrv import devicearray, driver

    if not hasattr(devicearray, "DeviceNDArray"):
        pytest.skip("numba-cuda's DeviceNDArray (the CUDA simulator's module has none)")
    owner, base = object(), 1 << 20
    parts = [(0, np.dtype(np.int64), (5,)), (48, np.dtype(np.float64), (3, 4)),
             (160, np.dtype(np.uint8), (0, 3)), (176, np.dtype(np.uint8), (2, 2, 3, 256))]
    got = LAYOUTS.stamp_parts(parts, base, owner, None)
    assert got[2] is None
    for (off, dtype, shape), a in zip(parts, got, strict=True):
        if 0 in shape:
            continue
        ref = np.empty(shape, dtype)
        data = driver.MemoryPointer(None, driver.binding.CUdeviceptr(base + off),
                                    size=ref.nbytes, owner=owner)
        want = devicearray.DeviceNDArray(shape=ref.shape, strides=ref.strides,
                                         dtype=ref.dtype, gpu_data=data, stream=0)
        assert vars(a).keys() == vars(want).keys()
        mine, theirs = vars(a.gpu_data), vars(want.gpu_data)
        assert mine.keys() == theirs.keys()
        for k, v in theirs.items():
            assert (int(mine[k]) == int(v)) if k in ("device_pointer", "handle") \
                else mine[k] is v or mine[k] == v, k
        for name, value in vars(want).items():
            if name not in ("gpu_data", "_dummy"):
                assert vars(a)[name] == value, name
        assert (a._dummy.shape, a._dummy.strides) == (want._dummy.shape, want._dummy.strides)
        assert a.is_c_contiguous() and int(a.gpu_data.device_pointer) == base + off


def test_stamped_members_are_the_stamped_parts_of_one_layout():
    from numba.cuda.cudadrv import devicearray

    if not hasattr(devicearray, "DeviceNDArray"):
        pytest.skip("numba-cuda's DeviceNDArray (the CUDA simulator's module has none)")
    owner, base, shape, dtype = object(), 1 << 24, (6, 5, 3), np.dtype(np.float64)
    step = 6 * 5 * 3 * 8 + 64  # members need not be packed
    stamp = LAYOUTS.member_stamp(step, dtype, shape, base, owner, None)
    got = [stamp(m) for m in (3, 1, 0, 2)]  # (one at a time, in any order)
    got = [got[2], got[1], got[3], got[0]]
    want = LAYOUTS.stamp_parts([(m * step, dtype, shape) for m in range(4)], base, owner,
                               None)
    for a, b in zip(got, want, strict=True):
        assert a is not b and a.gpu_data is not b.gpu_data
        assert vars(a).keys() == vars(b).keys()
        for k, v in vars(b).items():
            if k not in ("gpu_data", "_dummy"):
                assert vars(a)[k] == v, k
        pa, pb = vars(a.gpu_data), vars(b.gpu_data)
        assert pa.keys() == pb.keys()
        for k, v in pb.items():
            assert (int(pa[k]) == int(v)) if k in ("device_pointer", "handle") \
                else pa[k] is v or pa[k] == v, k
    assert [int(a.gpu_data.device_pointer) for a in got] == [base + m * step for m in range(4)]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64, np.int64, np.uint16])
def test_written_out_prototypes_are_the_constructed_ones(dtype):
    """``_Layouts.proto`` writes a non-empty layout's prototype out instead of calling
    numba-cuda's constructor (a training batch meets ~10 new layouts a batch): every attribute,
    the layout object's dims, extent and flags included, equals the constructed one's."""
    from millipyde.backend import pool

    dtype = np.dtype(dtype)
    shapes = [(), (1,), (7,), (1, 1), (3, 1), (1, 5), (4, 6), (256, 3, 512, 512),
              (17, 512, 512, 1), (1, 1, 1, 9), (2, 1, 3, 1), (5, 3, 2, 256), (np.int64(3), 4)]
    for shape in shapes:
        got = pool._described(shape, dtype)
        want = pool._constructed(tuple(map(int, shape)), dtype, None)
        assert got is not None and pool._same(got, want), shape
        assert all(type(v) is int for v in got["shape"] + got["strides"])
        assert got["_dummy"].is_c_contig and \
            got["_dummy"].is_f_contig == want["_dummy"].is_f_contig
    assert pool._DESCRIBE and pool._CHECKED == [True]
    # the checker itself tells a difference
    other = pool._constructed((4, 6), dtype, None)
    assert not pool._same(pool._described((6, 4), dtype), other)
    bad = dict(pool._described((4, 6), dtype))
    bad["extra"] = 1
    assert not pool._same(bad, other)
