"""``crop``: a window of the image (``img[top:top + height, left:left + width]``)."""

import numpy as np

from ...kernels.registry import index_map
from ..base import Draws, Emit, ImageKind, Reject, columns, define, integer, mark_window


def _crop_shape(h, w, top, left, height, width):
    return height, width


@index_map(nparams=4, shape=_crop_shape, name="crop")
def crop_window(y, x, h, w, top, left, height, width):
    """``img[top:top + height, left:left + width]`` (the window lies inside the image)."""
    return y + top, x + left


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    t, lf, h, w = args
    tall = t + h > hw[:, 0]
    wide = lf + w > hw[:, 1]
    return [
        Reject(tall, lambda i: f"crop top + height ({t + h}) exceeds the image height "
                               f"{int(hw[i, 0])}"),
        Reject(wide, lambda i: f"crop left + width ({lf + w}) exceeds the image width "
                               f"{int(hw[i, 1])}"),
        Emit("crop", columns(t, lf, h, w, n=len(hw))),
    ]


CROP = define("crop", "geometry", [crop_window], reference="numpy slicing")
mark_window(CROP.kernels[0])


@CROP.form(sample=_sample)
def crop(kind: ImageKind, top: int, left: int, height: int, width: int) -> tuple:
    """``img[top:top + height, left:left + width]``; the window must lie inside."""
    return (integer(top, "top", 0), integer(left, "left", 0), integer(height, "height", 1),
            integer(width, "width", 1))
