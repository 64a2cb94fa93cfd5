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


def test_split_bounds_compile_to_ptx() -> None:
    partial, finish = batch_bounds.split_kernels("cuda", threads=256)
    ptx = ptx_of(partial.py_func, (_arr(np.uint8, 2), _arr(np.int64, 1),
                                   _arr(np.float64, 1), types.int64))
    assert "bar.sync" in ptx and "%ctaid.x" in ptx
    ptx = ptx_of(finish.py_func, (_arr(np.float64, 1), _arr(np.float64, 2), types.int64,
                                  types.int64))
    assert "bar.sync" in ptx
    with pytest.raises(ValueError, match="GPU"):
        batch_bounds.split_kernels("cpu")


def test_parts_spread_a_member_over_the_sms() -> None:
    assert batch_bounds.parts_of(512 * 512 * 3, 256) == 96
    assert batch_bounds.parts_of(100, 256) == 1
    assert batch_bounds.parts_of(2**30, 256) == batch_bounds.PARTS_MAX["gpu"]
    assert batch_bounds.parts_of(2**30, 32, sim=True) == batch_bounds.PARTS_MAX["sim"]
