"""``rgb_shift`` / ``random_rgb_shift``: albumentations' ``RGBShift`` (a shift per channel)."""

from typing import Any

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, define, number, pair


@elementwise(nparams=3, name="rgb_shift")
def shift_channel(v, c, full, r, g, b):
    """albumentations ``shift_rgb``: ``v + shift`` of the value's channel (R, G or B),
    clamped to [0, full]; alpha untouched (integer images rounded when stored)."""
    if c == 0:
        s = v + r
    elif c == 1:
        s = v + g
    else:
        s = v + b
    return min(max(s, 0.0), full)


RGB_SHIFT = define("rgb_shift", "colour", [shift_channel],
                   reference="albumentations.RGBShift")


def _units(kind: ImageKind, value: float) -> float:
    # shifts are given on the 0..255 scale whatever the dtype (albumentations' defaults, 20,
    # suit every image): full / 255 of the image's units each
    return value * (kind.full / 255.0)


def _limit(kind: ImageKind, value: Any, name: str) -> tuple[float, float]:
    lo, hi = pair(value, name, symmetric=True)
    if max(abs(lo), abs(hi)) > 255:
        raise ValueError(f"{name} must lie within +-255 (the 0..255 scale), got ({lo}, {hi})")
    return _units(kind, lo), _units(kind, hi)


@RGB_SHIFT.form(template=True)
def rgb_shift(kind: ImageKind, r_shift: float = 0, g_shift: float = 0,
              b_shift: float = 0) -> tuple | None:
    """Add ``r_shift``, ``g_shift``, ``b_shift`` (on the 0..255 scale, -255..255, whatever
    the dtype: ``shift / 255`` on float images) to the R, G and B channels and clamp
    (albumentations ``RGBShift`` with fixed shifts); alpha untouched; a no-op on grey
    images."""
    shifts = tuple(number(v, n) for v, n in ((r_shift, "r_shift"), (g_shift, "g_shift"),
                                              (b_shift, "b_shift")))
    for v, n in zip(shifts, ("r_shift", "g_shift", "b_shift"), strict=True):
        if abs(v) > 255:
            raise ValueError(f"{n} must lie within +-255 (the 0..255 scale), got {v}")
    return tuple(_units(kind, v) for v in shifts) if kind.is_colour else None


@RGB_SHIFT.form(random=True, template=True)
def random_rgb_shift(kind: ImageKind, r_shift_limit: Any = 20, g_shift_limit: Any = 20,
                     b_shift_limit: Any = 20) -> Ranges | None:
    """albumentations ``RGBShift``: each channel's shift drawn uniformly from its limit (one
    number ``v``: (-v, v); or a (low, high) pair), on the 0..255 scale whatever the dtype
    (``rgb_shift``'s units). The draws are taken on grey images too, where nothing is
    recorded."""
    ranges = Ranges([_limit(kind, r_shift_limit, "r_shift_limit"),
                     _limit(kind, g_shift_limit, "g_shift_limit"),
                     _limit(kind, b_shift_limit, "b_shift_limit")])
    return ranges if kind.is_colour else None
