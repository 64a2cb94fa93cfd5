"""``median_blur``: the median over a square window (SciPy's ``median_filter``)."""

import numpy as np

from ...kernels.registry import Window, stencil
from ..base import ImageKind, define
from .window import border_code, border_of, sizes

#: the largest window side: its values are sorted per output (k * k of them)
MAX_SIDE = 15


@stencil(nparams=2, name="median_blur")
def median_window(k, mode):
    """A ``k`` x ``k`` median window and its border."""
    ones = np.ones(int(k))
    return Window(ones, ones, border_of(mode), median=True)


MEDIAN_BLUR = define("median_blur", "filters", [median_window],
                     reference="scipy.ndimage.median_filter (mode 'mirror' is 'reflect' here)")


@MEDIAN_BLUR.form()
def median_blur(kind: ImageKind, kernel_size: int = 3, mode: str = "reflect") -> tuple:
    """Median over a ``kernel_size`` x ``kernel_size`` window (odd, at most 15); outside the
    image as ``mode`` (``box_blur``'s names; ``"constant"`` counts zeros). Colour per
    channel, alpha kept."""
    k, k2 = sizes(kernel_size, "kernel_size", odd=True)
    if k != k2:
        raise ValueError(f"median_blur kernel_size must be square, got {kernel_size}")
    if k > MAX_SIDE:
        raise ValueError(f"median_blur kernel_size must be at most {MAX_SIDE}, got {k}")
    return float(k), border_code(mode, "median_blur")
