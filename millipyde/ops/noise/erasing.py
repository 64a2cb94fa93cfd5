"""``erase`` / ``random_erasing``: torchvision's erasing of a window (every channel)."""

from collections.abc import Sequence

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, columns, define, image_value, integer, span
from ..geometry.resized_crop import random_windows


@positional(nparams=5, alpha=True, name="erase")
def erase_window(v, c, full, y, x, u1, u2, top, left, height, width, value):
    """torchvision ``erase``: ``value`` inside the window, every channel (alpha included)."""
    if y >= top and y < top + height and x >= left and x < left + width:
        return value
    return v


ERASE = define("erase", "noise", [erase_window],
               reference="torchvision.transforms.v2.functional.erase")


@ERASE.form()
def erase(kind: ImageKind, top: int, left: int, height: int, width: int,
          value: float = 0) -> tuple:
    """torchvision ``erase``: the window set to ``value`` (image units), every channel."""
    return (integer(top, "top", 0), integer(left, "left", 0), integer(height, "height", 0),
            integer(width, "width", 0), image_value(kind, value, "value"))


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    sc, ra, v = args
    win, pending = random_windows(hw, sc, ra, d, erasing=True)
    found = np.ones(len(hw), dtype=bool)
    found[pending] = False  # ten misses: torchvision leaves the image as it is
    return [Emit("erase", columns(*win.T, v, n=len(hw)), skip=~found)]


@ERASE.form(random=True, skips=True, sample=_sample)
def random_erasing(kind: ImageKind, scale: Sequence[float] = (0.02, 0.33),
                   ratio: Sequence[float] = (0.3, 3.3), value: float = 0) -> tuple:
    """torchvision ``RandomErasing`` window sampling, then ``erase`` (its probability is
    the Operation's)."""
    sc, ra = span(scale, "scale"), span(ratio, "ratio")
    if sc[0] < 0 or sc[1] > 1:
        raise ValueError(f"scale must lie in [0, 1], got {sc}")
    if ra[0] <= 0:
        raise ValueError(f"ratio must be > 0, got {ra}")
    return sc, ra, image_value(kind, value, "value")
