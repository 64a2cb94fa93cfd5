"""The window filters (box_blur, gaussian_blur, adjust_sharpness, median_blur): one stencil
design with border modes, against SciPy's filters and NumPy transcriptions of torchvision v2
(tests/reference_tv2.py), their kernel and launch counts, their random forms."""

import numpy as np
import pytest
import reference_aug as tv
import reference_tv2 as tv2
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.filters.window import MODES

pytestmark = pytest.mark.cudasim_ok

# one photograph per kind (the filters treat every photograph alike; the simulator runs a
# Python thread per pixel)
SOME = list(zip(tv.PHOTOS, tv.KINDS, strict=True))
SOME_IDS = [f"{p}-{k}" for p, k in SOME]


def _check(out, expected, what, tol=1):
    assert_matches(out, expected, ulp_uint8=tol, atol=1e-9, what=what)
    if out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


@pytest.mark.parametrize(("photo", "kind"), SOME, ids=SOME_IDS)
@pytest.mark.parametrize(("k", "mode"), [(3, "reflect"), (4, "symmetric"), ((2, 5), "edge"),
                                         (5, "constant")])
def test_box_blur_is_scipys_uniform_filter(photo, kind, k, mode, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "box_blur", k, mode), tv2.box_blur(img, k, mode),
           f"box_blur({k}, {mode}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), SOME, ids=SOME_IDS)
@pytest.mark.parametrize(("k", "mode"), [(3, "reflect"), (5, "symmetric"), (3, "constant")])
def test_median_blur_is_scipys_median_filter(photo, kind, k, mode, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "median_blur", k, mode), tv2.median_blur(img, k, mode),
           f"median_blur({k}, {mode}) {photo} {kind}", tol=0)


@pytest.mark.parametrize(("photo", "kind"), SOME, ids=SOME_IDS)
@pytest.mark.parametrize(("k", "sigma"), [(3, None), (5, 1.3), ((3, 7), (0.6, 2.2))])
def test_gaussian_blur_is_torchvisions(photo, kind, k, sigma, size):
    # (torch's reflect padding refuses a radius as wide as the image; numpy.pad's, as
    # millipyde's, goes on reflecting)
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "gaussian_blur", k, sigma), tv2.gaussian_blur(img, k, sigma),
           f"gaussian_blur({k}, {sigma}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), SOME, ids=SOME_IDS)
@pytest.mark.parametrize("factor", [0.0, 0.5, 2.0])
def test_adjust_sharpness_is_torchvisions(photo, kind, factor, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "adjust_sharpness", factor), tv2.adjust_sharpness(img, factor),
           f"adjust_sharpness({factor}) {photo} {kind}")


def test_reflect_wraps_windows_wider_than_the_image():
    # numpy.pad's reflect/symmetric (SciPy's mirror/reflect) repeat past one period
    img = tv.photo("chelsea", "rgb", 3, 4)
    for mode in MODES:
        _check(on_gpu(img, "box_blur", 9, mode), tv2.box_blur(img, 9, mode), f"box 9 {mode}")


def test_kernel_and_launch_counts():
    # one stencil kernel each; two separable passes, one for the median; uint8 elementwise
    # ops before and after join it as tables (no kernel of their own). Sharpness is a
    # neighbourhood op: it joins the gather of the ops around it (one launch)
    img = tv.photo("coffee", "rgb", 12, 13)
    for method, args, kind, launches in (
            ("box_blur", (3,), "stencil", 2), ("gaussian_blur", (5,), "stencil", 2),
            ("adjust_sharpness", (1.5,), "gather", 1), ("median_blur", (3,), "stencil", 1)):
        g = mp.gpuimage(img)
        g.brightness(0.1)
        getattr(g, method)(*args)
        g.adjust_gamma(1.2)
        plan = g.explain()
        assert [k.kind for k in plan.kernels] == [kind], (method, str(plan))
        assert plan.kernels[0].launches == launches, method
        ref = mp.gpuimage(img)
        ref.brightness(0.1)
        mid = mp.gpuimage(np.asarray(ref))
        getattr(mid, method)(*args)
        want = mp.gpuimage(np.asarray(mid))
        want.adjust_gamma(1.2)
        assert np.array_equal(np.asarray(g), np.asarray(want)), method


def test_random_gaussian_blur_draws_one_sigma_for_both_axes():
    img = tv.photo("astronaut", "rgb", 11, 12)
    mp.seed(4)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    g.random_gaussian_blur(5, (0.5, 2.5))
    s = 0.5 + 2.0 * mprandom.uniform01(key.seed, key.sample, key.op, 0)
    _check(np.asarray(g), tv2.gaussian_blur(img, 5, s), "random_gaussian_blur")


def test_random_adjust_sharpness_applies_where_its_draw_is_below_p():
    img = tv.photo("astronaut", "rgb", 9, 10)
    mp.seed(2)
    seen = set()
    for _ in range(10):
        g = mp.gpuimage(img)
        key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
        g.random_adjust_sharpness(2.0, p=0.5)
        ran = mprandom.uniform01(key.seed, key.sample, key.op, 0) < 0.5
        seen.add(ran)
        _check(np.asarray(g), tv2.adjust_sharpness(img, 2.0) if ran else img, "random sharp")
    assert seen == {True, False}


BAD = [("box_blur", (0,), "kernel_size"), ("box_blur", (3, "wrap"), "mode"),
       ("median_blur", (4,), "odd"), ("median_blur", (17,), "at most"),
       ("median_blur", ((3, 5),), "square"), ("gaussian_blur", (4,), "odd"),
       ("gaussian_blur", (3, -1.0), "sigma"), ("gaussian_blur", (3, 1.0, "keep"), "mode"),
       ("random_gaussian_blur", (3, (0.0, 1.0)), "sigma"),
       ("adjust_sharpness", (-0.5,), "factor"), ("random_adjust_sharpness", (1.0, 2.0), "p")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    tv.assert_refused(method, args, name)


def _stepwise(img, steps):
    """Each op on the stored value of the one before (no fusion)."""
    out = img
    for method, args in steps:
        g = mp.gpuimage(out)
        getattr(g, method)(*args)
        out = np.asarray(g)
    return out


@pytest.mark.parametrize("steps", [
    [("fliplr", ()), ("adjust_sharpness", (2.0,))],
    [("rotate", (17.0,)), ("adjust_saturation", (0.5,)), ("adjust_sharpness", (0.3,))],
    [("adjust_sharpness", (2.0,)), ("adjust_sharpness", (0.0,)), ("equalize", ())],
    [("adjust_contrast", (1.5,)), ("adjust_sharpness", (1.7,)), ("autocontrast", ())],
], ids=["flip", "rotate-saturation", "twice-equalize", "contrast-autocontrast"])
def test_sharpness_fuses_with_what_comes_before_and_after(steps):
    # its neighbours are the fused ops before it run at each of them; two nest; statistics
    # before it are read inside, after it measure it
    img = tv.photo("astronaut", "rgb", 9, 11)
    g = mp.gpuimage(img)
    for method, args in steps:
        getattr(g, method)(*args)
    kinds = [k.kind for k in g.explain().kernels]
    assert kinds.count("gather") == 1 and "stencil" not in kinds, kinds
    _check(np.asarray(g), _stepwise(img, steps), str(steps), tol=0)
