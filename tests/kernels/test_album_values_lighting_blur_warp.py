"""The ops after albumentations, kornia and torchvision-era recipes: fancy_pca
(AlexNet's PCA lighting, ImageNet's basis), iso_noise (albumentations' ISONoise),
motion_blur (kornia's) and elastic_grid (torchvision's ElasticTransform on a coarse grid),
with their random forms; +-1 on uint8 against the
NumPy transcriptions of tests/reference_album.py, on tiny crops (the formulas are per value
or per pixel)."""

import numpy as np
import pytest
import reference_album as al
import reference_aug as tv
from reference import assert_matches, on_gpu
from tiers import tiered

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.noise.gaussian_noise import NOISE_KEY

SIM = pytest.mark.cudasim_ok
COLOUR = ["rgb", "rgba"]


def _check(out, expected, what, ulp=1):
    assert_matches(out, expected, ulp_uint8=ulp, atol=1e-6, what=what)
    if out.ndim == 3 and out.shape[2] == 4:
        assert np.array_equal(out[..., 3], expected[..., 3]), f"{what}: alpha changed"


def _u(g):
    """The draws ``u(t)`` of the next op recorded on ``g``."""
    seed, sample, op = mprandom.global_seed(), g._sample, g._opcount
    return lambda t: mprandom.uniform01(seed, sample, op, t)


# --------------------------------------------------------------------------- fancy_pca
@SIM
@pytest.mark.parametrize("kind", tiered(COLOUR, [0]))  # (RGBA: the same table kernel's kin)
@pytest.mark.parametrize("alpha", [0.3, (1.0, -2.0, 3.0), (-0.4, 0.0, 0.0)])
def test_fancy_pca_is_alexnets_lighting(kind, alpha):
    img = tv.photo("coffee", kind, 9, 11)
    _check(on_gpu(img, "fancy_pca", alpha), al.fancy_pca(img, alpha), f"fancy_pca {alpha}")


def test_fancy_pca_with_a_datasets_own_basis():
    rng = np.random.default_rng(3)
    img = tv.photo("chelsea", "rgb", 5, 6)
    vals = (0.3, 0.1, 0.05)
    vecs = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    out = on_gpu(img, "fancy_pca", (0.5, -1.0, 2.0), vals, vecs)
    _check(out, al.fancy_pca(img, (0.5, -1.0, 2.0), vals, vecs), "fancy_pca own basis")
    assert not np.array_equal(out, img)


def test_random_fancy_pca_draws_three_normal_weights():
    img = tv.photo("astronaut", "rgba", 6, 7)
    for seed in range(3):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _u(g)
        g.random_fancy_pca(0.4)
        r0, r1 = np.sqrt(-2 * np.log1p(-u(0))), np.sqrt(-2 * np.log1p(-u(2)))
        alpha = 0.4 * np.array([r0 * np.cos(2 * np.pi * u(1)), r0 * np.sin(2 * np.pi * u(1)),
                                r1 * np.cos(2 * np.pi * u(3))])
        _check(np.asarray(g), al.fancy_pca(img, alpha), f"random_fancy_pca seed {seed}")


def test_random_fancy_pca_weights_are_normal():
    # the three weights of 4000 images: mean 0, standard deviation alpha_std, uncorrelated
    from millipyde.ops import FORMS
    from millipyde.ops.base import kind_for
    from millipyde.ops.colour.fancy_pca import normals
    from millipyde.training import batch_ops

    z = normals(batch_ops.Ctx(7, np.arange(4000, dtype=np.int64), 0))
    assert np.all(np.abs(z.mean(axis=0)) < 0.06), z.mean(axis=0)
    assert np.all(np.abs(z.std(axis=0) - 1) < 0.04), z.std(axis=0)
    assert np.all(np.abs(np.corrcoef(z.T) - np.eye(3)) < 0.06)
    form = FORMS["random_fancy_pca"]
    assert form.parse(kind_for(3, np.uint8), 0.1)[0] == 0.1


@SIM
def test_fancy_pca_fuses_into_its_neighbours():
    img = tv.photo("chelsea", "rgb", 9, 10)
    g = mp.gpuimage(img)
    g.vflip()
    g.fancy_pca(0.5)
    g.random_fancy_pca()
    g.rgb_shift(10, 0, -10)
    assert len(g.explain().kernels) == 1, str(g.explain())


