"""The kernels of the albumentations / kornia value, colour, noise and filter ops (rgb_shift,
to_sepia, drop_channels, solarize_add, brightness_contrast, tone_curve, multiply_channels,
hsv_shift; kornia's linear and corner illuminations; salt_and_pepper, pixel_dropout and
multiplicative_noise, whose draws may be shared across a pixel's channels; sharpen, a
neighbourhood op) compile to PTX for sm_90 without a GPU, inlined in one chained gather
(test_ptx_tv.py's style)."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

import millipyde.ops  # noqa: F401  (the op registry the kernel sources read, filled on import)
from millipyde.graph.codegen.gather import gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams
from millipyde.graph.codegen.loader import load

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx

VALUES = ("rgb_shift", "to_sepia", "drop_channels", "solarize_add", "brightness_contrast",
          "tone_curve", "multiply_channels", "hsv_shift")
NOISE = ("linear_illumination", "corner_illumination", "gaussian_illumination",
         "salt_and_pepper", "pixel_dropout",
         "pixel_dropout_values", "multiplicative_noise", "multiplicative_noise_pixel")


def arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def test_chained_gather_with_the_new_ops_compiles_to_ptx() -> None:
    # RGBA uint8 after a fused pad (bounded reads): the value maps, the noise ops (shared and
    # per-channel draws), then sharpen, whose 3x3 neighbours rerun everything before it
    sig = GatherSig(4, "chain", True, False, "", pre=VALUES + NOISE + ("sharpen",),
                    bounded=True, clip=False)
    mod = load(gather_source(sig, "cuda"), "cuda")
    argtys = (arr(np.uint8, 3), arr(np.uint8, 3), arr(np.uint8, 3)) + \
        (types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".target sm_90" in ptx and ".entry" in ptx


def test_chained_gather_with_the_second_wave_compiles_to_ptx() -> None:
    # the exposure curves, the Planckian gains, the grid's holes (a positional map that
    # draws nothing) and the snow's HLS round trip (float32 arithmetic) in one RGBA gather
    sig = GatherSig(4, "chain", True, False, "",
                    pre=("adjust_log", "adjust_sigmoid", "planckian_jitter", "grid_dropout",
                         "snow_bleach"),
                    bounded=False, clip=False)
    mod = load(gather_source(sig, "cuda"), "cuda")
    argtys = (arr(np.uint8, 3), arr(np.uint8, 3), arr(np.uint8, 3)) + \
        (types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".target sm_90" in ptx and ".entry" in ptx
