"""``adjust_brightness`` / ``random_adjust_brightness``: torchvision's multiplicative
brightness (the thesis's additive one is ``brightness``)."""

import math

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, bounds, define, number


@elementwise(nparams=1, name="adjust_brightness")
def scale_value(v, c, full, factor, _b, _d):
    """torchvision ``adjust_brightness``: ``v * factor`` clamped to [0, full]; integers
    truncated, as torchvision's cast back; alpha untouched."""
    s = min(max(v * factor, 0.0), full)
    return math.floor(s) if full != 1.0 else s


ADJUST_BRIGHTNESS = define("adjust_brightness", "intensity", [scale_value],
                           reference="torchvision.transforms.v2.functional.adjust_brightness")


@ADJUST_BRIGHTNESS.form(template=True)
def adjust_brightness(kind: ImageKind, factor: float) -> tuple:
    """torchvision ``adjust_brightness``: multiply by ``factor`` (>= 0), clamp; alpha
    untouched."""
    f = number(factor, "factor")
    if f < 0:
        raise ValueError(f"adjust_brightness factor must be >= 0, got {f}")
    return (f,)


@ADJUST_BRIGHTNESS.form(random=True, template=True)
def random_adjust_brightness(kind: ImageKind, min_factor: float, max_factor: float) -> Ranges:
    """``adjust_brightness`` by a factor drawn uniformly from [min_factor, max_factor]
    (``ColorJitter(brightness=b)`` draws from [max(0, 1 - b), 1 + b])."""
    lo, hi = bounds(min_factor, max_factor, "min_factor", "max_factor")
    if lo < 0:
        raise ValueError(f"random_adjust_brightness min_factor must be >= 0, got {lo}")
    return Ranges([(lo, hi)])
