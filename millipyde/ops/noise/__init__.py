"""Noise and erasing: ops whose values depend on where the pixel is or on its own draws."""

from . import erasing, gaussian_noise  # noqa: F401  (definitions)
