"""Filters: stencils whose taps are computed on the host (scikit-image's Gaussian; the window
filters with border modes: box, Gaussian blur, sharpness, median)."""

from . import (  # noqa: F401  (definitions)
    box_blur,
    downscale,
    gaussian,
    gaussian_blur,
    jpeg,
    median_blur,
    motion_blur,
    sharpen,
    sharpness,
)
