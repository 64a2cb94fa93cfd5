"""invert, solarize, posterize, adjust_brightness, grayscale and permute_channels (and their
random forms) against NumPy transcriptions of torchvision v2's functional formulas
(tests/reference_aug.py), +-1 on uint8; each fuses into one kernel with its neighbours."""

import numpy as np
import pytest
import reference_aug as tv
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom

pytestmark = pytest.mark.cudasim_ok

# every kind, two photographs each (the formulas are per value: more photos add no case)
CASES = [(p, k) for p in tv.PHOTOS[:2] for k in tv.KINDS]
IDS = [f"{p}-{k}" for p, k in CASES]


def _check(out, expected, what):
    assert_matches(out, expected, ulp_uint8=1, atol=1e-9, what=what)
    if out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_invert(photo, kind, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "invert"), tv.invert(img), f"invert {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("threshold", [0.5, 128, 255])
def test_solarize(photo, kind, threshold, size):
    img = tv.photo(photo, kind, *size)
    if kind == "grey" and threshold > 1:
        threshold = threshold / 255.0  # image units: [0, 1] for float images
    _check(on_gpu(img, "solarize", threshold), tv.solarize(img, threshold),
           f"solarize({threshold}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("bits", [0, 3, 8])
def test_posterize(photo, kind, bits, size):
    img = tv.photo(photo, kind, *size)
    # exact: a mask on uint8, a power-of-two step on floats
    assert_matches(on_gpu(img, "posterize", bits), tv.posterize(img, bits), atol=0,
                   what=f"posterize({bits}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("factor", [0.0, 0.37, 1.6])
def test_adjust_brightness(photo, kind, factor, size):
    img = tv.photo(photo, kind, *size)
    _check(on_gpu(img, "adjust_brightness", factor), tv.adjust_brightness(img, factor),
           f"adjust_brightness({factor}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("channels", [1, 3])
def test_grayscale(photo, kind, channels, size):
    img = tv.photo(photo, kind, *size)
    out = on_gpu(img, "grayscale", channels)
    want = tv.grayscale(img, channels)
    if kind != "grey" and channels == 1:
        # float64 grey / 255: the uint8 grey (within one level of torch's float32 sum) back
        assert out.dtype == np.float64 and out.shape == img.shape[:2]
        assert np.array_equal(out * 255.0, np.rint(out * 255.0))
        assert_matches(np.rint(out * 255).astype(np.uint8),
                       np.rint(want * 255).astype(np.uint8), ulp_uint8=1,
                       what=f"grayscale(1) {photo} {kind}")
        return
    _check(out, want, f"grayscale({channels}) {photo} {kind}")


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("perm", [(0, 1, 2), (1, 2, 0), (2, 1, 0)])
def test_permute_channels(kind, perm, size):
    img = tv.photo("coffee", kind, *size)
    assert_matches(on_gpu(img, "permute_channels", perm), tv.permute_channels(img, perm),
                   what=f"permute_channels({perm}) {kind}")


def _draw(g, t=0):
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    return lambda t: mprandom.uniform01(key.seed, key.sample, key.op, t)


@pytest.mark.parametrize(("method", "args", "fixed"), [
    ("random_invert", (0.5,), lambda img, u: tv.invert(img) if u(0) < 0.5 else img),
    ("random_solarize", (100, 0.5),
     lambda img, u: tv.solarize(img, 100) if u(1) < 0.5 else img),
    ("random_posterize", (2, 0.5), lambda img, u: tv.posterize(img, 2) if u(1) < 0.5 else img),
    ("random_adjust_brightness", (0.5, 1.5),
     lambda img, u: tv.adjust_brightness(img, 0.5 + u(0))),
    ("random_grayscale", (0.5,), lambda img, u: tv.grayscale(img, 3) if u(0) < 0.5 else img),
])
def test_random_forms_draw_from_their_stream(method, args, fixed):
    # several images: both sides of each coin
    outcomes = set()
    for seed in range(12):
        mp.seed(seed)
        img = tv.photo("astronaut", "rgba", 13, 17)
        g = mp.gpuimage(img)
        u = _draw(g)
        getattr(g, method)(*args)
        want = fixed(img, u)
        _check(np.asarray(g), want, f"{method} seed {seed}")
        outcomes.add(np.array_equal(want, img))
    if method != "random_adjust_brightness":
        assert outcomes == {True, False}, f"{method}: one side of the coin in 12 seeds"


def test_channel_shuffle_draws_every_order_uniformly():
    img = tv.photo("coffee", "rgb", 5, 6)
    seen = {}
    for seed in range(600):
        mp.seed(seed)
        g = mp.gpuimage(img)
        k = int(_draw(g)(0) * 6)
        g.channel_shuffle()
        out = np.asarray(g)
        from millipyde.ops.colour.channel_shuffle import PERMUTATIONS

        assert np.array_equal(out, img[..., list(PERMUTATIONS[k])]), seed
        seen[k] = seen.get(k, 0) + 1
    # 100 expected per order: a binomial's 5-sigma band
    assert sorted(seen) == list(range(6)) and all(55 <= v <= 145 for v in seen.values()), seen


@pytest.mark.parametrize("kind", ["rgb", "rgba", "grey"])
def test_value_chain_is_one_kernel(kind):
    # elementwise and pixelwise ops add no kernel to a fused chain (flips and crops included)
    img = tv.photo("chelsea", kind, 19, 23)
    g = mp.gpuimage(img)
    g.fliplr()
    g.vflip()
    g.invert()
    g.solarize(0.6 if kind == "grey" else 150)
    g.posterize(5)
    g.adjust_brightness(1.2)
    g.grayscale(3)
    g.permute_channels((2, 0, 1))
    g.center_crop(11, 13)
    g.random_invert(0.5)
    plan = g.explain()
    assert len(plan.kernels) == 1, str(plan)
    want = tv.center_crop(tv.permute_channels(tv.grayscale(tv.adjust_brightness(tv.posterize(
        tv.solarize(tv.invert(tv.vflip(np.ascontiguousarray(img[:, ::-1]))),
                    0.6 if kind == "grey" else 150), 5), 1.2), 3), (2, 0, 1)), 11, 13)
    mp.seed(0)
    out = np.asarray(g)
    # (the final random_invert's coin: compare with both outcomes)
    ok = [np.abs(out.astype(np.float64) - w.astype(np.float64)).max() <= (1 if kind != "grey"
                                                                            else 1e-9)
          for w in (want, tv.invert(want))]
    assert any(ok), kind


def test_grayscale1_then_value_ops_is_one_kernel():
    img = tv.photo("coffee", "rgb", 16, 16)
    g = mp.gpuimage(img)
    g.vflip()
    g.grayscale(1)
    g.invert()
    g.adjust_brightness(0.8)
    assert len(g.explain().kernels) == 1, str(g.explain())
    want = tv.adjust_brightness(tv.invert(tv.grayscale(tv.vflip(img), 1)), 0.8)
    assert_matches(np.asarray(g), want, atol=1.0 / 255 + 1e-12)


BAD = [("solarize", (300,), "threshold"), ("solarize", ("a",), "threshold"),
       ("posterize", (9,), "bits"), ("posterize", (2.0,), "bits"),
       ("adjust_brightness", (-0.1,), "factor"), ("random_adjust_brightness", (1.2, 1.0),
                                                  "min_factor"),
       ("random_invert", (1.5,), "p"), ("random_solarize", (100, -0.1), "p"),
       ("grayscale", (2,), "channels"), ("permute_channels", ((0, 0, 1),), "permutation"),
       ("permute_channels", ((0, 1),), "permutation")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    tv.assert_refused(method, args, name)


def test_signed_images_are_refused_by_the_inverting_ops():
    g = mp.gpuimage(np.arange(12, dtype=np.int16).reshape(3, 4))
    for method, args in (("invert", ()), ("solarize", (3,)), ("posterize", (2,))):
        with pytest.raises(ValueError, match="signed"):
            getattr(g, method)(*args)


@pytest.mark.parametrize("kind", ["rgb", "rgba"])
def test_erase_takes_one_value_per_channel(kind):
    # torchvision's erase value: one number or one per channel
    img = tv.photo("coffee", kind, 9, 10)
    value = (10, 20, 30) if kind == "rgb" else (10, 20, 30, 40)
    assert_matches(on_gpu(img, "erase", 2, 3, 4, 5, value), tv.erase(img, 2, 3, 4, 5,
                                                                     list(value)))
    with pytest.raises(ValueError, match="one per channel"):
        mp.gpuimage(img).erase(0, 0, 2, 2, (1, 2))
