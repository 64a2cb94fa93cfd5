"""``resize``: scikit-image's bilinear resize (no anti-aliasing)."""

import numpy as np

from ...kernels.registry import sampler
from ..base import Draws, Emit, ImageKind, columns, define, integer


def _resize_shape(h, w, height, width):
    return height, width


@sampler(nparams=2, shape=_resize_shape, mode="edge", name="resize")
def resize_map(y, x, h, w, height, width):
    """skimage ``resize(order=1, mode="edge")``: pixel centres scaled, edges repeated."""
    return (y + 0.5) * (h / height) - 0.5, (x + 0.5) * (w / width) - 0.5


def resize_to(height: int, width: int, n: int) -> Emit:
    """The resize of ``n`` images to ``height`` x ``width``."""
    return Emit("resize", columns(height, width, n=n), out=np.tile([height, width], (n, 1)))


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return [resize_to(*args, n=len(hw))]


RESIZE = define("resize", "geometry", [resize_map],
                reference="skimage.transform.resize(order=1, mode='edge', anti_aliasing=False)")


@RESIZE.form(sample=_sample)
def resize(kind: ImageKind, height: int, width: int) -> tuple:
    """skimage ``resize(order=1, mode="edge", anti_aliasing=False)`` to height x width."""
    return integer(height, "height", 1), integer(width, "width", 1)


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
    out = shorter_sizes(hw, *args)
    return [Emit("resize", out.astype(np.float64), out=out)]


@RESIZE.form(sample=_sample_shorter)
def resize_shorter(kind: ImageKind, size: int, max_size: int | None = None) -> tuple:
    """torchvision ``resize(size=[size], max_size=...)``: the shorter side to ``size``, the
    aspect kept (the longer side truncated, at most ``max_size``); skimage's bilinear resize
    as :meth:`resize` (no anti-aliasing)."""
    s = integer(size, "size", 1)
    m = None if max_size is None else integer(max_size, "max_size", 1)
    if m is not None and m <= s:
        raise ValueError(f"max_size ({m}) must be greater than size ({s}), as torchvision's")
    return s, m
