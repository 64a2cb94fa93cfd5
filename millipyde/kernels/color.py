"""Colour kernels: greyscale conversion and per-channel colour gains."""

from .registry import elementwise, pixel


@pixel
def rgb2grey(r, g, b, a, has_alpha):
    """skimage ``rgb2gray`` (after ``rgba2rgb`` onto white when there is alpha)."""
    r = r / 255.0
    g = g / 255.0
    b = b / 255.0
    if has_alpha:
        al = a / 255.0
        r = min(max((1.0 - al) + al * r, 0.0), 1.0)
        g = min(max((1.0 - al) + al * g, 0.0), 1.0)
        b = min(max((1.0 - al) + al * b, 0.0), 1.0)
    return 0.2125 * r + 0.7154 * g + 0.0721 * b


@elementwise(nparams=3)
def colorize(v, c, full, r_mult, g_mult, b_mult):
    """Multiply channel ``c`` by its gain; the uint8 cast clips to 0..255."""
    if c == 0:
        return v * r_mult
    if c == 1:
        return v * g_mult
    return v * b_mult
