"""``adjust_sharpness`` / ``random_adjust_sharpness``: torchvision's blend with a 3x3
smoothing, its border pixels kept: a ``neighbourhood`` op, fused into the gather (its
neighbours' values are what comes before it, run at each of them)."""

import math

import numpy as np

from ...kernels.registry import neighbourhood
from ..base import Draws, Emit, ImageKind, chance, columns, define, number


@neighbourhood(nparams=1, name="adjust_sharpness")
def sharpness_value(acc, v, full, factor, _b):
    """torchvision ``adjust_sharpness`` of one value: ``acc`` the 3x3 sum around it, so the
    smoothed value is ``(acc + 4 v) / 13`` (kernel 1 1 1 / 1 5 1 / 1 1 1, over 13), rounded
    on integer images; then ``v + (1 - factor) (smoothed - v)``, clamped and truncated."""
    b = (acc + 4.0 * v) / 13.0
    if full != 1.0:  # torch's round: half to even
        r = math.floor(b)
        d = b - r
        if d > 0.5 or (d == 0.5 and r % 2.0 == 1.0):
            r += 1.0
        b = r
    s = v + (1.0 - factor) * (b - v)
    s = min(max(s, 0.0), full)
    return math.floor(s) if full != 1.0 else s


SHARPNESS = define("adjust_sharpness", "filters", [sharpness_value],
                   reference="torchvision.transforms.v2.functional.adjust_sharpness")


def _factor(factor: float, what: str) -> float:
    f = number(factor, "factor")
    if f < 0:
        raise ValueError(f"{what} factor must be >= 0, got {f}")
    return f


@SHARPNESS.form()
def adjust_sharpness(kind: ImageKind, factor: float) -> tuple:
    """torchvision ``adjust_sharpness``: blend with a 3x3 smoothing (0 smooths, 1 leaves the
    image, 2 sharpens); the border pixels are kept. Colour per channel, alpha kept."""
    return (_factor(factor, "adjust_sharpness"),)


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    f, p = args
    return [Emit("adjust_sharpness", columns(f, n=len(hw)), skip=~(d.u(0) < p))]


@SHARPNESS.form(random=True, skips=True, sample=_sample_random)
def random_adjust_sharpness(kind: ImageKind, factor: float, p: float = 0.5) -> tuple:
    """torchvision ``RandomAdjustSharpness``: ``adjust_sharpness(factor)`` with probability
    ``p`` (in [0, 1], both ends included)."""
    return _factor(factor, "random_adjust_sharpness"), chance(p)
