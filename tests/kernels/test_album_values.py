"""The colour, intensity, noise and filter ops whose references are albumentations', kornia's
and AutoAugment's formulas (tests/reference_album.py): rgb_shift, to_sepia, channel_dropout,
solarize_add, brightness_contrast, tone_curve, sharpen, salt_and_pepper, pixel_dropout and
multiplicative_noise, with their random forms; +-1 on uint8; each fuses with its neighbours
into one kernel."""

import numpy as np
import pytest
import reference_album as al
import reference_aug as tv
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.colour.channel_dropout import SUBSETS
from millipyde.ops.noise.gaussian_noise import NOISE_KEY

# one photograph per kind (the formulas are per value or per pixel: more add no case); the
# simulator runs only the tests marked for it, on 16x16 crops
CASES = list(zip(tv.PHOTOS, tv.KINDS, strict=True))
IDS = [f"{p}-{k}" for p, k in CASES]
COLOUR = [(p, k) for p, k in CASES if k != "grey"]
SIM = pytest.mark.cudasim_ok


@pytest.fixture
def crop():
    return (16, 16) if mp.backend() == "cudasim" else (61, 83)


def _check(out, expected, what, ulp=1):
    assert_matches(out, expected, ulp_uint8=ulp, atol=1e-6, what=what)
    if out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


def _stream(g):
    """The draws ``u(t)`` and the per-pixel key of the next op recorded on ``g``."""
    seed, sample, op = mprandom.global_seed(), g._sample, g._opcount
    return (lambda t: mprandom.uniform01(seed, sample, op, t),
            mprandom.key64(seed, sample, op, NOISE_KEY))


# --------------------------------------------------------------------------- value maps
@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_rgb_shift(photo, kind, crop):
    img = tv.photo(photo, kind, *crop)
    if kind == "grey":  # a no-op on grey images, as saturation and hue
        assert_matches(on_gpu(img, "rgb_shift", 0.1, 0.2, 0.3), img)
        return
    _check(on_gpu(img, "rgb_shift", 40, -25.5, 90), al.rgb_shift(img, 40, -25.5, 90),
           f"rgb_shift {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), COLOUR, ids=[f"{p}-{k}" for p, k in COLOUR])
def test_to_sepia(photo, kind, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "to_sepia"), al.to_sepia(img), f"to_sepia {photo} {kind}")


@pytest.mark.parametrize("kind", ["rgb", "rgba"])
@pytest.mark.parametrize(("channels", "fill"), [((0,), 0), ((1, 2), 200), ((2,), 77)])
def test_drop_channels(kind, channels, fill, crop):
    img = tv.photo("coffee", kind, *crop)
    _check(on_gpu(img, "drop_channels", channels, fill), al.drop_channels(img, channels, fill),
           f"drop_channels({channels}) {kind}", ulp=0)


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("addition", "threshold"), [(110, 128), (-60, 200), (30, 256)])
def test_solarize_add(photo, kind, addition, threshold, crop):
    img = tv.photo(photo, kind, *crop)
    if kind == "grey":  # image units
        addition, threshold = addition / 255.0, min(threshold / 255.0, 1.0)
    _check(on_gpu(img, "solarize_add", addition, threshold),
           al.solarize_add(img, addition, threshold), f"solarize_add {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("alpha", "beta"), [(1.3, -0.1), (0.6, 0.25)])
def test_brightness_contrast(photo, kind, alpha, beta, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "brightness_contrast", alpha, beta),
           al.brightness_contrast(img, alpha, beta), f"brightness_contrast {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("low", "high"), [(0.05, 0.95), (0.6, 0.3)])
def test_tone_curve(photo, kind, low, high, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "tone_curve", low, high), al.tone_curve(img, low, high),
           f"tone_curve({low}, {high}) {photo} {kind}")


@SIM
@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("alpha", "lightness"), [(0.35, 0.75)])
def test_sharpen_inside_the_border(photo, kind, alpha, lightness, crop):
    img = tv.photo(photo, kind, *crop)
    out = on_gpu(img, "sharpen", alpha, lightness)
    want = al.sharpen(img, alpha, lightness)
    # inside, albumentations' filter; on the border the value is kept (the neighbourhood
    # kind's rule; albumentations mirrors there)
    _check(out[1:-1, 1:-1], want[1:-1, 1:-1], f"sharpen {photo} {kind}")
    border = np.ones(img.shape[:2], dtype=bool)
    border[1:-1, 1:-1] = False
    assert np.array_equal(out[border], img[border])


