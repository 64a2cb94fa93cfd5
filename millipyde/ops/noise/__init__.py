"""Noise and erasing: ops whose values depend on where the pixel is or on its own draws."""

from . import (  # noqa: F401  (definitions)
    erasing,
    gaussian_noise,
    grid_dropout,
    iso_noise,
    multiplicative_noise,
    pixel_dropout,
    salt_and_pepper,
)
