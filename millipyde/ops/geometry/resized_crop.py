"""``random_resized_crop``: torchvision's ``RandomResizedCrop`` window, then ``crop`` and
``resize`` (scikit-image's)."""

import math
from collections.abc import Sequence

import numpy as np
from numba.extending import register_jitable

from ..base import Draws, Emit, ImageKind, between1, define, first_fits, integer, span
from .crop import CROP, crop_window
from .resize import resize_map, resize_to

#: torchvision's tries of a random window, and the draws each takes (draw ``4 t + k`` of try
#: ``t``: the scale, the aspect, the top, the left)
TRIES = 10
DRAWS_PER_TRY = 4
#: the form whose windows a decode lane draws compiled (``training.region_plan``: the draws,
#: the tries, the central window, the alignment in one call)
WINDOW_FORM = "random_resized_crop"


def window_params(scale: tuple[float, float], ratio: tuple[float, float],
                  erasing: bool) -> tuple[float, float, float, float, float]:
    """:func:`window_try`'s parameters: the scale range, the log-ratio range and whether the
    window is RandomErasing's (1.0) or RandomResizedCrop's (0.0)."""
    return (float(scale[0]), float(scale[1]), math.log(ratio[0]), math.log(ratio[1]),
            1.0 if erasing else 0.0)


def window_try(h: int, w: int, u0: float, u1: float, u2: float, u3: float,
               p: tuple[float, float, float, float, float]) -> tuple[bool, int, int, int, int]:
    """One of torchvision's tries of a random window in an ``h`` x ``w`` image, from its four
    uniform draws: (fits, top, left, height, width), zeros where it does not fit.

    ``p``: :func:`window_params`. RandomResizedCrop takes the aspect as width / height and
    accepts windows inside the image; RandomErasing takes it as height / width and accepts
    windows strictly smaller than it. An empty image's window is the empty (0, 0, 0, 0) at
    the first try (the resized crop then reads its whole, empty, self). Sides beyond the
    image never fit: clipped before the integer cast, NaN and infinities too (extreme scale
    or ratio).

    The one definition of the try: plain Python on one image (a method call), compiled into
    the batch's loop over its members (``Draws.first_fits``; NumPy's error model: a division
    by zero gives inf, as the guard below gives it in Python)."""
    area = h * w
    if area <= 0:
        return True, 0, 0, 0, 0
    target = area * between1(p[0], p[1], u0)
    aspect = _exp1(between1(p[2], p[3], u1))
    fa = math.sqrt(target * aspect)
    fb = math.sqrt(target / aspect) if aspect > 0.0 else math.inf
    big = max(h, w) + 1
    a = int(min(np.rint(fa), big)) if math.isfinite(fa) else big
    b = int(min(np.rint(fb), big)) if math.isfinite(fb) else big
    if p[4] != 0.0:
        hh = a
        ww = b
        fits = hh < h and ww < w
    else:
        ww = a
        hh = b
        fits = 0 < ww <= w and 0 < hh <= h
    if not fits:
        return False, 0, 0, 0, 0
    return True, int(u2 * (h - hh + 1)), int(u3 * (w - ww + 1)), hh, ww


@register_jitable
def _exp1(v: float) -> float:
    """``math.exp``, infinite where it overflows (an extreme ``ratio``: no window fits), as
    compiled code's ``math.exp`` gives it."""
    try:
        return math.exp(v)
    except Exception:  # (OverflowError: Numba matches no narrower class)
        return math.inf


def central_window(height: int, width: int,
                   ratio: tuple[float, float]) -> tuple[int, int, int, int]:
    """torchvision ``RandomResizedCrop.get_params``' window after ten misses: the central
    window of the ratio nearest the image's, (i, j, h, w)."""
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def random_windows(hw: np.ndarray, scale: tuple, ratio: tuple, d: Draws,
                   erasing: bool) -> tuple[np.ndarray, np.ndarray]:
    """torchvision's ten tries of a random window (:func:`window_try`) for every image: (n, 4)
    windows (top, left, height, width) and the images no try fitted."""
    return first_fits(window_try, hw, window_params(scale, ratio, erasing), d, TRIES,
                      DRAWS_PER_TRY, 4)


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    oh, ow, sc, ra = args
    win, pending = random_windows(hw, sc, ra, d, erasing=False)
    for r in pending.tolist():  # ten misses: torchvision's central fallback, per image
        win[r] = central_window(int(hw[r, 0]), int(hw[r, 1]), ra)
    return [Emit(CROP.kernels[0], win.astype(np.float64)), resize_to(oh, ow, len(hw))]


RRC = define("random_resized_crop", "geometry", [crop_window, resize_map],
             reference="torchvision RandomResizedCrop.get_params, then skimage resize")


@RRC.form(random=True, sample=_sample)
def random_resized_crop(kind: ImageKind, height: int, width: int,
                        scale: Sequence[float] = (0.08, 1.0),
                        ratio: Sequence[float] = (3 / 4, 4 / 3)) -> tuple:
    """torchvision ``RandomResizedCrop`` window sampling, then ``crop`` and ``resize``."""
    oh, ow = integer(height, "height", 1), integer(width, "width", 1)
    sc, ra = span(scale, "scale"), span(ratio, "ratio")
    if sc[0] < 0:
        raise ValueError(f"scale must be >= 0, got {sc}")
    if ra[0] <= 0:
        raise ValueError(f"ratio must be > 0, got {ra}")
    return oh, ow, sc, ra
