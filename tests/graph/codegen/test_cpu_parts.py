"""The cpu target's kernels run serial in parts (``codegen.cpu_parts``, ``backend/cpu.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.backend import cpu as cpu_backend
from millipyde.graph.codegen.cpu_parts import split_loops
from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.target import HEADER

KERNEL = """
# a comment kept
@njit(parallel=True, nogil=True, cache=True, error_model='numpy')
def kernel(src, dst, k):
    n = src.shape[0]
    for i in prange(min(n, dst.shape[0])):
        # rows of their own
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j] * k + i


@njit(cache=True)
def host(x):
    return x + 1
"""


def test_split_source_is_serial_with_parts() -> None:
    text = split_loops(KERNEL)
    assert "parallel" not in text and "prange" not in text
    assert "def kernel(src, dst, k, part_=0, parts_=1):" in text
    assert ("for i in range(part_ * (min(n, dst.shape[0])) // parts_, "
            "(part_ + 1) * (min(n, dst.shape[0])) // parts_):") in text
    assert "# a comment kept" in text and "# rows of their own" in text
    assert "def host(x):" in text  # not a parallel kernel: as it was
    assert split_loops(text) == text


@pytest.mark.parametrize("body,why", [
    ("    for i in prange(4):\n        x[i] = 1\n    for j in prange(4):\n        x[j] += 1\n",
     "2 prange loops"),
    ("    for k in range(3):\n        for i in prange(4):\n            x[i] = k\n",
     "not a loop of the function's body"),
    ("    for i in prange(4):\n        x[i] = 1\n    x[0] = x[1] + x[2]\n",
     "statements after its prange loop"),
])
def test_unsplittable_kernels_raise_naming_them(body: str, why: str) -> None:
    src = "@njit(parallel=True, cache=True)\ndef bad(x):\n" + body
    with pytest.raises(ValueError, match=f"cpu kernel bad: .*{why}"):
        split_loops(src)


def test_parts_together_equal_one_call_and_the_backend_splits_large_launches() -> None:
    fn = load(HEADER["cpu"] + KERNEL, "cpu").kernel
    assert cpu_backend.split_kernel(fn) and not cpu_backend.split_kernel(np.add)
    src = np.arange(7 * 5, dtype=np.float64).reshape(7, 5)
    whole = np.zeros_like(src)
    fn(src, whole, 2.0, 0, 1)
    assert np.array_equal(whole, src * 2.0 + np.arange(7)[:, None])
    parts = np.full_like(src, -1.0)
    for k in range(3):  # 7 rows in three parts of 2, 2 and 3 rows
        fn(src, parts, 2.0, k, 3)
    assert np.array_equal(parts, whole)
    backend = cpu_backend.CpuBackend()
    big = np.ones((cpu_backend.PARALLEL_MIN_ITEMS // 4 + 1, 4))
    out = np.zeros_like(big)
    backend.launch_2d(fn, big.shape[0], big.shape[1], 0, big, out, 3.0)
    assert np.array_equal(out, big * 3.0 + np.arange(big.shape[0])[:, None])
