"""The window stencil passes (box_blur, gaussian_blur, adjust_sharpness, median_blur: taps per
axis, border modes, an op's finish, medians; motion_blur's plane of taps) compile to PTX for
sm_90 without a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.stencil import window_source

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx


def arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


# (pre, post, finish, dtype): uint8 with tables on both sides and sharpness's finish; float64
CASES = [(True, True, np.uint8), (False, False, np.float64)]


@pytest.mark.parametrize("pre,post,dtype", CASES, ids=["uint8-tables", "float"])
def test_linear_window_passes_compile(pre, post, dtype) -> None:
    mod = load(window_source("cuda", False, pre, post), "cuda")
    img, lut, f64 = arr(dtype, 3), arr(np.uint8, 3), arr(np.float64, 1)
    rows = ptx_of(mod.rows.py_func, (img, arr(np.float64, 3), f64, types.int64, types.int64,
                                     lut))
    cols = ptx_of(mod.cols.py_func, (img, arr(np.float64, 3), img, f64, types.int64,
                                     types.boolean, types.float64, types.int64, lut))
    assert ".entry" in rows and ".entry" in cols


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_median_window_compiles_with_a_local_array(dtype) -> None:
    mod = load(window_source("cuda", False, dtype == np.uint8, False, 5), "cuda")
    img = arr(dtype, 3)
    ptx = ptx_of(mod.median.py_func, (img, img, types.int64, types.boolean, types.float64,
                                      types.int64, arr(np.uint8, 3)))
    assert ".entry" in ptx and ".local" in ptx


def test_plane_window_pass_compiles() -> None:
    # motion_blur's one pass over a (k, k) plane of taps, uint8 with tables on both sides
    mod = load(window_source("cuda", False, True, True, plane=True), "cuda")
    img = arr(np.uint8, 3)
    ptx = ptx_of(mod.plane.py_func, (img, img, arr(np.float64, 1), types.int64, types.int64,
                                     types.boolean, types.float64, types.int64,
                                     arr(np.uint8, 3)))
    assert ".entry" in ptx
