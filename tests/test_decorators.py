"""Public decorators (@mp.elementwise, @mp.pixelwise, @mp.index_map): user ops recorded like
methods, run by Operations, fused with the built-ins (kernel counts, tinygrad's
``check_schedule`` habit), and the issue-15 chains' kernel counts."""

import math

import numpy as np
import pytest
import reference as ref
import reference_aug as tv
from reference import assert_matches

import millipyde as mp

pytestmark = pytest.mark.cudasim_ok


@mp.elementwise
def invert(v, c):
    return 1.0 - v


@mp.elementwise
def scale_channel(v, c, k):
    if c == 1:
        return v * k
    return v


@mp.pixelwise
def swap_rb(r, g, b):
    return b, g, r


@mp.pixelwise
def mix(r, g, b, t):
    m = (r + g + b) / 3.0
    return r + t * (m - r), g + t * (m - g), b + t * (m - b)


@mp.index_map
def shift_down(row, col, height, width, dy):
    return row - dy, col


def _half_shape(h, w):
    return (h + 1) // 2, w


@mp.index_map(shape=_half_shape)
def every_other_row(row, col, height, width):
    return 2.0 * row, col


@mp.index_map
def swirl(row, col, height, width, strength):
    # not affine: the map is called in the kernel for every output pixel
    cy, cx = (height - 1) / 2.0, (width - 1) / 2.0
    dy, dx = row - cy, col - cx
    a = strength * math.exp(-(dy * dy + dx * dx) / (width * width + 1.0))
    return cy + math.cos(a) * dy - math.sin(a) * dx, cx + math.sin(a) * dy + math.cos(a) * dx


def _count(g) -> int:
    return len(g.explain().kernels)


def test_elementwise_matches_numpy_and_keeps_alpha():
    img = tv.photo("coffee", "rgba", 11, 13)
    g = mp.gpuimage(img)
    assert invert(g) is None
    out = np.asarray(g)
    want = img.copy()
    want[..., :3] = 255 - img[..., :3]
    assert_matches(out, want)


def test_elementwise_parameter_clips_and_rounds():
    img = tv.photo("chelsea", "rgb", 9, 10)
    g = mp.gpuimage(img)
    scale_channel(g, 1.7)
    want = img.copy()
    want[..., 1] = np.clip(np.rint(img[..., 1] / 255.0 * 1.7 * 255.0), 0, 255)
    assert_matches(np.asarray(g), want, ulp_uint8=1)


def test_pixelwise_mixes_channels_and_refuses_grey():
    img = tv.photo("astronaut", "rgb", 8, 9)
    g = mp.gpuimage(img)
    swap_rb(g)
    assert_matches(np.asarray(g), np.ascontiguousarray(img[..., ::-1]))
    grey = mp.gpuimage(tv.photo("astronaut", "grey", 8, 9))
    with pytest.raises(ValueError, match="greyscale"):
        swap_rb(grey)


def test_index_map_with_shape_rule_and_zero_outside():
    img = tv.photo("coffee", "rgb", 12, 7)
    g = mp.gpuimage(img)
    every_other_row(g)
    assert_matches(np.asarray(g), np.ascontiguousarray(img[::2]))
    g = mp.gpuimage(img)
    shift_down(g, 3)
    want = np.zeros_like(img)
    want[3:] = img[:-3]
    assert_matches(np.asarray(g), want)


def test_non_affine_index_map_matches_skimage_warp():
    from skimage import transform

    img = tv.photo("chelsea", "rgb", 20, 24)
    g = mp.gpuimage(img)
    swirl(g, 1.5)

    def inverse(xy, s):
        rows, cols = np.vectorize(swirl.fn)(xy[:, 1], xy[:, 0], 20, 24, s)
        return np.stack([cols, rows], axis=1)

    # map_args: skimage's fast-path check breaks on plain functions without them
    want = transform.warp(img, inverse, map_args={"s": 1.5}, order=1, mode="constant", cval=0,
                          clip=False, preserve_range=True)
    assert_matches(np.asarray(g), np.clip(np.rint(want), 0, 255).astype(np.uint8), ulp_uint8=1)


