"""``snow`` / ``random_snow``: albumentations' ``RandomSnow(method="bleach")`` on uint8 RGB:
OpenCV's uint8 HLS, the lightness below a threshold scaled up, and back to RGB."""

import math
from typing import Any

import numpy as np

from ...kernels.registry import pixelwise
from ..base import ImageKind, Ranges, colour_only, define, number, pair


@pixelwise(nparams=3, name="snow_bleach")
def bleach(r, g, b, full, snow_point, coeff, _d):
    """albumentations ``add_snow_bleach``: ``cv2.cvtColor(RGB2HLS)`` of the uint8 pixel (H
    0..179, L and S 0..255, each rounded), ``L * coeff`` where ``L < snow_point * 127.5 +
    85``, clipped and truncated, then ``HLS2RGB`` rounded (OpenCV's float formulas)."""
    # OpenCV's float32 arithmetic: L's halves (an odd max + min) round by its float32 error
    k = np.float32(1.0 / 255.0)
    r = np.float32(r) * k
    g = np.float32(g) * k
    b = np.float32(b) * k
    vmax = max(r, max(g, b))
    vmin = min(r, min(g, b))
    diff = vmax - vmin
    light = (vmax + vmin) * np.float32(0.5)
    h = np.float32(0.0)
    s = np.float32(0.0)
    if diff > np.float32(1.1920928955078125e-07):  # FLT_EPSILON
        if light < np.float32(0.5):
            s = diff / (vmax + vmin)
        else:
            s = diff / (np.float32(2.0) - vmax - vmin)
        d = np.float32(60.0) / diff
        if vmax == r:
            h = (g - b) * d
        elif vmax == g:
            h = (b - r) * d + np.float32(120.0)
        else:
            h = (r - g) * d + np.float32(240.0)
        if h < np.float32(0.0):
            h += np.float32(360.0)
    h = float(h * np.float32(0.5))
    light = float(light * np.float32(255.0))
    s = float(s * np.float32(255.0))
    # saturate_cast<uchar>: to the nearest, halves to even (Python's round)
    h = min(max(round(h), 0.0), 255.0)
    light = min(max(round(light), 0.0), 255.0)
    s = min(max(round(s), 0.0), 255.0) / 255.0
    if light < snow_point * 127.5 + 85.0:
        light = math.floor(min(max(light * coeff, 0.0), 255.0))
    light = light / 255.0
    if s == 0.0:
        return light * 255.0, light * 255.0, light * 255.0
    p2 = light * (1.0 + s) if light <= 0.5 else light + s - light * s
    p1 = 2.0 * light - p2
    hh = h * (6.0 / 180.0)
    if hh >= 6.0:
        hh -= 6.0
    sector = math.floor(hh)
    f = hh - sector
    up = p1 + (p2 - p1) * f
    down = p1 + (p2 - p1) * (1.0 - f)
    if sector == 0.0:
        r2, g2, b2 = p2, up, p1
    elif sector == 1.0:
        r2, g2, b2 = down, p2, p1
    elif sector == 2.0:
        r2, g2, b2 = p1, p2, up
    elif sector == 3.0:
        r2, g2, b2 = p1, down, p2
    elif sector == 4.0:
        r2, g2, b2 = up, p1, p2
    else:
        r2, g2, b2 = p2, p1, down
    return r2 * 255.0, g2 * 255.0, b2 * 255.0


SNOW = define("snow", "colour", [bleach],
              reference="albumentations.RandomSnow(method='bleach') (OpenCV uint8 HLS)")


def _uint8(kind: ImageKind, what: str) -> None:
    colour_only(kind, what)
    if kind.dtype.name != "uint8":
        raise ValueError(f"{what} needs a uint8 image (it transcribes OpenCV's uint8 HLS "
                         f"conversion); this one is {kind.dtype}")


def _point(value: Any, name: str) -> float:
    v = number(value, name)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {v}")
    return v


def _coeff(value: Any) -> float:
    c = number(value, "brightness_coeff")
    if not 0.0 <= c <= 255.0:
        raise ValueError(f"brightness_coeff must lie in [0, 255], got {c}")
    return c


@SNOW.form()
def snow(kind: ImageKind, snow_point: float = 0.2, brightness_coeff: float = 2.5) -> tuple:
    """albumentations' snow ("bleach"): in OpenCV's uint8 HLS, lightness below ``snow_point *
    127.5 + 85`` (``snow_point`` in [0, 1]) multiplied by ``brightness_coeff`` and clipped;
    uint8 RGB/RGBA only, alpha untouched."""
    _uint8(kind, "snow")
    return _point(snow_point, "snow_point"), _coeff(brightness_coeff), 0.0


@SNOW.form(random=True)
def random_snow(kind: ImageKind, snow_point_range: Any = (0.1, 0.3),
                brightness_coeff: float = 2.5) -> Ranges:
    """albumentations ``RandomSnow(snow_point_range, brightness_coeff, method="bleach")``: the
    snow point drawn uniformly per image from ``snow_point_range``."""
    _uint8(kind, "random_snow")
    lo, hi = pair(snow_point_range, "snow_point_range")
    _point(lo, "snow_point_range")
    _point(hi, "snow_point_range")
    c = _coeff(brightness_coeff)
    return Ranges([(lo, hi), (c, c), (0.0, 0.0)])
