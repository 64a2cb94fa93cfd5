"""``adjust_hue`` / ``random_hue``: torchvision's hue rotation through HSV."""

import numpy as np
from numba.extending import register_jitable

from ...kernels.fmath import at_least, floorf, fma, lowest
from ...kernels.registry import BYTE_FORMS, pixelwise
from ..base import ImageKind, Ranges, bounds, define, number


@register_jitable
def _from_hsv(h6, s, maxc, delta, full):  # noqa: ANN001, ANN202 - kernel math
    """:func:`hue_shift`'s second half: the hue ``h6`` (in sixths of a turn, from the ratios)
    shifted by ``delta``, back to RGB, as torchvision does."""
    h = h6 + 1.0
    h = h - floorf(h)  # fmod(h, 1) of a positive h
    h = h + delta
    h = h - floorf(h)  # torch's remainder: non-negative
    h6 = h * 6.0
    i = floorf(h6)
    f = h6 - i
    sxf = s * f
    q = min(max((1.0 - sxf) * maxc, 0.0), 1.0)
    t = min(max((sxf + (1.0 - s)) * maxc, 0.0), 1.0)
    p = min(max((1.0 - s) * maxc, 0.0), 1.0)
    v = maxc
    k = int(i) % 6
    if k == 0:
        r, g, b = v, t, p
    elif k == 1:
        r, g, b = q, v, p
    elif k == 2:
        r, g, b = p, v, t
    elif k == 3:
        r, g, b = p, q, v
    elif k == 4:
        r, g, b = t, p, v
    else:
        r, g, b = v, p, q
    if full != 1.0:
        # torchvision's float -> uint8: multiply by 255.999 and truncate. Whole numbers within
        # the type's range (``whole``: not rounded again): q, t, p are in [0, 1] and v at most
        # 1; v is below lowest / m only on signed types, where every channel is the lowest
        # (and a signed pixel whose largest channel is 0 has s infinite: NaN gives lowest)
        m = full + 1.0 - 1e-3
        lo = lowest(full)
        return (at_least(floorf(r * m), lo), at_least(floorf(g * m), lo),
                at_least(floorf(b * m), lo))
    return r, g, b


@register_jitable
def _to_hsv(r, g, b, full):  # noqa: ANN001, ANN202 - kernel math
    """:func:`hue_shift`'s first half: ``(h6, s, maxc)``, the hue in sixths of a turn (before
    it is taken modulo 1), the saturation and the value of the pixel ``r, g, b``."""
    # floors as floats (``fmath.floorf``: no round trip through an integer in the pixel's
    # chain); each branch below divides only the two channel ratios it reads
    r = r / full
    g = g / full
    b = b / full
    maxc = max(r, max(g, b))
    minc = min(r, min(g, b))
    rng = maxc - minc
    eqc = maxc == minc
    s = rng / (1.0 if eqc else maxc)
    div = 1.0 if eqc else rng
    # the largest channel r: h = bc - gc; g: 2 + rc - bc; b: 4 + gc - rc (xc = (maxc - x) /
    # div, each computed where it is read)
    if maxc == r:
        h = (maxc - b) / div - (maxc - g) / div
    elif maxc == g:
        h = 2.0 + (maxc - r) / div - (maxc - b) / div
    else:
        h = 4.0 + (maxc - g) / div - (maxc - r) / div
    return h / 6.0, s, maxc


@pixelwise(nparams=1, name="adjust_hue", whole=True)
@register_jitable
def hue_shift(r, g, b, full, delta, _b, _d):
    """torchvision ``adjust_hue``: RGB -> HSV, hue shifted by ``delta`` (mod 1), back to RGB."""
    h6, s, maxc = _to_hsv(r, g, b, full)
    return _from_hsv(h6, s, maxc, delta, full)


#: ``i / 255.0`` for each byte ``i``: :func:`hue_shift`'s first divisions on uint8 images
UNIT = np.arange(256.0) / 255.0
#: ``1 / (i / 255.0)`` rounded, the reciprocal of each byte's unit value (entry 0 is never
#: read: a pixel whose channels differ has its largest at least 1)
RECIPROCAL = 1.0 / np.maximum(UNIT, UNIT[1])
#: 1/6 rounded
SIXTH = 1.0 / 6.0
#: :func:`hsv_bytes`' cases (largest channel r and smallest b, r and g; g and b, g and r; b
#: and r, b and g): h = (CASE_A + CASE_S x) + CASE_B, x the middle channel's ratio
CASE_A = np.array([1.0, -1.0, 2.0, 3.0, 4.0, 5.0])
CASE_S = np.array([-1.0, 1.0, 1.0, -1.0, 1.0, -1.0])
CASE_B = np.array([0.0, 0.0, -1.0, 0.0, -1.0, 0.0])


