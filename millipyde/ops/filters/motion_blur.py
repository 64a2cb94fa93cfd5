"""``motion_blur`` / ``random_motion_blur``: kornia's ``motion_blur`` (``RandomMotionBlur``): a
line of odd length ``k`` through the window's centre, its weights ramped by ``direction``,
rotated by ``angle`` and normalised, correlated with the image.

The line at an angle is not separable: it runs as a window stencil whose taps are a plane
(``kernels.registry.Window.plane``, one pass over the (k, k) taps, zero taps skipped), built
on the host from the node's parameters. The kernel size is data (the taps' length), so every
size runs the same compiled pass and the random form draws ``k`` per image. (albumentations'
``MotionBlur`` draws a random segment with ``cv2.line`` instead: a different kernel family.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import Window, stencil
from ..base import Draws, Emit, ImageKind, between, columns, define, integer, number, span
from .window import border_code, border_of


def motion_taps(k: int, angle: float, direction: float) -> np.ndarray:
    """kornia's ``get_motion_kernel2d(k, angle, direction, mode="nearest")`` in float64: the
    middle row ``d + (1 - 2 d) i / (k - 1)`` (``d = (direction + 1) / 2``), rotated
    counter-clockwise by ``angle`` degrees about the window's centre (kornia's ``rotate``:
    each tap reads the line at the nearest position of the inverse rotation, halves to even
    as ``grid_sample``; zero outside), divided by its sum."""
    d = (min(max(direction, -1.0), 1.0) + 1.0) / 2.0
    line = d + (1.0 - 2.0 * d) / (k - 1) * np.arange(k)
    c = (k - 1) / 2.0
    t = np.deg2rad(angle)
    cos, sin = np.cos(t), np.sin(t)
    y, x = np.mgrid[0:k, 0:k].astype(np.float64)
    sx = np.rint(c + cos * (x - c) - sin * (y - c))
    sy = np.rint(c + sin * (x - c) + cos * (y - c))
    on = (sy == k // 2) & (sx >= 0) & (sx <= k - 1)
    taps = np.where(on, line[np.clip(sx, 0, k - 1).astype(int)], 0.0)
    return taps / taps.sum()


@stencil(nparams=4, name="motion_blur")
def motion_window(k, angle, direction, mode):
    """The line's (k, k) taps (:func:`motion_taps`) as a plane window, and its border."""
    side = np.zeros(int(k))
    return Window(side, side, border_of(mode), plane=motion_taps(int(k), angle, direction))


MOTION_BLUR = define("motion_blur", "filters", [motion_window],
                     reference="kornia.filters.motion_blur (mode='nearest')")


def _size(value: Any, name: str) -> int:
    k = integer(value, name)
    if k < 3 or k % 2 == 0:
        raise ValueError(f"{name} must be odd and >= 3, got {value}")
    return k


def _direction(value: float, name: str) -> float:
    if not -1.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [-1, 1], got {value}")
    return value


@MOTION_BLUR.form()
def motion_blur(kind: ImageKind, kernel_size: int, angle: float, direction: float = 0.0,
                mode: str = "constant") -> tuple:
    """kornia ``motion_blur``: a line of ``kernel_size`` taps (odd, >= 3) at ``angle`` degrees
    (counter-clockwise from the x axis), its weights ramped from one end to the other by
    ``direction`` in [-1, 1] (0: uniform; 1: all weight ahead, kornia's convention),
    normalised and correlated with the image; outside the image as ``mode`` (default
    ``"constant"``, kornia's; ``box_blur``'s names). Colour per channel, alpha kept; integer
    outputs rounded."""
    k = _size(kernel_size, "kernel_size")
    return (float(k), number(angle, "angle"), _direction(number(direction, "direction"),
                                                          "direction"),
            border_code(mode, "motion_blur"))


def _limits(value: Any, name: str) -> tuple[float, float]:
    """kornia's argument: one number ``v`` as (-v, v), or a (min, max) pair."""
    if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, str):
        return span(value, name)
    v = number(value, name)
    if v < 0:
        raise ValueError(f"{name} must be >= 0 when a single number, got {v}")
    return -v, v


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (klo, khi), (alo, ahi), (dlo, dhi), mode = args
    n = len(hw)
    # an odd size, each of klo, klo + 2, ..., khi equally likely
    count = (khi - klo) // 2 + 1
    k = klo + 2.0 * np.minimum(np.floor(d.u(0) * count), count - 1)
    return [Emit(MOTION_BLUR.kernels[0], columns(k, between(alo, ahi, d.u(1)),
                                                 between(dlo, dhi, d.u(2)), mode, n=n))]


@MOTION_BLUR.form(random=True, sample=_sample_random)
def random_motion_blur(kind: ImageKind, kernel_size: Any, angle: Any, direction: Any,
                       mode: str = "constant") -> tuple:
    """kornia ``RandomMotionBlur``: ``motion_blur`` with, per image, an odd kernel size drawn
    uniformly from ``kernel_size`` (one odd size, or a (min, max) pair of odd sizes; kornia
    draws one per batch), the angle from ``angle`` and the direction from ``direction``
    (each one number ``v``: (-v, v), or a (min, max) pair)."""
    if isinstance(kernel_size, (Sequence, np.ndarray)) and not isinstance(kernel_size, str):
        if len(kernel_size) != 2:
            raise ValueError(f"kernel_size must be one odd size or a (min, max) pair, got "
                             f"{len(kernel_size)} values")
        klo, khi = (_size(kernel_size[0], "kernel_size[0]"),
                    _size(kernel_size[1], "kernel_size[1]"))
        if klo > khi:
            raise ValueError(f"kernel_size must be (min, max) with min <= max, got "
                             f"{tuple(kernel_size)}")
    else:
        klo = khi = _size(kernel_size, "kernel_size")
    alo, ahi = _limits(angle, "angle")
    dlo, dhi = _limits(direction, "direction")
    for v in (dlo, dhi):
        _direction(v, "direction")
    return (klo, khi), (alo, ahi), (dlo, dhi), border_code(mode, "random_motion_blur")
