"""Positional kernels: values that depend on where the pixel is or on its own random draws."""

import math

from .registry import positional


@positional(nparams=3, draws=True)
def gaussian_noise(v, c, full, y, x, u1, u2, key_hi, key_lo, sigma):
    """Add N(0, sigma) on values in [0, 1] and clip; ``u1, u2`` are the pixel's uniform draws.

    Box-Muller: ``u1`` in [0, 1), so ``1 - u1`` is in (0, 1] and the logarithm is finite.
    """
    z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
    s = v + sigma * z * full
    return min(max(s, 0.0), full)


@positional(nparams=5, alpha=True)
def erase(v, c, full, y, x, u1, u2, top, left, height, width, value):
    """torchvision ``erase``: ``value`` inside the window, every channel (alpha included)."""
    if y >= top and y < top + height and x >= left and x < left + width:
        return value
    return v
