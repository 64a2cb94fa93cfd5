"""The byte forms of hue and saturation (``kernels.registry.BYTE_FORMS``), which the cpu arena
gathers call on uint8 members: the same values as the ops' own functions, compared on every
one of the 2**24 pixels where a form computes in another way than the op."""

from __future__ import annotations

import numpy as np
from numba import njit

from millipyde.graph.codegen.cpu_devices import device
from millipyde.kernels.fmath import fma
from millipyde.kernels.registry import BYTE_FORMS
from millipyde.ops.colour.hue import _to_hsv, hsv_bytes, hue_shift, hue_shift_bytes
from millipyde.ops.colour.saturation import saturation_blend, saturation_blend_bytes


@njit(error_model="numpy", cache=False)
def _hsv_differences(bits: np.ndarray) -> int:
    """How many of (h6, s, maxc) over all 2**24 pixels differ, bit for bit, between
    ``_to_hsv`` with ``full`` 255 and ``hsv_bytes``."""
    bad = 0
    for r in range(256):
        for g in range(256):
            for b in range(256):
                x = _to_hsv(float(r), float(g), float(b), 255.0)
                y = hsv_bytes(float(r), float(g), float(b))
                for k in range(3):
                    bits[0] = x[k]
                    bits[1] = y[k]
                    bad += bits.view(np.int64)[0] != bits.view(np.int64)[1]
    return bad


def test_hsv_bytes_equal_on_every_pixel() -> None:
    assert _hsv_differences(np.zeros(2)) == 0


def test_saturation_grey_without_the_division() -> None:
    # every weighted sum of three bytes (and every whole number up to the largest one)
    n = np.arange(2989 * 255 + 5870 * 255 + 1140 * 255 + 1, dtype=np.float64)
    assert np.array_equal(np.floor(n * 1e-4), np.floor(n / 10000.0))


# compiled as the generated cpu modules compile them (``_dev``: not inlined, to compile once)
_HUE, _HUE_B = device(hue_shift), device(hue_shift_bytes)
_SAT, _SAT_B = device(saturation_blend), device(saturation_blend_bytes)


@njit(error_model="numpy", cache=False)
def _forms(px: np.ndarray, full: float, a: float, out: np.ndarray) -> None:
    for i in range(px.shape[0]):
        r, g, b = px[i, 0], px[i, 1], px[i, 2]
        out[i, 0] = _HUE(r, g, b, full, a, 0.0, 0.0)
        out[i, 1] = _HUE_B(r, g, b, full, a, 0.0, 0.0)
        out[i, 2] = _SAT(r, g, b, full, 2.0 * a + 1.0, 0.0, 0.0)
        out[i, 3] = _SAT_B(r, g, b, full, 2.0 * a + 1.0, 0.0, 0.0)


def test_byte_forms_equal_the_ops_functions() -> None:
    # compiled, as the cpu kernels call them: uint8 pixels (grey ones included), and another
    # full (uint16, float), where the forms run the ops' functions
    assert set(BYTE_FORMS) == {"adjust_hue", "adjust_saturation"}
    rng = np.random.default_rng(5)
    for full in (255.0, 65535.0, 1.0):
        px = np.floor(rng.random((4000, 3)) * (full + 1)) if full > 1 else rng.random((4000, 3))
        px[:50] = px[:50, :1]
        for a in (-0.5, -0.21, 0.0, 0.13, 0.5):
            out = np.zeros((4000, 4, 3))
            _forms(px, full, a, out)
            assert np.array_equal(out[:, 0], out[:, 1]), (full, a)
            assert np.array_equal(out[:, 2], out[:, 3]), (full, a)
    # and in plain Python (fmath.fma's exact rounding)
    for r, g, b in ((200.0, 13.0, 77.0), (0.0, 0.0, 255.0), (9.0, 9.0, 9.0), (31.0, 250.0, 250.0)):
        assert hue_shift_bytes(r, g, b, 255.0, 0.3, 0.0, 0.0) == hue_shift(r, g, b, 255.0, 0.3,
                                                                           0.0, 0.0)


def test_fma_rounds_once() -> None:
    # 1 + 2**-52 squared is 1 + 2**-51 + 2**-104: the product alone rounds the last term away
    x = 1.0 + 2.0 ** -52
    assert fma(x, x, -(1.0 + 2.0 ** -51)) == 2.0 ** -104
    f = njit(lambda a, b, c: fma(a, b, c))
    assert f(x, x, -(1.0 + 2.0 ** -51)) == 2.0 ** -104
