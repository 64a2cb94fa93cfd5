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
