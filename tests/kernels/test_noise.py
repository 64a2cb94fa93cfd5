"""gaussian_noise (counter-based normal draws), erase and random_erasing (issue 15)."""

import math

import numpy as np
import pytest
import reference as ref
import reference_aug as tv
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.noise.gaussian_noise import NOISE_KEY

pytestmark = pytest.mark.cudasim_ok

CASES = [(p, k) for p in tv.PHOTOS for k in tv.KINDS]
IDS = [f"{p}-{k}" for p, k in CASES]


def _noisy(img, sigma, seed, sample=0):
    op = mp.Operation("gaussian_noise", sigma)
    g = mp.gpuimage(img)
    op.apply(g, seed, sample, 0)
    return np.asarray(g)


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_gaussian_noise_is_clipped_normal_and_reproducible(photo, kind):
    img = tv.photo(photo, kind, 24, 32)
    a, b = _noisy(img, 0.1, 7), _noisy(img, 0.1, 7)
    assert_matches(b, a, what="same seed, same noise")
    assert not np.array_equal(_noisy(img, 0.1, 8), a)
    full = 255.0 if img.dtype == np.uint8 else 1.0
    rgb = slice(0, 3) if img.ndim == 3 else slice(None)
    d = (a[..., rgb].astype(np.float64) - img[..., rgb]) / full
    inside = (a[..., rgb] > 0) & (a[..., rgb] < full)  # not clipped
    assert abs(d[inside].mean()) < 0.03 and 0.07 < d[inside].std() < 0.12
    if kind == "rgba":
        assert np.array_equal(a[..., 3], img[..., 3]), "alpha changed"


def test_gaussian_noise_zero_sigma_is_identity(size):
    img = tv.photo("coffee", "rgb", *size)
    assert_matches(_noisy(img, 0.0, 1), img)


def _reference_noise(img, sigma, seed, sample=0, op=0):
    """The counter-based draws in NumPy/Python: SplitMix64 of (op key ^ counter), Box-Muller."""
    key = mprandom.key64(seed, sample, op, NOISE_KEY)
    full = 255.0 if img.dtype == np.uint8 else 1.0
    h, w = img.shape[:2]
    chans = 3 if img.ndim == 3 else 1
    out = np.array(img, dtype=np.float64, copy=True)
    for y in range(h):
        for x in range(w):
            for c in range(chans):
                n = ((y * w + x) * 4 + c) * 2
                u1, u2 = ((mprandom.mix(key ^ m) >> 11) * 2.0 ** -53 for m in (n, n + 1))
                z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
                idx = (y, x, c) if img.ndim == 3 else (y, x)
                out[idx] = min(max(out[idx] + sigma * z * full, 0.0), full)
    return ref._to_dtype(out, img.dtype) if img.dtype == np.uint8 else out


@pytest.mark.parametrize("kind", tv.KINDS)
def test_noise_is_the_counter_hash_on_every_backend(kind, size):
    # the same draws as a pure-Python transcription: what makes them the same on any device
    img = tv.photo("coffee", kind, *size)
    assert_matches(_noisy(img, 0.08, 21), _reference_noise(img, 0.08, 21), ulp_uint8=1,
                   atol=1e-12)


def test_noise_draws_are_standard_normal():
    if mp.backend() == "cudasim":
        pytest.skip("65536 simulated threads; the draws themselves are checked above")
    # a flat mid-grey image: values never clip at sigma 0.05, so the noise is all there is
    # (65536 draws: standard errors 0.004 on the mean and std, 0.01 on the skewness, 0.02 on
    # the kurtosis; the bounds are five of them)
    img = np.full((256, 256), 0.5)
    d = (_noisy(img, 0.05, 3) - 0.5) / 0.05
    assert abs(d.mean()) < 0.02 and abs(d.std() - 1) < 0.02
    assert abs(np.mean(d ** 3)) < 0.05 and abs(np.mean(d ** 4) - 3) < 0.1


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_erase(photo, kind, size):
    img = tv.photo(photo, kind, *size)
    h, w = img.shape[:2]
    value = 0.75 if kind == "grey" else 99
    win = (h // 3, w // 4, max(1, h // 2), max(1, w // 2))
    assert_matches(on_gpu(img, "erase", *win, value), tv.erase(img, *win, value))


@pytest.mark.parametrize("kind", tv.KINDS)
def test_random_erasing_is_torchvision_window(kind):
    img = tv.photo("chelsea", kind, 30, 40)
    mp.seed(9)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    g.random_erasing(value=0)
    draws = [mprandom.uniform01(key.seed, key.sample, key.op, k) for k in range(40)]
    win = tv.erasing_params(30, 40, (0.02, 0.33), (0.3, 3.3), draws)
    assert win is not None
    i, j, h, w = win
    # torchvision: h from sqrt(area * ratio), w from sqrt(area / ratio); both inside
    assert 0 < h < 30 and 0 < w < 40 and i + h <= 30 and j + w <= 40
    assert_matches(np.asarray(g), tv.erase(img, *win, 0))


def test_noise_and_erase_fuse_after_geometry_in_one_kernel():
    img = tv.photo("astronaut", "rgba", 20, 24)
    g = mp.gpuimage(img)
    g.fliplr()
    g.resize(10, 12)
    g.erase(1, 2, 3, 4, 0)
    g.gaussian_noise(0.05)
    assert len(g.explain().kernels) == 1, str(g.explain())
    g.fliplr()  # geometry after a positional op starts a new kernel
    assert len(g.explain().kernels) == 2, str(g.explain())


BAD = [("gaussian_noise", (-0.1,), "sigma"), ("random_gaussian_noise", (0.2, 0.1), "min_sigma"),
       ("erase", (0, 0, -1, 2), "height"), ("erase", (0, 0, 1, 2, 256), "value"),
       ("random_erasing", ((0.5, 0.1),), "scale"), ("random_erasing", ((0.1, 0.2), (0, 1)),
                                                    "ratio")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    img = tv.photo("coffee", "rgb", 5, 6)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError, match=name):
        getattr(g, method)(*args)
    assert_matches(g, img)
