"""``shear`` / ``random_shear``: kornia's ``RandomShear`` (x then y shear about the centre,
sampled bilinearly with zeros outside), one affine sampler that fuses with its neighbours."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..base import Draws, Emit, ImageKind, between, define, number, span
from .translate import TRANSLATE, kornia_rows


def shear_rows(shx: np.ndarray, shy: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """``warp_affine_zero`` parameters of kornia's ``get_shear_matrix2d`` (shear angles in
    degrees, ``shx`` along x then ``shy`` along y) about the centre ``(w / 2 - 0.5,
    h / 2 - 0.5)``."""
    n = len(hw)
    cx = hw[:, 1] / 2.0 - 0.5
    cy = hw[:, 0] / 2.0 - 0.5
    with np.errstate(all="ignore"):
        tx = np.tan(np.radians(shx))
        ty = np.tan(np.radians(shy))
    m = np.tile(np.eye(3), (n, 1, 1))
    m[:, 0, 1], m[:, 0, 2] = -tx, tx * cy
    m[:, 1, 0], m[:, 1, 1], m[:, 1, 2] = -ty, 1.0 + tx * ty, ty * (tx * cy + cx)
    return kornia_rows(m, hw)


SHEAR = define("shear", "geometry", [TRANSLATE.kernels[0]],
               reference="kornia.augmentation.RandomShear (its warp_affine, align_corners=False)")


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    n = len(hw)
    return [Emit(TRANSLATE.kernels[0], shear_rows(np.full(n, args[0]), np.full(n, args[1]),
                                                  hw))]


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (xlo, xhi), (ylo, yhi) = args
    return [Emit(TRANSLATE.kernels[0], shear_rows(between(xlo, xhi, d.u(0)),
                                                  between(ylo, yhi, d.u(1)), hw))]


def _angle(value: float, name: str) -> float:
    v = number(value, name)
    if not -90.0 < v < 90.0:
        raise ValueError(f"{name} must lie strictly between -90 and 90 degrees, got {v}")
    return v


@SHEAR.form(sample=_sample_fixed)
def shear(kind: ImageKind, shear_x: float, shear_y: float = 0) -> tuple:
    """Shear by ``shear_x`` degrees along x, then ``shear_y`` along y, about the centre
    (bilinear, zeros outside): kornia ``RandomShear``'s transform for those angles."""
    return _angle(shear_x, "shear_x"), _angle(shear_y, "shear_y")


@SHEAR.form(random=True, sample=_sample_random)
def random_shear(kind: ImageKind, shear: Any) -> tuple:
    """kornia ``RandomShear``: ``shear`` a number ``a`` (x and y each in [-a, a]), an (a, b)
    range along x only, or (a, b, c, d) for x in [a, b] and y in [c, d], in degrees; ``p``
    through the Operation."""
    if isinstance(shear, (Sequence, np.ndarray)) and not isinstance(shear, (str, bytes)):
        if len(shear) == 2:
            rx, ry = span(shear, "shear"), (0.0, 0.0)
        elif len(shear) == 4:
            rx, ry = span(shear[:2], "shear[0:2]"), span(shear[2:], "shear[2:4]")
        else:
            raise ValueError(f"shear must be a number, 2 or 4 values, got {len(shear)} values")
    else:
        v = number(shear, "shear")
        if v < 0:
            raise ValueError(f"shear must be >= 0 when a single number, got {v}")
        rx = ry = (-v, v)
    for r, nm in ((rx, "shear x range"), (ry, "shear y range")):
        if not (-90.0 < r[0] and r[1] < 90.0):
            raise ValueError(f"{nm} must lie strictly between -90 and 90 degrees, got {r}")
    return rx, ry
