"""The kernels of issue 31's ops compile to PTX for sm_90 without a GPU: every new
elementwise, pixelwise and pixel function inlined in one chained gather (a fused crop_fill's
bounded reads, a sampler, the grey stage after them), and in the arena gather that writes a
training batch (test_ptx_augment.py's and test_ptx_arena.py's style)."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.graph.codegen import arena
from millipyde.graph.codegen.gather import gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams
from millipyde.graph.codegen.loader import load

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx

VALUES = ("invert", "solarize", "posterize", "adjust_brightness")
COLOUR = ("grayscale", "permute_channels")


def arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def test_chained_gather_with_every_new_op_compiles_to_ptx() -> None:
    # RGBA uint8: pad-like fills (crop_fill), the value and colour ops before and after a
    # sampler (rotate_about, crop_edge: the sampler's matrix is a parameter), then the
    # one-channel grey stage and value ops on the grey
    sig = GatherSig(4, "chain", True, True, "grayscale1", pre=VALUES + COLOUR,
                    post=COLOUR + VALUES, grey_ops=VALUES, bounded=True, clip=False)
    mod = load(gather_source(sig, "cuda"), "cuda")
    argtys = (arr(np.uint8, 3), arr(np.float64, 3), arr(np.uint8, 3)) + \
        (types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".target sm_90" in ptx and ".entry" in ptx


def test_arena_gather_with_the_new_ops_compiles_to_ptx() -> None:
    # the batch writer's gather (NCHW float32 out) after an edge sampler (crop_edge), gated
    sig = GatherSig(3, "chain", True, True, "", post=VALUES + COLOUR,
                    lut_stages=(False, False), clip=False, edge=True)
    mod = load(arena.arena_gather_source(sig, "cuda", False, True, "NCHW", 3), "cuda")
    argtys = (arr(np.uint8, 1), arr(np.int64, 2), arr(np.float64, 2), arr(np.float64, 1),
              arr(np.float32, 4), arr(np.int64, 1), arr(np.float64, 1), arr(np.float64, 1),
              types.float64)
    assert ".entry" in ptx_of(mod.kernel.py_func, argtys)


def test_batch_mix_kernels_compile_to_ptx() -> None:
    from millipyde.graph.codegen import mix

    kernel = load(mix.mix_batch_source("cuda"), "cuda").mix_batch
    for dtype in (np.float32, np.float16):  # the batches' dtypes
        argtys = ((arr(dtype, 1), arr(np.float32, 1), arr(np.int64, 1)) + (types.int64,) * 5
                  + (types.float64,) + (types.int64,) * 4 + (types.float64,))
        assert ".entry" in ptx_of(kernel.py_func, argtys)
