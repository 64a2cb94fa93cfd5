"""``grayscale`` / ``random_grayscale``: torchvision's ``rgb_to_grayscale`` on uint8 colour.

Three channels: a pixelwise op (each of R, G, B becomes the pixel's grey; alpha kept). One
channel: a colour-to-grey ``pixel`` kernel, whose value is gpuimage's greyscale form, float64
in [0, 1]: torchvision's uint8 grey ``g`` as ``g / 255`` (``np.rint(out * 255)`` gives ``g``
back; a batch converts it as it would convert ``g``). A uint8 2-D result would need a grey
stage that keeps its source's dtype, which the gather code generator, the batch writers and
the recorded templates do not have (each takes the grey stage's value as float64 in [0, 1]).
"""

import math

import numpy as np

from ...kernels.registry import pixel, pixelwise
from ..base import ALWAYS, Draws, Emit, ImageKind, Ranges, coin, columns, define, integer


@pixelwise(nparams=2, name="grayscale")
def grey_to_rgb(r, g, b, full, u, p, _d):
    """torchvision ``rgb_to_grayscale(num_output_channels=3)`` where the image's coin ``u`` is
    below ``p``: ``0.2989 r + 0.587 g + 0.114 b`` truncated to an integer, in every channel."""
    if u >= p:
        return r, g, b
    # whole-number sums over 10000: the exact weighted sum (``tv_grey``'s), truncated
    s = (2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0
    if full != 1.0:
        s = math.floor(s)
    return s, s, s


@pixel(name="grayscale1")
def grey_of_rgb(r, g, b, a, has_alpha):
    """torchvision's uint8 grey of an RGB pixel (alpha ignored) as a float64 in [0, 1]:
    ``floor(0.2989 r + 0.587 g + 0.114 b) / 255``."""
    return math.floor((2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0) / 255.0


GRAYSCALE = define("grayscale", "colour", [grey_to_rgb, grey_of_rgb],
                   reference="torchvision.transforms.v2.functional.rgb_to_grayscale")


def _sample(args: tuple | None, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    if args is None:
        return []
    n = len(hw)
    if args[0] == 1:
        return [Emit("grayscale1", columns(n=n))]
    return [Emit("grayscale", columns(*ALWAYS, n=n))]


@GRAYSCALE.form(sample=_sample)
def grayscale(kind: ImageKind, channels: int = 1) -> tuple | None:
    """torchvision ``rgb_to_grayscale``: ``channels=3`` keeps RGB(A) uint8 with the grey in
    R, G and B (alpha kept); ``channels=1`` gives a grey image, float64 ``grey / 255``
    (gpuimage's greyscale form; alpha dropped). A no-op on grey images."""
    c = integer(channels, "channels")
    if c not in (1, 3):
        raise ValueError(f"grayscale channels must be 1 or 3, got {c}")
    return (c,) if kind.is_colour else None


@GRAYSCALE.form(random=True)
def random_grayscale(kind: ImageKind, p: float = 0.1) -> Ranges | None:
    """torchvision ``RandomGrayscale``: ``grayscale(channels=3)`` with probability ``p`` (the
    image keeps its channels; a no-op on grey images, where the coin is drawn too)."""
    ranges = Ranges(coin(p))
    return ranges if kind.is_colour else None
