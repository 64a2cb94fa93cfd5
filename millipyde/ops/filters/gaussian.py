"""``gaussian`` / ``random_gaussian``: scikit-image's Gaussian blur (``mode="constant"``,
``truncate=8``) as a separable stencil whose taps are computed on the host."""

import math

import numpy as np

from ...kernels.registry import stencil
from ..base import Draws, Emit, ImageKind, Ranges, between, bounds, columns, define, number

TRUNCATE = 8.0

# Above this sigma the taps' normalisation is the integral of the Gaussian (to float64
# precision: the Poisson-summation correction is exp(-2 pi**2 sigma**2) < 1e-500), so a radius
# longer than the image needs no array as long as the radius.
_ANALYTIC_SIGMA = 8.0


@stencil(nparams=1, name="gaussian")
def gaussian_taps(sigma, reach=None):
    """scipy's 1-D Gaussian taps for ``sigma``, ``truncate=8``: radius ``int(8 sigma + .5)``.

    ``reach`` (the image's largest extent minus one, recorded with the op) caps the radius:
    taps further out only ever multiply the zero padding, so dropping them changes nothing,
    and memory and time stay bounded by the image whatever ``sigma`` is. The kept taps are
    normalised by the sum over the full radius, as scipy's are.
    """
    s = float(sigma)
    reach = None if reach is None else int(reach)
    full_radius = TRUNCATE * s + 0.5
    if reach is None or full_radius < reach + 1 or s < _ANALYTIC_SIGMA:
        radius = int(full_radius)
        x = np.arange(-radius, radius + 1, dtype=np.float64)
        phi = np.exp(-0.5 / (s * s) * x * x)
        if reach is None or radius <= reach:
            return phi / phi.sum()
        total = phi.sum()
        return phi[radius - reach:radius + reach + 1] / total
    radius = int(reach)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    # the sum of exp(-x**2 / (2 s**2)) over |x| <= R (R = int(8 s + .5)): the integral to
    # R + 1/2, in logs so that no sigma up to float64's largest overflows
    ratio = (math.floor(full_radius) + 0.5) / s if math.isfinite(full_radius) else TRUNCATE
    log_total = (math.log(s) + 0.5 * math.log(2.0 * math.pi)
                 + math.log(math.erf(ratio / math.sqrt(2.0))))
    return np.exp(-0.5 * (x / s) ** 2 - log_total)


def reach_of(hw: np.ndarray) -> np.ndarray:
    """The furthest any pixel is from another along one axis, per image: a Gaussian's taps
    beyond it only meet the zero padding (``gaussian_taps`` bounds the taps by it)."""
    return np.maximum(hw.max(axis=1) - 1, 0)


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return [Emit("gaussian", columns(args[0], reach_of(hw), n=len(hw)))]


def _sample_random(args: Ranges, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    s = between(*args[0], d.u(0))
    # sigma 0 leaves the image as it is: nothing is recorded
    return [Emit("gaussian", columns(s, reach_of(hw), n=len(hw)), skip=~(s > 0))]


GAUSSIAN = define("gaussian", "filters", [gaussian_taps],
                  reference="skimage.filters.gaussian(mode='constant', cval=0, truncate=8)")


@GAUSSIAN.form(template=True, sample=_sample_fixed)
def gaussian(kind: ImageKind, sigma: float = 1) -> tuple:
    """Gaussian blur (``mode="constant"``, ``truncate=8``); colour per channel, alpha kept."""
    s = number(sigma, "sigma")
    if s <= 0:
        raise ValueError(f"gaussian sigma must be > 0, got {s}")
    return (s,)


@GAUSSIAN.form(random=True, template=True, skips=True, sample=_sample_random)
def random_gaussian(kind: ImageKind, min_sigma: float, max_sigma: float) -> Ranges:
    """``gaussian`` with sigma drawn from [min_sigma, max_sigma]; sigma 0 leaves it as is."""
    lo, hi = bounds(min_sigma, max_sigma, "min_sigma", "max_sigma")
    if lo < 0:
        raise ValueError(f"random_gaussian min_sigma must be >= 0, got {lo}")
    return Ranges([(lo, hi)])
