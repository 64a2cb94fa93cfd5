"""resize, crop, pad, warp_affine, random_affine and random_resized_crop against scikit-image,
NumPy and torchvision's parameter sampling (issue 15)."""

import numpy as np
import pytest
import reference_aug as tv
from reference import SKIMAGE_ATOL, assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.geometry.affine import affine_matrix

pytestmark = pytest.mark.cudasim_ok

CASES = [(p, k) for p in tv.PHOTOS for k in tv.KINDS]
IDS = [f"{p}-{k}" for p, k in CASES]


def _check(out, expected, what):
    assert_matches(out, expected, ulp_uint8=1, atol=SKIMAGE_ATOL, what=what)


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("scale", [(0.5, 0.7), (1.6, 1.3), (1.0, 0.25)])
def test_resize(photo, kind, scale, size):
    img = tv.photo(photo, kind, *size)
    h = max(1, round(img.shape[0] * scale[0]))
    w = max(1, round(img.shape[1] * scale[1]))
    out = on_gpu(img, "resize", h, w)
    _check(out, tv.resize(img, h, w), f"resize({h}, {w}) {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_crop(photo, kind, size):
    img = tv.photo(photo, kind, *size)
    h, w = img.shape[:2]
    win = (h // 3, w // 4, max(1, h - h // 3 - 1), max(1, w // 2))
    out = on_gpu(img, "crop", *win)
    assert_matches(out, tv.crop(img, *win), what=f"crop{win} {photo} {kind}")


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
def test_pad(photo, kind, size):
    img = tv.photo(photo, kind, *size)
    value = 0.25 if kind == "grey" else 200
    out = on_gpu(img, "pad", 2, 0, 3, 5, value)
    assert_matches(out, tv.pad(img, 2, 0, 3, 5, value), what=f"pad {photo} {kind}")


MATRICES = {
    "shear": [[0.9, 0.2, 3.0], [-0.1, 1.1, -4.0]],
    "zoom": [[0.5, 0.0, 2.0], [0.0, 0.5, 1.0], [0.0, 0.0, 1.0]],
    "shift": [[1.0, 0.0, 2.0], [0.0, 1.0, -3.0]],
}


@pytest.mark.parametrize(("photo", "kind"), CASES, ids=IDS)
@pytest.mark.parametrize("name", sorted(MATRICES))
def test_warp_affine(photo, kind, name, size):
    img = tv.photo(photo, kind, *size)
    out = on_gpu(img, "warp_affine", MATRICES[name])
    _check(out, tv.warp_affine(img, MATRICES[name]), f"warp_affine {name} {photo} {kind}")


@pytest.mark.parametrize("kind", tv.KINDS)
def test_crop_pad_resize_fuse_into_one_kernel_and_match(kind, size):
    img = tv.photo("coffee", kind, *size)
    h, w = img.shape[:2]
    value = 0.5 if kind == "grey" else 17
    g = mp.gpuimage(img)
    g.pad(1, 2, 3, 1, value)
    g.fliplr()
    g.crop(1, 1, h, w)
    g.resize(h + 3, max(1, w - 1))
    assert len(g.explain().kernels) == 1, str(g.explain())
    expected = tv.resize(tv.crop(np.ascontiguousarray(np.fliplr(tv.pad(img, 1, 2, 3, 1, value))),
                                 1, 1, h, w), h + 3, max(1, w - 1))
    _check(np.asarray(g), expected, f"pad-fliplr-crop-resize {kind}")


def test_tv_affine_matrix_agrees_with_the_centre_form():
    # two transcriptions of torchvision's inverse affine matrix: the package's closed form and
    # the reference's product of matrices
    for args in [(30.0, (2.0, -3.0), 1.2, (10.0, 0.0)), (-75.0, (0.0, 0.0), 0.8, (5.0, -7.0)),
                 (0.0, (4.0, 1.0), 1.0, (0.0, 0.0))]:
        got = affine_matrix(31, 47, *args)
        np.testing.assert_allclose(got, tv.tv_affine_matrix(31, 47, *args), atol=1e-12)


@pytest.mark.parametrize("kind", tv.KINDS)
def test_random_affine_draws_torchvision_ranges_and_warps(kind, size):
    img = tv.photo("astronaut", kind, *size)
    h, w = img.shape[:2]
    mp.seed(11)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    g.random_affine(20, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-5, 5, -3, 3))
    u = [mprandom.uniform01(key.seed, key.sample, key.op, k) for k in range(6)]
    angle = -20 + 40 * u[0]
    tx, ty = round((2 * u[1] - 1) * 0.1 * w), round((2 * u[2] - 1) * 0.2 * h)
    m = tv.tv_affine_matrix(h, w, angle, (tx, ty), 0.8 + 0.4 * u[3],
                            (-5 + 10 * u[4], -3 + 6 * u[5]))
    _check(np.asarray(g), tv.warp_affine(img, m), f"random_affine {kind}")


@pytest.mark.parametrize("kind", tv.KINDS)
def test_random_resized_crop_is_torchvision_window_then_resize(kind, size):
    img = tv.photo("chelsea", kind, *size)
    mp.seed(5)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    g.random_resized_crop(9, 11)
    draws = [mprandom.uniform01(key.seed, key.sample, key.op, k) for k in range(40)]
    i, j, h, w = tv.crop_params(img.shape[0], img.shape[1], (0.08, 1.0), (3 / 4, 4 / 3), draws)
    assert len(g.explain().kernels) == 1
    _check(np.asarray(g), tv.resize(tv.crop(img, i, j, h, w), 9, 11), f"rrc {kind}")


def test_random_resized_crop_same_seed_same_output_in_pipelines():
    img = tv.photo("coffee", "rgb", 40, 52)
    op = mp.Operation("random_resized_crop", 16, 16)
    outs = []
    for _ in range(2):
        g = mp.gpuimage(img)
        op.apply(g, 123, 4, 0)
        outs.append(np.asarray(g))
    assert_matches(outs[1], outs[0])
    g = mp.gpuimage(img)
    op.apply(g, 124, 4, 0)
    assert not np.array_equal(np.asarray(g), outs[0])


BAD = [
    ("resize", (0, 5)), ("resize", (5, 2.5)), ("crop", (-1, 0, 2, 2)), ("crop", (0, 0, 99, 2)),
    ("crop", (0, 0, 2, 99)), ("pad", (1, 1, 1, -1)), ("pad", (1, 1, 1, 1, 300)),
    ("pad", (1, 1, 1, 1, 1.5)), ("warp_affine", ([[1, 0], [0, 1]],)),
    ("warp_affine", ([[1, 0, 0], [0, 1, 0], [0.1, 0, 1]],)), ("random_affine", (-5,)),
    ("random_affine", (5, (0.1, 2))), ("random_affine", (5, None, (0, 1))),
    ("random_resized_crop", (0, 4)), ("random_resized_crop", (4, 4, (0.5, 0.1))),
    ("random_resized_crop", (4, 4, (0.1, 1), (0, 1))),
]
NAMES = ["height", "width", "top", "height", "width", "right", "value", "value", "matrix",
         "matrix", "degrees", "translate", "scale", "height", "scale", "ratio"]


@pytest.mark.parametrize(("call", "name"), list(zip(BAD, NAMES, strict=True)),
                         ids=[f"{c[0]}{c[1]}" for c in BAD])
def test_bad_arguments_raise_naming_them(call, name):
    img = tv.photo("astronaut", "rgb", 8, 9)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError, match=name):
        getattr(g, call[0])(*call[1])
    assert_matches(g, img, what="a rejected call changed the image")
