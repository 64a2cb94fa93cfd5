"""``rescale_intensity``: scikit-image's ``exposure.rescale_intensity(image,
in_range="image", out_range)``: the image's [min, max] over all its colour values stretched
to ``out_range``.

Unlike ``autocontrast`` (a range per channel) one range spans R, G and B, so colour balance
is kept. The channel ranges are the per-image statistic (``kernels.stats.CHANNEL_RANGE``);
the kernel takes their extremes.
"""

import math
from typing import Any

import numpy as np

from ...kernels.registry import elementwise
from ..base import Draws, Emit, ImageKind, columns, define, image_value, pair, unsigned_only


@elementwise(nparams=2, stat="channel_range", name="rescale_intensity")
def rescale_grey(v, c, full, omin, omax, st, o):
    """skimage ``rescale_intensity`` of a grey image: its [min, max] to [omin, omax]."""
    lo = st[o]
    hi = st[o + 1]
    # skimage: clip to [imin, imax], (v - imin) / (imax - imin) * (omax - omin) + omin,
    # cast to the image's dtype (truncation); imin == imax: the value clipped to out_range
    if hi == lo:
        s = min(max(v, omin), omax)
    else:
        s = (min(max(v, lo), hi) - lo) / (hi - lo) * (omax - omin) + omin
    return math.floor(s) if full != 1.0 else s


@elementwise(nparams=2, stat="channel_range", name="rescale_intensity_rgb")
def rescale_rgb(v, c, full, omin, omax, st, o):
    """skimage ``rescale_intensity`` of R, G and B: their joint [min, max] (the extremes of
    the three channel ranges) to [omin, omax]; alpha untouched."""
    lo = min(st[o], min(st[o + 2], st[o + 4]))
    hi = max(st[o + 1], max(st[o + 3], st[o + 5]))
    # as rescale_grey: clip to [imin, imax], (v - imin) / (imax - imin) * (omax - omin) + omin,
    # cast to the image's dtype (truncation); imin == imax: the value clipped to out_range
    if hi == lo:
        s = min(max(v, omin), omax)
    else:
        s = (min(max(v, lo), hi) - lo) / (hi - lo) * (omax - omin) + omin
    return math.floor(s) if full != 1.0 else s


RESCALE_INTENSITY = define("rescale_intensity", "intensity", [rescale_grey, rescale_rgb],
                           reference="skimage.exposure.rescale_intensity(in_range='image')")


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    kernel = "rescale_intensity_rgb" if kind.is_colour else "rescale_intensity"
    return [Emit(kernel, columns(*args, n=len(hw)))]


@RESCALE_INTENSITY.form(sample=_sample)
def rescale_intensity(kind: ImageKind, out_range: Any = None) -> tuple:
    """skimage ``rescale_intensity(image, in_range="image", out_range)``: the image's values
    (R, G and B together; alpha untouched) stretched from their [min, max] to ``out_range``
    (image units; default the dtype's full range), then truncated on integer images."""
    unsigned_only(kind, "rescale_intensity")
    if out_range is None:
        return 0.0, kind.full
    lo, hi = pair(out_range, "out_range")
    image_value(kind, lo, "out_range")
    image_value(kind, hi, "out_range")
    return lo, hi
