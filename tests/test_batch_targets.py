"""``Generator.batches(with_targets=True)``: boxes, keypoints and masks per sample (issue 15).

Each sample's targets equal the targets of the per-output Generator's output with the same
index, moved once more by the ``resize`` op when the batch has a ``shape``; and the box drawn on
the image lands inside each sample's box, touching its sides (within 1 pixel).
"""

import numpy as np
import pytest

import millipyde as mp

H, W = 40, 56
BOX = (14, 9, 31, 22)  # xyxy, pixel edges


def _drawn() -> np.ndarray:
    img = np.zeros((H, W, 3), np.uint8)
    x0, y0, x1, y1 = BOX
    img[y0:y1, x0:x1] = 255
    return img


def _ops() -> list:
    return [mp.Operation("fliplr", probability=0.5),
            mp.Operation("random_affine", 20, (0.1, 0.1), (0.9, 1.1)),
            mp.Operation("random_brightness", -0.1, 0.1)]


def _input() -> mp.gpuimage:
    g = mp.gpuimage(_drawn())
    mask = np.zeros((H, W), np.int32)
    mask[BOX[1]:BOX[3], BOX[0]:BOX[2]] = 4
    g.set_targets(boxes=[BOX], labels=[9], keypoints=[[20, 15]], mask=mask)
    return g


def _extent(img: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(img > 0.5)
    return xs.min(), ys.min(), xs.max() + 1, ys.max() + 1


@pytest.mark.parametrize("shape", [None, (30, 45)])
def test_batch_targets_equal_the_per_output_targets(shape) -> None:
    plain = mp.gpuimage(np.zeros((H, W, 3), np.uint8))  # no targets: None
    inputs = [_input(), plain]
    per_output = list(mp.Generator(inputs, _ops(), outputs=8, seed=5))
    gen = mp.Generator(inputs, _ops(), outputs=8, seed=5)
    with gen.batches(4, shape=shape, with_indices=True, with_targets=True) as it:
        got = [(k, t) for batch, ks, _, ts in it for k, t in zip(ks, ts, strict=True)]
    assert [k for k, _ in got] == list(range(8))
    for k, t in got:
        y = per_output[k]
        if k % 2:
            assert t is None
            continue
        if shape is not None:
            y.resize(*shape)
        assert np.allclose(t.boxes, y.boxes) and list(t.labels) == list(y.labels)
        assert np.allclose(t.keypoints, y.keypoints)
        assert list(t.visible) == list(y.keypoints_visible)
        assert np.array_equal(t.mask, y.mask)


def test_the_drawn_box_lies_in_each_samples_box() -> None:
    gen = mp.Generator([_input()], _ops(), outputs=6, seed=2)
    with gen.batches(3, with_targets=True) as it:
        for batch, ts in it:
            x = np.from_dlpack(batch) if mp.backend() == "cpu" else np.asarray(batch)
            for sample, t in zip(x, ts, strict=True):
                (box,) = t.boxes
                ex0, ey0, ex1, ey1 = _extent(sample[0])  # NCHW: red channel
                assert ex0 >= box[0] - 1 and ey0 >= box[1] - 1
                assert ex1 <= box[2] + 1 and ey1 <= box[3] + 1
                assert list(t.labels) == [9] and t.mask.shape == (H, W)


def test_with_targets_refuses_callables_and_non_bools() -> None:
    gen = mp.Generator([_input()], [mp.Operation(lambda x: None)], outputs=2, seed=0)
    with pytest.raises(ValueError, match="with_targets"):
        gen.batches(2, with_targets=True)
    gen = mp.Generator([_input()], _ops(), outputs=2, seed=0)
    with pytest.raises(ValueError, match="with_targets"):
        gen.batches(2, with_targets="yes")
