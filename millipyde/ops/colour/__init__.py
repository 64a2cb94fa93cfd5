"""Colour ops: greyscale, gains, contrast, saturation, hue, channel orders."""

from . import (  # noqa: F401  (definitions)
    channel_dropout,
    channel_shuffle,
    colorize,
    contrast,
    fancy_pca,
    grayscale,
    grey,
    hsv_shift,
    hue,
    planckian_jitter,
    rgb_shift,
    saturation,
    sepia,
    snow,
)
