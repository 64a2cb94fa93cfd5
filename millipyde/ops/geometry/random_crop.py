"""``random_crop``: torchvision's ``RandomCrop`` (padding, ``pad_if_needed``, a constant or
edge border) as one window of the padded image."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import sampler
from ..base import (
    Draws,
    Emit,
    ImageKind,
    Reject,
    columns,
    define,
    image_value,
    integer,
    mark_window,
)
from .center_crop import window_or_fill, windows
from .crop import CROP

#: padding modes that are an affine map with a border rule the gather has
MODES = ("constant", "edge")


def _window_shape(h, w, top, left, height, width):
    return height, width


@sampler(nparams=4, shape=_window_shape, mode="edge", name="crop_edge")
def window_or_edge(y, x, h, w, top, left, height, width):
    """A window that may reach outside the image, where it repeats the nearest edge pixel
    (``np.pad(mode="edge")`` then a crop): an integer map sampled with edge clamping."""
    return y + top, x + left


mark_window("crop_edge")


def padding_ltrb(padding: Any) -> tuple[int, int, int, int]:
    """torchvision's ``padding``: one int (every side), two (left/right, top/bottom) or four
    (left, top, right, bottom), each >= 0; as (left, top, right, bottom)."""
    if isinstance(padding, (Sequence, np.ndarray)) and not isinstance(padding, (str, bytes)):
        vals = [integer(v, f"padding[{i}]", 0) for i, v in enumerate(padding)]
        if len(vals) == 1:
            return (vals[0],) * 4
        if len(vals) == 2:
            return vals[0], vals[1], vals[0], vals[1]
        if len(vals) == 4:
            return vals[0], vals[1], vals[2], vals[3]
        raise ValueError(f"padding must be an int or a sequence of 1, 2 or 4 ints, got "
                         f"{len(vals)} values")
    v = integer(padding, "padding", 0)
    return v, v, v, v


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    h, w, (pl, pt, pr, pb), grow, fill, mode = args
    n = len(hw)
    ph = hw[:, 0] + pt + pb
    pw = hw[:, 1] + pl + pr
    top_pad = np.full(n, pt, dtype=np.int64)
    left_pad = np.full(n, pl, dtype=np.int64)
    if grow:  # pad_if_needed: both sides grow by the shortfall, as torchvision's
        dh = np.maximum(h - ph, 0)
        dw = np.maximum(w - pw, 0)
        top_pad += dh
        left_pad += dw
        ph = ph + 2 * dh
        pw = pw + 2 * dw
    small = (ph < h) | (pw < w)
    # torch.randint(0, ph - h + 1) and (0, pw - w + 1): uniform integers, as int(u * count)
    top = np.where(ph > h, (d.u(0) * np.maximum(ph - h + 1, 1)).astype(np.int64), 0)
    left = np.where(pw > w, (d.u(1) * np.maximum(pw - w + 1, 1)).astype(np.int64), 0)
    win = np.stack([top - top_pad, left - left_pad, np.full(n, h), np.full(n, w)], axis=1)
    reject = Reject(small, lambda i: (
        f"random_crop size ({h}, {w}) is larger than the {'padded ' if any(args[2]) else ''}"
        f"image ({int(ph[i])}, {int(pw[i])}); pass pad_if_needed=True to pad it"))
    if not any(args[2]) and not grow:
        return windows([reject], win, np.ones(n, dtype=bool), 0.0)
    if mode == "edge":
        return [reject, Emit("crop_edge", win.astype(np.float64),
                             out=np.tile([h, w], (n, 1)))]
    return [reject, Emit("crop_fill", columns(*win.T, fill, n=n))]


RANDOM_CROP = define("random_crop", "geometry", [CROP.kernels[0], window_or_fill,
                                                 window_or_edge],
                     reference="torchvision.transforms.v2.RandomCrop")


@RANDOM_CROP.form(random=True, sample=_sample)
def random_crop(kind: ImageKind, height: int, width: int, padding: Any = None,
                pad_if_needed: bool = False, fill: float = 0,
                padding_mode: str = "constant") -> tuple:
    """torchvision ``RandomCrop``: a ``height`` x ``width`` window at a uniform position of the
    image padded by ``padding`` (and, with ``pad_if_needed``, by what the crop lacks on both
    sides); ``padding_mode`` ``"constant"`` (``fill``, image units) or ``"edge"``."""
    h, w = integer(height, "height", 1), integer(width, "width", 1)
    pad = (0, 0, 0, 0) if padding is None else padding_ltrb(padding)
    if not isinstance(pad_if_needed, (bool, np.bool_)):
        raise ValueError(f"pad_if_needed must be True or False, got {pad_if_needed!r}")
    if padding_mode in ("reflect", "symmetric"):
        raise ValueError(
            f"random_crop padding_mode {padding_mode!r} is not supported yet: a reflected "
            "border is not an affine map (use 'constant' or 'edge')")
    if padding_mode not in MODES:
        raise ValueError(f"random_crop padding_mode must be one of {MODES}, got "
                         f"{padding_mode!r}")
    value = image_value(kind, fill, "fill")
    return h, w, pad, bool(pad_if_needed), value, padding_mode
