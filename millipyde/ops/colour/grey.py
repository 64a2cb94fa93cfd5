"""``rgb2grey`` (and its aliases): RGB/RGBA uint8 to float64 greyscale, as scikit-image."""

from ...kernels.registry import pixel
from ..base import ImageKind, define


@pixel(name="rgb2grey")
def grey_of_pixel(r, g, b, a, has_alpha):
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


GREY = define("rgb2grey", "colour", [grey_of_pixel],
              reference="skimage.color.rgb2gray (rgba2rgb onto white first for RGBA)")


@GREY.form(template=True, aliases=("rgb2gray", "rgba2grey", "rgba2gray"))
def rgb2grey(kind: ImageKind) -> tuple | None:
    """Convert RGB/RGBA to float64 greyscale (alpha blended onto white); no-op on grey."""
    return () if kind.is_colour else None
