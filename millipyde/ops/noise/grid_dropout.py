"""``grid_dropout`` / ``random_grid_dropout``: albumentations' ``GridDropout`` (a regular
grid of rectangular holes set to a fill value)."""

from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, columns, define, image_value, integer, number


@positional(nparams=7, name="grid_dropout")
def grid_hole(v, c, full, y, x, u1, u2, unit_h, unit_w, hole_h, hole_w, shift_y, shift_x,
              fill):
    """albumentations ``GridDropout``: ``fill`` where the pixel lies in a hole, the
    ``hole_h`` x ``hole_w`` rectangle at ``(shift_y + i * unit_h, shift_x + j * unit_w)`` of
    every grid unit; alpha untouched."""
    dy = y - shift_y
    dx = x - shift_x
    if dy >= 0.0 and dx >= 0.0 and dy % unit_h < hole_h and dx % unit_w < hole_w:
        return fill
    return v


GRID_DROPOUT = define("grid_dropout", "noise", [grid_hole],
                      reference="albumentations.GridDropout")


def _units(unit_size: Any, name: str) -> tuple[int, int]:
    if isinstance(unit_size, (tuple, list, np.ndarray)):
        if len(unit_size) != 2:
            raise ValueError(f"{name} must be one size or an (h, w) pair, got {unit_size!r}")
        uh, uw = (integer(u, name) for u in unit_size)
    else:
        uh = uw = integer(unit_size, name)
    if min(uh, uw) < 2:
        raise ValueError(f"{name} must be >= 2 pixels, got {unit_size!r}")
    return uh, uw


def _ratio(value: Any) -> float:
    r = number(value, "ratio")
    if not 0.0 < r < 1.0:
        raise ValueError(f"ratio must lie in (0, 1) (a hole's share of its unit), got {r}")
    return r


def holes(unit: np.ndarray, ratio: float) -> np.ndarray:
    """albumentations' hole side of a unit side: ``int(unit * ratio)`` within
    [1, unit - 1]."""
    return np.minimum(np.maximum(np.floor(unit * ratio), 1), unit - 1)


def _fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (uh, uw), ratio, (sy, sx), fill = args
    hh, hw_ = holes(np.float64(uh), ratio), holes(np.float64(uw), ratio)
    # albumentations: each shift within [0, unit - hole]
    sy, sx = min(max(0, sy), uh - hh), min(max(0, sx), uw - hw_)
    return [Emit("grid_dropout", columns(uh, uw, hh, hw_, sy, sx, fill, n=len(hw)))]


@GRID_DROPOUT.form(sample=_fixed)
def grid_dropout(kind: ImageKind, unit_size: Any, ratio: float = 0.5, shift: Any = (0, 0),
                 fill: float = 0) -> tuple:
    """albumentations ``GridDropout``: units of ``unit_size`` pixels (one side or (h, w),
    >= 2), each with a hole of ``int(unit * ratio)`` pixels (kept within [1, unit - 1]) at
    ``shift`` (y, x) pixels from the unit's corner (kept within [0, unit - hole]), filled
    with ``fill`` (image units); alpha untouched."""
    units = _units(unit_size, "unit_size")
    if isinstance(shift, (tuple, list, np.ndarray)) and len(shift) == 2:
        sy, sx = (integer(s, "shift") for s in shift)
    else:
        raise ValueError(f"shift must be a (y, x) pair of pixels, got {shift!r}")
    if min(sy, sx) < 0:
        raise ValueError(f"shift must be >= 0, got {shift!r}")
    return units, _ratio(ratio), (sy, sx), image_value(kind, fill, "fill")


def _random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (lo, hi), ratio, random_offset, fill = args
    # albumentations: a square unit, randint(lo, hi) (both ends); random_offset: each shift
    # randint(0, unit - hole)
    unit = lo + np.minimum(np.floor(d.u(0) * (hi - lo + 1)), hi - lo)
    hole = holes(unit, ratio)
    if random_offset:
        room = unit - hole + 1
        sy = np.minimum(np.floor(d.u(1) * room), room - 1)
        sx = np.minimum(np.floor(d.u(2) * room), room - 1)
    else:
        sy = sx = 0.0
    return [Emit("grid_dropout", columns(unit, unit, hole, hole, sy, sx, fill, n=len(hw)))]


@GRID_DROPOUT.form(random=True, sample=_random)
def random_grid_dropout(kind: ImageKind, unit_size_range: Any = (10, 40), ratio: float = 0.5,
                        random_offset: bool = True, fill: float = 0) -> tuple:
    """albumentations ``GridDropout(unit_size_range, ratio, random_offset)``: a square unit
    drawn per image from ``unit_size_range`` (whole pixels, both ends, >= 2) and, with
    ``random_offset``, the holes' shifts from [0, unit - hole]."""
    if (not isinstance(unit_size_range, (tuple, list, np.ndarray))
            or len(unit_size_range) != 2):
        raise ValueError(f"unit_size_range must be a (min, max) pair, got {unit_size_range!r}")
    lo, hi = (integer(u, "unit_size_range") for u in unit_size_range)
    if not 2 <= lo <= hi:
        raise ValueError(f"unit_size_range must satisfy 2 <= min <= max, got ({lo}, {hi})")
    if not isinstance(random_offset, (bool, np.bool_)):
        raise ValueError(f"random_offset must be True or False, got {random_offset!r}")
    return (lo, hi), _ratio(ratio), bool(random_offset), image_value(kind, fill, "fill")
