"""``adjust_hue`` / ``random_hue``: torchvision's hue rotation through HSV."""

from ...kernels.fmath import at_least, floorf, lowest
from ...kernels.registry import pixelwise
from ..base import ImageKind, Ranges, bounds, define, number


@pixelwise(nparams=1, name="adjust_hue", whole=True)
def hue_shift(r, g, b, full, delta, _b, _d):
    """torchvision ``adjust_hue``: RGB -> HSV, hue shifted by ``delta`` (mod 1), back to RGB."""
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
    h = h / 6.0 + 1.0
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
