"""The cached launch path (``backend/launcher.py``): what it takes, passes and runs."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.backend import launcher


def test_kind_key_takes_scalars_and_refuses_host_arrays_and_huge_ints():
    key = launcher.kind_key((True, 3, 2.5, np.float64(1.0), np.int32(4)))
    assert key is not None
    # the kinds, not the values, decide the key (the compiled signature)
    assert launcher.kind_key((False, -9, 0.0, np.float64(7.0), np.int32(-1))) == key
    for other in ((True, 3.0, 2.5, np.float64(1.0), np.int32(4)),
                  (True, 3, 2.5, np.float32(1.0), np.int32(4)),
                  (True, 3, 2.5, np.float64(1.0)),
                  (1, 3, 2.5, np.float64(1.0), np.int32(4))):
        assert launcher.kind_key(other) != key
    # the dispatcher copies host arrays over; the cached path has no such step
    assert launcher.kind_key((np.zeros(3), 1.0)) is None
    # numba would type 2**63 as uint64, not as the int64 the cached signature has
    assert launcher.kind_key((2**63,)) is None
    assert launcher.kind_key((-(2**63),)) == launcher.kind_key((5,)) is not None
    assert launcher.kind_key(("text",)) is None


def test_packers_follow_numba_cudas_argument_abi():
    from numba.core import types

    out: list = []
    launcher._packer(types.float64)(out, 0.5)
    launcher._packer(types.int32)(out, -7)
    launcher._packer(types.boolean)(out, np.bool_(True))
    launcher._packer(types.float32)(out, 1.5)
    assert [type(v) for v in out] == [ctypes.c_double, ctypes.c_int32, bool, ctypes.c_float]
    assert [getattr(v, "value", v) for v in out] == [0.5, -7, True, 1.5]
    # layouts other than C keep their strides in the kernel: the dispatcher handles those
    assert launcher._packer(types.Array(types.uint8, 2, "A")) is None
    assert launcher._packer(types.Array(types.uint8, 2, "C")) is launcher._array_packer
    assert launcher._packer(types.UniTuple(types.float64, 2)) is None


def _values(args: list) -> list:
    """ctypes values by type and value; Python and NumPy scalars by value."""
    return [("c", type(v).__name__, v.value) if isinstance(v, ctypes._SimpleCData)
            else ("py", v.item() if isinstance(v, np.generic) else v) for v in args]


def _chain(img: mp.gpuimage) -> None:
    img.gaussian(1.5)
    img.adjust_gamma(1.7)
    img.fliplr()
    img.rotate(30)
    img.rgb2grey()


@pytest.mark.gpu
def test_cached_launches_pass_what_the_dispatcher_passes():
    """Every kernel of a fused and an unfused chain, after its cached path exists."""
    from millipyde.graph.plan import schedule

    seen = []
    real = runtime._launch

    def spy(kernel, device, args, *config):
        real(kernel, device, args, *config)
        seen.append((kernel, device, args))

    rng = np.random.default_rng(3)
    host = rng.integers(0, 256, (96, 80, 4), dtype=np.uint8)
    runtime._launch = spy
    try:
        for fuse in (True, False):
            for _ in range(2):  # the second pass launches through the cached path
                x = mp.gpuimage(host)
                _chain(x)
                with schedule.fusion(fuse):
                    np.asarray(x)
    finally:
        runtime._launch = real
    compared = 0
    for kernel, device, args in seen:
        packed = launcher.packed_args(kernel, device, args)
        if packed is None:
            continue
        with runtime.on_device(device):
            assert _values(packed) == _values(launcher.prepared_args(kernel, args)), kernel
        compared += 1
    assert compared >= len(seen) // 2 > 0


@pytest.mark.gpu
def test_cached_and_dispatched_launches_give_equal_images(monkeypatch):
    from millipyde.graph.plan import schedule

    served = []
    real = launcher.launch

    def counting(*a, **kw):
        served.append(real(*a, **kw))
        return served[-1]

    monkeypatch.setattr(launcher, "launch", counting)
    host = np.random.default_rng(4).integers(0, 256, (130, 170, 4), dtype=np.uint8)
    outs = {}
    for enabled in (False, True, True):
        launcher.ENABLED = enabled
        served.clear()
        try:
            for fuse in (True, False):
                x = mp.gpuimage(host)
                _chain(x)
                with schedule.fusion(fuse):
                    outs.setdefault((enabled, fuse), []).append(np.asarray(x))
        finally:
            launcher.ENABLED = True
    # the last round's launches went through the cached path (else this compares nothing)
    assert served and all(served), served
    for fuse in (True, False):
        base = outs[(False, fuse)][0]
        for out in outs[(True, fuse)]:
            np.testing.assert_array_equal(out, base)


@pytest.mark.gpu
def test_a_strided_argument_goes_through_the_dispatcher():
    from numba import cuda

    @cuda.jit
    def double(a, out):
        i = cuda.grid(1)
        if i < a.shape[0]:
            out[i] = 2 * a[i]

    base = runtime.from_host(np.arange(20, dtype=np.float64), 0)
    strided = base[::2]
    out = runtime.empty((10,), np.float64, 0)
    for _ in range(3):
        runtime.launch_blocks(double, 1, 32, 0, strided, out)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(0, 20, 2))
    assert launcher.packed_args(double, 0, (strided, out)) is None
    contiguous = runtime.from_host(np.arange(10, dtype=np.float64), 0)
    for _ in range(2):
        runtime.launch_blocks(double, 1, 32, 0, contiguous, out)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(10))
    assert launcher.packed_args(double, 0, (contiguous, out)) is not None


def _plain(v) -> object:
    v = v.value if isinstance(v, ctypes._SimpleCData) else v
    v = v.item() if isinstance(v, np.generic) else v
    return 0 if v is None else (int(v) if not isinstance(v, (bool, float, int)) else v)


@pytest.mark.gpu
def test_driver_level_launches_pass_what_the_dispatcher_passes():
    """Slot by slot, the packed parameter block equals numba-cuda's own arguments."""
    seen = []
    real = runtime._launch

    def spy(kernel, device, args, *config):
        real(kernel, device, args, *config)
        seen.append((kernel, device, args))

    host = np.random.default_rng(5).integers(0, 256, (64, 72, 3), dtype=np.uint8)
    runtime._launch = spy
    try:
        for _ in range(2):
            x = mp.gpuimage(host)
            _chain(x)
            np.asarray(x)
    finally:
        runtime._launch = real
    compared = 0
    for kernel, device, args in seen:
        raw = launcher.raw_args(kernel, device, args)
        if raw is None:
            continue
        with runtime.on_device(device):
            want = [_plain(v) for v in launcher.prepared_args(kernel, args)]
        assert [_plain(v) for v in raw] == want, kernel
        compared += 1
    assert compared >= len(seen) // 2 > 0


@pytest.mark.gpu
def test_direct_and_cuda_core_launches_give_equal_images():
    host = np.random.default_rng(6).integers(0, 256, (90, 110, 3), dtype=np.uint8)
    outs = []
    for direct in (False, True, True):
        launcher.DIRECT = direct
        try:
            x = mp.gpuimage(host)
            _chain(x)
            outs.append(np.asarray(x))
        finally:
            launcher.DIRECT = True
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
