"""Colour kernels: greyscale conversion and per-channel colour gains."""

from .registry import elementwise, pixel


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
