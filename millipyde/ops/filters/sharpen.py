"""``sharpen`` / ``random_sharpen``: albumentations' ``Sharpen`` (a blend with a 3x3
sharpening kernel) as a ``neighbourhood`` op, fused into the gather."""

from typing import Any

import numpy as np

from ...kernels.registry import neighbourhood
from ..base import Draws, Emit, ImageKind, between, columns, define, number, span


@neighbourhood(nparams=2, name="sharpen")
def sharpen_value(acc, v, full, alpha, lightness):
    """albumentations ``Sharpen``: the kernel ``(1 - alpha) I + alpha K``, ``K`` the 3x3 of
    -1 with ``8 + lightness`` at its centre, applied to a value whose 3x3 sum is ``acc``:
    ``(1 - alpha) v + alpha ((9 + lightness) v - acc)``, clamped to [0, full]."""
    s = (1.0 - alpha) * v + alpha * ((9.0 + lightness) * v - acc)
    return min(max(s, 0.0), full)


SHARPEN = define("sharpen", "filters", [sharpen_value],
                 reference="albumentations.Sharpen (method='kernel'; border pixels kept)")


def _alpha(value: Any, name: str) -> float:
    a = number(value, name)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {a}")
    return a


@SHARPEN.form()
def sharpen(kind: ImageKind, alpha: float = 0.35, lightness: float = 0.75) -> tuple:
    """albumentations' sharpening: blend (``alpha`` in [0, 1]) with the 3x3 kernel of -1
    around ``8 + lightness`` (``lightness >= 0``); pixels on the image's border are kept
    (albumentations mirrors the image there). Colour per channel, alpha kept."""
    light = number(lightness, "lightness")
    if light < 0:
        raise ValueError(f"lightness must be >= 0, got {light}")
    return _alpha(alpha, "alpha"), light


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (alo, ahi), (llo, lhi) = args
    return [Emit("sharpen", columns(between(alo, ahi, d.u(0)), between(llo, lhi, d.u(1)),
                                    n=len(hw)))]


@SHARPEN.form(random=True, sample=_sample)
def random_sharpen(kind: ImageKind, alpha: Any = (0.2, 0.5),
                   lightness: Any = (0.5, 1.0)) -> tuple:
    """albumentations ``Sharpen``: ``sharpen`` with ``alpha`` and ``lightness`` drawn
    uniformly per image from their (min, max) ranges."""
    alo, ahi = span(alpha, "alpha")
    _alpha(alo, "alpha")
    _alpha(ahi, "alpha")
    llo, lhi = span(lightness, "lightness")
    if llo < 0:
        raise ValueError(f"lightness must be >= 0, got {lightness!r}")
    return (alo, ahi), (llo, lhi)
