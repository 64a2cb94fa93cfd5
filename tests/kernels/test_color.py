"""rgb2grey and its aliases against scikit-image's rgb2gray / rgba2rgb."""

import numpy as np
import pytest
import reference as ref
from reference import SKIMAGE_ATOL, assert_matches, on_gpu

ALIASES = ["rgb2grey", "rgb2gray", "rgba2grey", "rgba2gray"]

pytestmark = pytest.mark.cudasim_ok


@pytest.mark.parametrize("method", ALIASES)
@pytest.mark.parametrize("kind", ["rgb", "rgba"])
def test_colour_to_grey(method, kind, size):
    h, w = size
    img = ref.photo(kind, h, w)
    out = on_gpu(img, method)
    # float64, (h, w): assert_matches checks shape and dtype first
    assert out.shape == (h, w)
    assert out.dtype == np.float64
    assert_matches(out, ref.rgb2grey(img), atol=SKIMAGE_ATOL, what=f"{method} {kind}")
    assert np.all((out >= 0) & (out <= 1))


@pytest.mark.parametrize("method", ALIASES)
def test_grey_is_noop(method, size):
    h, w = size
    img = ref.photo_grey(h, w)
    out = on_gpu(img, method)
    assert_matches(out, img, what=f"{method} on greyscale")


@pytest.mark.parametrize("method", ALIASES)
def test_rgba_alpha_blends_on_white(method):
    # fully transparent pixels become white (1.0), opaque ones keep their grey level
    img = np.zeros((3, 5, 4), dtype=np.uint8)
    img[..., :3] = np.arange(15, dtype=np.uint8).reshape(3, 5, 1) * 17
    img[0, :, 3] = 0
    img[1, :, 3] = 255
    img[2, :, 3] = 128
    out = on_gpu(img, method)
    assert_matches(out[0], np.ones(5), atol=SKIMAGE_ATOL)
    assert_matches(out, ref.rgb2grey(img), atol=SKIMAGE_ATOL)


def test_grey_twice_is_grey_once():
    import millipyde as mp

    rgb = ref.photo_rgb(17, 23)
    img = mp.gpuimage(rgb)
    img.rgb2grey()
    img.rgb2gray()
    assert_matches(img, ref.rgb2grey(rgb), atol=SKIMAGE_ATOL)
    assert img.ndim == 2 and img.shape == (17, 23) and img.dtype == np.float64
