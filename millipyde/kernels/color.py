"""Colour kernels: greyscale conversion and per-channel colour gains."""

import math

from .registry import elementwise, pixel, pixelwise


@pixel
def rgb2grey(r, g, b, a, has_alpha):
    """skimage ``rgb2gray`` (after ``rgba2rgb`` onto white when there is alpha)."""
    # img_as_float's own scaling, a multiply (a float64 division is ~20 GPU instructions)
    r = r * (1.0 / 255.0)
    g = g * (1.0 / 255.0)
    b = b * (1.0 / 255.0)
    if has_alpha:
        # divided, not multiplied: GPU compilers may fuse a product into the ``1.0 - al``
        # below (an FMA, one rounding fewer) in one kernel and not in another, and fused and
        # unfused results must agree to the bit
        al = a / 255.0
        # rgba2rgb's clip to [0, 1]: both terms are >= 0, so only the top can be crossed (by
        # rounding); a comparison, as min/max would also handle NaN, which cannot occur
        r = (1.0 - al) + al * r
        r = r if r < 1.0 else 1.0
        g = (1.0 - al) + al * g
        g = g if g < 1.0 else 1.0
        b = (1.0 - al) + al * b
        b = b if b < 1.0 else 1.0
    # GPU compilers fuse a sum of two products into an FMA with either product, and not the
    # same one in every kernel; a sum started with an add has one product per step to fuse, so
    # fused and unfused kernels agree to the bit (+0.0 changes no value: r >= 0)
    s = 0.2125 * r + 0.0
    s = s + 0.7154 * g
    return s + 0.0721 * b


@elementwise(nparams=3)
def colorize(v, c, full, r_mult, g_mult, b_mult):
    """Multiply channel ``c`` by its gain; the uint8 cast clips to 0..255."""
    if c == 0:
        return v * r_mult
    if c == 1:
        return v * g_mult
    return v * b_mult



@elementwise(nparams=1, stat=True)
def adjust_contrast(v, c, full, factor, mean, _d):
    """torchvision ``adjust_contrast``: blend with the image's grey mean, clamp, truncate."""
    s = factor * v + (1.0 - factor) * mean
    s = min(max(s, 0.0), full)
    # torchvision converts back to integers with a cast (truncation); floats stay as they are
    return math.floor(s) if full != 1.0 else s


@pixelwise(nparams=1)
def adjust_saturation(r, g, b, full, factor, _b, _d):
    """torchvision ``adjust_saturation``: blend each channel with the pixel's grey value."""
    s = (2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0  # exact on whole numbers (tv_grey)
    if full != 1.0:
        s = math.floor(s)
    k = 1.0 - factor
    r2 = min(max(factor * r + k * s, 0.0), full)
    g2 = min(max(factor * g + k * s, 0.0), full)
    b2 = min(max(factor * b + k * s, 0.0), full)
    if full != 1.0:
        return math.floor(r2), math.floor(g2), math.floor(b2)
    return r2, g2, b2


@pixelwise(nparams=1)
def adjust_hue(r, g, b, full, delta, _b, _d):
    """torchvision ``adjust_hue``: RGB -> HSV, hue shifted by ``delta`` (mod 1), back to RGB."""
    r = r / full
    g = g / full
    b = b / full
    maxc = max(r, max(g, b))
    minc = min(r, min(g, b))
    rng = maxc - minc
    eqc = maxc == minc
    s = rng / (1.0 if eqc else maxc)
    div = 1.0 if eqc else rng
    rc = (maxc - r) / div
    gc = (maxc - g) / div
    bc = (maxc - b) / div
    if maxc == r:
        h = bc - gc
    elif maxc == g:
        h = 2.0 + rc - bc
    else:
        h = 4.0 + gc - rc
    h = h / 6.0 + 1.0
    h = h - math.floor(h)  # fmod(h, 1) of a positive h
    h = h + delta
    h = h - math.floor(h)  # torch's remainder: non-negative
    h6 = h * 6.0
    i = math.floor(h6)
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
        # torchvision's float -> uint8: multiply by 255.999 and truncate
        m = full + 1.0 - 1e-3
        return math.floor(r * m), math.floor(g * m), math.floor(b * m)
    return r, g, b


@pixel
def tv_grey(r, g, b, a, has_alpha):
    """torchvision's grey of a uint8 pixel (``_rgb_to_grayscale_image``), floored: the values
    whose mean ``adjust_contrast`` blends with."""
    # whole-number sums over 10000: exact, so a grey that is a whole number floors to itself
    # (0.2989 * 20 + 0.587 * 18 + 0.114 * 4 is 17, but 16.999999999999996 in float64)
    return math.floor((2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0)