# --------------------------------------------------------------------------- noise
@SIM
@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_salt_and_pepper_is_kornias_given_the_draws(photo, kind, crop):
    img = tv.photo(photo, kind, *crop)
    mp.seed(11)
    g = mp.gpuimage(img)
    _, key = _stream(g)
    g.salt_and_pepper(0.3, 0.4)
    u1, u2 = al.pixel_draws(key, *img.shape[:2], shared=True)
    _check(np.asarray(g), al.salt_and_pepper(img, 0.3, 0.4, u1, u2),
           f"salt_and_pepper {photo} {kind}", ulp=0)


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("per_channel", [False, True])
def test_pixel_dropout_given_the_draws(kind, per_channel, crop):
    img = tv.photo("astronaut", kind, *crop)
    value = 0.5 if kind == "grey" else ((10, 20, 30, 40) if kind == "rgba" else 99)
    mp.seed(12)
    g = mp.gpuimage(img)
    _, key = _stream(g)
    g.pixel_dropout(0.25, per_channel, value)
    u1, u2 = al.pixel_draws(key, *img.shape[:2], shared=not per_channel)
    values = np.broadcast_to(value, (4,)) if np.ndim(value) == 0 else value
    _check(np.asarray(g), al.pixel_dropout(img, 0.25, values, u1, u2),
           f"pixel_dropout {kind} {per_channel}", ulp=0)


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize(("per_channel", "per_pixel"),
                         [(False, False), (True, False), (False, True), (True, True)])
def test_multiplicative_noise_given_the_draws(kind, per_channel, per_pixel, crop):
    img = tv.photo("coffee", kind, *crop)
    mp.seed(13)
    g = mp.gpuimage(img)
    u, key = _stream(g)
    g.multiplicative_noise((0.5, 1.5), per_channel, per_pixel)
    if per_pixel:
        u1, _ = al.pixel_draws(key, *img.shape[:2], shared=not per_channel)
        m = 0.5 + u1
    else:
        m = 0.5 + np.array([u(0), u(1), u(2)] if per_channel else [u(0)] * 3)
    _check(np.asarray(g), al.multiply(img, m), f"multiplicative_noise {kind}")


def test_noise_draws_follow_their_probabilities():
    if mp.backend() == "cudasim":
        pytest.skip("16384 simulated threads; the draws themselves are checked above")
    img = np.full((128, 128, 3), 128, dtype=np.uint8)
    mp.seed(3)
    out = on_gpu(img, "salt_and_pepper", 0.2, 0.25)
    # one outcome per pixel, the same in every channel
    assert (out == out[..., :1]).all()
    noisy = out[..., 0] != 128
    salt = out[..., 0] == 255
    # 16384 pixels: binomial standard errors 0.003 (amount) and 0.007 (salt share); 5 sigma
    assert abs(noisy.mean() - 0.2) < 0.016 and abs(salt[noisy].mean() - 0.25) < 0.035
    out = on_gpu(img, "pixel_dropout", 0.1, True)
    assert abs((out == 0).mean() - 0.1) < 0.012
    assert 0.02 < ((out == 0).sum(axis=2) == 1).mean()  # values dropped on their own
    m = on_gpu(np.full((128, 128, 3), 200, dtype=np.uint8), "multiplicative_noise",
               (0.8, 1.2), True, True)
    r = m / 200.0  # uniform on [0.8, 1.2] (rounded to 1/200): mean 1, std 0.1155
    assert abs(r.mean() - 1.0) < 0.003 and abs(r.std() - 0.11547) < 0.003


# --------------------------------------------------------------------------- random forms
def _bez_pair(u, t):
    z = np.sqrt(-2.0 * np.log1p(-u(t))) * np.cos(2.0 * np.pi * u(t + 1))
    return z


