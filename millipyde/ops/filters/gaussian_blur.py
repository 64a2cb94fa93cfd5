"""``gaussian_blur`` / ``random_gaussian_blur``: torchvision's Gaussian blur (a kernel size,
sigma per axis, reflect border by default), as a window stencil."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import Window, stencil
from ..base import Draws, Emit, ImageKind, between, columns, define, number, span
from .window import border_code, border_of, sizes


def gaussian_taps_1d(k: int, sigma: float) -> np.ndarray:
    """torchvision's ``_get_gaussian_kernel1d``: ``softmax(-(x / sigma)**2)`` over ``k``
    points ``x`` evenly from ``-lim`` to ``lim``, ``lim = (k - 1) / (2 sqrt 2)`` (the
    Gaussian of the pixel offsets), in float64."""
    lim = (k - 1) / (2.0 * np.sqrt(2.0))
    e = -((np.linspace(-lim, lim, k) / sigma) ** 2)
    p = np.exp(e - e.max())
    return p / p.sum()


@stencil(nparams=5, name="gaussian_blur")
def gaussian_window(kx, ky, sx, sy, mode):
    """The blur's taps along each axis (torchvision's order: x first) and its border."""
    return Window(gaussian_taps_1d(int(ky), sy), gaussian_taps_1d(int(kx), sx),
                  border_of(mode))


GAUSSIAN_BLUR = define("gaussian_blur", "filters", [gaussian_window],
                       reference="torchvision.transforms.v2.functional.gaussian_blur")


def _sigmas(sigma: Any, kx: int, ky: int) -> tuple[float, float]:
    if sigma is None:  # torchvision's default for the kernel size
        return kx * 0.15 + 0.35, ky * 0.15 + 0.35
    if isinstance(sigma, Sequence) and not isinstance(sigma, str):
        if len(sigma) not in (1, 2):
            raise ValueError(f"sigma must be one number or a pair, got {len(sigma)} values")
        pair = (number(sigma[0], "sigma[0]"), number(sigma[-1], f"sigma[{len(sigma) - 1}]"))
    else:
        s = number(sigma, "sigma")
        pair = (s, s)
    if min(pair) <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    return pair


@GAUSSIAN_BLUR.form()
def gaussian_blur(kind: ImageKind, kernel_size: Any, sigma: Any = None,
                  mode: str = "reflect") -> tuple:
    """torchvision ``gaussian_blur``: ``kernel_size`` odd (one, or (x, y) as torchvision),
    ``sigma`` one or (x, y) (default torchvision's ``0.15 k + 0.35``); outside the image as
    ``mode`` (default ``"reflect"``, torchvision's; ``box_blur``'s names). Colour per
    channel, alpha kept; uint8 rounded."""
    kx, ky = sizes(kernel_size, "kernel_size", odd=True)
    sx, sy = _sigmas(sigma, kx, ky)
    return float(kx), float(ky), sx, sy, border_code(mode, "gaussian_blur")


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    kx, ky, (lo, hi), mode = args
    s = between(lo, hi, d.u(0))  # torchvision: one sigma, both axes
    return [Emit("gaussian_blur", columns(kx, ky, s, s, mode, n=len(hw)))]


@GAUSSIAN_BLUR.form(random=True, sample=_sample_random)
def random_gaussian_blur(kind: ImageKind, kernel_size: Any, sigma: Any = (0.1, 2.0),
                         mode: str = "reflect") -> tuple:
    """torchvision ``GaussianBlur``: ``gaussian_blur`` with one sigma drawn uniformly from
    ``sigma`` (min, max) for both axes (one number: that sigma)."""
    kx, ky = sizes(kernel_size, "kernel_size", odd=True)
    if isinstance(sigma, Sequence) and not isinstance(sigma, str):
        lo, hi = span(sigma, "sigma")
    else:
        lo = hi = number(sigma, "sigma")
    if lo <= 0:
        raise ValueError(f"random_gaussian_blur sigma must be > 0, got {sigma}")
    return float(kx), float(ky), (lo, hi), border_code(mode, "random_gaussian_blur")
