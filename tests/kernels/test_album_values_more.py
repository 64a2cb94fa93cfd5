"""Ops after scikit-image, kornia and albumentations: adjust_log,
adjust_sigmoid and rescale_intensity (scikit-image itself), planckian_jitter (kornia's
formula and table), grid_dropout, downscale and snow (albumentations' formulas, OpenCV's
resizes and uint8 HLS transcribed in tests/reference_album.py), with their random forms;
+-1 on uint8; the value maps fuse into their neighbours' gather."""

import numpy as np
import pytest
import reference_album as al
import reference_aug as tv
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.colour.planckian_jitter import GAINS

CASES = list(zip(tv.PHOTOS, tv.KINDS, strict=True))
IDS = [f"{p}-{k}" for p, k in CASES]
COLOUR = [(p, k) for p, k in CASES if k != "grey"]
SIM = pytest.mark.cudasim_ok


@pytest.fixture
def crop():
    return (16, 16) if mp.backend() == "cudasim" else (61, 83)


def _check(out, expected, what, ulp=1, alpha_kept=True):
    assert_matches(out, expected, ulp_uint8=ulp, atol=1e-6, what=what)
    if alpha_kept and out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


def _u(g):
    """The draws ``u(t)`` of the next op recorded on ``g``."""
    seed, sample, op = mprandom.global_seed(), g._sample, g._opcount
    return lambda t: mprandom.uniform01(seed, sample, op, t)


def _skimage(img, fn):
    """A scikit-image function of the colour values (R, G, B together; alpha kept)."""
    if img.ndim == 2:
        return fn(img)
    out = np.array(img, copy=True)
    out[..., :3] = fn(img[..., :3])
    return out


# --------------------------------------------------------------------------- scikit-image
@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("gain", "inv"), [(1.0, False), (0.8, False), (0.9, True)])
def test_adjust_log_is_skimages(photo, kind, gain, inv, crop):
    from skimage import exposure

    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "adjust_log", gain, inv),
           _skimage(img, lambda v: exposure.adjust_log(v, gain, inv)),
           f"adjust_log({gain}, {inv}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("cutoff", "gain", "inv"),
                         [(0.5, 10, False), (0.3, 5, True), (0.8, -4, False)])
def test_adjust_sigmoid_is_skimages(photo, kind, cutoff, gain, inv, crop):
    from skimage import exposure

    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "adjust_sigmoid", cutoff, gain, inv),
           _skimage(img, lambda v: exposure.adjust_sigmoid(v, cutoff, gain, inv)),
           f"adjust_sigmoid({cutoff}, {gain}, {inv}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("out_range", [None, "narrow"])
def test_rescale_intensity_is_skimages(photo, kind, out_range, crop):
    from skimage import exposure

    img = tv.photo(photo, kind, *crop)
    # a photograph's crop spans nearly the whole range: squeeze it first (as a low-contrast
    # input), through the same reference
    img = _skimage(img, lambda v: (v // 3 + 40).astype(v.dtype) if v.dtype == np.uint8
                   else v * 0.4 + 0.3)
    rng = None if out_range is None else ((30, 220) if kind != "grey" else (0.1, 0.8))
    want = _skimage(img, lambda v: np.asarray(exposure.rescale_intensity(
        v, in_range="image", out_range="dtype" if rng is None else rng)).astype(v.dtype))
    args = () if rng is None else (rng,)
    _check(on_gpu(img, "rescale_intensity", *args), want, f"rescale_intensity {kind} {rng}")


def test_rescale_intensity_of_a_flat_image_clips_it():
    img = np.full((4, 5, 3), 77, dtype=np.uint8)
    assert_matches(on_gpu(img, "rescale_intensity", (100, 200)), np.full_like(img, 100))
    assert_matches(on_gpu(img, "rescale_intensity"), img)


def test_rescale_intensity_keeps_colour_balance_where_autocontrast_does_not():
    # one range over R, G and B (skimage's image min / max), not one per channel
    img = np.zeros((2, 2, 3), dtype=np.uint8)
    img[..., 0], img[..., 1], img[..., 2] = [[10, 60], [60, 60]], [[20, 30], [30, 30]], 40
    out = on_gpu(img, "rescale_intensity")
    assert out[0, 0, 0] == 0 and out[0, 1, 0] == 255  # R spans the image's range
    assert out[0, 0, 2] == out[1, 1, 2] == 153  # flat B stays flat and mid-range
    assert not np.array_equal(out, on_gpu(img, "autocontrast"))


@pytest.mark.parametrize(("method", "args", "fixed"), [
    ("random_adjust_log", ((0.5, 1.0),), lambda img, u: _skimage(
        img, lambda v: __import__("skimage").exposure.adjust_log(v, 0.5 + 0.5 * u(0)))),
    ("random_adjust_sigmoid", ((0.3, 0.6), (4, 12)), lambda img, u: _skimage(
        img, lambda v: __import__("skimage").exposure.adjust_sigmoid(
            v, 0.3 + 0.3 * u(0), 4 + 8 * u(1)))),
    ("random_planckian_jitter", ("CIED", [2, 9, 20]), lambda img, u: al.planckian_jitter(
        img, *GAINS["cied"][[2, 9, 20][int(u(0) * 3)]])),
])
def test_random_forms_draw_from_their_stream(method, args, fixed):
    seen = set()
    for seed in range(6):
        mp.seed(seed)
        img = tv.photo("astronaut", "rgba", 13, 17)
        g = mp.gpuimage(img)
        u = _u(g)
        getattr(g, method)(*args)
        out = np.asarray(g)
        _check(out, fixed(img, u), f"{method} seed {seed}")
        seen.add(out.tobytes())
    assert len(seen) > 1, f"{method}: the same output for every seed"


# --------------------------------------------------------------------------- kornia
@pytest.mark.parametrize(("photo", "kind"), COLOUR, ids=[f"{p}-{k}" for p, k in COLOUR])
@pytest.mark.parametrize(("mode", "row"), [("blackbody", 0), ("blackbody", 12),
                                           ("blackbody", 24), ("CIED", 5), ("cied", 22)])
def test_planckian_jitter_is_kornias(photo, kind, mode, row, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "planckian_jitter", row, mode),
           al.planckian_jitter(img, *GAINS[mode.lower()][row]), f"planckian {mode} {row}")


