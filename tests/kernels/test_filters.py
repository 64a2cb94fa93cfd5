"""gaussian against skimage.filters.gaussian(mode="constant", cval=0, truncate=8)."""

import numpy as np
import pytest
import reference as ref
from reference import SKIMAGE_ATOL, assert_matches, on_gpu

KINDS = ["rgb", "rgba", "grey"]
SIGMAS = [0.5, 1, 2, 3.3]


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("sigma", SIGMAS, ids=[str(s) for s in SIGMAS])
@pytest.mark.parametrize("kind", KINDS)
def test_gaussian(kind, sigma, size):
    img = ref.photo(kind, *size)
    out = on_gpu(img, "gaussian", sigma)
    assert_matches(out, ref.gaussian(img, sigma), ulp_uint8=1, atol=SKIMAGE_ATOL,
                   what=f"gaussian({sigma}) {kind}")
    if kind == "rgba":
        assert_matches(out[..., 3], img[..., 3], what="alpha must be untouched")


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("sigma", [0, -1, -0.5])
@pytest.mark.parametrize("kind", KINDS)
def test_gaussian_nonpositive_sigma_raises(kind, sigma):
    import millipyde as mp

    img = ref.photo(kind, 7, 5)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError):
        g.gaussian(sigma)
    # the failed call recorded nothing
    assert_matches(g, img)


@pytest.mark.cudasim_ok
def test_gaussian_constant_border_darkens_edges():
    # mode="constant", cval=0: a white image gets darker at the border, stays 1 in the middle
    img = np.ones((21, 21), dtype=np.float64)
    out = on_gpu(img, "gaussian", 1)
    assert_matches(out, ref.gaussian(img, 1), atol=SKIMAGE_ATOL)
    assert out[0, 0] < 0.5 and abs(out[10, 10] - 1) < 1e-6
