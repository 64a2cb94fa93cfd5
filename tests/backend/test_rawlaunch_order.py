"""The driver-level parameter block packs arrays-then-scalars launches (every generated kernel's
order) in one slice, and any other order argument by argument: the same slots either way."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np
import pytest
from numba.core import types

from millipyde.backend import rawlaunch


def _template(argument_types):
    fmt, kinds, slots = "<", [], 0
    for ty in argument_types:
        codes, ndim = rawlaunch._codes(ty)
        for c in codes:
            fmt += c + "x" * (8 - struct.calcsize("<" + c))
        slots += len(codes)
        kinds.append(ndim)
    return rawlaunch.Template(0, tuple(kinds), fmt, slots)


ARR = types.Array(types.uint8, 2, "C")


def _arr(ptr: int) -> SimpleNamespace:
    return SimpleNamespace(size=6, dtype=np.dtype(np.uint8), shape=(2, 3), strides=(3, 1),
                           gpu_data=SimpleNamespace(device_pointer=ptr))


def _slots(ptr: int) -> tuple:
    return (0, 0, 6, 1, ptr, 2, 3, 3, 1)


def test_arrays_first_then_scalars():
    t = _template((ARR, ARR, types.float64, types.float64, types.boolean))
    assert t.lead == 2
    got = t.unpack((_arr(64), _arr(128), 0.5, -2.25, True))
    assert got == _slots(64) + _slots(128) + (0.5, -2.25, True)


def test_a_scalar_between_arrays_packs_argument_by_argument():
    t = _template((ARR, types.float64, ARR, types.int32))
    assert t.lead == -1
    got = t.unpack((_arr(64), 1.5, _arr(256), -3))
    assert got == _slots(64) + (1.5,) + _slots(256) + (-3,)


@pytest.mark.parametrize("kinds", [(ARR, types.float64), (ARR, types.float64, ARR)])
def test_a_wrong_argument_count_is_refused(kinds):
    t = _template(kinds)
    with pytest.raises(ValueError):
        t.values((_arr(64),))