@pytest.mark.parametrize(("method", "args", "fixed"), [
    ("random_rgb_shift", (20, (-5, 30), 10),
     lambda img, u: al.rgb_shift(img, -20 + 40 * u(0), -5 + 35 * u(1), -10 + 20 * u(2))),
    ("random_sepia", (0.5,), lambda img, u: al.to_sepia(img) if u(0) < 0.5 else img),
    ("channel_dropout", ((1, 2), 33),
     lambda img, u: al.drop_channels(img, SUBSETS[1 + int(u(0) * 2)][
         int(u(1) * len(SUBSETS[1 + int(u(0) * 2)]))], 33)),
    ("random_solarize_add", (0, 110), lambda img, u: al.solarize_add(img, 110 * u(0), 128)),
    ("random_brightness_contrast", (0.2, 0.3),
     lambda img, u: al.brightness_contrast(img, 0.7 + 0.6 * u(0), -0.2 + 0.4 * u(1))),
    ("random_tone_curve", (0.1,),
     lambda img, u: al.tone_curve(img, np.clip(0.25 + 0.1 * _bez_pair(u, 0), 0, 1),
                                  np.clip(0.75 + 0.1 * _bez_pair(u, 2), 0, 1))),
    ("random_sharpen", ((0.2, 0.5), (0.5, 1.0)),
     lambda img, u: al.sharpen(img, 0.2 + 0.3 * u(0), 0.5 + 0.5 * u(1))),
])
def test_random_forms_draw_from_their_stream(method, args, fixed):
    outcomes = set()
    for seed in range(8):
        mp.seed(seed)
        img = tv.photo("astronaut", "rgba", 13, 17)
        g = mp.gpuimage(img)
        u, _ = _stream(g)
        getattr(g, method)(*args)
        want = fixed(img, u)
        out = np.asarray(g)
        if method == "random_sharpen":  # inside the border
            out, want = out[1:-1, 1:-1], want[1:-1, 1:-1]
        _check(out, want, f"{method} seed {seed}")
        outcomes.add(np.array_equal(want, img))
    if method == "random_sepia":
        assert outcomes == {True, False}, "one side of the coin in 8 seeds"


def test_random_tone_curve_per_channel_draws_each_channel():
    img = tv.photo("coffee", "rgb", 9, 10)
    mp.seed(4)
    g = mp.gpuimage(img)
    u, _ = _stream(g)
    g.random_tone_curve(0.2, True)
    lows = [np.clip(0.25 + 0.2 * _bez_pair(u, 4 * c), 0, 1) for c in range(3)]
    highs = [np.clip(0.75 + 0.2 * _bez_pair(u, 4 * c + 2), 0, 1) for c in range(3)]
    _check(np.asarray(g), al.tone_curve(img, lows, highs), "random_tone_curve per channel")


def test_random_salt_and_pepper_draws_its_amounts():
    img = tv.photo("chelsea", "rgb", 12, 14)
    mp.seed(9)
    g = mp.gpuimage(img)
    u, key = _stream(g)
    g.random_salt_and_pepper((0.1, 0.5), (0.3, 0.7))
    u1, u2 = al.pixel_draws(key, 12, 14, shared=True)
    want = al.salt_and_pepper(img, 0.1 + 0.4 * u(0), 0.3 + 0.4 * u(1), u1, u2)
    _check(np.asarray(g), want, "random_salt_and_pepper", ulp=0)


def test_channel_dropout_draws_every_subset():
    img = tv.photo("coffee", "rgb", 3, 4)
    seen = set()
    for seed in range(40):
        mp.seed(seed)
        g = mp.gpuimage(img)
        g.channel_dropout((1, 2), 0)
        seen.add(tuple(int(c) for c in range(3) if not np.asarray(g)[..., c].any()))
    assert seen == {s for k in (1, 2) for s in SUBSETS[k]}, seen


def test_same_seed_same_noise():
    img = tv.photo("coffee", "rgb", 10, 11)
    outs = []
    for _ in range(2):
        mp.seed(5)
        g = mp.gpuimage(img)
        g.random_salt_and_pepper()
        g.pixel_dropout(0.1)
        g.multiplicative_noise(per_channel=True, elementwise=True)
        outs.append(np.asarray(g))
    assert np.array_equal(*outs)


# --------------------------------------------------------------------------- kernels
@SIM
@pytest.mark.parametrize("kind", ["rgb", "rgba", "grey"])
def test_value_noise_and_sharpen_chain_is_one_kernel(kind):
    # elementwise, pixelwise, positional and neighbourhood ops add no kernel: flips, a crop,
    # every new value map, the noise ops and sharpen run in one gather
    img = tv.photo("chelsea", kind, 15, 16)
    g = mp.gpuimage(img)
    g.fliplr()
    g.center_crop(13, 14)
    g.rgb_shift(10, -10, 5)
    g.to_sepia()
    g.solarize_add(0.2 if kind == "grey" else 40, 0.5 if kind == "grey" else 128)
    g.brightness_contrast(1.1, 0.05)
    g.random_tone_curve()
    g.random_rgb_shift()
    g.multiplicative_noise()
    g.pixel_dropout(0.05)
    g.random_salt_and_pepper()
    g.multiplicative_noise(per_channel=True, elementwise=True)
    g.random_linear_illumination()
    g.random_corner_illumination()
    g.random_gaussian_illumination()
    g.sharpen()
    if kind != "grey":
        g.drop_channels([1])
        g.channel_dropout()
        g.random_hsv_shift()
    assert len(g.explain().kernels) == 1, str(g.explain())


