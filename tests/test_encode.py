"""encode_png: the PNG writer the encoder threads use, read back exactly by Pillow."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from skimage import data

from millipyde.encode import encode_png


def _read(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as im:
        im.load()
        return np.asarray(im)


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (9, 11, 1), (6, 4, 2), (13, 17, 3),
                                   (8, 3, 4)])
def test_png_reads_back_exactly(shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(0, 256, size=shape, dtype=np.uint8)
    got = _read(encode_png(x))
    want = x[..., 0] if x.ndim == 3 and x.shape[2] == 1 else x
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_png_of_a_photograph_and_a_strided_view_at_each_level():
    photo = data.astronaut()[::3, ::2]  # not contiguous
    assert not photo.flags.c_contiguous
    sizes = []
    for level in (0, 1, 9):
        png = encode_png(photo, level)
        np.testing.assert_array_equal(_read(png), photo)
        sizes.append(len(png))
    assert sizes[0] > sizes[1] >= sizes[2]  # level 0 stores, higher levels compress


def test_png_mode_follows_channels():
    x = np.zeros((4, 4, 4), np.uint8)
    modes = [Image.open(io.BytesIO(encode_png(x[..., :c]))).mode for c in (1, 2, 3, 4)]
    assert modes == ["L", "LA", "RGB", "RGBA"]


@pytest.mark.parametrize("bad, match", [
    (np.zeros((4, 4), np.float32), "uint8"),
    (np.zeros((4, 4, 5), np.uint8), "shape"),
    (np.zeros((0, 4, 3), np.uint8), "shape"),
    (np.zeros((2, 2, 2, 3), np.uint8), "shape"),
])
def test_png_refuses_what_it_cannot_hold(bad, match):
    with pytest.raises(ValueError, match=match):
        encode_png(bad)


@pytest.mark.parametrize("level", [-1, 10, 1.5, True])
def test_png_level_checked(level):
    with pytest.raises(ValueError, match="level"):
        encode_png(np.zeros((2, 2), np.uint8), level)