def test_planckian_gains_are_kornias_ratios():
    # kornia divides R and B by G of each row (float32); two rows by hand
    assert GAINS["blackbody"].shape == (25, 2) and GAINS["cied"].shape == (23, 2)
    assert np.isclose(GAINS["blackbody"][0, 0], 0.6743 / 0.4029, rtol=1e-6)
    assert np.isclose(GAINS["cied"][22, 1], 0.6882 / 0.4719, rtol=1e-6)


def test_random_planckian_jitter_draws_every_row():
    img = np.full((2, 2, 3), 100, dtype=np.uint8)
    seen = set()
    for seed in range(40):
        mp.seed(seed)
        g = mp.gpuimage(img)
        g.random_planckian_jitter("blackbody", [0, 5, 24])
        seen.add(tuple(np.asarray(g)[0, 0]))
    assert len(seen) == 3, seen


# --------------------------------------------------------------------------- albumentations
@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("unit", "ratio", "shift"), [((5, 5), 0.5, (0, 0)),
                                                      ((4, 7), 0.3, (2, 9)),
                                                      ((3, 3), 0.9, (1, 1))])
def test_grid_dropout_is_albumentations(photo, kind, unit, ratio, shift, crop):
    img = tv.photo(photo, kind, *crop)
    fill = 0.25 if kind == "grey" else 200
    _check(on_gpu(img, "grid_dropout", unit, ratio, shift, fill),
           al.grid_dropout(img, *unit, ratio, *shift, fill), f"grid_dropout {unit} {kind}",
           ulp=0)


def test_random_grid_dropout_draws_unit_and_shifts():
    img = tv.photo("coffee", "rgb", 16, 15)
    units = set()
    for seed in range(12):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _u(g)
        g.random_grid_dropout((3, 6), 0.4, True, 9)
        unit = 3 + int(u(0) * 4)
        hole = min(max(int(unit * 0.4), 1), unit - 1)
        sy, sx = int(u(1) * (unit - hole + 1)), int(u(2) * (unit - hole + 1))
        _check(np.asarray(g), al.grid_dropout(img, unit, unit, 0.4, sy, sx, 9),
               f"random_grid_dropout seed {seed}", ulp=0)
        units.add(unit)
    assert len(units) >= 3, units


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("scale", "interpolation"), [(0.5, "nearest"), (0.3, "nearest"),
                                                      (0.5, "linear"), (0.37, "linear")])
def test_downscale_is_albumentations(photo, kind, scale, interpolation, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "downscale", scale, interpolation),
           al.downscale(img, scale, interpolation), f"downscale({scale}, {interpolation})",
           ulp=0 if interpolation == "nearest" else 1, alpha_kept=False)  # alpha resized too


def test_random_downscale_draws_its_scale():
    img = tv.photo("chelsea", "rgb", 14, 16)
    for seed in range(4):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _u(g)
        g.random_downscale((0.25, 0.75), "linear")
        _check(np.asarray(g), al.downscale(img, 0.25 + 0.5 * u(0), "linear"),
               f"random_downscale seed {seed}")


# --------------------------------------------------------------------------- kernels
@SIM
@pytest.mark.parametrize("kind", ["rgb", "rgba", "grey"])
def test_new_value_maps_chain_is_one_kernel(kind):
    img = tv.photo("chelsea", kind, 15, 16)
    grey = kind == "grey"
    g = mp.gpuimage(img)
    g.fliplr()
    g.center_crop(13, 14)
    g.adjust_log(0.9)
    g.random_adjust_log()
    g.adjust_sigmoid(0.5, 6)
    g.random_adjust_sigmoid()
    g.grid_dropout(4, 0.5, (1, 1), 0.5 if grey else 90)
    g.random_grid_dropout((3, 5))
    if not grey:
        g.planckian_jitter(7)
        g.random_planckian_jitter()
        g.snow(0.3, 1.5)
        g.random_snow()
    assert len(g.explain().kernels) == 1, str(g.explain())
    out = np.asarray(g)
    assert out.shape[:2] == (13, 14)