def test_operation_runs_user_ops_with_drawn_ranges():
    img = tv.photo("coffee", "rgb", 10, 12)
    op = mp.Operation(mix, (0.2, 0.8))
    outs = []
    for seed in (4, 4, 5):
        g = mp.gpuimage(img)
        op.apply(g, seed, 0, 0)
        outs.append(np.asarray(g))
    assert_matches(outs[1], outs[0])
    assert not np.array_equal(outs[2], outs[0])
    x = mp.gpuimage(img)
    mp.Pipeline([x], [mp.Operation(invert), mp.Operation("fliplr")]).run()
    want = np.ascontiguousarray(np.fliplr(img))
    want = 255 - want
    assert_matches(np.asarray(x), want)


def test_bad_parameters_raise():
    g = mp.gpuimage(tv.photo("coffee", "rgb", 4, 5))
    with pytest.raises(ValueError, match="parameters"):
        scale_channel(g)
    with pytest.raises(ValueError, match="parameter 0"):
        scale_channel(g, "x")
    with pytest.raises(ValueError, match="at most"):
        mp.elementwise(lambda v, c, a, b, d, e: v)


# ---------------------------------------------------------------- kernel counts (issue 15)
def test_fliplr_user_elementwise_gamma_is_one_kernel():
    img = tv.photo("astronaut", "rgba", 9, 13)
    g = mp.gpuimage(img)
    g.fliplr()
    invert(g)
    g.adjust_gamma(1.5)
    assert _count(g) == 1, str(g.explain())
    want = ref.adjust_gamma(_inv(np.ascontiguousarray(np.fliplr(img))), 1.5)
    assert_matches(np.asarray(g), want, ulp_uint8=1)


def _inv(img):
    out = np.array(img, copy=True)
    out[..., :3] = 255 - out[..., :3]
    return out


def test_user_index_map_then_user_pixelwise_is_one_kernel():
    img = tv.photo("chelsea", "rgb", 12, 9)
    g = mp.gpuimage(img)
    every_other_row(g)
    swap_rb(g)
    assert _count(g) == 1, str(g.explain())
    assert_matches(np.asarray(g), np.ascontiguousarray(img[::2, :, ::-1]))


def test_imagenet_style_chain_is_one_kernel_and_two_with_contrast():
    img = tv.photo("coffee", "rgb", 30, 40)
    g = mp.gpuimage(img)
    g.random_resized_crop(16, 16)
    g.fliplr()
    g.adjust_saturation(1.3)
    g.adjust_hue(0.05)
    g.gaussian_noise(0.02)
    assert _count(g) == 1, str(g.explain())
    g = mp.gpuimage(img)
    g.random_resized_crop(16, 16)
    g.fliplr()
    g.adjust_saturation(1.3)
    g.adjust_contrast(0.7)
    g.adjust_hue(0.05)
    g.gaussian_noise(0.02)
    plan = g.explain()
    assert len(plan.kernels) <= 2, str(plan)
    assert [k.kind for k in plan.kernels] == ["stat", "gather"]
    assert np.asarray(g).shape == (16, 16, 3)


def test_fused_chain_equals_unfused():
    from millipyde.graph.plan import schedule

    img = tv.photo("astronaut", "rgba", 21, 17)

    def run():
        g = mp.gpuimage(img)
        mp.Operation("random_resized_crop", 12, 10).apply(g, 1, 2, 0)
        g.fliplr()
        g.adjust_saturation(0.7)
        g.adjust_contrast(1.3)
        g.adjust_hue(-0.2)
        mp.Operation("gaussian_noise", 0.05).apply(g, 1, 2, 5)
        return np.asarray(g)

    fused = run()
    with schedule.fusion(False):
        unfused = run()
    assert_matches(fused, unfused)


def test_user_ops_travel_to_other_processes_by_pickle():
    # Dask ships Operations by cloudpickle; the op re-registers where it is unpickled
    cloudpickle = pytest.importorskip("cloudpickle")
    fn = cloudpickle.loads(cloudpickle.dumps(scale_channel))
    assert fn.name == scale_channel.name
    img = tv.photo("coffee", "rgb", 6, 7)
    a, b = mp.gpuimage(img), mp.gpuimage(img)
    mp.Operation(fn, 1.5).apply(a, 0, 0, 0)
    scale_channel(b, 1.5)
    assert_matches(np.asarray(a), np.asarray(b))
