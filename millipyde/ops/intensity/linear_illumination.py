"""``linear_illumination`` / ``random_linear_illumination``: kornia's
``RandomLinearIllumination`` (a linear ramp from one edge, added and clamped)."""

from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, between, columns, define, integer, number, pair

#: the ramp's directions, kornia's numbering: brightest (for a positive gain) at the bottom,
#: the top, the right, the left
DIRECTIONS = ("bottom", "top", "right", "left")


@positional(nparams=4, name="linear_illumination")
def add_ramp(v, c, full, y, x, u1, u2, amp, direction, h, w):
    """kornia ``RandomLinearIllumination``: ``v + amp * ramp * full`` clamped to [0, full],
    ``ramp`` rising from 0 to 1 towards the ``direction`` edge (0 bottom, 1 top, 2 right,
    3 left) of the ``h`` x ``w`` image; alpha untouched."""
    # torch.linspace(0, 1, n)[i], and linspace(1, 0, n)[i] (1 on an axis of one pixel)
    ry = y / (h - 1.0) if h > 1.0 else 0.0
    rx = x / (w - 1.0) if w > 1.0 else 0.0
    if direction == 0.0:
        r = ry
    elif direction == 1.0:
        r = 1.0 - ry
    elif direction == 2.0:
        r = rx
    else:
        r = 1.0 - rx
    return min(max(v + amp * r * full, 0.0), full)


LINEAR_ILLUMINATION = define("linear_illumination", "intensity", [add_ramp],
                             reference="kornia.augmentation.RandomLinearIllumination")


def direction_of(value: Any, name: str = "direction") -> float:
    """A direction by name (:data:`DIRECTIONS`) or number (0..3)."""
    if isinstance(value, str):
        if value not in DIRECTIONS:
            raise ValueError(f"{name} must be one of {DIRECTIONS} or 0..3, got {value!r}")
        return float(DIRECTIONS.index(value))
    d = integer(value, name, 0)
    if d > 3:
        raise ValueError(f"{name} must be one of {DIRECTIONS} or 0..3, got {value!r}")
    return float(d)


def gain_and_sign(gain: Any, sign: Any) -> tuple[tuple[float, float], tuple[float, float]]:
    """kornia's illumination ``gain`` (in [0, 1]) and ``sign`` (in [-1, 1]) ranges: a number
    or a (min, max) pair each."""
    out = []
    for value, name, lo_ok in ((gain, "gain", 0.0), (sign, "sign", -1.0)):
        if isinstance(value, (tuple, list, np.ndarray)):
            lo, hi = pair(value, name)
        else:
            lo = hi = number(value, name)
        if lo < lo_ok or hi > 1.0:
            raise ValueError(f"{name} must lie in [{lo_ok:g}, 1], got {value!r}")
        out.append((lo, hi))
    return out[0], out[1]


def draw_illumination(args: tuple, d: Draws) -> tuple[np.ndarray, np.ndarray]:
    """kornia's draws of one image's illumination: the signed gain (``gain`` uniform, its sign
    that of a uniform ``sign`` draw) and the direction (``floor(4 u)``)."""
    (glo, ghi), (slo, shi) = args
    gain = between(glo, ghi, d.u(0))
    sign = np.where(between(slo, shi, d.u(1)) >= 0.0, 1.0, -1.0)
    return sign * gain, np.minimum(np.floor(d.u(2) * 4.0), 3.0)


def _fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    amp, direction = args
    return [Emit("linear_illumination", columns(amp, direction, hw[:, 0], hw[:, 1],
                                                n=len(hw)))]


def _random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    amp, direction = draw_illumination(args, d)
    return [Emit("linear_illumination", columns(amp, direction, hw[:, 0], hw[:, 1],
                                                n=len(hw)))]


@LINEAR_ILLUMINATION.form(sample=_fixed)
def linear_illumination(kind: ImageKind, gain: float, direction: Any = "bottom") -> tuple:
    """kornia's linear illumination: ``gain * ramp`` (``gain`` in [-1, 1], a fraction of full
    intensity) added and clamped, ``ramp`` rising linearly from 0 at one edge to 1 at the
    ``direction`` edge (``"bottom"``, ``"top"``, ``"right"``, ``"left"``); alpha untouched."""
    g = number(gain, "gain")
    if not -1.0 <= g <= 1.0:
        raise ValueError(f"linear_illumination gain must lie in [-1, 1], got {g}")
    return g, direction_of(direction)


@LINEAR_ILLUMINATION.form(random=True, sample=_random)
def random_linear_illumination(kind: ImageKind, gain: Any = (0.01, 0.2),
                               sign: Any = (-1.0, 1.0)) -> tuple:
    """kornia ``RandomLinearIllumination``: a gain drawn uniformly from ``gain``, negative
    where a draw from ``sign`` is, and one of the four directions uniformly."""
    return gain_and_sign(gain, sign)
