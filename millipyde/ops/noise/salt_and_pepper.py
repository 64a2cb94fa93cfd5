"""``salt_and_pepper`` / ``random_salt_and_pepper``: kornia's ``RandomSaltAndPepperNoise``
from counter-based per-pixel draws (same seed, same noise on every device)."""

from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, between, columns, define, number, pair
from .gaussian_noise import NOISE_KEY


@positional(nparams=4, draws=True, shared=True, name="salt_and_pepper")
def salt_or_pepper(v, c, full, y, x, u1, u2, key_hi, key_lo, amount, salt):
    """kornia's salt and pepper: where the pixel's ``u1 < amount`` its value becomes ``full``
    (salt) if its ``u2 < salt``, else 0 (pepper); one outcome per pixel, the same in R, G
    and B (kornia repeats its masks over the channels); alpha untouched."""
    if u1 < amount:
        if u2 < salt:
            return full
        return 0.0
    return v


SALT_AND_PEPPER = define("salt_and_pepper", "noise", [salt_or_pepper],
                         reference="kornia.augmentation.RandomSaltAndPepperNoise (own draws)")


def keys(d: Draws) -> tuple[np.ndarray, np.ndarray]:
    """The 64-bit key of an op's per-pixel counters as two exact float64 halves (the kernel
    rebuilds the key from them)."""
    k = d.key64(NOISE_KEY)
    return (k >> np.uint64(32)).astype(np.float64), (k & np.uint64(0xFFFFFFFF)).astype(np.float64)


def fraction(value: Any, name: str) -> float:
    """A probability-like number in [0, 1]."""
    v = number(value, name)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {v}")
    return v


def _fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return [Emit("salt_and_pepper", columns(*keys(d), *args, n=len(hw)))]


def _random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (alo, ahi), (slo, shi) = args
    return [Emit("salt_and_pepper", columns(*keys(d), between(alo, ahi, d.u(0)),
                                            between(slo, shi, d.u(1)), n=len(hw)))]


@SALT_AND_PEPPER.form(draws=True, sample=_fixed)
def salt_and_pepper(kind: ImageKind, amount: float, salt_vs_pepper: float = 0.5) -> tuple:
    """kornia's salt and pepper noise: each pixel, with probability ``amount``, becomes
    white (probability ``salt_vs_pepper``) or black, in every colour channel at once; alpha
    untouched; same seed, same noise on every device."""
    return fraction(amount, "amount"), fraction(salt_vs_pepper, "salt_vs_pepper")


def _range(value: Any, name: str) -> tuple[float, float]:
    if isinstance(value, (tuple, list, np.ndarray)):
        lo, hi = pair(value, name)
    else:
        lo = hi = number(value, name)
    fraction(lo, name)
    fraction(hi, name)
    return lo, hi


@SALT_AND_PEPPER.form(random=True, sample=_random)
def random_salt_and_pepper(kind: ImageKind, amount: Any = (0.01, 0.06),
                           salt_vs_pepper: Any = (0.4, 0.6)) -> tuple:
    """kornia ``RandomSaltAndPepperNoise``: ``salt_and_pepper`` with ``amount`` and
    ``salt_vs_pepper`` drawn uniformly per image from their (min, max) ranges (one number:
    that value)."""
    return _range(amount, "amount"), _range(salt_vs_pepper, "salt_vs_pepper")
