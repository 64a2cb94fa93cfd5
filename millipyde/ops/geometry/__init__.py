"""Geometric ops: index maps and bilinear samplers that fuse into one gather."""

from . import (  # noqa: F401  (definitions)
    affine,
    center_crop,
    crop,
    elastic_grid,
    fliplr,
    pad,
    pad_to,
    perspective,
    random_crop,
    resize,
    resized_crop,
    rot90,
    rotate,
    shear,
    translate,
    transpose,
    vflip,
    zoom_out,
)
