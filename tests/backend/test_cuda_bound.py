"""The cuda backend's replay launch (``backend/cuda_bound.py``) with a fake driver: the block it
hands ``cuLaunchKernel`` is the one the cached launch path packs for the same arguments, and
what it does not cover goes through the general launch."""

from __future__ import annotations

import ctypes
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from numba.core import types

from millipyde.backend import launcher, rawlaunch
from millipyde.backend.cuda_bound import RawBound2D

ARR3 = types.Array(types.uint8, 3, "C")


class _FakeDriver:
    """``cuLaunchKernel`` recording its configuration and the parameter block it was given."""

    def __init__(self, layout) -> None:
        self.layout, self.calls = layout, []
        self.context = 0xC7

    def cuCtxGetCurrent(self, out):  # noqa: N802
        out._obj.value = self.context
        return 0

    def cuLaunchKernel(self, handle, gx, gy, gz, bx, by, bz, shared, stream, params, extra):  # noqa: N802
        block = ctypes.string_at(params[0], self.layout.size)
        self.calls.append(((gx, gy, gz), (bx, by, bz), shared, stream,
                           self.layout.unpack(block)))
        return 0


class _FakeDriverEx(_FakeDriver):
    """A driver with ``cuLaunchKernelEx`` too (CUDA 12 on), which the replay launch prefers:
    recorded as ``cuLaunchKernel`` records, from the configuration it is given."""

    def __init__(self, layout) -> None:
        super().__init__(layout)
        self.functions = []

    def cuLaunchKernelEx(self, config, f, params, extra):  # noqa: N802
        c = config._obj
        self.functions.append(f.value)
        return self.cuLaunchKernel(f, c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX,
                                   c.blockDimY, c.blockDimZ, c.sharedMemBytes, c.hStream or 0,
                                   params, extra)


class _FakeBackend:
    def __init__(self) -> None:
        self._tls = threading.local()
        self.stream = SimpleNamespace(handle=SimpleNamespace(value=0x77))

    def stream_on(self, device: int):
        return self.stream


def _arr(shape, ptr, dtype=np.uint8, strides=None) -> SimpleNamespace:
    ref = np.empty(shape, dtype)
    return SimpleNamespace(size=ref.size, dtype=ref.dtype, shape=ref.shape,
                           strides=ref.strides if strides is None else strides, ndim=ref.ndim,
                           gpu_data=SimpleNamespace(device_pointer=ptr))


@pytest.fixture(params=[_FakeDriver, _FakeDriverEx], ids=["cuLaunchKernel", "Ex"])
def bound(monkeypatch, request):
    template = rawlaunch.build(0x1234, (ARR3, ARR3, ARR3) + (types.float64,) * 3)
    driver = request.param(template.layout)
    monkeypatch.setattr(rawlaunch, "_libcuda", driver)
    backend = _FakeBackend()
    ptrs = iter(range(1 << 30, 1 << 31, 1 << 20))
    generic = []

    def alloc(handle):
        assert handle == 0x77
        return _arr((4, 5, 3), next(ptrs))

    src, dst, table = _arr((4, 5, 3), 4096), _arr((4, 5, 3), 8192), _arr((2, 3, 256), 512)
    b = RawBound2D(backend, lambda s, p: generic.append((s, p)) or "generic", template, alloc,
                   0, 0xC7, (3, 2, 1), (32, 8, 1), (src, dst, table, 0.5, 1.0, 2.0), src, 3)
    return SimpleNamespace(b=b, template=template, driver=driver, backend=backend,
                           generic=generic, table=table)


def test_the_launch_passes_what_the_cached_path_packs(bound):
    src = _arr((4, 5, 3), 1 << 16)
    dst = bound.b(src, [0.25, -3.5, 7.0])
    ((grid, block, shared, stream, slots),) = bound.driver.calls
    assert (grid, block, shared, stream) == ((3, 2, 1), (32, 8, 1), 0, 0x77)
    assert slots == bound.template.unpack((src, dst, bound.table, 0.25, -3.5, 7.0))
    assert int(dst.gpu_data.device_pointer) == 1 << 30 and bound.generic == []
    assert getattr(bound.driver, "functions", [0x1234]) == [0x1234]
    dst2 = bound.b(src, [1.0, 2.0, 3.0])  # a new output per call, the block rewritten
    assert bound.driver.calls[1][4] == bound.template.unpack(
        (src, dst2, bound.table, 1.0, 2.0, 3.0))


