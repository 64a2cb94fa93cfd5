"""Intensity ops: value maps per channel (brightness, gamma, invert, solarize, posterize) and
the per-channel statistic ops autocontrast and equalize."""

from . import (  # noqa: F401  (definitions)
    adjust_brightness,
    autocontrast,
    brightness,
    brightness_contrast,
    corner_illumination,
    equalize,
    gamma,
    gaussian_illumination,
    invert,
    linear_illumination,
    log,
    posterize,
    rescale_intensity,
    sigmoid,
    solarize,
    solarize_add,
    tone_curve,
)
