"""Lazy NumPy arithmetic: NumPy's results, dtypes and broadcasting; fused == unfused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import millipyde as mp
from millipyde.graph.plan import schedule

cudasim_ok = pytest.mark.cudasim_ok

BINARY = [np.add, np.subtract, np.multiply, np.true_divide, np.minimum, np.maximum]
UNARY = [np.absolute, np.negative, np.exp, np.sqrt]


@st.composite
def programs(draw):
    shape = draw(st.sampled_from([(5,), (3, 4), (2, 3, 4)]))
    other = draw(st.sampled_from([shape, shape[-1:], (1,) * len(shape), ()]))
    steps = draw(st.lists(st.tuples(st.sampled_from(range(len(BINARY) + len(UNARY))),
                                    st.floats(-2, 2), st.booleans()), min_size=1, max_size=6))
    return shape, other, steps


def _evaluate(steps, x, y):
    v = x
    for code, c, use_y in steps:
        if code < len(BINARY):
            v = BINARY[code](v, y if use_y else c)
        else:
            fn = UNARY[code - len(BINARY)]
            if fn is np.exp:
                v = fn(np.clip(v, -5, 5))
            elif fn is np.sqrt:
                v = fn(np.absolute(v))
            else:
                v = fn(v)
    return v


@cudasim_ok
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_expressions_match_numpy_fused_and_unfused(prog) -> None:
    shape, other, steps = prog
    rng = np.random.default_rng(len(steps))
    x0, y0 = rng.random(shape) + 0.5, rng.random(other) + 0.5
    expected = _evaluate(steps, x0, y0)
    fused = _evaluate(steps, mp.gpuarray(x0), mp.gpuarray(y0))
    unfused = _evaluate(steps, mp.gpuarray(x0), mp.gpuarray(y0))
    assert isinstance(fused, mp.gpuarray) and fused.shape == np.shape(expected)
    assert fused.dtype == np.asarray(expected).dtype
    assert len(fused.explain().kernels) == 1
    with schedule.fusion(False):
        b = np.asarray(unfused)
    np.testing.assert_allclose(np.asarray(fused), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b, expected, rtol=1e-12, atol=1e-12)


@cudasim_ok
def test_integer_promotion_and_true_division_follow_numpy() -> None:
    a0 = np.arange(12, dtype=np.int32).reshape(3, 4)
    a = mp.gpuarray(a0)
    for got, want in ((a * 3 + 1, a0 * 3 + 1), (a / 4, a0 / 4), (a * 2.5, a0 * 2.5),
                      (a > 5, a0 > 5), (np.where(a > 5, a, -1), np.where(a0 > 5, a0, -1)),
                      (np.clip(a, 2, 9), np.clip(a0, 2, 9))):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(np.asarray(got), want)


@cudasim_ok
# integer arithmetic wraps like NumPy's arrays; the simulator runs kernels on NumPy scalars,
# which warn where compiled code silently wraps
@pytest.mark.filterwarnings("ignore:overflow encountered in scalar:RuntimeWarning")
@pytest.mark.parametrize("name", ["sum", "mean", "min", "max"])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint8])
def test_reductions_are_one_map_reduce(name, dtype) -> None:
    x0 = (np.random.default_rng(3).random((37, 29)) * 200).astype(dtype)
    x = mp.gpuarray(x0)
    r = getattr(np, name)(x * 2)
    assert isinstance(r, mp.gpuarray) and r.shape == ()
    assert len(r.explain().kernels) == 1
    want = getattr(np, name)(x0 * 2)
    assert r.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(r), want, rtol=1e-12)
    assert getattr(x, name)().dtype == getattr(x0, name)().dtype


def test_reduction_with_axis_falls_back_to_numpy() -> None:
    x0 = np.arange(12.0).reshape(3, 4)
    out = np.sum(mp.gpuarray(x0), axis=0)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, x0.sum(axis=0))


def test_nan_propagates_through_min_and_minimum_like_numpy() -> None:
    x0 = np.array([1.0, np.nan, 3.0])
    x = mp.gpuarray(x0)
    assert np.isnan(float(np.min(x)))
    np.testing.assert_array_equal(np.asarray(np.minimum(x, 2.0)), np.minimum(x0, 2.0))
