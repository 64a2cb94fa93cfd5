"""``erase`` / ``random_erasing``: torchvision's erasing of a window (every channel)."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, channel_values, columns, define, integer, span
from ..geometry.resized_crop import random_windows


@positional(nparams=8, alpha=True, name="erase")
def erase_window(v, c, full, y, x, u1, u2, top, left, height, width, v0, v1, v2, v3):
    """torchvision ``erase``: channel ``c``'s value (``v0`` .. ``v3``) inside the window, every
    channel (alpha included)."""
    if y >= top and y < top + height and x >= left and x < left + width:
        if c == 0:
            return v0
        if c == 1:
            return v1
        if c == 2:
            return v2
        return v3
    return v


ERASE = define("erase", "noise", [erase_window],
               reference="torchvision.transforms.v2.functional.erase")


@ERASE.form()
def erase(kind: ImageKind, top: int, left: int, height: int, width: int,
          value: Any = 0) -> tuple:
    """torchvision ``erase``: the window set to ``value`` (image units; one number, or one per
    channel), every channel."""
    return (integer(top, "top", 0), integer(left, "left", 0), integer(height, "height", 0),
            integer(width, "width", 0), *channel_values(kind, value, "value"))


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    sc, ra, v = args
    win, pending = random_windows(hw, sc, ra, d, erasing=True)
    found = np.ones(len(hw), dtype=bool)
    found[pending] = False  # ten misses: torchvision leaves the image as it is
    return [Emit("erase", columns(*win.T, *v, n=len(hw)), skip=~found)]


@ERASE.form(random=True, skips=True, sample=_sample)
def random_erasing(kind: ImageKind, scale: Sequence[float] = (0.02, 0.33),
                   ratio: Sequence[float] = (0.3, 3.3), value: Any = 0) -> tuple:
    """torchvision ``RandomErasing`` window sampling, then ``erase`` (its probability is
    the Operation's; ``value`` one number or one per channel, image units)."""
    sc, ra = span(scale, "scale"), span(ratio, "ratio")
    if sc[0] < 0 or sc[1] > 1:
        raise ValueError(f"scale must lie in [0, 1], got {sc}")
    if ra[0] <= 0:
        raise ValueError(f"ratio must be > 0, got {ra}")
    return sc, ra, channel_values(kind, value, "value")
