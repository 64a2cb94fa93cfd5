"""The block codec passes (``jpeg``: samples, coefficients, decode, colour) and the weighted
sum (``AugMix``'s mix) compile to PTX for sm_90 without a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.graph.codegen.codec import codec_source
from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.weighted import weighted_source

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx


def arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def test_codec_passes_compile() -> None:
    mod = load(codec_source("cuda", False), "cuda")
    img, f3, f2, lut = arr(np.uint8, 3), arr(np.float64, 3), arr(np.float64, 2), \
        arr(np.uint8, 3)
    i = types.int64
    ptxs = [
        ptx_of(mod.samples.py_func, (img, f3, i, i, i, i, i, i, lut)),
        ptx_of(mod.coefficients.py_func, (f3, f3, f2, f2, i, i, i)),
        ptx_of(mod.decode.py_func, (f3, f3, f2, i, i, i)),
        ptx_of(mod.colour.py_func, (img, f3, img, i, i, i, i, lut)),
    ]
    assert all(".entry" in p for p in ptxs)


def test_weighted_sum_compiles() -> None:
    mod = load(weighted_source("cuda", False), "cuda")
    img, f3 = arr(np.uint8, 3), arr(np.float64, 3)
    acc = ptx_of(mod.accumulate.py_func, (f3, img, types.float64, types.boolean))
    fin = ptx_of(mod.finish.py_func, (f3, img, img, types.int64, types.boolean, types.float64))
    assert ".entry" in acc and ".entry" in fin
