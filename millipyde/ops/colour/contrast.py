"""``adjust_contrast`` / ``random_contrast``: torchvision's blend with the grey mean.

The mean is a per-image statistic (``kernels.stats.GREY_SUM``: ``tv_grey`` summed over the
image the op sees, and the pixel count): one reduction kernel runs before the fused gather.
"""

import math

from ...kernels.fmath import floorf, lowest, overflows
from ...kernels.registry import elementwise, pixel
from ..base import ImageKind, Ranges, bounds, define, number


@elementwise(nparams=1, stat="grey_sum", name="adjust_contrast", whole=True)
def contrast_blend(v, c, full, factor, _b, st, o):
    """torchvision ``adjust_contrast``: blend with the image's grey mean, clamp, truncate."""
    mean = st[o] / st[o + 1]  # (the sum of the grey values over their count)
    d = v - mean
    if overflows(factor, max(abs(v), abs(mean), 1.0)):
        # a factor near float64's largest, whose products would overflow: the blend's limit,
        # the mean where v is the mean, else an infinity of v - mean's sign (clamped below)
        s = mean if d == 0.0 else (full if d > 0.0 else -full - 1.0)
    else:
        s = factor * v + (1.0 - factor) * mean
        if s != s:  # a NaN value: the same rule
            s = mean if d == 0.0 else (full if d > 0.0 else -full - 1.0)
    # the type's range: signed images keep their negative values (``_rint_clip``'s rule)
    s = min(max(s, lowest(full)), full)
    # torchvision converts back to integers with a cast (truncation); floats stay as they are.
    # Integer images get whole numbers within [lo, full] (``whole``: not rounded again)
    return floorf(s) if full != 1.0 else s


@pixel(name="tv_grey")
def tv_grey(r, g, b, a, has_alpha):
    """torchvision's grey of a uint8 pixel (``_rgb_to_grayscale_image``), floored: the values
    whose mean ``adjust_contrast`` blends with."""
    # whole-number sums over 10000: exact, so a grey that is a whole number floors to itself
    # (0.2989 * 20 + 0.587 * 18 + 0.114 * 4 is 17, but 16.999999999999996 in float64)
    return math.floor((2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0)


CONTRAST = define("adjust_contrast", "colour", [contrast_blend, tv_grey],
                  reference="torchvision.transforms.v2.functional.adjust_contrast")


@CONTRAST.form()
def adjust_contrast(kind: ImageKind, factor: float) -> tuple:
    """torchvision ``adjust_contrast``: blend with the grey mean (alpha untouched)."""
    f = number(factor, "factor")
    if f < 0:
        raise ValueError(f"adjust_contrast factor must be >= 0, got {f}")
    return (f,)


@CONTRAST.form(random=True)
def random_contrast(kind: ImageKind, min_factor: float, max_factor: float) -> Ranges:
    """``adjust_contrast`` by a factor drawn uniformly from [min_factor, max_factor]."""
    lo, hi = bounds(min_factor, max_factor, "min_factor", "max_factor")
    if lo < 0:
        raise ValueError(f"random_contrast min_factor must be >= 0, got {lo}")
    return Ranges([(lo, hi)])
