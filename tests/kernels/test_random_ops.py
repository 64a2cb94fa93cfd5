"""random_* variants: degenerate ranges, seeding, bounds checks, envelopes."""

import numpy as np
import pytest
import reference as ref
from reference import SKIMAGE_ATOL, assert_matches

KINDS = ["rgb", "rgba", "grey"]

cudasim_ok = pytest.mark.cudasim_ok

# (random call, equivalent fixed call) with min == max
DEGENERATE = {
    "gaussian": (("random_gaussian", 1.5, 1.5), ("gaussian", 1.5)),
    "brightness": (("random_brightness", 0.3, 0.3), ("brightness", 0.3)),
    "rotate": (("random_rotate", 33.0, 33.0), ("rotate", 33.0)),
    "adjust_gamma": (("random_adjust_gamma", [2.0, 2.0], [0.7, 0.7]), ("adjust_gamma", 2.0, 0.7)),
    "colorize": (("random_colorize", [1.5, 1.5], [0.8, 0.8], [1.0, 1.0]),
                 ("colorize", 1.5, 0.8, 1.0)),
}

# calls with a real range (used for reproducibility)
RANGED = {
    "gaussian": ("random_gaussian", 0.5, 2.5),
    "brightness": ("random_brightness", -0.5, 0.5),
    "rotate": ("random_rotate", -45.0, 45.0),
    "adjust_gamma": ("random_adjust_gamma", [0.5, 2.0], [0.7, 1.0]),
    "colorize": ("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5]),
}

BAD = [
    ("random_gaussian", 2.0, 1.0),           # min > max
    ("random_gaussian", -1.0, 1.0),          # negative sigma
    ("random_brightness", 0.5, -0.5),        # min > max
    ("random_brightness", -2.0, 0.0),        # out of [-1, 1]
    ("random_brightness", 0.0, 1.5),         # out of [-1, 1]
    ("random_rotate", 30.0, 10.0),           # min > max
    ("random_adjust_gamma", [2.0, 1.0], [1.0, 1.0]),    # gamma min > max
    ("random_adjust_gamma", [1.0, 1.0], [1.0, 0.5]),    # gain min > max
    ("random_adjust_gamma", [-1.0, 1.0], [1.0, 1.0]),   # negative gamma
    ("random_colorize", [1.5, 0.5], [1.0, 1.0], [1.0, 1.0]),  # r min > max
    ("random_colorize", [1.0, 1.0], [1.0, 1.0], [1.2, 1.1]),  # b min > max
]


def _cases(ops):
    """(op, kind) pairs; colorize does not apply to greyscale (tested separately)."""
    return [pytest.param(op, kind, id=f"{op}-{kind}") for op in ops for kind in KINDS
            if not (op == "colorize" and kind == "grey")]


def _run(img, call, seed=None):
    import millipyde as mp

    if seed is not None:
        mp.seed(seed)
    g = mp.gpuimage(img)
    ret = getattr(g, call[0])(*call[1:])
    assert ret is None
    return np.asarray(g)


@cudasim_ok
@pytest.mark.parametrize(("op", "kind"), _cases(DEGENERATE))
def test_equal_bounds_equal_fixed_op(op, kind, size):
    img = ref.photo(kind, *size)
    rand_call, fixed_call = DEGENERATE[op]
    out_rand = _run(img, rand_call, seed=7)
    out_fixed = _run(img, fixed_call)
    assert_matches(out_rand, out_fixed, what=f"{rand_call} vs {fixed_call}")
    # and both agree with the reference
    expected = getattr(ref, fixed_call[0])(img, *fixed_call[1:])
    tol = 1 if op in ("gaussian", "rotate") else 0
    assert_matches(out_rand, expected, ulp_uint8=tol, atol=SKIMAGE_ATOL)


@cudasim_ok
@pytest.mark.parametrize(("op", "kind"), _cases(RANGED))
def test_same_seed_same_result(op, kind):
    img = ref.photo(kind, 17, 23)
    call = RANGED[op]
    first = _run(img, call, seed=1234)
    second = _run(img, call, seed=1234)
    assert_matches(second, first, what=f"{call} not reproducible with the same seed")


@cudasim_ok
def test_random_colorize_on_grey_raises():
    import millipyde as mp

    img = ref.photo_grey(5, 7)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError):
        g.random_colorize([1, 1], [1, 1], [1, 1])
    assert_matches(g, img)


