"""``ops.fmath.floorf``: ``math.floor`` as a float in Python, on the cpu target and in PTX."""

from __future__ import annotations

import math
import platform

import pytest

from millipyde.ops.fmath import floorf

VALUES = [0.0, 0.5, 1.0, 254.999, 255.0, -0.5, -1.0, -3.25, 1e-300, 2.0**52 + 1.0,
          -(2.0**52) - 1.0, 6.0 - 2.0**-50, 4503599627370495.5]


@pytest.mark.cudasim_ok
def test_python_is_math_floor_as_float() -> None:
    for v in VALUES:
        got = floorf(v)
        assert isinstance(got, float) and got == math.floor(v), v


def test_compiled_cpu_matches_and_stays_float() -> None:
    from numba import njit

    @njit
    def frac(x):
        return x - floorf(x)

    for v in VALUES:
        assert frac(v) == v - math.floor(v), v
    assert math.isnan(frac(math.nan))
    if platform.machine() in ("x86_64", "AMD64"):
        asm = next(iter(frac.inspect_asm().values()))
        # the floor is roundsd; no conversion to an integer and back
        assert "cvttsd2si" not in asm and "cvtsi2sd" not in asm


def test_ptx_is_one_rounding() -> None:
    from numba import cuda, float64
    from ptx_compile import ptx_of

    dev = cuda.jit(device=True)(lambda x: x - floorf(x))

    def kernel(a):
        a[0] = dev(a[0])

    ptx = ptx_of(kernel, (float64[:],))
    assert "cvt.rmi.f64.f64" in ptx
    assert "cvt.rzi.s64.f64" not in ptx