@SIM
def test_new_value_maps_chain_matches_the_references():
    from skimage import exposure

    img = tv.photo("coffee", "rgb", 11, 12)
    g = mp.gpuimage(img)
    g.vflip()
    g.planckian_jitter(20)
    g.grid_dropout((3, 4), 0.5, (1, 0), 7)
    g.adjust_sigmoid(0.4, 8)
    assert len(g.explain().kernels) == 1
    want = al.grid_dropout(al.planckian_jitter(tv.vflip(img), *GAINS["blackbody"][20]),
                           3, 4, 0.5, 1, 0, 7)
    want = exposure.adjust_sigmoid(want, 0.4, 8)
    # two stored roundings (planckian's, then the sigmoid's truncation) through one kernel
    _check(np.asarray(g), want, "vflip, planckian_jitter, grid_dropout, adjust_sigmoid", ulp=2)


def test_rescale_intensity_adds_only_its_reduction():
    img = tv.photo("coffee", "rgb", 11, 12)
    g = mp.gpuimage(img)
    g.adjust_log(0.9)
    base = len(g.explain().kernels)
    g.rescale_intensity()
    g.adjust_sigmoid()
    # one reduction kernel for the range statistic; the values still share one gather
    assert len(g.explain().kernels) <= base + 1, str(g.explain())


BAD = [("adjust_log", (-1,), "gain"), ("adjust_log", (1, "yes"), "inv"),
       ("random_adjust_log", ((1.2, 0.8),), "gain_range"),
       ("adjust_sigmoid", (1.5,), "cutoff"), ("adjust_sigmoid", (0.5, 500), "gain"),
       ("random_adjust_sigmoid", ((0.2, 1.4),), "cutoff_range"),
       ("rescale_intensity", ((10, 300),), "out_range"),
       ("rescale_intensity", ((200, 10),), "out_range"),
       ("planckian_jitter", (25,), "select_from"), ("planckian_jitter", (1, "sun"), "mode"),
       ("random_planckian_jitter", ("blackbody", []), "select_from"),
       ("grid_dropout", (1,), "unit_size"), ("grid_dropout", (5, 1.0), "ratio"),
       ("grid_dropout", (5, 0.5, 3), "shift"), ("grid_dropout", (5, 0.5, (0, 0), 300), "fill"),
       ("random_grid_dropout", ((8, 4),), "unit_size_range"),
       ("random_grid_dropout", ((4, 8), 0.5, 1), "random_offset"),
       ("downscale", (1.0,), "scale"), ("downscale", (0.5, "cubic"), "interpolation"),
       ("random_downscale", ((0.1, 1.5),), "scale_range")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    tv.assert_refused(method, args, name)


def test_planckian_jitter_refuses_grey_images():
    g = mp.gpuimage(np.zeros((4, 5)))
    for method, args in (("planckian_jitter", (3,)), ("random_planckian_jitter", ())):
        with pytest.raises(ValueError, match="RGB"):
            getattr(g, method)(*args)


# --------------------------------------------------------------------------- snow (HLS)
@pytest.mark.parametrize(("photo", "kind"), COLOUR, ids=[f"{p}-{k}" for p, k in COLOUR])
@pytest.mark.parametrize(("point", "coeff"), [(0.2, 2.5), (0.0, 1.0), (0.9, 1.7), (0.5, 0.4)])
def test_snow_is_albumentations_bleach(photo, kind, point, coeff, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "snow", point, coeff), al.snow_bleach(img, point, coeff),
           f"snow({point}, {coeff}) {photo} {kind}")


def test_hls_round_trip_is_near_the_identity():
    # an independent check of the uint8 HLS transcription: with a coefficient of 1 the
    # OpenCV round trip moves a value by a few levels at most (hue in 2-degree steps)
    img = tv.photo("astronaut", "rgb", 40, 50)
    got = al.snow_bleach(img, 0.5, 1.0).astype(np.int64)
    assert np.abs(got - img).max() <= 4, np.abs(got - img).max()
    assert np.abs(got - img).mean() < 0.6


def test_random_snow_draws_its_point():
    img = tv.photo("coffee", "rgba", 9, 10)
    for seed in range(3):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _u(g)
        g.random_snow((0.1, 0.6), 2.0)
        _check(np.asarray(g), al.snow_bleach(img, 0.1 + 0.5 * u(0), 2.0),
               f"random_snow seed {seed}")


def test_snow_arguments():
    g = mp.gpuimage(tv.photo("coffee", "rgb", 4, 5))
    with pytest.raises(ValueError, match="snow_point"):
        g.snow(1.5)
    with pytest.raises(ValueError, match="brightness_coeff"):
        g.snow(0.2, -1)
    with pytest.raises(ValueError, match="snow_point_range"):
        g.random_snow((0.5, 0.1))
    with pytest.raises(ValueError, match="RGB"):
        mp.gpuimage(np.zeros((4, 5))).snow()
