"""The block codec passes (``jpeg``: samples, coefficients, decode, colour) and the weighted
sums (``AugMix``'s mix, per image and over a batch) compile to PTX for sm_90 without a
GPU."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.graph.codegen.codec import codec_source
from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.weighted import weighted_batch_source, weighted_source

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


def test_batched_weighted_sum_compiles() -> None:
    # the batch's mix (``batch_arena._run_fork``'s arguments: flat uint8 source and chains,
    # int64 rows, float64 weights, the (m, h, w, c) output, channels, integer flag, full)
    mod = load(weighted_batch_source("cuda", False), "cuda")
    flat, rows, i = arr(np.uint8, 1), arr(np.int64, 2), types.int64
    ptx = ptx_of(mod.mix.py_func, (flat, rows, flat, rows, arr(np.float64, 2),
                                   arr(np.uint8, 4), i, i, types.float64))
    assert ".entry" in ptx
