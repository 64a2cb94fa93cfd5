"""``pad_to`` / ``random_pad_to``: albumentations' ``PadIfNeeded`` (a constant border that
brings the image to at least ``min_height`` x ``min_width``, placed by ``position``), as the
``pad`` index map with per-image sides."""

import numpy as np

from ..base import Draws, Emit, ImageKind, columns, define, image_value, integer
from .pad import PAD

#: albumentations' placements of the image on its padded canvas (``random``: the random form)
POSITIONS = ("center", "top_left", "top_right", "bottom_left", "bottom_right")


def shortfall(hw: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns each image lacks ((n,) each, 0 where it is large enough)."""
    return np.maximum(height - hw[:, 0], 0), np.maximum(width - hw[:, 1], 0)


def placed(dh: np.ndarray, dw: np.ndarray, position: str) -> list[np.ndarray]:
    """albumentations' ``get_pad_dims`` then ``adjust_padding_by_position``: (top, bottom,
    left, right) of each image."""
    top, left = dh // 2, dw // 2
    if position in ("top_left", "top_right"):
        top = np.zeros_like(dh)
    if position in ("bottom_left", "bottom_right"):
        top = dh
    if position in ("top_left", "bottom_left"):
        left = np.zeros_like(dw)
    if position in ("top_right", "bottom_right"):
        left = dw
    return [top, dh - top, left, dw - left]


PAD_TO = define("pad_to", "geometry", [PAD.kernels[0]],
                reference="albumentations.PadIfNeeded(border_mode=BORDER_CONSTANT)")


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    height, width, position, fill = args
    sides = placed(*shortfall(hw, height, width), position)
    return [Emit(PAD.kernels[0], columns(*sides, fill, n=len(hw)))]


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    height, width, fill = args
    dh, dw = shortfall(hw, height, width)
    # random.randint(0, pad) inclusive: int(u * (pad + 1))
    top = np.minimum((d.u(0) * (dh + 1)).astype(np.int64), dh)
    left = np.minimum((d.u(1) * (dw + 1)).astype(np.int64), dw)
    return [Emit(PAD.kernels[0], columns(top, dh - top, left, dw - left, fill, n=len(hw)))]


@PAD_TO.form(sample=_sample_fixed)
def pad_to(kind: ImageKind, min_height: int, min_width: int, position: str = "center",
           fill: float = 0) -> tuple:
    """albumentations ``PadIfNeeded``: pad with ``fill`` (image units, every channel) to at
    least ``min_height`` x ``min_width``; ``position`` places the image (``"center"``, its
    odd pixel at the bottom / right, or a corner: ``"top_left"``, ...)."""
    h, w = integer(min_height, "min_height", 1), integer(min_width, "min_width", 1)
    if position == "random":
        raise ValueError("pad_to position 'random' is the random form: use random_pad_to")
    if position not in POSITIONS:
        raise ValueError(f"pad_to position must be one of {POSITIONS}, got {position!r}")
    return h, w, position, image_value(kind, fill, "fill")


@PAD_TO.form(random=True, sample=_sample_random)
def random_pad_to(kind: ImageKind, min_height: int, min_width: int, fill: float = 0) -> tuple:
    """albumentations ``PadIfNeeded(position="random")``: ``pad_to`` with the image at a
    uniform whole-pixel place on the canvas."""
    h, w = integer(min_height, "min_height", 1), integer(min_width, "min_width", 1)
    return h, w, image_value(kind, fill, "fill")