@SIM
def test_value_maps_chain_matches_the_references():
    img = tv.photo("coffee", "rgb", 11, 12)
    g = mp.gpuimage(img)
    g.vflip()
    g.rgb_shift(10, -20, 5)
    g.to_sepia()
    g.drop_channels([2], 9)
    assert len(g.explain().kernels) == 1
    want = al.drop_channels(al.to_sepia(al.rgb_shift(tv.vflip(img), 10, -20, 5)), [2], 9)
    _check(np.asarray(g), want, "vflip, rgb_shift, to_sepia, drop_channels")


BAD = [("rgb_shift", (300,), "r_shift"), ("random_rgb_shift", (20, (5, 1)), "g_shift_limit"),
       ("drop_channels", ((0, 1, 2),), "channels"), ("drop_channels", ((3,),), "channels"),
       ("channel_dropout", ((1, 3),), "channel_drop_range"),
       ("solarize_add", (10, 300), "threshold"), ("solarize_add", (400,), "addition"),
       ("brightness_contrast", (-1, 0), "alpha"), ("brightness_contrast", (1, 2), "beta"),
       ("tone_curve", (1.5,), "low_y"), ("random_tone_curve", (-0.1,), "scale"),
       ("salt_and_pepper", (1.2,), "amount"), ("random_salt_and_pepper", ((0.1, 2),), "amount"),
       ("pixel_dropout", (0.1, "yes"), "per_channel"), ("pixel_dropout", (-0.1,), "dropout_prob"),
       ("multiplicative_noise", ((-1, 1),), "multiplier"), ("sharpen", (1.5,), "alpha"),
       ("random_sharpen", ((0.1, 0.2), (-1, 0)), "lightness")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    tv.assert_refused(method, args, name)


def test_colour_only_ops_refuse_grey_images():
    g = mp.gpuimage(np.zeros((4, 5)))
    for method, args in (("drop_channels", ([0],)), ("channel_dropout", ())):
        with pytest.raises(ValueError, match="RGB"):
            getattr(g, method)(*args)


# --------------------------------------------------------------------------- HSV
@pytest.mark.parametrize(("photo", "kind"), COLOUR, ids=[f"{p}-{k}" for p, k in COLOUR])
@pytest.mark.parametrize("shifts", [(0, 0, 0), (17.5, -30, 25), (-90, 60.7, -40), (179, 0, 0)])
def test_hsv_shift(photo, kind, shifts, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "hsv_shift", *shifts), al.hsv_shift(img, *shifts),
           f"hsv_shift{shifts} {photo} {kind}")


def test_hsv_round_trip_is_near_the_float_conversion():
    # an independent check of the uint8 HSV transcription: OpenCV's uint8 HSV round trip
    # (hue in 2-degree steps) stays within a few levels of scikit-image's float one
    from skimage import color

    img = tv.photo("astronaut", "rgb", 40, 50)
    hsv = color.rgb2hsv(img)
    hsv[..., 0] = np.mod(hsv[..., 0] + 40 / 360, 1.0)
    want = np.rint(color.hsv2rgb(hsv) * 255)
    got = al.hsv_shift(img, 20, 0, 0).astype(np.float64)  # 20 OpenCV units: 40 degrees
    assert np.abs(got - want).max() <= 6, np.abs(got - want).max()
    assert np.abs(got - want).mean() < 1.0


def test_random_hsv_shift_draws_from_its_stream():
    img = tv.photo("coffee", "rgba", 9, 10)
    for seed in range(3):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u, _ = _stream(g)
        g.random_hsv_shift(20, (-30, 10), 15)
        want = al.hsv_shift(img, -20 + 40 * u(0), -30 + 40 * u(1), -15 + 30 * u(2))
        _check(np.asarray(g), want, f"random_hsv_shift seed {seed}")


def test_hsv_shift_arguments():
    g = mp.gpuimage(tv.photo("coffee", "rgb", 4, 5))
    with pytest.raises(ValueError, match="hue_shift"):
        g.hsv_shift(200)
    with pytest.raises(ValueError, match="sat_shift_limit"):
        g.random_hsv_shift(10, (5, 300))
    # (gpuimage holds colour as uint8; a batch's kind is checked by the definition)
    from millipyde.ops import FORMS
    from millipyde.ops.base import kind_for

    with pytest.raises(ValueError, match="uint8"):
        FORMS["hsv_shift"].parse(kind_for(3, np.uint16), 10)


