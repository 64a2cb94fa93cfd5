"""``corner_illumination`` / ``random_corner_illumination``: kornia's
``RandomLinearCornerIllumination`` (a diagonal ramp from one corner, added and clamped)."""

from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, columns, define, integer, number
from .linear_illumination import draw_illumination, gain_and_sign

#: the corners, kornia's numbering: where the ramp is brightest for a positive gain
CORNERS = ("bottom_right", "bottom_left", "top_right", "top_left")


@positional(nparams=4, name="corner_illumination")
def add_diagonal(v, c, full, y, x, u1, u2, amp, corner, h, w):
    """kornia ``RandomLinearCornerIllumination``: ``v + amp * g * full`` clamped, ``g`` the
    ramp ``x + y`` (``y - x``, ``x - y``, ``1 - x - y`` for the other corners; ``x``, ``y``
    each from 0 to 1 across the image) min-max normalised to [0, 1]; alpha untouched."""
    xg = x / (w - 1.0) if w > 1.0 else 0.0  # torch.linspace(0, 1, w)[x]
    yg = y / (h - 1.0) if h > 1.0 else 0.0
    if corner == 0.0:
        g = xg + yg
        lo = 0.0
        hi = (1.0 if w > 1.0 else 0.0) + (1.0 if h > 1.0 else 0.0)
    elif corner == 1.0:
        g = yg - xg
        lo = -1.0 if w > 1.0 else 0.0
        hi = 1.0 if h > 1.0 else 0.0
    elif corner == 2.0:
        g = xg - yg
        lo = -1.0 if h > 1.0 else 0.0
        hi = 1.0 if w > 1.0 else 0.0
    else:
        g = 1.0 - xg - yg
        lo = 1.0 - (1.0 if w > 1.0 else 0.0) - (1.0 if h > 1.0 else 0.0)
        hi = 1.0
    # kornia's normalize_min_max: (g - min) / (max - min + 1e-6)
    g = (g - lo) / (hi - lo + 1e-6)
    return min(max(v + amp * g * full, 0.0), full)


CORNER_ILLUMINATION = define("corner_illumination", "intensity", [add_diagonal],
                             reference="kornia.augmentation.RandomLinearCornerIllumination")


def _corner(value: Any) -> float:
    if isinstance(value, str):
        if value not in CORNERS:
            raise ValueError(f"corner must be one of {CORNERS} or 0..3, got {value!r}")
        return float(CORNERS.index(value))
    k = integer(value, "corner", 0)
    if k > 3:
        raise ValueError(f"corner must be one of {CORNERS} or 0..3, got {value!r}")
    return float(k)


def _fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    amp, corner = args
    return [Emit("corner_illumination", columns(amp, corner, hw[:, 0], hw[:, 1], n=len(hw)))]


def _random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    amp, corner = draw_illumination(args, d)
    return [Emit("corner_illumination", columns(amp, corner, hw[:, 0], hw[:, 1], n=len(hw)))]


@CORNER_ILLUMINATION.form(sample=_fixed)
def corner_illumination(kind: ImageKind, gain: float, corner: Any = "bottom_right") -> tuple:
    """kornia's corner illumination: ``gain * g`` (``gain`` in [-1, 1], a fraction of full
    intensity) added and clamped, ``g`` a diagonal ramp from 0 at one corner to 1 at
    ``corner`` (``"bottom_right"``, ``"bottom_left"``, ``"top_right"``, ``"top_left"``);
    alpha untouched."""
    g = number(gain, "gain")
    if not -1.0 <= g <= 1.0:
        raise ValueError(f"corner_illumination gain must lie in [-1, 1], got {g}")
    return g, _corner(corner)


@CORNER_ILLUMINATION.form(random=True, sample=_random)
def random_corner_illumination(kind: ImageKind, gain: Any = (0.01, 0.2),
                               sign: Any = (-1.0, 1.0)) -> tuple:
    """kornia ``RandomLinearCornerIllumination``: a gain drawn uniformly from ``gain``,
    negative where a draw from ``sign`` is, and one of the four corners uniformly."""
    return gain_and_sign(gain, sign)
