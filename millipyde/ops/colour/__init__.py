"""Colour ops: greyscale, gains, contrast, saturation, hue."""

from . import colorize, contrast, grey, hue, saturation  # noqa: F401  (definitions)
