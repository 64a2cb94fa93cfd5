"""vflip, center_crop, random_crop and rotate's expand / center against NumPy transcriptions of
torchvision v2 (tests/reference_aug.py) and scikit-image's rotate; index maps fuse into one
kernel with their neighbours."""

import numpy as np
import pytest
import reference_aug as tv
from reference import assert_matches, on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops.geometry.random_crop import padding_ltrb

pytestmark = pytest.mark.cudasim_ok

SKIMAGE_ATOL = 1e-9


@pytest.mark.parametrize("kind", tv.KINDS)
def test_vflip(kind, size):
    img = tv.photo("astronaut", kind, *size)
    assert_matches(on_gpu(img, "vflip"), tv.vflip(img), what=f"vflip {kind}")


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize("crop", [(1, 1), (4, 6), (7, 7), (20, 9), (30, 40)])
def test_center_crop(kind, crop, size):
    img = tv.photo("coffee", kind, *size)
    assert_matches(on_gpu(img, "center_crop", *crop), tv.center_crop(img, *crop),
                   what=f"center_crop{crop} {kind} {size}")


def _keyed(g):
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    return [mprandom.uniform01(key.seed, key.sample, key.op, t) for t in range(2)]


CROPS = [((5, 4), None, False, 0, "constant"), ((9, 9), 3, False, 17, "constant"),
         ((12, 30), (2, 5), True, 200, "constant"), ((6, 8), (1, 2, 3, 4), False, 0, "edge"),
         ((40, 12), None, True, 0, "edge")]


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize(("crop", "padding", "grow", "fill", "mode"), CROPS)
def test_random_crop(kind, crop, padding, grow, fill, mode, size):
    img = tv.photo("chelsea", kind, *size)
    if kind == "grey":
        fill = fill / 255.0
    pad = (0, 0, 0, 0) if padding is None else padding_ltrb(padding)
    for seed in range(3):
        mp.seed(seed)
        g = mp.gpuimage(img)
        draws = _keyed(g)
        params = tv.random_crop_params(img.shape[0], img.shape[1], crop, pad, grow, draws)
        if params is None:
            with pytest.raises(ValueError, match="larger than"):
                g.random_crop(*crop, padding, grow, fill, mode)
            continue
        g.random_crop(*crop, padding, grow, fill, mode)
        want = tv.random_crop(img, crop, pad, grow, fill, "edge" if mode == "edge" else
                              "constant", draws)
        assert_matches(g, want, what=f"random_crop{crop} {padding} {grow} {mode} {kind}")


def test_random_crop_position_is_uniform():
    # a 2 x 2 window of a 6 x 6 ramp: its first value says which of the 5 rows it starts at
    tops = np.zeros(5, dtype=int)
    for seed in range(500):
        mp.seed(seed)
        g = mp.gpuimage(np.arange(36, dtype=np.uint8).reshape(6, 6) * 7)
        g.random_crop(2, 2)
        tops[int(np.asarray(g)[0, 0]) // 42] += 1
    assert tops.sum() == 500 and (tops > 60).all() and (tops < 140).all(), tops


@pytest.mark.parametrize("kind", tv.KINDS)
@pytest.mark.parametrize(("angle", "expand", "center"), [
    (30, True, None), (-100, True, None), (90, True, None), (12.5, False, (3, 2)),
    (45, True, (0, 0))])
def test_rotate_expand_and_center_match_skimage(kind, angle, expand, center, size):
    img = tv.photo("astronaut", kind, *size)
    out = on_gpu(img, "rotate", angle, expand, 0, center)
    assert_matches(out, tv.rotate(img, angle, expand, center), ulp_uint8=1,
                   atol=SKIMAGE_ATOL, what=f"rotate({angle}, {expand}, {center}) {kind}")


def test_rotate_with_only_an_angle_keeps_its_kernel():
    g = mp.gpuimage(tv.photo("astronaut", "rgb", 9, 9))
    g.rotate(10)
    assert [k.ops for k in g.explain().kernels] == [("rotate",)]
    g = mp.gpuimage(tv.photo("astronaut", "rgb", 9, 9))
    g.rotate(10, expand=True)
    assert [k.ops for k in g.explain().kernels] == [("rotate_about",)]


def test_random_rotate_expand_draws_its_angle():
    img = tv.photo("chelsea", "rgb", 15, 21)
    mp.seed(4)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    g.random_rotate(-50, 50, expand=True)
    angle = -50 + 100 * mprandom.uniform01(key.seed, key.sample, key.op, 0)
    assert_matches(g, tv.rotate(img, angle, True), ulp_uint8=1, atol=SKIMAGE_ATOL)


@pytest.mark.parametrize("kind", ["rgb", "grey"])
def test_geometry_chain_is_one_kernel(kind):
    img = tv.photo("coffee", kind, 23, 29)
    g = mp.gpuimage(img)
    g.vflip()
    g.center_crop(19, 21)
    g.random_crop(15, 17)
    g.invert()
    g.rotate(20, expand=True)
    g.random_vflip(1.0)
    g.solarize(0.5 if kind == "grey" else 128)
    assert len(g.explain().kernels) == 1, str(g.explain())


def test_pad_after_a_crop_reads_its_fill():
    # a fill-reading map after a crop must not read the source outside the crop's window
    # (it fused into one gather before, which compared positions with the source's bounds)
    img = (np.arange(20 * 20 * 3) % 251).astype(np.uint8).reshape(20, 20, 3)
    g = mp.gpuimage(img)
    g.crop(5, 5, 10, 10)
    g.pad(2, 2, 2, 2, 7)
    assert_matches(g, tv.pad(img[5:15, 5:15], 2, 2, 2, 2, 7))
    g = mp.gpuimage(img)
    g.crop(5, 5, 10, 10)
    g.random_crop(12, 12, padding=2, fill=9)
    out = np.asarray(g)
    assert (out[0] == 9).all() or (out[-1] == 9).all() or (out[:, 0] == 9).all() or \
        (out[:, -1] == 9).all()


BAD = [("center_crop", (0, 3), "height"), ("random_crop", (3, 3, -1), "padding"),
       ("random_crop", (3, 3, (1, 2, 3)), "padding"),
       ("random_crop", (3, 3, 1, False, 0, "reflect"), "reflect"),
       ("random_crop", (3, 3, 1, False, 0, "wrap"), "padding_mode"),
       ("random_crop", (3, 3, 1, False, 300), "fill"),
       ("random_crop", (30, 3), "larger than"), ("rotate", (10, False, 5), "fill"),
       ("rotate", (10, 1), "expand"), ("rotate", (10, False, 0, (1,)), "center"),
       ("random_vflip", (2,), "p")]


@pytest.mark.parametrize(("method", "args", "match"), BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_raise_naming_them(method, args, match):
    img = tv.photo("chelsea", "rgb", 7, 6)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError, match=match):
        getattr(g, method)(*args)
    assert_matches(g, img)
