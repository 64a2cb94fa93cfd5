"""Geometric ops of issue 31's second wave (rot90, translate, shear, pad_to, zoom_out,
perspective) against NumPy transcriptions (tests/reference_aug.py, tests/reference_tv2.py):
each fuses with its neighbours into one gather, and its targets follow it."""

import numpy as np
import pytest
import reference_aug as tv
import reference_geo as geo
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom

pytestmark = pytest.mark.cudasim_ok


def _keyed(g, n=2):
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    return [mprandom.uniform01(key.seed, key.sample, key.op, t) for t in range(n)]


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("k", [0, 1, 2, 3, -1, 6])
def test_rot90_is_numpy_rot90(kind, k):
    img = tv.photo("astronaut", kind, 7, 12)
    assert_matches(on_gpu(img, "rot90", k), np.rot90(img, k), what=f"rot90({k}) {kind}")


def test_random_rot90_draws_a_quarter_turn_per_image():
    img = tv.photo("chelsea", "rgb", 5, 8)
    seen = np.zeros(4, int)
    for seed in range(200):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u, coin = _keyed(g)
        g.random_rot90(p=0.75)
        k = min(int(u * 4), 3) if coin < 0.75 else 0
        assert_matches(g, np.rot90(img, k), what=f"seed {seed}")
        seen[k] += 1
    # k = 0 with probability 1/4 + 3/16, the others 3/16 each
    assert 60 < seen[0] < 110 and all(20 < s < 60 for s in seen[1:]), seen


def test_rot90_fuses_with_its_neighbours():
    img = tv.photo("coffee", "rgb", 9, 14)
    g = mp.gpuimage(img)
    g.crop(1, 2, 7, 10)
    g.rot90(1)
    g.vflip()
    g.invert()
    g.random_rot90()
    assert len(g.explain().kernels) == 1, str(g.explain())
    g = mp.gpuimage(img)
    g.crop(1, 2, 7, 10)
    g.rot90(1)
    g.vflip()
    g.invert()
    assert_matches(g, tv.invert(np.rot90(img[1:8, 2:12], 1)[::-1]))


def test_rot90_moves_boxes_keypoints_and_mask():
    img = np.zeros((6, 10), np.uint8)
    mask = np.zeros((6, 10), np.int32)
    mask[1:3, 2:5] = 7
    g = mp.gpuimage(img)
    g.set_targets(boxes=[[2, 1, 5, 3]], keypoints=[[2, 1]], mask=mask)
    g.rot90(1)
    # np.rot90: input (y, x) goes to (W - 1 - x, y)
    assert np.allclose(g.boxes, [[1, 5, 3, 8]])
    assert np.allclose(g.keypoints, [[1, 7]])
    assert np.array_equal(g.mask, np.rot90(mask))


@pytest.mark.parametrize(("method", "args", "match"), [
    ("rot90", (1.5,), "k"), ("rot90", (True,), "k"), ("random_rot90", (1.5,), "p"),
    ("translate", ("1",), "dx"), ("random_translate", (1.5,), "translate_x"),
    ("random_translate", (None, (0.3, 0.1)), "translate_y"), ("shear", (90,), "shear_x"),
    ("random_shear", ((1, 2, 3),), "shear"), ("random_shear", (-4,), "shear")])
def test_bad_arguments_raise_naming_them(method, args, match):
    img = tv.photo("chelsea", "rgb", 7, 6)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError, match=match):
        getattr(g, method)(*args)
    assert_matches(g, img)


# --------------------------------------------------------------------------- translate, shear
@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize(("dx", "dy"), [(0, 0), (1, 0), (2.5, -1.25), (-3, 4), (40, 0)])
def test_translate_is_kornias_warp(kind, dx, dy):
    img = tv.photo("astronaut", kind, 9, 13)
    want = geo.kornia_warp_affine(img, geo.translation_matrix(dx, dy))
    assert_matches(on_gpu(img, "translate", dx, dy), want, ulp_uint8=1, atol=1e-9,
                   what=f"translate({dx}, {dy}) {kind}")


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize(("shx", "shy"), [(0, 0), (20, 0), (-35, 10), (5, -60)])
def test_shear_is_kornias_warp(kind, shx, shy):
    img = tv.photo("chelsea", kind, 11, 8)
    want = geo.kornia_warp_affine(img, geo.shear_matrix(11, 8, shx, shy))
    assert_matches(on_gpu(img, "shear", shx, shy), want, ulp_uint8=1, atol=1e-9,
                   what=f"shear({shx}, {shy}) {kind}")


def test_random_translate_and_shear_draw_kornias_parameters():
    img = tv.photo("coffee", "rgb", 10, 12)
    for seed in range(4):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _keyed(g)
        g.random_translate((-0.2, 0.3), 0.1)
        dx, dy = (-0.2 + 0.5 * u[0]) * 12, (-0.1 + 0.2 * u[1]) * 10
        assert_matches(g, geo.kornia_warp_affine(img, geo.translation_matrix(dx, dy)),
                       ulp_uint8=1)
        g = mp.gpuimage(img)
        u = _keyed(g)
        g.random_shear((-10, 20, 5, 30))
        shx, shy = -10 + 30 * u[0], 5 + 25 * u[1]
        assert_matches(g, geo.kornia_warp_affine(img, geo.shear_matrix(10, 12, shx, shy)),
                       ulp_uint8=1)


def test_translate_and_shear_fuse_with_their_neighbours():
    img = tv.photo("coffee", "rgb", 12, 12)
    g = mp.gpuimage(img)
    g.vflip()
    g.random_crop(10, 10)
    g.translate(1.5, -2)
    g.rot90()
    g.invert()
    assert len(g.explain().kernels) == 1, str(g.explain())
    g = mp.gpuimage(img)
    g.random_shear(15)
    g.random_translate(0.1, 0.1)  # a second sampler: its own gather
    assert len(g.explain().kernels) == 2, str(g.explain())


def test_translate_moves_boxes():
    g = mp.gpuimage(np.zeros((10, 21), np.uint8))
    g.set_targets(boxes=[[2, 1, 5, 3]], keypoints=[[3, 2]])
    g.translate(4, 2)  # kornia's grid moves the content by 4 * 21 / 20 and 2 * 10 / 9
    assert np.allclose(g.boxes, [[2 + 4.2, 1 + 20 / 9, 5 + 4.2, 3 + 20 / 9]])
    assert np.allclose(g.keypoints, [[3 + 4.2, 2 + 20 / 9]])
