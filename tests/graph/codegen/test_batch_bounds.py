"""The batched warp-clip bounds kernel (``codegen.batch_bounds``) compiles for CUDA (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.graph.codegen import batch_bounds

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx


def _arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


@pytest.mark.parametrize("dtype,threads", [(np.uint8, 1024), (np.float32, 256),
                                           (np.float64, 1024), (np.int16, 256)])
def test_bounds_kernel_compiles_to_ptx(dtype, threads: int) -> None:
    kernel = batch_bounds.bounds_kernel("cuda", threads=threads)
    argtys = (_arr(dtype, 2), _arr(np.int64, 1), _arr(np.float64, 2), types.int64)
    ptx = ptx_of(kernel.py_func, argtys)
    assert ".entry" in ptx
    assert "bar.sync" in ptx  # the block's tree reduction in shared memory
    assert "%ctaid.x" in ptx  # one block per member
