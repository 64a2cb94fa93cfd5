"""``center_crop``: torchvision's ``center_crop`` (zero padding where the crop is larger)."""

import numpy as np

from ...kernels.registry import index_map
from ..base import Draws, Emit, ImageKind, columns, define, integer, mark_window
from .crop import CROP


def _window_shape(h, w, top, left, height, width, value):
    return height, width


@index_map(nparams=5, shape=_window_shape, fills=True, name="crop_fill")
def window_or_fill(y, x, h, w, top, left, height, width, value):
    """A ``height`` x ``width`` window at (``top``, ``left``), which may reach outside the
    image: pixels there read ``value`` (every channel), as a pad then a crop."""
    return y + top, x + left


mark_window("crop_fill")


def windows(emit: list, win: np.ndarray, inside: np.ndarray, value: float) -> list:
    """``emit`` plus the windows ``win`` ((n, 4) top, left, height, width): a plain ``crop``
    where every window lies inside its image, ``crop_fill`` (reading ``value`` outside) where
    none does, each on its own images otherwise (a batch then makes them one by one)."""
    n = len(win)
    if inside.all():
        return [*emit, Emit(CROP.kernels[0], win.astype(np.float64))]
    fill = Emit("crop_fill", columns(*win.T, value, n=n), skip=inside if inside.any() else None)
    if not inside.any():
        return [*emit, fill]
    return [*emit, Emit(CROP.kernels[0], win.astype(np.float64), skip=~inside), fill]


def center_windows(hw: np.ndarray, height: int, width: int) -> np.ndarray:
    """torchvision's ``center_crop`` windows ((n, 4) top, left, height, width) in the images'
    own coordinates: ``round((H - h) / 2)`` (half to even, as Python's) where the crop fits,
    else minus the left/top half of the zero padding, ``(h - H) // 2``."""
    H, W = hw[:, 0], hw[:, 1]
    top = np.where(height <= H, np.round((H - height) / 2.0), -((height - H) // 2))
    left = np.where(width <= W, np.round((W - width) / 2.0), -((width - W) // 2))
    n = len(hw)
    return np.stack([top, left, np.full(n, height), np.full(n, width)], axis=1).astype(np.int64)


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    h, w = args
    win = center_windows(hw, h, w)
    inside = (win[:, 0] >= 0) & (win[:, 1] >= 0) & (win[:, 0] + h <= hw[:, 0]) & \
        (win[:, 1] + w <= hw[:, 1])
    return windows([], win, inside, 0.0)


CENTER_CROP = define("center_crop", "geometry", [CROP.kernels[0], window_or_fill],
                     reference="torchvision.transforms.v2.functional.center_crop")


@CENTER_CROP.form(sample=_sample)
def center_crop(kind: ImageKind, height: int, width: int) -> tuple:
    """torchvision ``center_crop`` to ``height`` x ``width``: the central window (zeros
    outside where the crop is larger than the image)."""
    return integer(height, "height", 1), integer(width, "width", 1)
