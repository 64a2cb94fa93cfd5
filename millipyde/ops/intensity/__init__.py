"""Intensity ops: brightness, gamma, and the per-channel statistic ops autocontrast and
equalize."""

from . import autocontrast, brightness, equalize, gamma  # noqa: F401  (definitions)
