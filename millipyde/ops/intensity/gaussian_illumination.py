"""``gaussian_illumination`` / ``random_gaussian_illumination``: kornia's
``RandomGaussianIllumination`` (a 2-D Gaussian spot, min-max normalised, added and clamped)."""

import math
from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, between, define, number, pair
from .linear_illumination import gain_and_sign


@positional(nparams=8, name="gaussian_illumination")
def add_spot(v, c, full, y, x, u1, u2, amp, cy, cx, sy, sx, k, gmin, gmax):
    """kornia ``RandomGaussianIllumination``: ``v + amp * g * full`` clamped to [0, full],
    ``g`` the product of the 1-D Gaussians ``exp(-(y - cy)**2 / (2 sy**2))`` and the same in
    ``x`` (times ``k``, one over their sums), min-max normalised over the image (``gmin``,
    ``gmax``: kornia's ``normalize_min_max``, its 1e-6 included); alpha untouched."""
    dy = y - cy
    dx = x - cx
    g = k * math.exp(-dy * dy / (2.0 * sy * sy)) * math.exp(-dx * dx / (2.0 * sx * sx))
    g = (g - gmin) / (gmax - gmin + 1e-6)
    return min(max(v + amp * g * full, 0.0), full)


GAUSSIAN_ILLUMINATION = define("gaussian_illumination", "intensity", [add_spot],
                               reference="kornia.augmentation.RandomGaussianIllumination")


def profile(n: int, centre: float, sigma: float) -> tuple[float, float, float, float]:
    """kornia's ``gaussian(n, sigma, mean=centre)`` along one axis: its shifted centre (an
    even ``n`` adds 0.5 to every offset), its sum and its smallest and largest value (the
    kernel divides by the sum; the 2-D extremes are the products of the 1-D ones)."""
    shifted = centre - (0.5 if n % 2 == 0 else 0.0)
    d = np.arange(n, dtype=np.float64) - shifted
    g = np.exp(-d * d / (2.0 * sigma * sigma))
    return shifted, float(g.sum()), float(g.min()), float(g.max())


def spot_rows(amp: np.ndarray, cfy: np.ndarray, cfx: np.ndarray, sfy: np.ndarray,
              sfx: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """The kernel's parameter rows of images of sizes ``hw``: centres ``round(size * cf)``
    (halves to even, as ``torch.round``), sigmas ``size * sf``."""
    n = len(hw)
    rows = np.empty((n, 8))
    for i in range(n):
        h, w = int(hw[i, 0]), int(hw[i, 1])
        sy, sx = h * float(sfy[i]), w * float(sfx[i])
        cy, ty, ly, hy = profile(h, float(np.rint(h * cfy[i])), sy)
        cx, tx, lx, hx = profile(w, float(np.rint(w * cfx[i])), sx)
        k = 1.0 / (ty * tx)
        rows[i] = (amp[i], cy, cx, sy, sx, k, k * ly * lx, k * hy * hx)
    return rows


def _check(lo: float, hi: float, name: str, value: Any) -> tuple[float, float]:
    # centres in [0, 1]; sigmas in (0, 1] (a zero sigma has no Gaussian)
    if name == "sigma" and lo <= 0:
        raise ValueError(f"sigma must lie in (0, 1], got {value!r}")
    if lo < 0 or hi > 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return lo, hi


def _range(value: Any, name: str) -> tuple[float, float]:
    if isinstance(value, (tuple, list, np.ndarray)):
        lo, hi = pair(value, name)
    else:
        lo = hi = number(value, name)
    return _check(lo, hi, name, value)


def _yx(value: Any, name: str) -> tuple[float, float]:
    """One fraction for both axes, or a (y, x) pair."""
    if isinstance(value, (tuple, list, np.ndarray)):
        if len(value) != 2:
            raise ValueError(f"{name} must be one number or a (y, x) pair, got {value!r}")
        vy, vx = number(value[0], f"{name}[0]"), number(value[1], f"{name}[1]")
    else:
        vy = vx = number(value, name)
    _check(min(vy, vx), max(vy, vx), name, value)
    return vy, vx


def _fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    amp, (cfy, cfx), (sfy, sfx) = args
    n = len(hw)
    full = [np.full(n, v) for v in (amp, cfy, cfx, sfy, sfx)]
    return [Emit("gaussian_illumination", spot_rows(*full, hw))]


def _random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (glo, ghi), (clo, chi), (slo, shi), (sglo, sghi) = args
    # kornia's order: gain, sigma_x, center_x, sigma_y, center_y, sign
    gain = between(glo, ghi, d.u(0))
    sfx, cfx = between(slo, shi, d.u(1)), between(clo, chi, d.u(2))
    sfy, cfy = between(slo, shi, d.u(3)), between(clo, chi, d.u(4))
    sign = np.where(between(sglo, sghi, d.u(5)) >= 0.0, 1.0, -1.0)
    return [Emit("gaussian_illumination", spot_rows(sign * gain, cfy, cfx, sfy, sfx, hw))]


@GAUSSIAN_ILLUMINATION.form(sample=_fixed)
def gaussian_illumination(kind: ImageKind, gain: float, center: Any = (0.5, 0.5),
                          sigma: Any = (0.5, 0.5)) -> tuple:
    """kornia's Gaussian illumination: ``gain * g`` (``gain`` in [-1, 1], a fraction of full
    intensity) added and clamped, ``g`` a Gaussian spot min-max normalised to [0, 1], centred
    at ``center`` (y, x) and of standard deviations ``sigma`` (y, x), both as fractions of
    the image's height and width (centres rounded to a pixel, as kornia's); alpha
    untouched."""
    g = number(gain, "gain")
    if not -1.0 <= g <= 1.0:
        raise ValueError(f"gaussian_illumination gain must lie in [-1, 1], got {g}")
    return g, _yx(center, "center"), _yx(sigma, "sigma")


@GAUSSIAN_ILLUMINATION.form(random=True, sample=_random)
def random_gaussian_illumination(kind: ImageKind, gain: Any = (0.01, 0.15),
                                 center: Any = (0.1, 0.9), sigma: Any = (0.2, 1.0),
                                 sign: Any = (-1.0, 1.0)) -> tuple:
    """kornia ``RandomGaussianIllumination``: gain, centre (per axis) and sigma (per axis,
    fractions of the image's size) drawn uniformly from their ranges, the gain negative
    where a draw from ``sign`` is."""
    g, sg = gain_and_sign(gain, sign)
    return g, _range(center, "center"), _range(sigma, "sigma"), sg
