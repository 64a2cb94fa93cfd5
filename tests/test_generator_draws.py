"""Vectorised counter-based draws (``random.uniform01_array``) equal the scalar ones bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest

from millipyde import random as mprandom


@pytest.mark.parametrize("seed", [0, 1, -7, 2**63 + 5, 123456789])
@pytest.mark.parametrize("op", [0, 3, 1 << 40])
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_uniform01_array_equals_scalar(seed: int, op: int, k: int) -> None:
    samples = np.array([0, 1, 2, 63, 64, 1000, 2**40, 2**62 + 3], dtype=np.int64)
    got = mprandom.uniform01_array(seed, samples, op, k)
    want = [mprandom.uniform01(seed, int(s), op, k) for s in samples]
    assert got.dtype == np.float64
    assert got.tolist() == want  # exact equality of every float


def test_uniform01_array_negative_and_unsigned_samples() -> None:
    for s in (np.array([-1, -5]), np.array([3, 9], dtype=np.uint64)):
        got = mprandom.uniform01_array(4, s, 1, 0)
        assert got.tolist() == [mprandom.uniform01(4, int(v), 1, 0) for v in s]


def test_gate_array_equals_gate() -> None:
    samples = np.arange(500)
    for p in (None, 0.2, 0.5, 0.9):
        got = mprandom.gate_array(11, samples, 6, p)
        assert got.tolist() == [mprandom.gate(11, int(s), 6, p) for s in samples]
    # a fair coin comes up both ways over 500 samples
    assert 0 < mprandom.gate_array(11, samples, 6, 0.5).sum() < 500


@pytest.mark.parametrize("seed", [0, -7, 2**63 + 5])
def test_uniforms_are_the_draws_one_by_one(seed: int) -> None:
    """``uniforms`` (an op's several draws from one key prefix) is ``uniform01`` per draw."""
    for sample, op, n in ((0, 0, 3), (2**40, 5, 1), (-3, 1 << 40, 7), (9, 2, 0)):
        assert mprandom.uniforms(seed, sample, op, n) == \
            [mprandom.uniform01(seed, sample, op, t) for t in range(n)]


def test_sample_indices_reserve_a_block() -> None:
    """``sample_indices(n)``: the indices ``n`` calls of ``next_sample_index`` would give."""
    first = mprandom.sample_indices(5)
    assert mprandom.next_sample_index() == first + 5
    assert mprandom.sample_indices(0) == first + 6 == mprandom.next_sample_index()


@pytest.mark.parametrize("value", [
    [0.5, 1.5], (0.5, 1.5), [1.5, 1.5], [-0.0, 0.0], [1, 2], [1.0, 2], [True, 2.0], [2.0, 1.0],
    [float("nan"), 1.0], [0.0, float("inf")], [0.5], (0.5, 1.5, 2.5), "ab", np.array([0.5, 1.0]),
    [np.float64(0.25), 0.5], [np.float32(0.25), 0.5], 3.0])
def test_number_range_takes_what_its_checks_take(value) -> None:
    """``checks.number_range``'s path for pairs of Python floats returns what its checks
    return, and everything else still meets the checks (their errors name the argument)."""
    from millipyde import checks

    def checked(v):  # the checks alone (the fast path given a pair it does not take)
        class Seq(list):
            pass

        return checks.number_range(Seq(v) if type(v) in (list, tuple) else v, "r")

    try:
        want = checked(value)
    except ValueError as err:
        assert "r" in str(err)
        with pytest.raises(ValueError, match=re.escape(str(err))):
            checks.number_range(value, "r")
        return
    got = checks.number_range(value, "r")
    assert got == want and [type(v) for v in got] == [type(v) for v in want]
    assert [np.float64(v).tobytes() for v in got] == [np.float64(v).tobytes() for v in want]
