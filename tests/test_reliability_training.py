"""Issue 32, classes 8, 9, 12, 13 and 14 (the Generator and ``batches()`` parts) at the public
API: targets never shared nor half-applied, Generators unaffected by later ops on their inputs,
batch memory bounded by the data, empty images through Generators and batches, clear
refusals of bad ``batches()`` options. Tiny images; the cpu backend."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

import millipyde as mp

BOX = [[1.0, 2.0, 6.0, 7.0]]


def _with_box(h=10, w=12):
    img = mp.gpuimage(ref.photo_rgb(h, w))
    img.set_targets(boxes=BOX, labels=[3], keypoints=[[2.0, 3.0]],
                    mask=np.ones((h, w), np.int32))
    return img


# --------------------------------------------------------------- class 8: targets
@pytest.mark.parametrize("op", [[], [mp.Operation("adjust_gamma", 2.0)],
                                [mp.Operation("fliplr")]], ids=["none", "colour", "flip"])
def test_generator_outputs_targets_are_read_only_and_never_shared(op):
    """``next(gen).boxes[:] = 0`` zeroed the input's boxes and every later output's (a
    colour op leaves the targets as they are: the same arrays). Outputs carry their targets
    (the recorded batch path dropped them) and writing them raises; nothing else changes."""
    img = _with_box()
    gen = mp.Generator([img], op or [mp.Operation("brightness", 0.0)], outputs=3, seed=0)
    out = next(gen)
    want = np.array(BOX) if not op or op[0].name != "fliplr" else np.array([[6.0, 2, 11, 7]])
    np.testing.assert_array_equal(out.boxes, want)
    for name in ("boxes", "labels", "keypoints", "keypoints_visible", "mask"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(out, name)[...] = 0
    np.testing.assert_array_equal(img.boxes, BOX)
    np.testing.assert_array_equal(next(gen).boxes, want)


def test_clone_and_set_targets_keep_their_own_arrays():
    labels = np.array([3])
    img = mp.gpuimage(ref.photo_rgb(10, 12))
    img.set_targets(boxes=BOX, labels=labels)
    labels[0] = 99  # the caller's array stays the caller's
    assert img.labels.tolist() == [3]
    c = img.clone()
    with pytest.raises(ValueError, match="read-only"):
        c.boxes[0, 0] = 5.0
    np.testing.assert_array_equal(img.boxes, BOX)


def test_a_user_map_on_an_image_with_targets_is_refused_before_recording():
    """The map was applied (image mirrored, ``boxes`` None) before the refusal."""
    @mp.index_map
    def mirror(row, col, height, width):
        return row, width - 1.0 - col

    img = _with_box()
    host = np.asarray(img)
    with pytest.raises(ValueError, match=r"mirror: targets cannot follow a user index map"):
        mirror(img)
    np.testing.assert_array_equal(np.asarray(img), host)
    np.testing.assert_array_equal(img.boxes, BOX)


def test_a_geometric_op_targets_cannot_follow_leaves_the_image():
    """A degenerate affine map: the targets' inverse fails; the op must not be recorded."""
    img = _with_box()
    host = np.asarray(img)
    with pytest.raises(ValueError, match=r"warp_affine: targets cannot follow a map that is not"):
        img.warp_affine([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(img), host)
    np.testing.assert_array_equal(img.boxes, BOX)


# ------------------------------------------- class 9: inputs changed after the Generator
@pytest.mark.parametrize("batch", [1, 64], ids=["per-output", "batched"])
def test_an_op_recorded_on_an_input_later_changes_nothing(batch, monkeypatch):
    """Any method recorded on an input after the Generator was built made every ``next()``
    and ``batches()`` fail (``KeyError`` in the stacked inputs). The Generator works from
    its inputs as they were when it was made."""
    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", str(batch))
    host = ref.photo_rgb(10, 12)
    a, b = mp.gpuimage(host), mp.gpuimage(host[::-1].copy())
    ops = [mp.Operation("fliplr")]
    gen = mp.Generator([a, b], ops, outputs=4, return_to_host=True, seed=0)
    batches = mp.Generator([a, b], ops, outputs=4, seed=0).batches(2, layout="NHWC")
    a.adjust_gamma(2.0)
    b.crop(0, 0, 5, 5)
    outs = list(gen)
    assert len(outs) == 4
    np.testing.assert_array_equal(outs[0], np.fliplr(host))
    np.testing.assert_array_equal(outs[1], np.fliplr(host[::-1]))
    first = np.asarray(next(batches))
    np.testing.assert_array_equal(first[0], np.fliplr(host).astype(np.float32) / 255)
    assert np.asarray(a).shape == host.shape and np.asarray(b).shape == (5, 5, 3)


# ---------------------------------------------------- class 12: memory follows the data
def test_batches_far_larger_than_memory_are_refused_when_asked():
    """``batches(10**9)`` on an infinite Generator grew to 20.9 GB and was killed."""
    gen = mp.Generator([mp.gpuimage(ref.photo_rgb(10, 12))], [mp.Operation("fliplr")])
    with pytest.raises(ValueError, match=r"batches size 1000000000: .* bytes, more than"):
        gen.batches(10**9)
    with pytest.raises(ValueError, match=r"size 2 and shape \(100000, 100000\)"):
        gen.batches(2, shape=(100_000, 100_000))
    gen.close()


def test_a_batch_holds_at_most_the_outputs_there_are():
    """``outputs=5, batches(10**12)`` raised MemoryError; it is one batch of 5."""
    gen = mp.Generator([mp.gpuimage(ref.photo_rgb(10, 12))], [mp.Operation("fliplr")],
                       outputs=5, seed=0)
    got = list(gen.batches(10**12))
    assert len(got) == 1 and np.asarray(got[0]).shape == (5, 3, 10, 12)


# ------------------------------------------------------------ class 13: empty images
@pytest.mark.parametrize("shape", [(0, 8), (8, 0), (0, 0), (0, 8, 3), (8, 0, 4)])
def test_generators_and_batches_of_empty_images(shape):
    """``Generator([0x8 image])`` raised ZeroDivisionError. Empty in, empty out; resized to
    ``shape=``, an empty sample reads only the zero outside it (as ``resize`` does)."""
    host = np.zeros(shape, np.uint8 if len(shape) == 3 else np.float64)
    ops = [mp.Operation("fliplr"), mp.Operation("random_brightness", -0.1, 0.1)]
    outs = list(mp.Generator([mp.gpuimage(host)], ops, outputs=3, return_to_host=True))
    assert [o.shape for o in outs] == [shape] * 3
    gen = mp.Generator([mp.gpuimage(host)], ops, outputs=3, seed=1)
    (b,) = list(gen.batches(3, layout="NHWC", channels=3))
    assert np.asarray(b).shape == (3, *shape[:2], 3)
    for _ in range(2):  # the same zeros every run (it read memory outside before)
        gen = mp.Generator([mp.gpuimage(host)], ops, outputs=3, seed=1)
        b = np.asarray(next(gen.batches(3, shape=(4, 5), mean=0.5, std=0.25)))
        np.testing.assert_array_equal(b, np.full((3, 3, 4, 5), -2.0, np.float32))


# -------------------------------------------------------- class 14: clear refusals
@pytest.mark.parametrize("kwargs, name", [
    ({"channels": 3.0}, "channels"), ({"channels": True}, "channels"),
    ({"dtype": ["float32"]}, "dtype"), ({"dtype": {"float32": 1}}, "dtype"),
    ({"dtype": None}, "dtype"), ({"size": 2.0}, "size"), ({"layout": ["NCHW"]}, "layout"),
])
def test_bad_batches_options_name_the_argument(kwargs, name):
    """``channels=3.0`` and ``dtype=['float32']`` raised NumPy's own errors."""
    gen = mp.Generator([mp.gpuimage(ref.photo_rgb(4, 5))], [mp.Operation("fliplr")],
                       outputs=2)
    size = kwargs.pop("size", 2)
    with pytest.raises(ValueError, match=f"batches {name}"):
        gen.batches(size, **kwargs)
