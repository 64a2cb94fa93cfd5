"""transpose, fliplr and rotate against NumPy / skimage.transform.rotate."""

import numpy as np
import pytest
import reference as ref
from reference import SKIMAGE_ATOL, assert_matches, on_gpu

KINDS = ["rgb", "rgba", "grey"]
ANGLES = [0, 45, 90, 123.4, -30, 360]

pytestmark = pytest.mark.cudasim_ok


@pytest.mark.parametrize("kind", KINDS)
def test_transpose(kind, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "transpose")
    assert_matches(out, ref.transpose(img), what=f"transpose {kind}")


@pytest.mark.parametrize("kind", KINDS)
def test_fliplr(kind, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "fliplr")
    assert_matches(out, ref.fliplr(img), what=f"fliplr {kind}")


@pytest.mark.parametrize("angle", ANGLES, ids=[str(a) for a in ANGLES])
@pytest.mark.parametrize("kind", KINDS)
def test_rotate(kind, angle, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "rotate", angle)
    # bilinear interpolation: +-1 on uint8 where rounding differs, 4 decimals on float
    assert_matches(out, ref.rotate(img, angle), ulp_uint8=1, atol=SKIMAGE_ATOL,
                   what=f"rotate({angle}) {kind}")


@pytest.mark.parametrize("kind", KINDS)
def test_transpose_twice_and_fliplr_twice_are_identity(kind, size):
    import millipyde as mp

    img = ref.photo(kind, *size)
    g = mp.gpuimage(img)
    g.transpose()
    g.fliplr()
    g.fliplr()
    g.transpose()
    assert_matches(g, img)


@pytest.mark.parametrize("kind", KINDS)
def test_chain_of_geometry_ops(kind, size):
    import millipyde as mp

    img = ref.photo(kind, *size)
    g = mp.gpuimage(img)
    g.transpose()
    g.fliplr()
    g.rotate(30)
    expected = ref.rotate(ref.fliplr(ref.transpose(img)), 30)
    assert_matches(g, expected, ulp_uint8=1, atol=SKIMAGE_ATOL)


def test_rotate_90_of_square_matches_rot90():
    # skimage rotates counter-clockwise like np.rot90; on odd squares the centre is a pixel
    img = ref.photo_rgb(17, 17)
    out = on_gpu(img, "rotate", 90)
    assert_matches(out, np.rot90(img), ulp_uint8=1)


@pytest.mark.parametrize("kind", KINDS)
def test_rotate_clips_to_input_range_like_skimage(kind):
    # skimage.transform.rotate(..., clip=True by default) clips the bilinear output to
    # [min(input), max(input)] (over all channels), except pixels exactly equal to cval.
    # On a bright crop with no dark pixel, corner pixels that blend with the 0 background
    # are therefore raised to the image minimum.  API.md names that exact skimage call.
    img = ref.photo(kind, 5, 5)
    assert img.min() > 0.1 * (255 if img.dtype == np.uint8 else 1)  # a bright crop
    out = on_gpu(img, "rotate", 15)
    assert_matches(out, ref.rotate(img, 15), ulp_uint8=1, atol=SKIMAGE_ATOL,
                   what=f"rotate(15) {kind} on a crop without dark pixels")
