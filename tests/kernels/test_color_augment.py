"""adjust_contrast / adjust_saturation / adjust_hue and their random variants against NumPy
transcriptions of torchvision v2's functional formulas (tests/reference_aug.py), +-1 on uint8."""

import numpy as np
import pytest
import reference_aug as tv
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom

pytestmark = pytest.mark.cudasim_ok

CASES = [(p, k) for p in tv.PHOTOS for k in tv.KINDS]
IDS = [f"{p}-{k}" for p, k in CASES]


def _check(out, expected, what):
    assert_matches(out, expected, ulp_uint8=1, atol=1e-9, what=what)
    if out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("factor", [0.0, 0.6, 1.0, 1.7])
def test_adjust_contrast(photo, kind, factor, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "adjust_contrast", factor), tv.adjust_contrast(img, factor),
           f"adjust_contrast({factor}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("factor", [0.0, 0.5, 1.0, 2.3])
def test_adjust_saturation(photo, kind, factor, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "adjust_saturation", factor), tv.adjust_saturation(img, factor),
           f"adjust_saturation({factor}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("delta", [-0.5, -0.12, 0.0, 0.3, 0.5])
def test_adjust_hue(photo, kind, delta, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "adjust_hue", delta), tv.adjust_hue(img, delta),
           f"adjust_hue({delta}) {photo} {kind}")


@pytest.mark.parametrize("kind", tv.KINDS)
def test_contrast_after_geometry_uses_the_mean_of_its_own_input(kind, size):
    img = tv.photo("coffee", kind, *size)
    h, w = img.shape[:2]
    g = mp.gpuimage(img)
    g.crop(0, 0, max(1, h // 2), w)
    g.fliplr()
    g.adjust_contrast(1.6)
    plan = g.explain()
    assert len(plan.kernels) == 2, str(plan)  # the grey-mean reduction, then the gather
    want = tv.adjust_contrast(np.ascontiguousarray(np.fliplr(img[:max(1, h // 2)])), 1.6)
    _check(np.asarray(g), want, f"crop-fliplr-contrast {kind}")


@pytest.mark.parametrize(("method", "fixed", "bounds"), [
    ("random_contrast", "adjust_contrast", (0.6, 1.4)),
    ("random_saturation", "adjust_saturation", (0.6, 1.4)),
    ("random_hue", "adjust_hue", (-0.1, 0.1)),
])
def test_random_variants_draw_uniformly_from_their_stream(method, fixed, bounds):
    img = tv.photo("astronaut", "rgba", 13, 17)
    mp.seed(3)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    getattr(g, method)(*bounds)
    u = mprandom.uniform01(key.seed, key.sample, key.op, 0)
    value = bounds[0] + (bounds[1] - bounds[0]) * u
    _check(np.asarray(g), getattr(tv, fixed)(img, value), method)


BAD = [("adjust_contrast", (-0.1,), "factor"), ("adjust_saturation", ("a",), "factor"),
       ("adjust_hue", (0.6,), "delta"), ("random_contrast", (1.2, 1.0), "min_factor"),
       ("random_saturation", (-1, 1.0), "min_factor"), ("random_hue", (-0.7, 0.1), "bounds")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    tv.assert_refused(method, args, name)
