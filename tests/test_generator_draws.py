"""Vectorised counter-based draws (``random.uniform01_array``) equal the scalar ones bit for bit."""

from __future__ import annotations

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
