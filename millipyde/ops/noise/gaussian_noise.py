"""``gaussian_noise`` / ``random_gaussian_noise``: additive Gaussian noise from counter-based
per-pixel draws (same seed, same noise on every device)."""

import math

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, Ranges, between, bounds, columns, define, number

# draw index of the 64-bit key of the per-pixel counters (parameter draws use t >= 0, the
# probability coin t = -1)
NOISE_KEY = -2


@positional(nparams=3, draws=True, name="gaussian_noise")
def add_noise(v, c, full, y, x, u1, u2, key_hi, key_lo, sigma):
    """Add N(0, sigma) on values in [0, 1] and clip; ``u1, u2`` are the pixel's uniform draws.

    Box-Muller: ``u1`` in [0, 1), so ``1 - u1`` is in (0, 1] and the logarithm is finite.
    """
    z = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
    s = v + sigma * z * full
    # the type's range: signed images keep their negative values (``_rint_clip``'s rule)
    lo = 0.0
    if (full == 127.0 or full == 32767.0 or full == 2147483647.0
            or full == 9223372036854775808.0):
        lo = -full - 1.0
    return min(max(s, lo), full)


def _noise(d: Draws, sigma: np.ndarray | float) -> list:
    k = d.key64(NOISE_KEY)
    # two exact float64 halves: the kernel rebuilds the 64-bit key from them
    return [Emit("gaussian_noise", columns((k >> np.uint64(32)).astype(np.float64),
                                           (k & np.uint64(0xFFFFFFFF)).astype(np.float64),
                                           sigma, n=len(k)))]


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return _noise(d, args[0])


def _sample_random(args: Ranges, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return _noise(d, between(*args[0], d.u(0)))


NOISE = define("gaussian_noise", "noise", [add_noise],
               reference="torchvision.transforms.v2.functional.gaussian_noise (own draws)")


@NOISE.form(draws=True, sample=_sample_fixed)
def gaussian_noise(kind: ImageKind, sigma: float) -> tuple:
    """Add N(0, sigma) to values in [0, 1] and clip (alpha untouched); same seed, same
    noise on every device."""
    s = number(sigma, "sigma")
    if s < 0:
        raise ValueError(f"gaussian_noise sigma must be >= 0, got {s}")
    return (s,)


@NOISE.form(random=True, sample=_sample_random)
def random_gaussian_noise(kind: ImageKind, min_sigma: float, max_sigma: float) -> Ranges:
    """``gaussian_noise`` with sigma drawn uniformly from [min_sigma, max_sigma]."""
    lo, hi = bounds(min_sigma, max_sigma, "min_sigma", "max_sigma")
    if lo < 0:
        raise ValueError(f"random_gaussian_noise min_sigma must be >= 0, got {lo}")
    return Ranges([(lo, hi)])
