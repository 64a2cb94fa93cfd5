"""``multiplicative_noise``: albumentations' ``MultiplicativeNoise`` (values multiplied by
draws from a range: one per image, per channel, per pixel or per value)."""

from typing import Any

import numpy as np

from ...kernels.registry import elementwise, positional
from ..base import Draws, Emit, ImageKind, between, columns, define, number, pair
from .salt_and_pepper import keys


@elementwise(nparams=3, name="multiply_channels")
def multiply_channel(v, c, full, m0, m1, m2):
    """``v`` times its channel's multiplier (``m0`` on grey images), clamped to [0, full];
    alpha untouched (integer images rounded when stored)."""
    m = m0
    if c == 1:
        m = m1
    elif c == 2:
        m = m2
    return min(max(v * m, 0.0), full)


def multiply_draw(v, c, full, y, x, u1, u2, key_hi, key_lo, lo, hi):
    """``v`` times a multiplier drawn uniformly from [lo, hi] by the draw ``u1``, clamped to
    [0, full]; alpha untouched."""
    return min(max(v * (lo + (hi - lo) * u1), 0.0), full)


# a draw per value (``per_channel``) or per pixel (one multiplier for its R, G and B)
positional(nparams=4, draws=True, name="multiplicative_noise")(multiply_draw)
positional(nparams=4, draws=True, shared=True, name="multiplicative_noise_pixel")(multiply_draw)

MULTIPLICATIVE_NOISE = define(
    "multiplicative_noise", "noise",
    [multiply_channel, "multiplicative_noise", "multiplicative_noise_pixel"],
    reference="albumentations.MultiplicativeNoise (own draws)")


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (lo, hi), per_channel, per_pixel = args
    n = len(hw)
    if per_pixel:
        kernel = "multiplicative_noise" if per_channel else "multiplicative_noise_pixel"
        return [Emit(kernel, columns(*keys(d), lo, hi, n=n))]
    m0 = between(lo, hi, d.u(0))
    if per_channel:
        return [Emit("multiply_channels",
                     columns(m0, between(lo, hi, d.u(1)), between(lo, hi, d.u(2)), n=n))]
    return [Emit("multiply_channels", columns(m0, m0, m0, n=n))]


@MULTIPLICATIVE_NOISE.form(random=True, sample=_sample)
def multiplicative_noise(kind: ImageKind, multiplier: Any = (0.9, 1.1),
                         per_channel: bool = False, elementwise: bool = False) -> tuple:
    """albumentations ``MultiplicativeNoise``: values times a multiplier drawn uniformly from
    ``multiplier`` (min, max), clamped: one per image, one per channel (``per_channel``),
    one per pixel (``elementwise``) or one per value (both); alpha untouched; same seed, same
    noise on every device."""
    if isinstance(multiplier, (tuple, list, np.ndarray)):
        lo, hi = pair(multiplier, "multiplier")
    else:
        lo = hi = number(multiplier, "multiplier")
    if lo < 0:
        raise ValueError(f"multiplier must be >= 0, got {multiplier!r}")
    for flag, name in ((per_channel, "per_channel"), (elementwise, "elementwise")):
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    return (lo, hi), bool(per_channel), bool(elementwise)
