"""``brightness_contrast`` / ``random_brightness_contrast``: albumentations'
``RandomBrightnessContrast`` (``brightness_by_max=True``): ``alpha v + beta full``."""

import math
from typing import Any

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, define, number, pair


@elementwise(nparams=2, name="brightness_contrast")
def scale_shift(v, c, full, alpha, beta, _d):
    """albumentations ``brightness_contrast_adjust`` (``beta_by_max``): ``alpha v + beta
    full`` clamped to [0, full]; integers truncated, as its uint8 table's cast; alpha
    untouched."""
    s = min(max(v * alpha + beta * full, 0.0), full)
    return math.floor(s) if full != 1.0 else s


BRIGHTNESS_CONTRAST = define(
    "brightness_contrast", "intensity", [scale_shift],
    reference="albumentations.RandomBrightnessContrast (brightness_by_max=True)")


@BRIGHTNESS_CONTRAST.form(template=True)
def brightness_contrast(kind: ImageKind, alpha: float = 1, beta: float = 0) -> tuple:
    """albumentations' brightness and contrast: ``alpha * v + beta * full`` (``alpha >= 0``
    the contrast gain, ``beta`` in [-1, 1] the brightness as a fraction of full intensity),
    clamped; alpha channel untouched."""
    a, b = number(alpha, "alpha"), number(beta, "beta")
    if a < 0:
        raise ValueError(f"brightness_contrast alpha must be >= 0, got {a}")
    if not -1.0 <= b <= 1.0:
        raise ValueError(f"brightness_contrast beta must lie in [-1, 1], got {b}")
    return a, b


@BRIGHTNESS_CONTRAST.form(random=True, template=True)
def random_brightness_contrast(kind: ImageKind, brightness_limit: Any = 0.2,
                               contrast_limit: Any = 0.2) -> Ranges:
    """albumentations ``RandomBrightnessContrast``: ``alpha = 1 + c``, ``beta = b``, with
    ``c`` drawn uniformly from ``contrast_limit`` and ``b`` from ``brightness_limit`` (one
    number ``v``: (-v, v); or a (low, high) pair)."""
    blo, bhi = pair(brightness_limit, "brightness_limit", symmetric=True)
    clo, chi = pair(contrast_limit, "contrast_limit", symmetric=True)
    if blo < -1 or bhi > 1:
        raise ValueError(f"brightness_limit must lie in [-1, 1], got ({blo}, {bhi})")
    if clo < -1:
        raise ValueError(f"contrast_limit must be >= -1 (alpha = 1 + c >= 0), got {clo}")
    return Ranges([(1.0 + clo, 1.0 + chi), (blo, bhi)])
