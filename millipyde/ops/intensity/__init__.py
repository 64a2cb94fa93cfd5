"""Intensity ops: brightness and gamma."""

from . import brightness, gamma  # noqa: F401  (definitions)
