"""The driver-level launch's parameter block (``backend/rawlaunch.py``), without a device."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from numba.core import types

from millipyde.backend import rawlaunch


def _layout(argument_types):
    return rawlaunch.build(0, tuple(argument_types))


def test_each_flattened_argument_takes_one_8_byte_slot_in_numba_cudas_order():
    t = _layout((types.Array(types.uint8, 3, "C"), types.float64, types.float32,
                 types.boolean, types.int32, types.uint8))
    assert t.layout.size == 8 * (5 + 6 + 5)
    arr = SimpleNamespace(size=24, dtype=np.dtype(np.uint8), shape=(2, 3, 4),
                          strides=(12, 4, 1), gpu_data=SimpleNamespace(device_pointer=4096))
    got = t.unpack((arr, 0.1, 0.1, np.bool_(True), -5, 200))
    assert got == (0, 0, 24, 1, 4096, 2, 3, 4, 12, 4, 1, 0.1, np.float32(0.1).item(), True,
                   -5, 200)


def test_strided_arrays_and_unknown_types_have_no_template():
    assert rawlaunch._codes(types.Array(types.uint8, 2, "A")) is None
    assert rawlaunch._codes(types.UniTuple(types.float64, 2)) is None


@pytest.mark.parametrize("value, want", [(7, (7, 1, 1)), ((3, 4), (3, 4, 1)),
                                         ([2, 3, 4], (2, 3, 4)), (np.int64(5), (5, 1, 1))])
def test_grids_and_blocks_become_three_ints(value, want):
    assert rawlaunch.dims(value) == want


# The block packs arrays-then-scalars launches (every generated kernel's order) in one slice,
# and any other order argument by argument: the same slots either way.

ARR = types.Array(types.uint8, 2, "C")


def _arr(ptr: int) -> SimpleNamespace:
    return SimpleNamespace(size=6, dtype=np.dtype(np.uint8), shape=(2, 3), strides=(3, 1),
                           gpu_data=SimpleNamespace(device_pointer=ptr))


def _slots(ptr: int) -> tuple:
    return (0, 0, 6, 1, ptr, 2, 3, 3, 1)


def test_arrays_first_then_scalars():
    t = _layout((ARR, ARR, types.float64, types.float64, types.boolean))
    assert t.lead == 2
    got = t.unpack((_arr(64), _arr(128), 0.5, -2.25, True))
    assert got == _slots(64) + _slots(128) + (0.5, -2.25, True)


def test_a_scalar_between_arrays_packs_argument_by_argument():
    t = _layout((ARR, types.float64, ARR, types.int32))
    assert t.lead == -1
    got = t.unpack((_arr(64), 1.5, _arr(256), -3))
    assert got == _slots(64) + (1.5,) + _slots(256) + (-3,)


@pytest.mark.parametrize("kinds", [(ARR, types.float64), (ARR, types.float64, ARR)])
def test_a_wrong_argument_count_is_refused(kinds):
    t = _layout(kinds)
    with pytest.raises(ValueError):
        t.values((_arr(64),))


def test_the_current_context_is_read_through_the_driver(monkeypatch):
    class Driver:
        handle = 0xC0FFEE

        def cuCtxGetCurrent(self, out):  # noqa: N802
            out._obj.value = self.handle
            return 0

    driver = Driver()
    monkeypatch.setattr(rawlaunch, "_libcuda", driver)
    assert rawlaunch.current_context() == 0xC0FFEE
    driver.handle = None  # no context current: NULL
    assert rawlaunch.current_context() == 0
    monkeypatch.setattr(rawlaunch, "_libcuda", False)  # no driver library here
    assert rawlaunch.current_context() is None


def test_the_launch_configuration_is_laid_out_as_cuda_h_says():
    """``CUlaunchConfig`` (cuda.h, CUDA 12 and 13): seven unsigned ints, the stream, the
    attribute pointer, their count; offsets as a C compiler lays them out (LP64)."""
    import ctypes

    from millipyde.backend.rawlaunch import LaunchConfig

    offsets = [getattr(LaunchConfig, name).offset for name, _ in LaunchConfig._fields_]
    assert offsets == [0, 4, 8, 12, 16, 20, 24, 32, 40, 48]
    assert ctypes.sizeof(LaunchConfig) == 56
    c = LaunchConfig(3, 2, 1, 32, 8, 1, 4096, 0x77, None, 0)
    assert (c.gridDimX, c.blockDimY, c.sharedMemBytes, c.hStream) == (3, 8, 4096, 0x77)
