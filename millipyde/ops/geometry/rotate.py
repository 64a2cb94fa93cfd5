"""``rotate`` / ``random_rotate``: scikit-image's rotation (bilinear, zero outside), about the
centre or a given point, keeping the shape or expanding to hold the whole image."""

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import sampler
from ..base import Draws, Emit, ImageKind, Ranges, between, bounds, columns, define, number


@sampler(nparams=1, name="rotate")
def rotation_map(y, x, h, w, angle):
    """skimage ``rotate``: counter-clockwise by ``angle`` degrees about the centre."""
    t = math.radians(angle)
    cy = h / 2.0 - 0.5
    cx = w / 2.0 - 0.5
    cos_t = math.cos(t)
    sin_t = math.sin(t)
    sx = cos_t * (x - cx) - sin_t * (y - cy) + cx
    sy = sin_t * (x - cx) + cos_t * (y - cy) + cy
    return sy, sx


def _about_shape(h, w, angle, cy, cx, oy, ox, height, width):
    return height, width


@sampler(nparams=7, shape=_about_shape, name="rotate_about")
def rotation_about_map(y, x, h, w, angle, cy, cx, oy, ox, height, width):
    """skimage ``rotate(angle, resize=..., center=(cx, cy))``: output pixel (y, x), moved by
    the expanded output's offset (``oy``, ``ox``), rotated counter-clockwise by ``angle``
    degrees about (``cy``, ``cx``); the output is ``height`` x ``width``."""
    t = math.radians(angle)
    cos_t = math.cos(t)
    sin_t = math.sin(t)
    dx = x + ox - cx
    dy = y + oy - cy
    return sin_t * dx + cos_t * dy + cy, cos_t * dx - sin_t * dy + cx


ROTATE = define("rotate", "geometry", [rotation_map, rotation_about_map],
                reference="skimage.transform.rotate(order=1, mode='constant', cval=0; "
                          "resize=expand, center=center)")


def about(hw: np.ndarray, angle: np.ndarray, expand: bool,
          centre: tuple[float, float] | None) -> np.ndarray:
    """(n, 7) parameters of ``rotate_about``: skimage ``rotate``'s centre (``(w / 2 - 0.5,
    h / 2 - 0.5)`` unless given as (x, y)) and, with ``expand`` (skimage's ``resize``), the
    output that holds the four corner pixels' centres rotated, ``round(extent + 1)``, with
    its offset; per image, in Python (cos and sin as CPython computes them)."""
    rows = []
    for (h, w), a in zip(hw.tolist(), angle.tolist(), strict=True):
        cx, cy = (w / 2.0 - 0.5, h / 2.0 - 0.5) if centre is None else centre
        oy = ox = 0.0
        height, width = h, w
        if expand:
            t = math.radians(a)
            c, s = math.cos(t), math.sin(t)
            # the inverse rotation (clockwise) of the corners about the centre
            xs, ys = [], []
            for px, py in ((0, 0), (0, h - 1), (w - 1, h - 1), (w - 1, 0)):
                dx, dy = px - cx, py - cy
                xs.append(c * dx + s * dy + cx)
                ys.append(-s * dx + c * dy + cy)
            ox, oy = min(xs), min(ys)
            height = int(np.around(max(ys) - oy + 1))
            width = int(np.around(max(xs) - ox + 1))
        rows.append((a, cy, cx, oy, ox, height, width))
    return np.array(rows, dtype=np.float64).reshape(len(hw), 7)


def _emit(angle: np.ndarray, extra: tuple | None, hw: np.ndarray) -> list:
    if extra is None:
        return [Emit("rotate", columns(angle, n=len(hw)))]
    p = about(hw, angle, *extra)
    return [Emit("rotate_about", p, out=p[:, 5:7].astype(np.int64))]


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return _emit(np.full(len(hw), args[0]), args[1], hw)


def _sample_random(args: Any, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    if isinstance(args, Ranges):  # angle only: the plain draws of the same-size recorder
        return _emit(between(*args[0], d.u(0)), None, hw)
    (lo, hi), extra = args
    return _emit(between(lo, hi, d.u(0)), extra, hw)


def _extra(expand: Any, fill: Any, center: Any, what: str) -> tuple | None:
    """(expand, centre) when either asks for more than skimage's plain rotate, else None."""
    if not isinstance(expand, (bool, np.bool_)):
        raise ValueError(f"{what} expand must be True or False, got {expand!r}")
    if number(fill, "fill") != 0:
        raise ValueError(f"{what} fill must be 0: the bilinear sampler reads 0 outside the "
                         f"image (another fill is not supported yet), got {fill!r}")
    centre = None
    if center is not None:
        if isinstance(center, (str, bytes)) or not isinstance(center, (Sequence, np.ndarray)) \
                or len(center) != 2:
            raise ValueError(f"{what} center must be an (x, y) pair, got {center!r}")
        centre = (number(center[0], "center[0]"), number(center[1], "center[1]"))
    if not expand and centre is None:
        return None
    return bool(expand), centre


@ROTATE.form(template=True, sample=_sample_fixed)
def rotate(kind: ImageKind, angle: float, expand: bool = False, fill: float = 0,
           center: Any = None) -> tuple:
    """Rotate counter-clockwise by ``angle`` degrees (bilinear, 0 outside) about the centre,
    or ``center`` (x, y); ``expand`` grows the output to hold the whole rotated image
    (skimage ``rotate``'s ``resize``). ``fill`` must be 0."""
    return number(angle, "angle"), _extra(expand, fill, center, "rotate")


@ROTATE.form(random=True, template=True, sample=_sample_random)
def random_rotate(kind: ImageKind, min_angle: float, max_angle: float, expand: bool = False,
                  fill: float = 0, center: Any = None) -> Any:
    """``rotate`` by an angle drawn uniformly from [min_angle, max_angle]."""
    span_ = bounds(min_angle, max_angle, "min_angle", "max_angle")
    extra = _extra(expand, fill, center, "random_rotate")
    return Ranges([span_]) if extra is None else (span_, extra)
