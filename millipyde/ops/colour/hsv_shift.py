"""``hsv_shift`` / ``random_hsv_shift``: albumentations' ``HueSaturationValue`` on uint8 RGB:
OpenCV's uint8 HSV (hue 0..179), each of H, S, V shifted through albumentations' tables, and
back to RGB."""

import math
from typing import Any

from ...kernels.registry import pixelwise
from ..base import ImageKind, Ranges, define, number, pair


@pixelwise(nparams=3, name="hsv_shift")
def shift_hsv(r, g, b, full, dh, ds, dv):
    """``cv2.cvtColor(RGB2HSV)`` of a uint8 pixel (its fixed-point tables, 12 fraction bits),
    hue ``(h + dh) mod 180``, saturation and value ``s + ds``, ``v + dv`` clipped to 0..255,
    each truncated (albumentations' uint8 tables), then ``HSV2RGB`` rounded."""
    v = max(r, max(g, b))
    vmin = min(r, min(g, b))
    diff = v - vmin
    sdiv = 0.0
    if v > 0.0:  # OpenCV's sdiv_table: round(255 << 12 / v), halves to even
        sdiv = 1044480.0 / v
        fl = math.floor(sdiv)
        if sdiv - fl > 0.5 or (sdiv - fl == 0.5 and fl % 2.0 == 1.0):
            fl += 1.0
        sdiv = fl
    s = math.floor((diff * sdiv + 2048.0) / 4096.0)
    if v == r:
        h = g - b
    elif v == g:
        h = b - r + 2.0 * diff
    else:
        h = r - g + 4.0 * diff
    hdiv = 0.0
    if diff > 0.0:  # hdiv_table180: round(180 << 12 / (6 diff))
        hdiv = 737280.0 / (6.0 * diff)
        fl = math.floor(hdiv)
        if hdiv - fl > 0.5 or (hdiv - fl == 0.5 and fl % 2.0 == 1.0):
            fl += 1.0
        hdiv = fl
    h = math.floor((h * hdiv + 2048.0) / 4096.0)
    if h < 0.0:
        h += 180.0
    # albumentations' tables: np.mod(h + dh, 180) and clip(x + d, 0, 255), cast to uint8
    h = math.floor((h + dh) % 180.0)
    s = math.floor(min(max(s + ds, 0.0), 255.0)) / 255.0
    v = math.floor(min(max(v + dv, 0.0), 255.0)) / 255.0
    if s == 0.0:
        r2 = v
        g2 = v
        b2 = v
    else:
        hh = h * (6.0 / 180.0)
        sector = math.floor(hh)
        f = hh - sector
        p = v * (1.0 - s)
        q = v * (1.0 - s * f)
        t = v * (1.0 - s * (1.0 - f))
        if sector == 0.0:
            r2, g2, b2 = v, t, p
        elif sector == 1.0:
            r2, g2, b2 = q, v, p
        elif sector == 2.0:
            r2, g2, b2 = p, v, t
        elif sector == 3.0:
            r2, g2, b2 = p, q, v
        elif sector == 4.0:
            r2, g2, b2 = t, p, v
        else:
            r2, g2, b2 = v, p, q
    # saturate_cast<uchar>(x * 255): to the nearest (the store rounds and clamps)
    return r2 * 255.0, g2 * 255.0, b2 * 255.0


HSV_SHIFT = define("hsv_shift", "colour", [shift_hsv],
                   reference="albumentations.HueSaturationValue (OpenCV uint8 HSV)")

_WHY = "it transcribes OpenCV's uint8 HSV conversion"


def _uint8(kind: ImageKind, what: str) -> None:
    if kind.is_colour and kind.dtype.name != "uint8":
        raise ValueError(f"{what} needs a uint8 image ({_WHY}); this one is {kind.dtype}")


@HSV_SHIFT.form()
def hsv_shift(kind: ImageKind, hue_shift: float = 0, sat_shift: float = 0,
              val_shift: float = 0) -> tuple | None:
    """albumentations' ``shift_hsv`` on uint8 RGB(A): hue shifted by ``hue_shift`` in
    OpenCV's units (180 a full turn: 2 degrees each), saturation and value by ``sat_shift``,
    ``val_shift`` (0..255 units), clipped; alpha untouched; a no-op on grey images."""
    vals = [number(v, n) for v, n in ((hue_shift, "hue_shift"), (sat_shift, "sat_shift"),
                                      (val_shift, "val_shift"))]
    for v, n, top in zip(vals, ("hue_shift", "sat_shift", "val_shift"), (180, 255, 255),
                         strict=True):
        if abs(v) > top:
            raise ValueError(f"{n} must lie within +-{top}, got {v}")
    _uint8(kind, "hsv_shift")
    return tuple(vals) if kind.is_colour else None


def _limit(value: Any, name: str, top: float) -> tuple[float, float]:
    lo, hi = pair(value, name, symmetric=True)
    if lo < -top or hi > top:
        raise ValueError(f"{name} must lie within +-{top}, got ({lo}, {hi})")
    return lo, hi


@HSV_SHIFT.form(random=True)
def random_hsv_shift(kind: ImageKind, hue_shift_limit: Any = 20, sat_shift_limit: Any = 30,
                     val_shift_limit: Any = 20) -> Ranges | None:
    """albumentations ``HueSaturationValue``: ``hsv_shift`` with each shift drawn uniformly
    from its limit (one number ``v``: (-v, v); or a (low, high) pair; the draws are taken on
    grey images too, where nothing is recorded)."""
    ranges = Ranges([_limit(hue_shift_limit, "hue_shift_limit", 180),
                     _limit(sat_shift_limit, "sat_shift_limit", 255),
                     _limit(val_shift_limit, "val_shift_limit", 255)])
    _uint8(kind, "random_hsv_shift")
    return ranges if kind.is_colour else None
