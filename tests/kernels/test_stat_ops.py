"""autocontrast / equalize (per-image statistics beyond the grey mean) against NumPy
transcriptions of torchvision v2 (tests/reference_tv2.py), +-1 on uint8; their kernel counts
(one reduction, then the gather) and random forms."""

import numpy as np
import pytest
import reference_aug as tv
import reference_tv2 as tv2
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.kernels.stats import hist_bin

pytestmark = pytest.mark.cudasim_ok

CASES = [(p, k) for p in tv.PHOTOS for k in tv.KINDS]
IDS = [f"{p}-{k}" for p, k in CASES]


def _check(out, expected, what, tol=1):
    assert_matches(out, expected, ulp_uint8=tol, atol=1e-9, what=what)
    if out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_autocontrast(photo, kind, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "autocontrast"), tv2.autocontrast(img), f"autocontrast {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_equalize(photo, kind, size):
    img = tv.photo(photo, kind, *size)
    # Pillow's table is integer arithmetic: the same values exactly
    _check(on_gpu(img, "equalize"), tv2.equalize(img), f"equalize {photo} {kind}", tol=0)


def test_flat_and_two_valued_channels():
    # equal minimum and maximum: left as they are; a step of 0: equalize leaves the channel
    img = np.zeros((5, 7, 3), dtype=np.uint8)
    img[..., 0] = 40
    img[:2, :, 1] = 200
    img[..., 2] = np.arange(35, dtype=np.uint8).reshape(5, 7) * 7
    # (torchvision's float32 stretch lands a channel's maximum on 254.99998, cast to 254)
    for method, ref, tol in (("autocontrast", tv2.autocontrast, 1),
                             ("equalize", tv2.equalize, 0)):
        _check(on_gpu(img, method), ref(img), method, tol=tol)
    assert np.array_equal(on_gpu(img, "autocontrast")[..., 0], img[..., 0])


def test_grey_uint8_and_float_bins():
    rng = np.random.default_rng(3)
    grey = rng.integers(0, 256, (9, 11), dtype=np.uint8)
    _check(on_gpu(grey, "equalize"), tv2.equalize(grey), "equalize uint8 grey", tol=0)
    f = rng.random((9, 11))
    f[0, 0], f[0, 1] = 0.0, 1.0
    _check(on_gpu(f, "equalize"), tv2.equalize(f), "equalize float grey")
    # the bin rule written in the kernels is kernels.stats.hist_bin's
    assert [hist_bin(v, 1.0) for v in (0.0, 0.5, 1.0)] == [0, 127, 255]
    assert hist_bin(37.0, 255.0) == 37


@pytest.mark.parametrize("method", ["autocontrast", "equalize"])
def test_after_geometry_measures_its_own_input_in_one_reduction(method, size):
    img = tv.photo("coffee", "rgb", *size)
    h, w = img.shape[:2]
    g = mp.gpuimage(img)
    g.crop(0, 0, max(1, h // 2), w)
    g.fliplr()
    getattr(g, method)()
    plan = g.explain()
    assert [k.kind for k in plan.kernels] == ["stat", "gather"], str(plan)
    want = getattr(tv2, method)(np.ascontiguousarray(np.fliplr(img[:max(1, h // 2)])))
    _check(np.asarray(g), want, f"crop-fliplr-{method}")


def test_chained_statistics_each_measure_the_previous_ops_output():
    # a chain mode gather (saturation mixes channels): three reductions, each reading the rows
    # of the ones before it, then one gather
    img = tv.photo("astronaut", "rgb", 13, 17)
    g = mp.gpuimage(img)
    g.equalize()
    g.adjust_saturation(0.4)
    g.autocontrast()
    g.adjust_contrast(1.7)
    assert [k.kind for k in g.explain().kernels] == ["stat"] * 3 + ["gather"]
    want = tv.adjust_contrast(tv2.autocontrast(tv.adjust_saturation(tv2.equalize(img), 0.4)), 1.7)
    _check(np.asarray(g), want, "equalize-saturation-autocontrast-contrast", tol=2)


def test_not_fused_into_a_stencil_s_tables():
    # a uint8 stencil takes elementwise ops as tables; one that reads a statistic is not one
    img = tv.photo("chelsea", "rgb", 12, 14)
    g = mp.gpuimage(img)
    g.gaussian(1.0)
    g.adjust_contrast(0.5)
    blurred = mp.gpuimage(img)
    blurred.gaussian(1.0)
    _check(np.asarray(g), tv.adjust_contrast(np.asarray(blurred), 0.5), "gaussian-contrast")


@pytest.mark.parametrize("method", ["random_autocontrast", "random_equalize"])
def test_random_forms_apply_where_their_draw_is_below_p(method):
    img = tv.photo("astronaut", "rgb", 9, 10)
    fixed = getattr(tv2, method.removeprefix("random_"))
    mp.seed(11)
    applied = 0
    for _ in range(12):
        g = mp.gpuimage(img)
        key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
        getattr(g, method)(p=0.5)
        ran = mprandom.uniform01(key.seed, key.sample, key.op, 0) < 0.5
        applied += ran
        _check(np.asarray(g), fixed(img) if ran else img, method)
    assert 0 < applied < 12
    for p, want in ((1.0, fixed(img)), (0.0, img)):
        g = mp.gpuimage(img)
        getattr(g, method)(p=p)
        _check(np.asarray(g), want, f"{method}(p={p})")


BAD = [("equalize", (), np.uint16, "uint8 or float"),
       ("random_equalize", (1.5,), np.uint8, "p must lie"),
       ("random_autocontrast", (-0.1,), np.uint8, "p must lie"),
       ("random_autocontrast", ("x",), np.uint8, "p")]


@pytest.mark.parametrize(("method", "args", "dtype", "match"), BAD,
                         ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, dtype, match):
    img = np.arange(30, dtype=dtype).reshape(5, 6)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError, match=match):
        getattr(g, method)(*args)
    assert_matches(g, img)