BAD = [("fancy_pca", ("x",), "alpha"), ("fancy_pca", ((1, 2),), "alpha"),
       ("fancy_pca", (0.1, (1, 2, -3)), "eigvals"), ("fancy_pca", (0.1, None, np.eye(2)),
                                                     "eigvecs"),
       ("random_fancy_pca", (-0.1,), "alpha_std"), ("random_fancy_pca", (0.1, "abc"), "eigvals"),
       ("iso_noise", (1.5,), "color_shift"), ("iso_noise", (0.1, 6), "intensity"),
       ("random_iso_noise", ((0.1, 0.01),), "color_shift"),
       ("random_iso_noise", ((0.01, 0.05), (-1, 0.5)), "intensity"),
       ("motion_blur", (4, 30), "kernel_size"), ("motion_blur", (5, 30, 2), "direction"),
       ("motion_blur", (5, 30, 0, "wrap"), "mode"),
       ("random_motion_blur", ((7, 3), 30, 0.5), "kernel_size"),
       ("random_motion_blur", (5, -3, 0.5), "angle"),
       ("random_motion_blur", (5, 30, (-2, 0)), "direction"),
       ("elastic_grid", (np.zeros((2, 4, 4)),), "displacement"),
       ("elastic_grid", ("x",), "displacement"), ("random_elastic_grid", (1.5,), "magnitude")]


@pytest.mark.parametrize(("method", "args", "name"), BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, name):
    tv.assert_refused(method, args, name)


def test_colour_only_ops_refuse_grey_images():
    for method, args in (("fancy_pca", (0.1,)), ("random_fancy_pca", ())):
        with pytest.raises(ValueError, match="RGB"):
            getattr(mp.gpuimage(np.zeros((4, 5))), method)(*args)


# --------------------------------------------------------------------------- iso_noise
def _iso_draws(key, h, w):
    # the pixel's four draws: counters of channel slots 0 and 1 (u1, u2 of slot 0, u1 of 1)
    u1, u2 = al.pixel_draws(key, h, w, shared=False)
    return u1[..., 0], u2[..., 0], u1[..., 1]


# The iso_noise and elastic_grid tests run one op chain each (after fancy_pca, on RGB): each
# distinct chain is a kernel to compile (a few CPU-seconds), and these are the chains that
# test_generator_batches_album's "pca_iso" and "elastic" entries run too.
@SIM
@pytest.mark.parametrize(("shift", "intensity"), [(0.05, 0.5), (0.3, 2.0)])
def test_iso_noise_is_albumentations_given_the_draws(shift, intensity):
    img = tv.photo("astronaut", "rgb", 12, 13)
    mp.seed(3)
    g = mp.gpuimage(img)
    g.fancy_pca(0.2)
    key = mprandom.key64(mprandom.global_seed(), g._sample, g._opcount, NOISE_KEY)
    g.iso_noise(shift, intensity)
    # the lightness reduction (of fancy_pca's output), then one gather holding both ops
    assert len(g.explain().kernels) == 2, str(g.explain())
    want = al.iso_noise(al.fancy_pca(img, 0.2), shift, intensity, *_iso_draws(key, 12, 13))
    _check(np.asarray(g), want, f"iso_noise({shift}, {intensity})")
    assert not np.array_equal(np.asarray(g), al.fancy_pca(img, 0.2))


def test_random_iso_noise_draws_its_arguments():
    img = tv.photo("coffee", "rgb", 9, 8)
    mp.seed(8)
    g = mp.gpuimage(img)
    g.fancy_pca(0.2)
    u = _u(g)
    key = mprandom.key64(mprandom.global_seed(), g._sample, g._opcount, NOISE_KEY)
    g.random_iso_noise((0.1, 0.2), (0.5, 1.5))
    want = al.iso_noise(al.fancy_pca(img, 0.2), 0.1 + 0.1 * u(0), 0.5 + u(1),
                        *_iso_draws(key, 9, 8))
    _check(np.asarray(g), want, "random_iso_noise")


def test_poisson_inversion_has_the_poisson_moments():
    # the count the kernel and its reference compute from one uniform: mean and variance lam
    u = (np.arange(20000) + 0.5) / 20000
    for lam in (0.0, 3.5, 60.0):
        k = al.poisson_inverse(lam, u)
        assert abs(k.mean() - lam) < 0.01 + 0.01 * lam
        assert abs(k.var() - lam) < 0.02 + 0.02 * lam