@cudasim_ok
def test_different_seeds_differ():
    img = ref.photo_grey(17, 23)
    call = ("random_brightness", -0.5, 0.5)
    outs = [_run(img, call, seed=s) for s in (1, 2, 3)]
    assert not (np.array_equal(outs[0], outs[1]) and np.array_equal(outs[1], outs[2])), \
        "three different seeds gave the same random_brightness draw"


@cudasim_ok
@pytest.mark.parametrize("call", BAD, ids=[f"{c[0]}{c[1:]}" for c in BAD])
def test_bad_bounds_raise(call):
    import millipyde as mp

    img = ref.photo_rgb(5, 7)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError):
        getattr(g, call[0])(*call[1:])
    assert_matches(g, img, what="a rejected call changed the image")


@cudasim_ok
@pytest.mark.parametrize("kind", KINDS)
def test_random_gaussian_zero_is_noop(kind, size):
    img = ref.photo(kind, *size)
    out = _run(img, ("random_gaussian", 0, 0), seed=3)
    assert_matches(out, img)


@cudasim_ok
@pytest.mark.parametrize("seed", [0, 1, 99])
@pytest.mark.parametrize("kind", ["rgb", "rgba"])
def test_random_colorize_within_envelope(kind, seed, size):
    img = ref.photo(kind, *size)
    out = _run(img, ("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5]), seed=seed)
    lo = ref.colorize(img, 0.5, 0.5, 0.5)
    hi = ref.colorize(img, 1.5, 1.5, 1.5)
    assert out.shape == img.shape and out.dtype == np.uint8
    assert np.all(out >= lo) and np.all(out <= hi), "random_colorize left the envelope"
    if kind == "rgba":
        assert_matches(out[..., 3], img[..., 3], what="alpha must be untouched")


@cudasim_ok
@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("kind", KINDS)
def test_random_brightness_within_envelope(kind, seed, size):
    img = ref.photo(kind, *size)
    out = _run(img, ("random_brightness", -0.4, 0.4), seed=seed)
    lo = ref.brightness(img, -0.4)
    hi = ref.brightness(img, 0.4)
    assert out.shape == img.shape and out.dtype == img.dtype
    assert np.all(out >= lo) and np.all(out <= hi), "random_brightness left the envelope"


@cudasim_ok
@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("kind", KINDS)
def test_random_adjust_gamma_within_envelope(kind, seed, size):
    img = ref.photo(kind, *size)
    out = _run(img, ("random_adjust_gamma", [0.5, 2.0], [0.7, 1.0]), seed=seed)
    # v**gamma * gain is decreasing in gamma and increasing in gain on [0, 1]
    lo = ref.adjust_gamma(img, 2.0, 0.7)
    hi = ref.adjust_gamma(img, 0.5, 1.0)
    eps = 0 if img.dtype == np.uint8 else SKIMAGE_ATOL
    assert out.shape == img.shape and out.dtype == img.dtype
    assert np.all(out >= lo - eps) and np.all(out <= hi + eps), \
        "random_adjust_gamma left the envelope"


@cudasim_ok
@pytest.mark.parametrize("kind", KINDS)
def test_random_rotate_is_some_rotation(kind):
    # a 10-degree-wide range on a tiny image: the result must equal rotate(a) for some
    # a in the range; check against a dense grid of candidate angles (+-1 on uint8)
    img = ref.photo(kind, 5, 5)
    img[2, 2] = 0  # keep skimage's clip-to-input-range out of this test (see test_geometry)
    out = _run(img, ("random_rotate", 10.0, 20.0), seed=11)
    cands = [ref.rotate(img, a) for a in np.linspace(10.0, 20.0, 2001)]
    errs = [np.max(np.abs(c.astype(np.float64) - out.astype(np.float64))) for c in cands]
    tol = 1 if img.dtype == np.uint8 else 1e-3
    assert min(errs) <= tol, f"random_rotate(10, 20) matches no rotation; best error {min(errs)}"
