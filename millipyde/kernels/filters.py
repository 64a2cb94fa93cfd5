"""Filter kernels: separable stencils whose taps are computed on the host."""

import math

import numpy as np

from .registry import stencil

TRUNCATE = 8.0

# Above this sigma the taps' normalisation is the integral of the Gaussian (to float64
# precision: the Poisson-summation correction is exp(-2 pi**2 sigma**2) < 1e-500), so a radius
# longer than the image needs no array as long as the radius.
_ANALYTIC_SIGMA = 8.0


@stencil(nparams=1)
def gaussian(sigma, reach=None):
    """scipy's 1-D Gaussian taps for ``sigma``, ``truncate=8``: radius ``int(8 sigma + .5)``.

    ``reach`` (the image's largest extent minus one, recorded with the op) caps the radius:
    taps further out only ever multiply the zero padding, so dropping them changes nothing,
    and memory and time stay bounded by the image whatever ``sigma`` is. The kept taps are
    normalised by the sum over the full radius, as scipy's are.
    """
    s = float(sigma)
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
