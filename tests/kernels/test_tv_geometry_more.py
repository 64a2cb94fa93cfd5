"""Geometric ops (rot90, translate, shear, pad_to, zoom_out,
perspective) against NumPy transcriptions (tests/reference_aug.py, tests/reference_tv2.py):
each fuses with its neighbours into one gather, and its targets follow it."""

import numpy as np
import pytest
import reference_aug as tv
import reference_geo as geo
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom

#: the simulator runs the fused-chain tests only (tiny images): each new kernel text once
sim = pytest.mark.cudasim_ok


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


@sim
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
    ("random_shear", ((1, 2, 3),), "shear"), ("random_shear", (-4,), "shear"),
    ("perspective", ([[0, 0]] * 3, [[0, 0]] * 4), "startpoints"),
    ("perspective", ([[0, 0], [1, 0], [2, 0], [3, 0]],) * 2, "homography"),
    ("random_perspective", (1.5,), "distortion_scale"), ("random_perspective", (0.5, -1), "p"),
    ("pad_to", (0, 4), "min_height"), ("pad_to", (4, 4, "middle"), "position"),
    ("pad_to", (4, 4, "random"), "random_pad_to"), ("pad_to", (9, 9, "center", 256), "fill"),
    ("random_pad_to", (4, 2.5), "min_width"), ("random_zoom_out", (0, (0.5, 2)), "side_range"),
    ("random_zoom_out", (-1,), "fill"), ("random_zoom_out", (0, (1, 2), 2), "p")])
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


@sim
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


# --------------------------------------------------------------------------- perspective
def _corners(h, w):
    return [[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]]


ENDS = [lambda h, w: _corners(h, w),
        lambda h, w: [[1, 2], [w - 3, 0], [w - 1, h - 2], [2, h - 1]],
        lambda h, w: [[3, 3], [w - 4, 2], [w - 2, h - 4], [1, h - 2]],
        lambda h, w: [[-2, 1], [w + 3, -1], [w - 1, h + 2], [0, h - 3]]]


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("end", range(len(ENDS)))
def test_perspective_is_torchvisions(kind, end):
    img = tv.photo("astronaut", kind, 13, 16)
    starts, ends = _corners(13, 16), ENDS[end](13, 16)
    want = geo.perspective(img, geo.perspective_coeffs(starts, ends))
    assert_matches(on_gpu(img, "perspective", starts, ends), want, ulp_uint8=1, atol=1e-5,
                   what=f"perspective {ends} {kind}")


def test_random_perspective_draws_torchvisions_corners():
    img = tv.photo("chelsea", "rgb", 12, 15)
    ran = 0
    for seed in range(6):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _keyed(g, 9)
        g.random_perspective(0.6, p=0.7)
        if u[8] < 0.7:
            ran += 1
            ends = geo.random_perspective_endpoints(12, 15, 0.6, u)
            want = geo.perspective(img, geo.perspective_coeffs(_corners(12, 15), ends))
        else:
            want = img
        assert_matches(g, want, ulp_uint8=1, what=f"seed {seed}")
    assert 0 < ran < 6


@sim
def test_perspective_fuses_with_index_maps_and_values_in_one_kernel():
    img = tv.photo("coffee", "rgb", 14, 14)
    ends = ENDS[2](12, 12)
    g = mp.gpuimage(img)
    g.crop(1, 1, 12, 12)
    g.vflip()
    g.invert()
    g.perspective(_corners(12, 12), ends)
    g.rot90()
    g.solarize(100)
    assert len(g.explain().kernels) == 1, str(g.explain())
    want = geo.perspective(tv.invert(img[1:13, 1:13][::-1]),
                           geo.perspective_coeffs(_corners(12, 12), ends))
    assert_matches(g, tv.solarize(np.rot90(want), 100), ulp_uint8=1)


def test_perspective_moves_boxes_and_keypoints():
    img = np.zeros((20, 20), np.uint8)
    starts, ends = _corners(20, 20), [[2, 0], [19, 3], [17, 19], [0, 16]]
    g = mp.gpuimage(img)
    g.set_targets(boxes=[[4, 2, 12, 9]], keypoints=[[0, 0], [19, 0], [7.5, 11]])
    g.perspective(starts, ends)
    # torchvision's homography works on pixel edges (X = x + 1/2): an input point goes to
    # H^-1 of it, H the map from output to input of perspective_coeffs
    c = geo.perspective_coeffs(starts, ends)
    fwd = np.linalg.inv(np.array([c[0:3], c[3:6], [c[6], c[7], 1.0]]))

    def moved(x, y):
        v = fwd @ [x, y, 1.0]
        return v[0] / v[2], v[1] / v[2]

    kp = [np.subtract(moved(x + 0.5, y + 0.5), 0.5) for x, y in ([0, 0], [19, 0], [7.5, 11])]
    assert np.allclose(g.keypoints, kp, atol=1e-4)
    corners = np.array([moved(x, y) for x in (4, 12) for y in (2, 9)])
    box = [*corners.min(0), *corners.max(0)]
    assert np.allclose(g.boxes, [box], atol=1e-4)


# --------------------------------------------------------------------------- pad_to, zoom out
@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("position", ["center", "top_left", "top_right", "bottom_left",
                                      "bottom_right"])
