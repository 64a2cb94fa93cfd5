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
