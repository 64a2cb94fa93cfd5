"""``box_blur``: the mean over a box window (SciPy's ``uniform_filter``), with a border mode."""

import numpy as np

from ...kernels.registry import Window, stencil
from ..base import ImageKind, define
from .window import border_code, border_of, sizes


def box_taps_1d(k: int) -> np.ndarray:
    """``k`` taps of ``1 / k`` as SciPy places them: from ``-(k // 2)`` to ``(k - 1) // 2``
    (an even window one further left than right), in a centred odd-length array."""
    r = k // 2
    taps = np.zeros(2 * r + 1)
    taps[:k] = 1.0 / k
    return taps


@stencil(nparams=3, name="box_blur")
def box_window(ky, kx, mode):
    """The box's taps along each axis and its border."""
    return Window(box_taps_1d(int(ky)), box_taps_1d(int(kx)), border_of(mode))


BOX_BLUR = define("box_blur", "filters", [box_window],
                  reference="scipy.ndimage.uniform_filter (mode 'mirror' is 'reflect' here)")


@BOX_BLUR.form()
def box_blur(kind: ImageKind, kernel_size: int = 3, mode: str = "reflect") -> tuple:
    """Mean over a ``kernel_size`` box (one size, or (rows, columns) as SciPy's ``size``;
    an even size reaches one further left/up, as SciPy's); outside the image as ``mode``
    (numpy.pad's names: ``"reflect"`` mirrors about the edge pixel, SciPy's "mirror";
    ``"symmetric"`` about the edge, SciPy's "reflect"; ``"edge"``; ``"constant"`` zeros).
    Colour per channel, alpha kept; integer outputs rounded."""
    ky, kx = sizes(kernel_size, "kernel_size")
    return float(ky), float(kx), border_code(mode, "box_blur")
