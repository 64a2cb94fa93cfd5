"""Geometric ops: index maps and bilinear samplers that fuse into one gather."""

from . import affine, crop, fliplr, pad, resize, resized_crop, rotate, transpose  # noqa: F401
