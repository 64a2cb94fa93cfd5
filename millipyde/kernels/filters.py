"""Filter kernels: separable stencils whose taps are computed on the host."""

import numpy as np

from .registry import stencil

TRUNCATE = 8.0


@stencil(nparams=1)
def gaussian(sigma):
    """scipy's 1-D Gaussian taps for ``sigma``, ``truncate=8``: radius ``int(8 sigma + .5)``."""
    radius = int(TRUNCATE * float(sigma) + 0.5)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    phi = np.exp(-0.5 / (float(sigma) * float(sigma)) * x * x)
    return phi / phi.sum()
