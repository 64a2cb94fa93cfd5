"""``adjust_saturation`` / ``random_saturation``: torchvision's blend with each pixel's grey."""

import math

from numba.extending import register_jitable

from ...kernels.fmath import floorf, overflows
from ...kernels.registry import BYTE_FORMS, pixelwise
from ..base import ImageKind, Ranges, bounds, define, number


@register_jitable
def _blend(r, g, b, s, full, factor):  # noqa: ANN001, ANN202 - kernel math
    """:func:`saturation_blend` past the grey ``s`` of the pixel ``r, g, b``."""
    k = 1.0 - factor
    if overflows(factor, max(abs(r), abs(g), abs(b), 1.0)):
        # a factor near float64's largest, whose products would overflow: the blend's limit
        # below
        r2 = g2 = b2 = math.nan
    else:
        r2 = factor * r + k * s
        g2 = factor * g + k * s
        b2 = factor * b + k * s
    # (overflowed, or a NaN value): the blend's limit is the grey where the channel is the
    # grey, else an infinity of the channel's side of it (clamped below)
    if r2 != r2:
        r2 = s if r == s else (full if r > s else 0.0)
    if g2 != g2:
        g2 = s if g == s else (full if g > s else 0.0)
    if b2 != b2:
        b2 = s if b == s else (full if b > s else 0.0)
    # integer images get whole numbers within [0, full] (``whole``: not rounded again)
    r2 = min(max(r2, 0.0), full)
    g2 = min(max(g2, 0.0), full)
    b2 = min(max(b2, 0.0), full)
    if full != 1.0:
        return floorf(r2), floorf(g2), floorf(b2)
    return r2, g2, b2


@pixelwise(nparams=1, name="adjust_saturation", whole=True)
@register_jitable
def saturation_blend(r, g, b, full, factor, _b, _d):
    """torchvision ``adjust_saturation``: blend each channel with the pixel's grey value."""
    s = (2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0  # exact on whole numbers (tv_grey)
    if full != 1.0:
        s = floorf(s)
    return _blend(r, g, b, s, full, factor)


def saturation_blend_bytes(r, g, b, full, factor, _b, _d):  # noqa: ANN001, ANN201 - kernel math
    """:func:`saturation_blend` where ``r, g, b`` are whole numbers in [0, 255] and ``full`` is
    255 (uint8 images; another ``full`` runs :func:`saturation_blend`): the cpu arena gathers'
    form on uint8 members (``graph.codegen.cpu_tables``). The grey's floor of ``n / 10000``,
    ``n`` the whole weighted sum (at most 2,550,000), is the floor of ``n * 1e-4``: the same
    for every ``n`` of the 2**24 pixels (``tests/ops/test_colour_bytes.py``), without the
    division."""
    if full != 255.0:
        return saturation_blend(r, g, b, full, factor, _b, _d)
    s = floorf((2989.0 * r + 5870.0 * g + 1140.0 * b) * 1e-4)
    return _blend(r, g, b, s, full, factor)


BYTE_FORMS["adjust_saturation"] = saturation_blend_bytes


SATURATION = define("adjust_saturation", "colour", [saturation_blend],
                    reference="torchvision.transforms.v2.functional.adjust_saturation")


@SATURATION.form()
def adjust_saturation(kind: ImageKind, factor: float) -> tuple | None:
    """torchvision ``adjust_saturation`` (alpha untouched; a no-op on grey images)."""
    f = number(factor, "factor")
    if f < 0:
        raise ValueError(f"adjust_saturation factor must be >= 0, got {f}")
    return (f,) if kind.is_colour else None


@SATURATION.form(random=True)
def random_saturation(kind: ImageKind, min_factor: float, max_factor: float) -> Ranges | None:
    """``adjust_saturation`` by a factor drawn uniformly from [min_factor, max_factor] (the
    draw is taken on grey images too, where nothing is recorded)."""
    lo, hi = bounds(min_factor, max_factor, "min_factor", "max_factor")
    if lo < 0:
        raise ValueError(f"random_saturation min_factor must be >= 0, got {lo}")
    return Ranges([(lo, hi)]) if kind.is_colour else None