@register_jitable
def hsv_bytes(r, g, b):  # noqa: ANN001, ANN201 - kernel math
    """:func:`_to_hsv` of whole numbers ``r, g, b`` in [0, 255] with ``full`` 255, with one
    division instead of seven: the same values, bit for bit (``tests/ops/test_colour_bytes.py``
    compares all 2**24 pixels).

    The channels' ``x / 255`` are read from :data:`UNIT`. Of the two channel ratios a branch
    reads, the smallest channel's is ``rng / rng``, exactly 1 (the largest and smallest
    channels differ), so only the middle channel's is divided (the branch taken as a case
    index into the sums' constants, :data:`CASE_A`). ``rng / maxc`` and ``h / 6``
    are the quotients corrected once from the rounded reciprocal ``y`` of the divisor ``d``:
    ``q = a y``, then ``q + fma(-q, d, a) y`` (Markstein's correction step; the remainder
    ``fma(-q, d, a)`` is exact).
    """
    ri = int(r)
    gi = int(g)
    bi = int(b)
    hi = max(ri, max(gi, bi))
    lo = min(ri, min(gi, bi))
    maxc = UNIT[hi]
    rng = maxc - UNIT[lo]
    if hi == lo:
        # rng / 1.0, and each branch's ratios 0 / 1.0
        return 0.0, rng, maxc
    q = rng * RECIPROCAL[hi]
    s = fma(fma(-q, maxc, rng), RECIPROCAL[hi], q)
    # the branch of _to_hsv (largest channel r, g or b, then which is the smallest), as a
    # case: h = (CASE_A + CASE_S x) + CASE_B, x = (maxc - m) / rng of the middle channel m, the
    # smallest's ratio being 1.0 (each sum in _to_hsv's order; CASE_S x is exact)
    c = 0 if hi == ri else (2 if hi == gi else 4)
    c += 1 if (ri if c == 4 else bi) != lo else 0
    x = (maxc - UNIT[ri + gi + bi - hi - lo]) / rng
    h = (CASE_A[c] + CASE_S[c] * x) + CASE_B[c]
    q = h * SIXTH
    return fma(fma(-q, 6.0, h), SIXTH, q), s, maxc


def hue_shift_bytes(r, g, b, full, delta, _b, _d):  # noqa: ANN001, ANN201 - kernel math
    """:func:`hue_shift` where ``r, g, b`` are whole numbers in [0, 255] and ``full`` is 255
    (uint8 images; another ``full`` runs :func:`hue_shift`): the cpu arena gathers' form on
    uint8 members (``graph.codegen.cpu_tables``), the same values with :func:`hsv_bytes`'s
    one division a pixel instead of seven."""
    if full != 255.0:
        return hue_shift(r, g, b, full, delta, _b, _d)
    h6, s, maxc = hsv_bytes(r, g, b)
    return _from_hsv(h6, s, maxc, delta, full)


BYTE_FORMS["adjust_hue"] = hue_shift_bytes


HUE = define("adjust_hue", "colour", [hue_shift],
             reference="torchvision.transforms.v2.functional.adjust_hue")


@HUE.form()
def adjust_hue(kind: ImageKind, delta: float) -> tuple | None:
    """torchvision ``adjust_hue`` by ``delta`` in [-0.5, 0.5] (a no-op on grey images)."""
    d = number(delta, "delta")
    if not -0.5 <= d <= 0.5:
        raise ValueError(f"adjust_hue delta must be in [-0.5, 0.5], got {d}")
    return (d,) if kind.is_colour else None


@HUE.form(random=True)
def random_hue(kind: ImageKind, min_delta: float, max_delta: float) -> Ranges | None:
    """``adjust_hue`` by a delta drawn uniformly from [min_delta, max_delta] (the draw is taken
    on grey images too, where nothing is recorded)."""
    lo, hi = bounds(min_delta, max_delta, "min_delta", "max_delta")
    if lo < -0.5 or hi > 0.5:
        raise ValueError(f"random_hue bounds must lie in [-0.5, 0.5], got [{lo}, {hi}]")
    return Ranges([(lo, hi)]) if kind.is_colour else None