def test_what_it_does_not_cover_goes_through_the_general_launch(bound, monkeypatch):
    strided = _arr((4, 5, 3), 1 << 16, strides=(30, 6, 2))
    assert bound.b(strided, [1.0, 2.0, 3.0]) == "generic"
    assert bound.b(_arr((5, 4, 3), 1 << 16), [1.0, 2.0, 3.0]) == "generic"
    bound.backend._tls.recording = lambda *a: None
    assert bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0, 3.0]) == "generic"
    bound.backend._tls.recording = None
    monkeypatch.setattr(launcher, "DIRECT", False)
    assert bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0, 3.0]) == "generic"
    monkeypatch.setattr(launcher, "DIRECT", True)
    bound.driver.context = 0xD8  # another device's context is current
    assert bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0, 3.0]) == "generic"
    bound.driver.context = 0xC7
    bound.backend.stream = None  # the device's default stream not known yet
    assert bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0, 3.0]) == "generic"
    bound.backend.stream = SimpleNamespace(handle=SimpleNamespace(value=0x77))

    def oom(handle):
        raise MemoryError("pool exhausted")

    bound.b.alloc = oom
    assert bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0, 3.0]) == "generic"
    assert len(bound.generic) == 7 and bound.driver.calls == []


def test_a_wrong_scalar_count_fails_loudly(bound):
    import struct

    with pytest.raises(struct.error):
        bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0])


def test_only_arrays_first_and_scalars_last_fit():
    f64 = types.float64
    assert RawBound2D.fits(rawlaunch.build(0, (ARR3, ARR3, ARR3, f64, f64)), 5, 2)
    assert RawBound2D.fits(rawlaunch.build(0, (ARR3, ARR3, ARR3)), 3, 0)
    assert not RawBound2D.fits(rawlaunch.build(0, (ARR3, f64, ARR3, f64)), 4, 1)
    assert not RawBound2D.fits(rawlaunch.build(0, (ARR3, ARR3, ARR3, f64)), 4, 2)
    assert not RawBound2D.fits(rawlaunch.build(0, (ARR3, ARR3, f64)), 4, 1)


@pytest.mark.parametrize("fake", [_FakeDriver, _FakeDriverEx])
def test_an_explicit_grid_passes_its_shared_memory(monkeypatch, fake):
    template = rawlaunch.build(0x99, (ARR3, ARR3, types.int64))
    driver = fake(template.layout)
    monkeypatch.setattr(rawlaunch, "_libcuda", driver)
    src, dst = _arr((4, 5, 3), 4096), _arr((4, 5, 3), 8192)
    b = RawBound2D(_FakeBackend(), None, template, lambda handle: dst, 0, 0xC7, (7, 1, 1),
                   (128, 1, 1), (src, dst, 5), src, 0, 4096)
    b(src, [])
    ((grid, block, shared, stream, slots),) = driver.calls
    assert (grid, block, shared) == ((7, 1, 1), (128, 1, 1), 4096)
    assert slots == template.unpack((src, dst, 5))


def test_each_launch_goes_on_the_stream_of_its_call(bound):
    """The last stream's handle is kept: a launch on another stream (a Pipeline worker's)
    and one back on the first each get their own handle."""
    streams = [SimpleNamespace(handle=SimpleNamespace(value=v)) for v in (0x77, 0x55, 0x77)]
    seen = []
    bound.b.alloc = lambda handle: seen.append(handle) or _arr((4, 5, 3), 1 << 20)
    for stream in streams:
        bound.backend.stream = stream
        bound.b(_arr((4, 5, 3), 1 << 16), [1.0, 2.0, 3.0])
    assert [c[3] for c in bound.driver.calls] == [0x77, 0x55, 0x77]
    assert seen == [0x77, 0x55, 0x77] and bound.generic == []


def test_the_driver_launch_without_ex_when_switched_off(monkeypatch):
    """``rawlaunch.LAUNCH_EX = False``: a replay launch bound then calls ``cuLaunchKernel``
    though the driver has ``cuLaunchKernelEx``."""
    template = rawlaunch.build(0x99, (ARR3, ARR3, types.int64))
    driver = _FakeDriverEx(template.layout)
    monkeypatch.setattr(rawlaunch, "_libcuda", driver)
    monkeypatch.setattr(rawlaunch, "LAUNCH_EX", False)
    src, dst = _arr((4, 5, 3), 4096), _arr((4, 5, 3), 8192)
    b = RawBound2D(_FakeBackend(), None, template, lambda handle: dst, 0, 0xC7, (7, 1, 1),
                   (128, 1, 1), (src, dst, 5), src, 0)
    b(src, [])
    assert len(driver.calls) == 1 and driver.functions == []


def test_a_table_per_call_is_written_into_the_first_fixed_slot(bound):
    """``table``: the first fixed argument's address rewritten per call (a host-built table
    uploaded per call, ``gather.TableLaunch``); a call without one leaves the last one."""
    src = _arr((4, 5, 3), 1 << 16)
    table = _arr((2, 3, 256), 1 << 12)
    dst = bound.b(src, [0.25, -3.5, 7.0], table)
    assert bound.driver.calls[0][4] == bound.template.unpack((src, dst, table, 0.25, -3.5, 7.0))
    table2 = _arr((2, 3, 256), 1 << 13)
    dst2 = bound.b(src, [0.25, -3.5, 7.0], table2)
    assert bound.driver.calls[1][4] == bound.template.unpack(
        (src, dst2, table2, 0.25, -3.5, 7.0))
    assert bound.generic == []


