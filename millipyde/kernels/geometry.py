"""Geometric kernels: where each output pixel reads from, as affine maps of (y, x).

``h`` and ``w`` are the height and width of the op's input.
"""

import math

from .registry import index_map, sampler


@index_map(swaps_axes=True)
def transpose(y, x, h, w):
    """Swap the two spatial axes."""
    return x, y


@index_map()
def fliplr(y, x, h, w):
    """Mirror left to right."""
    return y, w - 1 - x


@sampler(nparams=1)
def rotate(y, x, h, w, angle):
    """skimage ``rotate``: counter-clockwise by ``angle`` degrees about the centre."""
    t = math.radians(angle)
    cy = h / 2.0 - 0.5
    cx = w / 2.0 - 0.5
    cos_t = math.cos(t)
    sin_t = math.sin(t)
    sx = cos_t * (x - cx) - sin_t * (y - cy) + cx
    sy = sin_t * (x - cx) + cos_t * (y - cy) + cy
    return sy, sx


def _crop_shape(h, w, top, left, height, width):
    return height, width


@index_map(nparams=4, shape=_crop_shape)
def crop(y, x, h, w, top, left, height, width):
    """``img[top:top + height, left:left + width]`` (the window lies inside the image)."""
    return y + top, x + left


def _pad_shape(h, w, top, bottom, left, right, value):
    return h + top + bottom, w + left + right


@index_map(nparams=5, shape=_pad_shape, fills=True)
def pad(y, x, h, w, top, bottom, left, right, value):
    """``np.pad`` with a constant: pixels outside the input read ``value`` (every channel)."""
    return y - top, x - left


def _resize_shape(h, w, height, width):
    return height, width


@sampler(nparams=2, shape=_resize_shape, mode="edge")
def resize(y, x, h, w, height, width):
    """skimage ``resize(order=1, mode="edge")``: pixel centres scaled, edges repeated."""
    return (y + 0.5) * (h / height) - 0.5, (x + 0.5) * (w / width) - 0.5


@sampler(nparams=6)
def warp_affine(y, x, h, w, m00, m01, m02, m10, m11, m12):
    """skimage ``warp`` by ``AffineTransform(matrix=M)``: M maps output (col, row) to input."""
    return m10 * x + m11 * y + m12, m00 * x + m01 * y + m02
