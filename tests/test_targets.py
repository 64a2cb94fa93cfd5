"""Boxes, masks and keypoints follow an image through every geometric op (issue 15): a filled
box drawn on the image, transformed with it, lies inside the transformed box and touches each
of its sides (within 1 pixel; for rotations and affines the box is the tight box of the moved
corners, which the drawn shape touches at its corners)."""

import numpy as np
import pytest

import millipyde as mp

H, W = 40, 56
BOX = (14, 9, 31, 22)  # xyxy, pixel edges: columns 14..30, rows 9..21

OPS = [
    ("fliplr", ()), ("transpose", ()), ("rotate", (30,)), ("rotate", (-100,)),
    ("resize", (30, 90)), ("crop", (4, 6, 30, 40)), ("pad", (3, 5, 7, 2)),
    ("warp_affine", ([[0.9, 0.3, -4.0], [-0.2, 1.1, 3.0]],)),
    ("random_affine", (25, (0.1, 0.1), (0.8, 1.2), (-8, 8))),
    ("random_resized_crop", (32, 32, (0.5, 1.0))),
    ("vflip", ()), ("center_crop", (30, 40)), ("center_crop", (44, 60)),
    ("random_crop", (36, 50, 2)), ("random_crop", (44, 60, None, True, 0, "edge")),
    ("rotate", (30, True)), ("rotate", (20, False, 0, (20, 15))),
    ("random_rotate", (-60, 60, True)),
]


def _drawn() -> np.ndarray:
    img = np.zeros((H, W), np.uint8)
    x0, y0, x1, y1 = BOX
    img[y0:y1, x0:x1] = 255
    return img


def _extent(img: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(img > 127)
    return xs.min(), ys.min(), xs.max() + 1, ys.max() + 1


@pytest.mark.parametrize(("name", "args"), OPS, ids=[o[0] + str(i) for i, o in enumerate(OPS)])
def test_box_mask_and_keypoint_follow_the_drawn_box(name, args):
    mp.seed(2)
    g = mp.gpuimage(_drawn())
    mask = (_drawn() > 0).astype(np.int32) * 7
    g.set_targets(boxes=[BOX], labels=[5], keypoints=[[14, 9], [30, 21]], mask=mask)
    getattr(g, name)(*args)
    out = np.asarray(g)
    (box,) = g.boxes
    assert list(g.labels) == [5]
    ex0, ey0, ex1, ey1 = _extent(out)
    # the drawn pixels lie inside the box and touch each side (within 1 pixel)
    assert ex0 >= box[0] - 1 and ey0 >= box[1] - 1 and ex1 <= box[2] + 1 and ey1 <= box[3] + 1
    assert abs(ex0 - box[0]) <= 1 and abs(ey0 - box[1]) <= 1
    assert abs(ex1 - box[2]) <= 1 and abs(ey1 - box[3]) <= 1
    # the mask moved nearest-neighbour: its label where the image is bright (edges aside)
    m = g.mask
    assert m.shape == out.shape and set(np.unique(m)) <= {0, 7}
    assert ((m == 7) != (out > 127)).mean() < 0.05
    # the box's first and last pixels' centres are the keypoints: still on bright pixels
    for (x, y), vis in zip(g.keypoints, g.keypoints_visible, strict=True):
        assert vis
        yi, xi = int(round(y)), int(round(x))
        assert out[max(0, yi - 1):yi + 2, max(0, xi - 1):xi + 2].max() > 127


def test_colour_ops_leave_targets_and_boxes_leaving_are_dropped():
    img = np.zeros((H, W, 3), np.uint8)
    g = mp.gpuimage(img)
    g.set_targets(boxes=[[1, 1, 5, 5], [40, 20, 50, 30]], labels=[1, 2],
                  keypoints=[[2, 2], [45, 25]])
    g.adjust_saturation(0.5)
    g.gaussian_noise(0.1)
    assert np.array_equal(g.boxes, [[1, 1, 5, 5], [40, 20, 50, 30]])
    g.crop(10, 20, 25, 30)  # the first box and keypoint leave the window
    assert np.array_equal(g.labels, [2])
    assert np.allclose(g.boxes, [[20, 10, 30, 20]])
    assert list(g.keypoints_visible) == [False, True]
    assert np.allclose(g.keypoints, [[-18, -8], [25, 15]])


def test_targets_follow_through_a_generator_with_the_same_random_parameters():
    base = mp.gpuimage(_drawn())
    base.set_targets(boxes=[BOX], labels=[3])
    ops = [mp.Operation("random_affine", 30, (0.1, 0.1)), mp.Operation("fliplr",
                                                                       probability=0.5)]
    gen = mp.Generator([base], ops, outputs=6, seed=4)
    for out in gen:
        (box,) = out.boxes
        ex0, ey0, ex1, ey1 = _extent(np.asarray(out))
        assert abs(ex0 - box[0]) <= 1 and abs(ey1 - box[3]) <= 1


def test_bad_targets_raise_naming_them():
    g = mp.gpuimage(np.zeros((5, 6), np.uint8))
    with pytest.raises(ValueError, match="boxes"):
        g.set_targets(boxes=[[1, 2, 3]])
    with pytest.raises(ValueError, match="labels"):
        g.set_targets(boxes=[[1, 2, 3, 4]], labels=[1, 2])
    with pytest.raises(ValueError, match="mask"):
        g.set_targets(mask=np.zeros((4, 6), int))
    with pytest.raises(ValueError, match="keypoints"):
        g.set_targets(keypoints=[[1, 2, 3]])
