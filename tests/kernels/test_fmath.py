"""``kernels.fmath``: ``floorf`` (``math.floor`` as a float) in Python, on the cpu target and in
PTX; ``rintf`` (``numpy.rint``) on the cpu target."""

from __future__ import annotations

import math
import platform

import pytest

from millipyde.kernels.fmath import floorf

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


def test_cpu_rint_clip_gives_the_adds_values_and_zero_sign() -> None:
    """The cpu target's ``_rint_clip`` (``target.RINT_CLIP_CPU``, ``rintf``) against the
    shared text's (the adds of 2**52) run as plain Python: the same floats, and +0.0 where
    ``numpy.rint`` alone would give -0.0."""
    import numpy as np

    from millipyde.graph.codegen import target
    from millipyde.graph.codegen.loader import load

    cpu = load(target.HEADER["cpu"] + target.RINT_CLIP, "cpu")._rint_clip
    scope: dict = {"_dev": lambda f: f}
    exec(target.RINT_CLIP, scope)
    plain = scope["_rint_clip"]
    values = [-0.0, -0.25, -0.5, -0.75, 0.5, 1.5, 2.5, -1.5, 254.5, 255.5, 2.0**52 - 0.5,
              -(2.0**52) + 0.5, 2.0**53 + 2.0, -(2.0**53), 1e300, -1e300]
    for full in (255.0, 127.0, 2.0**63, 2.0**64):
        for v in values:
            got, want = cpu(v, full), plain(v, full)
            assert got == want and np.signbit(got) == np.signbit(want), (v, full, got, want)