@pytest.mark.parametrize("minimum", [(4, 4), (9, 7), (12, 15)])
def test_pad_to_is_albumentations_pad_if_needed(kind, position, minimum):
    img = tv.photo("astronaut", kind, 6, 7)
    fill = 0.25 if kind == "grey" else 77
    want = geo.pad(img, *geo.pad_if_needed_sides(6, 7, *minimum, position), fill)
    assert_matches(on_gpu(img, "pad_to", *minimum, position, fill), want,
                   what=f"pad_to{minimum} {position} {kind}")


def test_random_pad_to_and_zoom_out_draw_their_placements():
    img = tv.photo("coffee", "rgb", 6, 5)
    for seed in range(8):
        mp.seed(seed)
        g = mp.gpuimage(img)
        u = _keyed(g)
        g.random_pad_to(11, 8, fill=3)
        assert_matches(g, geo.pad(img, *geo.pad_if_needed_sides(6, 5, 11, 8, "random", u), 3))
        g = mp.gpuimage(img)
        u = _keyed(g, 4)
        g.random_zoom_out(9, (1.0, 3.0), p=0.8)
        assert_matches(g, geo.pad(img, *geo.zoom_out_sides(6, 5, (1.0, 3.0), 0.8, u), 9),
                       what=f"seed {seed}")


@sim
def test_pad_to_and_zoom_out_fuse_with_the_maps_after_them():
    img = tv.photo("chelsea", "rgb", 7, 9)
    g = mp.gpuimage(img)
    g.pad_to(10, 10, "top_left", 5)
    g.vflip()
    g.rot90()
    g.invert()
    assert len(g.explain().kernels) == 1, str(g.explain())
    assert_matches(g, tv.invert(np.rot90(geo.pad(img, 0, 3, 0, 1, 5)[::-1])))
    g = mp.gpuimage(img)
    g.random_zoom_out(0, (1.5, 2.0), p=1.0)
    g.random_crop(8, 8)
    g.perspective(_corners(8, 8), ENDS[1](8, 8))
    assert len(g.explain().kernels) == 1, str(g.explain())
    # a fused pad's fill read through the homography (bounded and projective at once)
    g = mp.gpuimage(img)
    g.pad_to(10, 12, "center", 200)
    g.perspective(_corners(10, 12), ENDS[3](10, 12))
    assert len(g.explain().kernels) == 1, str(g.explain())
    want = geo.perspective(geo.pad(img, 1, 2, 1, 2, 200),
                           geo.perspective_coeffs(_corners(10, 12), ENDS[3](10, 12)))
    assert_matches(g, want, ulp_uint8=1)


def test_pad_to_moves_boxes():
    g = mp.gpuimage(np.zeros((4, 6), np.uint8))
    g.set_targets(boxes=[[1, 1, 3, 2]])
    g.pad_to(8, 8)  # 2 rows on top, 1 column on the left
    assert np.allclose(g.boxes, [[2, 3, 4, 4]])


def test_torchvision_named_transforms_record_the_ops():
    import millipyde.transforms as T

    img = tv.photo("chelsea", "rgb", 10, 12)
    mp.seed(3)
    g = mp.gpuimage(img)
    u = _keyed(g, 9)
    T.RandomPerspective(0.5, p=1.0)(g)
    ends = geo.random_perspective_endpoints(10, 12, 0.5, u)
    assert_matches(g, geo.perspective(img, geo.perspective_coeffs(_corners(10, 12), ends)),
                   ulp_uint8=1)
    g = mp.gpuimage(img)
    u = _keyed(g, 4)
    T.RandomZoomOut(fill=7, side_range=(1.0, 2.0), p=1.0)(g)
    assert_matches(g, geo.pad(img, *geo.zoom_out_sides(10, 12, (1.0, 2.0), 1.0, u), 7))
    assert "RandomPerspective" not in T.NOT_SUPPORTED and "RandomZoomOut" in T.__all__
    with pytest.raises(ValueError, match="fill"):
        T.RandomPerspective(fill=3)


# --------------------------------------------------------------------------- resize antialias
@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("out", [(5, 7), (11, 30), (30, 30)])
def test_resize_antialias_is_skimages(kind, out):
    from skimage import transform

    img = tv.photo("astronaut", kind, 24, 26)
    want = transform.resize(img, out, order=1, mode="edge", anti_aliasing=True,
                            preserve_range=True)
    if kind == "rgba":  # alpha resized without the prefilter (stencils keep alpha)
        want[..., 3] = transform.resize(img[..., 3], out, order=1, mode="edge",
                                        anti_aliasing=False, preserve_range=True)
    assert_matches(on_gpu(img, "resize", *out, antialias=True), tv._back(want, img.dtype),
                   ulp_uint8=1, atol=1e-9, what=f"resize{out} antialias {kind}")


def test_resize_antialias_adds_one_stencil_and_keeps_the_default():
    # pixel noise shrunk 6x: kept as noise without the prefilter, near its mean with it
    img = (np.random.default_rng(0).integers(0, 2, (60, 60)) * 255).astype(np.uint8)
    g = mp.gpuimage(img)
    g.resize(10, 10, antialias=True)
    assert [k.kind for k in g.explain().kernels] == ["stencil", "gather"], str(g.explain())
    smooth = np.asarray(g).astype(float)
    g = mp.gpuimage(img)
    g.resize(10, 10)
    assert len(g.explain().kernels) == 1
    assert smooth.std() < 25 < np.asarray(g).astype(float).std()