# --------------------------------------------------------------------------- illumination
@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("direction", [0, 1, 2, 3])
def test_linear_and_corner_illumination(photo, kind, direction, crop):
    img = tv.photo(photo, kind, *crop)
    amp = 0.3 if direction % 2 else -0.25
    _check(on_gpu(img, "linear_illumination", amp, direction),
           al.linear_illumination(img, amp, direction), f"linear {direction} {kind}")
    _check(on_gpu(img, "corner_illumination", amp, direction),
           al.corner_illumination(img, amp, direction), f"corner {direction} {kind}")


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (6, 1)])
def test_illumination_on_one_pixel_wide_images(shape):
    img = tv.photo("coffee", "rgb", *shape)
    for d in range(4):
        _check(on_gpu(img, "linear_illumination", 0.4, d), al.linear_illumination(img, 0.4, d),
               f"linear {d} {shape}")
        _check(on_gpu(img, "corner_illumination", 0.4, d), al.corner_illumination(img, 0.4, d),
               f"corner {d} {shape}")


@pytest.mark.parametrize("method", ["random_linear_illumination", "random_corner_illumination"])
def test_random_illumination_draws_kornias_parameters(method):
    img = tv.photo("chelsea", "rgb", 10, 12)
    ref = al.linear_illumination if "linear" in method else al.corner_illumination
    for seed in range(4):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u, _ = _stream(g)
        getattr(g, method)((0.1, 0.3))
        amp = (0.1 + 0.2 * u(0)) * (1.0 if -1 + 2 * u(1) >= 0 else -1.0)
        _check(np.asarray(g), ref(img, amp, int(u(2) * 4)), f"{method} seed {seed}")
    with pytest.raises(ValueError, match="gain"):
        getattr(mp.gpuimage(img), method)((0.1, 1.5))
    with pytest.raises(ValueError, match="sign"):
        getattr(mp.gpuimage(img), method)(0.1, (-2, 1))


@SIM
def test_illumination_after_a_crop_spans_the_crop():
    # the ramp spans the image the op sees (the crop, fused in the same kernel), not its source
    img = tv.photo("astronaut", "rgb", 14, 16)
    g = mp.gpuimage(img)
    g.crop(2, 3, 9, 11)
    g.linear_illumination(0.5, "right")
    g.corner_illumination(-0.3, "top_left")
    assert len(g.explain().kernels) == 1, str(g.explain())
    want = al.corner_illumination(al.linear_illumination(img[2:11, 3:14], 0.5, 2), -0.3, 3)
    _check(np.asarray(g), want, "illumination after a crop")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize(("amp", "center", "sigma"), [(0.4, (0.5, 0.5), (0.5, 0.5)),
                                                      (-0.3, (0.1, 0.8), (0.2, 1.0))])
def test_gaussian_illumination(photo, kind, amp, center, sigma, crop):
    img = tv.photo(photo, kind, *crop)
    _check(on_gpu(img, "gaussian_illumination", amp, center, sigma),
           al.gaussian_illumination(img, amp, *center, *sigma), f"gaussian {center} {kind}")


@pytest.mark.parametrize("shape", [(1, 1), (1, 6), (7, 1), (16, 15)])
def test_random_gaussian_illumination_draws_kornias_parameters(shape):
    img = tv.photo("coffee", "rgb", *shape)
    for seed in range(3):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u, _ = _stream(g)
        g.random_gaussian_illumination((0.1, 0.5))
        amp = (0.1 + 0.4 * u(0)) * (1.0 if -1 + 2 * u(5) >= 0 else -1.0)
        sfx, cfx, sfy, cfy = (0.2 + 0.8 * u(1), 0.1 + 0.8 * u(2), 0.2 + 0.8 * u(3),
                              0.1 + 0.8 * u(4))
        _check(np.asarray(g), al.gaussian_illumination(img, amp, cfy, cfx, sfy, sfx),
               f"random_gaussian_illumination {shape} seed {seed}")
    with pytest.raises(ValueError, match="sigma"):
        mp.gpuimage(img).gaussian_illumination(0.2, 0.5, 0.0)
    with pytest.raises(ValueError, match="center"):
        mp.gpuimage(img).random_gaussian_illumination(0.1, (0.2, 1.4))
