"""``downscale`` / ``random_downscale``: albumentations' ``Downscale`` (a resize down by
``scale`` then back up to the image's size, OpenCV's nearest or bilinear resize), a loss of
detail at the same size."""

from typing import Any

import numpy as np

from ...kernels.registry import sampler
from ..base import Draws, Emit, ImageKind, between, columns, define, number, pair

#: moves a whole position off the half that rounds to even
NUDGE = 2.0 ** -30


def _to_size(h, w, height, width, fy, fx):
    return height, width


@sampler(nparams=4, shape=_to_size, mode="edge", nearest=True, name="downscale_nearest")
def nearest_map(y, x, h, w, height, width, fy, fx):
    """OpenCV ``resize(INTER_NEAREST)`` to ``height`` x ``width``: source pixel
    ``floor(y * fy)`` (``fy`` the inverse of OpenCV's scale), edges repeated. A sampler's
    map is affine and its nearest pixel rounds, so the floor is ``y * fy - 0.5`` rounded,
    nudged by 2**-30 so that a whole ``y * fy`` rounds up to itself."""
    return y * fy - 0.5 + NUDGE, x * fx - 0.5 + NUDGE


@sampler(nparams=4, shape=_to_size, mode="edge", name="downscale_linear")
def linear_map(y, x, h, w, height, width, fy, fx):
    """OpenCV ``resize(INTER_LINEAR)`` to ``height`` x ``width``: pixel centres scaled by
    ``fy``, ``fx`` (the inverse of OpenCV's scale), edges repeated."""
    return (y + 0.5) * fy - 0.5, (x + 0.5) * fx - 0.5


DOWNSCALE = define("downscale", "filters", [nearest_map, linear_map],
                   reference="albumentations.Downscale")

#: the interpolations by name
INTERPOLATIONS = ("nearest", "linear")


def _steps(scale: np.ndarray, interpolation: str, hw: np.ndarray) -> list:
    kernel = "downscale_" + interpolation
    h, w = hw[:, 0].astype(np.float64), hw[:, 1].astype(np.float64)
    # OpenCV's ``resize(img, None, fx=scale, fy=scale)``: size rint(side * scale) (at least
    # 1 here; OpenCV refuses 0), mapped with 1 / scale; then ``resize(small, (w, h))``,
    # mapped with small / side
    sh, sw = np.maximum(np.rint(h * scale), 1), np.maximum(np.rint(w * scale), 1)
    n = len(hw)
    small = np.stack([sh, sw], axis=1).astype(np.int64)
    return [Emit(kernel, columns(sh, sw, 1.0 / scale, 1.0 / scale, n=n), out=small),
            Emit(kernel, columns(h, w, sh / h, sw / w, n=n), out=hw.astype(np.int64))]


def _interpolation(value: Any) -> str:
    if value not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {INTERPOLATIONS}, got {value!r}")
    return value


def _scale(value: Any, name: str) -> float:
    s = number(value, name)
    if not 0.0 < s < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {s}")
    return s


def _fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    scale, interpolation = args
    return _steps(np.full(len(hw), scale), interpolation, hw)


@DOWNSCALE.form(sample=_fixed)
def downscale(kind: ImageKind, scale: float, interpolation: str = "nearest") -> tuple:
    """albumentations ``Downscale``: resized by ``scale`` (in (0, 1); sides ``rint(side *
    scale)``, at least 1) and back to its size with OpenCV's ``interpolation``, "nearest"
    (albumentations' default) or "linear"; two resizes, alpha included."""
    return _scale(scale, "scale"), _interpolation(interpolation)


def _random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (lo, hi), interpolation = args
    return _steps(between(lo, hi, d.u(0)), interpolation, hw)


@DOWNSCALE.form(random=True, sample=_random)
def random_downscale(kind: ImageKind, scale_range: Any = (0.25, 0.25),
                     interpolation: str = "nearest") -> tuple:
    """albumentations ``Downscale(scale_range)``: ``downscale`` with the scale drawn uniformly
    per image from ``scale_range`` (within (0, 1))."""
    lo, hi = pair(scale_range, "scale_range")
    _scale(lo, "scale_range")
    _scale(hi, "scale_range")
    return (lo, hi), _interpolation(interpolation)