def test_iso_noise_needs_rgb_unsigned():
    with pytest.raises(ValueError, match="RGB"):
        mp.gpuimage(np.zeros((4, 5))).iso_noise()
    from millipyde.ops import FORMS
    from millipyde.ops.base import kind_for

    with pytest.raises(ValueError, match="int16"):  # (gpuimage makes RGB uint8; a batch may not)
        FORMS["random_iso_noise"].parse(kind_for(3, np.int16))


# --------------------------------------------------------------------------- motion_blur
@pytest.mark.parametrize(("k", "angle", "direction"),
                         [(3, 0, 0), (5, 45, 1), (7, 100, -0.6), (9, -20, 0.3), (5, 90, 0.5)])
def test_motion_taps_are_kornias(k, angle, direction):
    from millipyde.ops.filters.motion_blur import motion_taps

    np.testing.assert_allclose(motion_taps(k, angle, direction),
                               al.motion_kernel(k, angle, direction), atol=1e-12)


@SIM
@pytest.mark.parametrize("kind", tiered(COLOUR, [0]))  # (one compiled pass for any uint8)
@pytest.mark.parametrize(("k", "angle", "direction", "mode"),
                         [(5, 45, 1, "constant"), (7, 100, -0.6, "reflect")])
def test_motion_blur_is_kornias(kind, k, angle, direction, mode):
    img = tv.photo("coffee", kind, 11, 12)
    out = on_gpu(img, "motion_blur", k, angle, direction, mode)
    _check(out, al.correlate(img, al.motion_kernel(k, angle, direction), mode),
           f"motion_blur({k}, {angle}, {direction}, {mode}) {kind}")


def test_random_motion_blur_draws_size_angle_direction():
    img = tv.photo("chelsea", "rgb", 10, 11)
    sizes = set()
    for seed in range(6):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _u(g)
        g.random_motion_blur((3, 7), 30, (0.2, 0.6), "edge")
        k = 3 + 2 * int(u(0) * 3)
        sizes.add(k)
        taps = al.motion_kernel(k, -30 + 60 * u(1), 0.2 + 0.4 * u(2))
        _check(np.asarray(g), al.correlate(img, taps, "edge"), f"random_motion_blur {seed}")
    assert len(sizes) > 1, sizes


@SIM
def test_motion_blur_is_one_pass_with_its_neighbours_on_its_loads():
    img = tv.photo("astronaut", "rgb", 9, 10)
    g = mp.gpuimage(img)
    g.adjust_gamma(0.8)
    g.motion_blur(5, 30, 0.2)
    g.invert()
    info = g.explain()
    assert len(info.kernels) == 1 and info.kernels[0].launches == 1, str(info)


# --------------------------------------------------------------------------- elastic_grid
@SIM
def test_elastic_grid_is_the_smooth_grid_warp_in_one_kernel_with_its_neighbours():
    img = tv.photo("chelsea", "rgb", 11, 13)
    disp = np.random.default_rng(2).uniform(-0.4, 0.4, (2, 5, 5))
    g = mp.gpuimage(img)
    g.elastic_grid(disp)
    g.fancy_pca(0.3)
    assert len(g.explain().kernels) == 1, str(g.explain())
    want = al.fancy_pca(al.elastic_grid(img, disp), 0.3)
    _check(np.asarray(g), want, "elastic_grid, fancy_pca")
    assert not np.array_equal(np.asarray(g), al.fancy_pca(img, 0.3))


def test_elastic_grid_of_zero_is_the_identity_and_random_draws_its_grid():
    img = tv.photo("coffee", "rgb", 9, 12)
    g = mp.gpuimage(img)
    g.elastic_grid(np.zeros((2, 5, 5)))
    g.fancy_pca(0.0)
    assert np.array_equal(np.asarray(g), img)
    mp.seed(6)
    g = mp.gpuimage(img)
    u = _u(g)
    g.random_elastic_grid(0.25)
    g.fancy_pca(0.3)
    disp = np.array([-0.25 + 0.5 * u(t) for t in range(50)]).reshape(2, 5, 5)
    _check(np.asarray(g), al.fancy_pca(al.elastic_grid(img, disp), 0.3), "random_elastic_grid")


def test_targets_cannot_follow_elastic_grid_and_the_image_is_unchanged():
    img = tv.photo("coffee", "rgb", 8, 9)
    g = mp.gpuimage(img)
    g.set_targets(boxes=[[1, 1, 5, 5]], keypoints=[[2, 3]])
    with pytest.raises(ValueError, match="elastic_grid: targets cannot follow a non-affine map"):
        g.random_elastic_grid()
    assert_matches(g, img)
    assert np.array_equal(g.targets.boxes, [[1, 1, 5, 5]])