def test_a_table_without_an_array_slot_goes_through_the_general_launch(monkeypatch):
    template = rawlaunch.build(0x99, (ARR3, ARR3, types.int64))
    driver = _FakeDriver(template.layout)
    monkeypatch.setattr(rawlaunch, "_libcuda", driver)
    src, dst = _arr((4, 5, 3), 4096), _arr((4, 5, 3), 8192)
    seen = []
    b = RawBound2D(_FakeBackend(), lambda s, p, t: seen.append(t) or "generic", template,
                   lambda handle: dst, 0, 0xC7, (7, 1, 1), (128, 1, 1), (src, dst, 5), src, 0)
    table = _arr((2, 3, 256), 1 << 12)
    assert b(src, [], table) == "generic" and seen == [table] and driver.calls == []


class _CopyDriver(_FakeDriver):
    """``cuMemcpyDtoDAsync`` recording (dst, src, bytes, stream)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.copies = []

    def cuMemcpyDtoDAsync_v2(self, dst, src, nbytes, stream):  # noqa: N802
        self.copies.append((dst, src, nbytes, stream))
        return 0


@pytest.fixture
def copier(monkeypatch):
    from millipyde.backend.cuda_bound import RawCopy

    driver = _CopyDriver()
    monkeypatch.setattr(rawlaunch, "_libcuda", driver)
    backend = _FakeBackend()
    ptrs = iter(range(1 << 30, 1 << 31, 1 << 20))
    made = []

    def alloc(handle):
        made.append(handle)
        return _arr((4, 5, 3), next(ptrs))

    return SimpleNamespace(c=RawCopy(backend, alloc, 0, 0xC7, _arr((4, 5, 3), 4096)),
                           driver=driver, backend=backend, made=made)


def test_a_bound_copy_is_one_driver_copy_on_the_launch_stream(copier):
    src = _arr((4, 5, 3), 1 << 16)
    dst = copier.c(src)
    assert copier.driver.copies == [(1 << 30, 1 << 16, 60, 0x77)]
    assert int(dst.gpu_data.device_pointer) == 1 << 30 and copier.made == [0x77]


def test_a_bound_copy_refuses_what_it_does_not_cover(copier, monkeypatch):
    assert copier.c(_arr((4, 5, 3), 1 << 16, strides=(30, 6, 2))) is None
    assert copier.c(_arr((5, 4, 3), 1 << 16)) is None
    assert copier.c(_arr((4, 5, 3), 1 << 16, dtype=np.int8)) is None
    monkeypatch.setattr(launcher, "DIRECT", False)
    assert copier.c(_arr((4, 5, 3), 1 << 16)) is None
    monkeypatch.setattr(launcher, "DIRECT", True)
    copier.driver.context = 0xD8  # another device's context is current
    assert copier.c(_arr((4, 5, 3), 1 << 16)) is None
    copier.driver.context = 0xC7
    copier.backend.stream = None
    assert copier.c(_arr((4, 5, 3), 1 << 16)) is None
    copier.backend.stream = SimpleNamespace(handle=SimpleNamespace(value=0x77))

    def oom(handle):
        raise MemoryError("pool exhausted")

    copier.c.alloc = oom
    assert copier.c(_arr((4, 5, 3), 1 << 16)) is None
    assert copier.driver.copies == []


def test_a_repeated_tuple_of_scalars_is_packed_once(bound):
    packs = []

    class Counting:
        def __init__(self, s):
            self.s = s

        def pack_into(self, *a):
            packs.append(a[2:])
            return self.s.pack_into(*a)

    bound.b.scalars = Counting(bound.b.scalars)
    src = _arr((4, 5, 3), 1 << 16)
    p, q, mutable = (0.25, -3.5, 7.0), (1.0, 2.0, 3.0), [4.0, 5.0, 6.0]
    dsts = [bound.b(src, p), bound.b(src, p), bound.b(src, q), bound.b(src, p),
            bound.b(src, mutable)]
    mutable[0] = 9.0  # (a list is packed on every call: it may have changed in place)
    dsts.append(bound.b(src, mutable))
    assert packs == [p, q, p, (4.0, 5.0, 6.0), (9.0, 5.0, 6.0)]
    for (_, _, _, _, slots), dst, s in zip(bound.driver.calls, dsts,
                                           [p, p, q, p, (4.0, 5.0, 6.0), (9.0, 5.0, 6.0)],
                                           strict=True):
        assert slots == bound.template.unpack((src, dst, bound.table, *s))
