"""``Generator.batches``: samples equal the per-output Generator's outputs, converted."""

from __future__ import annotations

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs

import millipyde as mp
from millipyde.training.batches import convert_reference

OPS = [mp.Operation("fliplr", probability=0.5), mp.Operation("random_brightness", -0.2, 0.2),
       mp.Operation("rgb2grey", probability=0.3),
       mp.Operation("random_rotate", 0, 30, probability=0.5)]


def _images(shape=(16, 16, 3), n=3, seed=0):
    rng = np.random.default_rng(seed)
    return [mp.gpuimage(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(n)]


def _check(imgs, ops, outputs, size, seed=5, **kw):
    want = eager_outputs(imgs, ops, outputs, seed)
    spec = batch_spec(size, **kw)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    with gen.batches(size, with_indices=True, **kw) as bs:
        got = list(bs)
    ks = []
    for batch, outs, ins in got:
        arr = np.asarray(batch)
        assert arr.dtype == spec.dtype
        assert arr.shape[0] == len(outs)
        for i, k in enumerate(outs.tolist()):
            assert ins[i] == k % len(imgs)
            ref = convert_reference(want[k], spec)
            assert arr[i].shape == ref.shape
            assert np.array_equal(arr[i], ref), f"sample {i} (output {k}) differs"
        ks += outs.tolist()
    return got, ks


def test_batches_equal_outputs_converted() -> None:
    got, ks = _check(_images(), OPS, 10, 4, mean=[0.5, 0.4, 0.3], std=[0.25, 0.5, 2.0])
    assert ks == list(range(10))
    assert [b.shape for b, _, _ in got] == [(4, 3, 16, 16), (4, 3, 16, 16), (2, 3, 16, 16)]


def test_batches_nhwc_float16_drop_last() -> None:
    got, ks = _check(_images(), OPS, 10, 4, layout="NHWC", dtype="float16", mean=0.5,
                     drop_last=True)
    assert ks == list(range(8))
    assert all(b.shape == (4, 16, 16, 3) for b, _, _ in got)


def test_batches_rgba_and_grey_inputs() -> None:
    ops = [mp.Operation("random_brightness", -0.2, 0.2)]
    _check(_images((8, 8, 4)), ops, 5, 5)
    rng = np.random.default_rng(1)
    greys = [mp.gpuimage(rng.random((8, 8))) for _ in range(2)]
    got, _ = _check(greys, [mp.Operation("fliplr", probability=0.5)], 4, 2)
    arr = np.asarray(got[0][0])
    assert np.array_equal(arr[:, 0], arr[:, 2])  # grey replicated
    _check(greys, [mp.Operation("fliplr", probability=0.5)], 4, 2, channels=1)


def test_batches_shape_mismatch_names_the_output() -> None:
    imgs = _images((8, 12, 3))
    gen = mp.Generator(imgs, [mp.Operation("transpose", probability=0.5)], outputs=16, seed=2)
    with pytest.raises(ValueError, match=r"output \d+ has shape"):
        with gen.batches(16) as bs:
            next(bs)


def test_batches_resize_matches_skimage() -> None:
    from skimage.transform import resize

    imgs = _images((8, 12, 3))
    ops = [mp.Operation("transpose", probability=0.5)]
    got, ks = _check(imgs, ops, 6, 3, shape=(10, 7))
    want = eager_outputs(imgs, ops, 6, 5)
    for k in ks:
        sk = resize(want[k].astype(np.float64) / 255.0, (10, 7), order=1, mode="edge",
                    anti_aliasing=False)
        arr = np.asarray(got[k // 3][0])[k % 3].transpose(1, 2, 0)
        np.testing.assert_allclose(arr, sk, atol=1e-6)


def test_batches_channels_one_refuses_colour() -> None:
    gen = mp.Generator(_images(), [mp.Operation("fliplr")], outputs=2, seed=0)
    with pytest.raises(ValueError, match="output 0"):
        with gen.batches(2, channels=1) as bs:
            next(bs)


@pytest.mark.parametrize("kw, name", [
    (dict(size=0), "size"), (dict(size=2, layout="CHW"), "layout"),
    (dict(size=2, dtype="int8"), "dtype"), (dict(size=2, channels=2), "channels"),
    (dict(size=2, mean=[1, 2]), "mean"), (dict(size=2, std=0), "std"),
    (dict(size=2, shape=(4,)), "shape"), (dict(size=2, drop_last=1), "drop_last"),
    (dict(size=2, with_indices="y"), "with_indices"),
])
def test_batches_argument_errors(kw, name) -> None:
    gen = mp.Generator(_images(), [mp.Operation("fliplr")], outputs=2, seed=0)
    with pytest.raises(ValueError, match=name):
        gen.batches(**kw)


def test_batches_len_and_infinite() -> None:
    gen = mp.Generator(_images(), [mp.Operation("fliplr")], outputs=10, seed=0)
    assert len(gen.batches(4)) == 3 and len(gen.batches(4, drop_last=True)) == 2
    inf = mp.Generator(_images(), [mp.Operation("fliplr")], seed=0)
    with inf.batches(3) as bs:
        assert next(bs).shape == (3, 3, 16, 16)
        assert next(bs).shape == (3, 3, 16, 16)


def test_batches_dlpack_to_numpy() -> None:
    if mp.backend() != "cpu":
        pytest.skip("host DLPack: the cpu backend")
    gen = mp.Generator(_images(), [mp.Operation("fliplr")], outputs=2, seed=0)
    with gen.batches(2) as bs:
        b = next(bs)
    assert np.array_equal(np.from_dlpack(b), np.asarray(b))


def test_batches_operation_error_names_operation_and_output() -> None:
    rng = np.random.default_rng(0)
    greys = [mp.gpuimage(rng.random((8, 8))) for _ in range(2)]
    ops = [mp.Operation("fliplr"), mp.Operation("random_colorize", [1, 2], [1, 2], [1, 2])]
    gen = mp.Generator(greys, ops, outputs=4, seed=0)
    from millipyde.pipeline import PipelineError

    with pytest.raises(PipelineError, match=r"operation 1 \('random_colorize'\).*output 0"):
        with gen.batches(2) as bs:
            next(bs)


def test_batches_of_mixed_input_sizes_with_shape() -> None:
    # inputs of several sizes: made per output (no shared launch yet), resized into one batch
    rng = np.random.default_rng(3)
    imgs = [mp.gpuimage(rng.integers(0, 256, s, dtype=np.uint8))
            for s in ((8, 12, 3), (10, 10, 3), (6, 9, 4))]
    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation("random_brightness", -.2, .2)]
    got, ks = _check(imgs, ops, 6, 6, shape=(7, 7))
    assert ks == list(range(6)) and got[0][0].shape == (6, 3, 7, 7)
