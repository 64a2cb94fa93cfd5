"""``rotate`` / ``random_rotate``: scikit-image's rotation about the centre (same shape)."""

import math

from ...kernels.registry import sampler
from ..base import ImageKind, Ranges, bounds, define, number


@sampler(nparams=1, name="rotate")
def rotation_map(y, x, h, w, angle):
    """skimage ``rotate``: counter-clockwise by ``angle`` degrees about the centre."""
    t = math.radians(angle)
    cy = h / 2.0 - 0.5
    cx = w / 2.0 - 0.5
    cos_t = math.cos(t)
    sin_t = math.sin(t)
    sx = cos_t * (x - cx) - sin_t * (y - cy) + cx
    sy = sin_t * (x - cx) + cos_t * (y - cy) + cy
    return sy, sx


ROTATE = define("rotate", "geometry", [rotation_map],
                reference="skimage.transform.rotate(order=1, mode='constant', cval=0)")


@ROTATE.form(template=True)
def rotate(kind: ImageKind, angle: float) -> tuple:
    """Rotate counter-clockwise by ``angle`` degrees about the centre (bilinear, 0 fill)."""
    return (number(angle, "angle"),)


@ROTATE.form(random=True, template=True)
def random_rotate(kind: ImageKind, min_angle: float, max_angle: float) -> Ranges:
    """``rotate`` by an angle drawn uniformly from [min_angle, max_angle]."""
    return Ranges([bounds(min_angle, max_angle, "min_angle", "max_angle")])
