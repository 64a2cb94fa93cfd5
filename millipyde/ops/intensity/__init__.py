"""Intensity ops: value maps per channel (brightness, gamma, invert, solarize, posterize)."""

from . import adjust_brightness, brightness, gamma, invert, posterize, solarize  # noqa: F401
