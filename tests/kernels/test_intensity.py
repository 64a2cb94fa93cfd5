"""brightness, colorize and adjust_gamma against the API.md formulas / skimage."""

import numpy as np
import pytest
import reference as ref
from reference import SKIMAGE_ATOL, assert_matches, on_gpu

KINDS = ["rgb", "rgba", "grey"]
DELTAS = [-1, -0.2, 0, 0.5, 1]
GAMMAS = [0.5, 1, 2, 3.7]
GAINS = [1, 0.7]
COLOURS = [(1.5, 0.8, 1), (0, 0, 0), (2, 2, 2)]

cudasim_ok = pytest.mark.cudasim_ok


def _alpha_untouched(out, img, kind):
    if kind == "rgba":
        assert_matches(out[..., 3], img[..., 3], what="alpha must be untouched")


def _raises_and_unchanged(img, method, *args):
    import millipyde as mp

    g = mp.gpuimage(img)
    with pytest.raises(ValueError):
        getattr(g, method)(*args)
    assert_matches(g, img, what=f"failed {method}{args} changed the image")


# ----------------------------------------------------------------- brightness
@cudasim_ok
@pytest.mark.parametrize("delta", DELTAS, ids=[str(d) for d in DELTAS])
@pytest.mark.parametrize("kind", KINDS)
def test_brightness(kind, delta, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "brightness", delta)
    assert_matches(out, ref.brightness(img, delta), what=f"brightness({delta}) {kind}")
    _alpha_untouched(out, img, kind)


@cudasim_ok
@pytest.mark.parametrize("delta", [-1.0001, 1.5, -2, 255])
@pytest.mark.parametrize("kind", KINDS)
def test_brightness_out_of_range_raises(kind, delta):
    _raises_and_unchanged(ref.photo(kind, 5, 7), "brightness", delta)


# ------------------------------------------------------------------- colorize
@cudasim_ok
@pytest.mark.parametrize("rgb", COLOURS, ids=["1.5-0.8-1", "0-0-0", "2-2-2"])
@pytest.mark.parametrize("kind", ["rgb", "rgba"])
def test_colorize(kind, rgb, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "colorize", *rgb)
    assert_matches(out, ref.colorize(img, *rgb), what=f"colorize{rgb} {kind}")
    _alpha_untouched(out, img, kind)


@cudasim_ok
def test_colorize_on_grey_raises():
    _raises_and_unchanged(ref.photo_grey(5, 7), "colorize", 1.5, 0.8, 1)


# --------------------------------------------------------------- adjust_gamma
@cudasim_ok
@pytest.mark.parametrize("gain", GAINS, ids=[f"gain{g}" for g in GAINS])
@pytest.mark.parametrize("gamma", GAMMAS, ids=[f"gamma{g}" for g in GAMMAS])
@pytest.mark.parametrize("kind", KINDS)
def test_adjust_gamma(kind, gamma, gain, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "adjust_gamma", gamma, gain)
    # exact on uint8 (API.md), 4 decimals on float greyscale
    assert_matches(out, ref.adjust_gamma(img, gamma, gain), ulp_uint8=0, atol=SKIMAGE_ATOL,
                   what=f"adjust_gamma({gamma}, {gain}) {kind}")
    _alpha_untouched(out, img, kind)


@cudasim_ok
@pytest.mark.parametrize("kind", KINDS)
def test_adjust_gamma_default_gain_is_one(kind):
    import millipyde as mp

    img = ref.photo(kind, 9, 11)
    g = mp.gpuimage(img)
    g.adjust_gamma(2)
    assert_matches(g, ref.adjust_gamma(img, 2, 1), atol=SKIMAGE_ATOL)


@cudasim_ok
def test_adjust_gamma_every_uint8_level_exact():
    # all 256 levels in one image: the LUT must match skimage's exactly
    img = np.stack([np.arange(256, dtype=np.uint8).reshape(16, 16)] * 3, axis=-1)
    for gamma, gain in [(0.5, 1), (2.2, 0.7), (3.7, 1), (0.3, 1.3)]:
        out = on_gpu(img, "adjust_gamma", gamma, gain)
        assert_matches(out, ref.adjust_gamma(img, gamma, gain),
                       what=f"adjust_gamma({gamma}, {gain}) on 0..255")


@cudasim_ok
@pytest.mark.parametrize("gamma", [-0.1, -2])
@pytest.mark.parametrize("kind", KINDS)
def test_adjust_gamma_negative_raises(kind, gamma):
    _raises_and_unchanged(ref.photo(kind, 5, 7), "adjust_gamma", gamma)


@cudasim_ok
def test_intensity_chain():
    import millipyde as mp

    img = ref.photo_rgba(17, 23)
    g = mp.gpuimage(img)
    g.brightness(-0.2)
    g.colorize(1.5, 0.8, 1)
    g.adjust_gamma(2, 0.7)
    expected = ref.adjust_gamma(ref.colorize(ref.brightness(img, -0.2), 1.5, 0.8, 1), 2, 0.7)
    assert_matches(g, expected)
