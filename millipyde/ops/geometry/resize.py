"""``resize``: scikit-image's bilinear resize, anti-aliased on request (its Gaussian
prefilter, a window stencil before the sampler)."""

import numpy as np

from ...kernels.registry import Window, sampler, stencil
from ..base import Draws, Emit, ImageKind, columns, define, integer


def _resize_shape(h, w, height, width):
    return height, width


@sampler(nparams=2, shape=_resize_shape, mode="edge", name="resize")
def resize_map(y, x, h, w, height, width):
    """skimage ``resize(order=1, mode="edge")``: pixel centres scaled, edges repeated."""
    return (y + 0.5) * (h / height) - 0.5, (x + 0.5) * (w / width) - 0.5


def antialias_taps(sigma: float) -> np.ndarray:
    """scipy ``gaussian_filter``'s taps (``truncate=4``: radius ``int(4 sigma + 0.5)``,
    ``exp(-x**2 / (2 sigma**2))`` normalised); one tap of 1 where ``sigma`` is 0."""
    if sigma <= 0:
        return np.ones(1)
    r = int(4.0 * sigma + 0.5)
    x = np.arange(-r, r + 1)
    phi = np.exp(-0.5 / (sigma * sigma) * x ** 2)
    return phi / phi.sum()


@stencil(nparams=2, name="resize_antialias")
def antialias_window(sigma_y, sigma_x):
    """skimage ``resize(anti_aliasing=True, mode="edge")``'s prefilter:
    ``ndi.gaussian_filter(image, sigma, mode="nearest")`` with ``sigma = max(0, (factor -
    1) / 2)`` per axis."""
    return Window(antialias_taps(sigma_y), antialias_taps(sigma_x), "edge")


def antialias_sigmas(hw: np.ndarray, out: np.ndarray) -> np.ndarray:
    """(n, 2) skimage's ``anti_aliasing_sigma = max(0, (in / out - 1) / 2)`` per axis."""
    return np.maximum(0.0, (hw / out - 1.0) / 2.0)


def resize_to(height: int, width: int, n: int) -> Emit:
    """The resize of ``n`` images to ``height`` x ``width``."""
    return Emit("resize", columns(height, width, n=n), out=np.tile([height, width], (n, 1)))


def _prefilter(antialias: bool, hw: np.ndarray, out: np.ndarray) -> list:
    """The anti-aliasing stencil before a resize of ``hw`` to ``out`` ((n, 2) each): none
    without ``antialias``; else one per image (one tap where an axis is not shrunk)."""
    if not antialias:
        return []
    s = antialias_sigmas(hw.astype(np.float64), out.astype(np.float64))
    return [Emit("resize_antialias", columns(s[:, 0], s[:, 1], n=len(hw)))]


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    height, width, antialias = args
    n = len(hw)
    return _prefilter(antialias, hw, np.tile([height, width], (n, 1))) + \
        [resize_to(height, width, n=n)]


RESIZE = define("resize", "geometry", [resize_map, antialias_window],
                reference="skimage.transform.resize(order=1, mode='edge', "
                          "anti_aliasing=antialias)")


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


@RESIZE.form(sample=_sample)
def resize(kind: ImageKind, height: int, width: int, antialias: bool = False) -> tuple:
    """skimage ``resize(order=1, mode="edge", anti_aliasing=antialias)`` to height x width;
    ``antialias`` first blurs each shrunk axis with sigma ``(factor - 1) / 2`` (scipy's
    ``gaussian_filter``, edges repeated; alpha is resized unblurred): one stencil kernel
    more."""
    return (integer(height, "height", 1), integer(width, "width", 1),
            _flag(antialias, "antialias"))


def shorter_sizes(hw: np.ndarray, size: int, max_size: int | None) -> np.ndarray:
    """torchvision's ``_compute_resized_output_size`` for ``size=[size]``: the shorter side to
    ``size``, the longer ``int(size * long / short)`` (at most ``max_size``, the shorter then
    scaled down with it); (n, 2) heights and widths."""
    h, w = hw[:, 0], hw[:, 1]
    short, long = np.minimum(h, w), np.maximum(h, w)
    new_short = np.full(len(hw), size, dtype=np.int64)
    new_long = (size * long / short).astype(np.int64)
    if max_size is not None:
        over = new_long > max_size
        new_short = np.where(over, (max_size * new_short / np.maximum(new_long, 1)).astype(
            np.int64), new_short)
        new_long = np.where(over, max_size, new_long)
    tall = w <= h  # the width is the shorter side (torchvision: ``w <= h``)
    return np.stack([np.where(tall, new_long, new_short), np.where(tall, new_short, new_long)],
                    axis=1)


def _sample_shorter(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    size, max_size, antialias = args
    out = shorter_sizes(hw, size, max_size)
    return _prefilter(antialias, hw, out) + [Emit("resize", out.astype(np.float64), out=out)]


@RESIZE.form(sample=_sample_shorter)
def resize_shorter(kind: ImageKind, size: int, max_size: int | None = None,
                   antialias: bool = False) -> tuple:
    """torchvision ``resize(size=[size], max_size=...)``: the shorter side to ``size``, the
    aspect kept (the longer side truncated, at most ``max_size``); skimage's bilinear resize
    as :meth:`resize` (``antialias``: its Gaussian prefilter)."""
    s = integer(size, "size", 1)
    m = None if max_size is None else integer(max_size, "max_size", 1)
    if m is not None and m <= s:
        raise ValueError(f"max_size ({m}) must be greater than size ({s}), as torchvision's")
    return s, m, _flag(antialias, "antialias")
