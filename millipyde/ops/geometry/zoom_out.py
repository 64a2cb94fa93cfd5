"""``random_zoom_out``: torchvision's ``RandomZoomOut`` (the image placed on a canvas up to
``side_range`` times its sides, filled with ``fill``), as the ``pad`` index map with per-image
sides."""

from typing import Any

import numpy as np

from ..base import Draws, Emit, ImageKind, between, chance, columns, define, image_value, span
from .pad import PAD

ZOOM_OUT = define("zoom_out", "geometry", [PAD.kernels[0]],
                  reference="torchvision.transforms.v2.RandomZoomOut")


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    fill, (lo, hi), p = args
    h, w = hw[:, 0], hw[:, 1]
    # make_params: r uniform in side_range, the canvas int(side * r), the image at
    # int((canvas - side) * u) from the top-left; p: torchvision's coin (u >= p: unchanged)
    r = between(lo, hi, d.u(0))
    ch = (h * r).astype(np.int64)
    cw = (w * r).astype(np.int64)
    left = ((cw - w) * d.u(1)).astype(np.int64)
    top = ((ch - h) * d.u(2)).astype(np.int64)
    on = d.u(3) < p
    sides = [np.where(on, v, 0) for v in (top, ch - h - top, left, cw - w - left)]
    return [Emit(PAD.kernels[0], columns(*sides, fill, n=len(hw)))]


@ZOOM_OUT.form(random=True, sample=_sample)
def random_zoom_out(kind: ImageKind, fill: float = 0, side_range: Any = (1.0, 4.0),
                    p: float = 0.5) -> tuple:
    """torchvision ``RandomZoomOut``: with probability ``p``, the image at a uniform place
    on a canvas ``r`` times its sides (``r`` uniform in ``side_range``, ``1 <= low <=
    high``), the rest ``fill`` (image units, every channel)."""
    lo, hi = span(side_range, "side_range")
    if lo < 1.0:
        raise ValueError(f"side_range must satisfy 1 <= low <= high, got ({lo}, {hi})")
    return image_value(kind, fill, "fill"), (lo, hi), chance(p, "p")
