"""``tone_curve`` / ``random_tone_curve``: albumentations' ``RandomToneCurve`` (a cubic
Bezier tone curve through (0, 0) and (1, 1), per image or per channel)."""

import math
from typing import Any

import numpy as np

from ...kernels.registry import elementwise
from ..base import Draws, Emit, ImageKind, columns, define, number

# A channel's two control heights (each in [0, 1]) travel as one float64: both quantized to
# 2**-24 (far below a uint8 level, 2**-8), ``low`` in the high bits. Three channels, three
# parameter slots (an elementwise kernel has three).
_Q = 2.0 ** 24
_SHIFT = 2.0 ** 25


def pack(low: np.ndarray | float, high: np.ndarray | float) -> np.ndarray:
    """Two control heights in [0, 1] as one exact float64 (see the module's note)."""
    return np.rint(np.asarray(low) * _Q) * _SHIFT + np.rint(np.asarray(high) * _Q)


@elementwise(nparams=3, name="tone_curve")
def bezier_curve(v, c, full, k0, k1, k2):
    """albumentations ``move_tone_curve``: ``t = v / full``, then ``3 (1 - t)**2 t low +
    3 (1 - t) t**2 high + t**3`` times full, ``(low, high)`` the control heights of the
    value's channel (unpacked from ``k0``.. ``k2``); integer images rounded when stored, as
    its table; alpha untouched."""
    k = k0
    if c == 1:
        k = k1
    elif c == 2:
        k = k2
    top = math.floor(k / 33554432.0)  # 2 ** 25: the low height's bits
    low = top / 16777216.0
    high = (k - top * 33554432.0) / 16777216.0
    t = v / full
    s = 1.0 - t
    y = 3.0 * s * s * t * low + 3.0 * s * t * t * high + t * t * t
    return min(max(y * full, 0.0), full)


TONE_CURVE = define("tone_curve", "intensity", [bezier_curve],
                    reference="albumentations.RandomToneCurve")


def _height(value: Any, name: str) -> float:
    h = number(value, name)
    if not 0.0 <= h <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {h}")
    return h


@TONE_CURVE.form()
def tone_curve(kind: ImageKind, low_y: float = 0.25, high_y: float = 0.75) -> tuple:
    """albumentations' tone curve: the cubic Bezier curve with control points (0, 0),
    (0.25, ``low_y``), (0.75, ``high_y``), (1, 1), evaluated at ``t = v / full`` (heights in
    [0, 1]; the defaults leave the image as it is); alpha untouched."""
    k = float(pack(_height(low_y, "low_y"), _height(high_y, "high_y")))
    return k, k, k


def _normal(d: Draws, t: int, centre: float, scale: float) -> np.ndarray:
    # Box-Muller on two of the image's draws, clipped to [0, 1] as albumentations clips
    z = np.sqrt(-2.0 * np.log1p(-d.u(t))) * np.cos(2.0 * np.pi * d.u(t + 1))
    return np.clip(centre + scale * z, 0.0, 1.0)


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    scale, per_channel = args
    n = len(hw)
    if per_channel and kind.is_colour:
        ks = [pack(_normal(d, 4 * c, 0.25, scale), _normal(d, 4 * c + 2, 0.75, scale))
              for c in range(3)]
    else:
        k = pack(_normal(d, 0, 0.25, scale), _normal(d, 2, 0.75, scale))
        ks = [k, k, k]
    return [Emit("tone_curve", columns(*ks, n=n))]


@TONE_CURVE.form(random=True, sample=_sample)
def random_tone_curve(kind: ImageKind, scale: float = 0.1, per_channel: bool = False) -> tuple:
    """albumentations ``RandomToneCurve``: ``tone_curve`` with ``low_y ~ N(0.25, scale)`` and
    ``high_y ~ N(0.75, scale)`` clipped to [0, 1], drawn once per image or, ``per_channel``,
    per R, G, B channel."""
    s = number(scale, "scale")
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"random_tone_curve scale must lie in [0, 1], got {s}")
    if not isinstance(per_channel, (bool, np.bool_)):
        raise ValueError(f"per_channel must be True or False, got {per_channel!r}")
    return s, bool(per_channel)
