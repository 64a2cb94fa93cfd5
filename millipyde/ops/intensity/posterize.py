"""``posterize`` / ``random_posterize``: torchvision's ``posterize`` (keep the top bits)."""

import math
from typing import Any

from ...kernels.registry import elementwise
from ..base import ALWAYS, ImageKind, Ranges, coin, define, integer, unsigned_only


@elementwise(nparams=3, name="posterize")
def posterize_value(v, c, full, bits, u, p):
    """torchvision ``posterize``, where the image's coin ``u`` is below ``p``: integers keep
    their top ``bits`` bits (``v & mask``: ``v`` floored to a multiple of
    ``2 ** (type bits - bits)``); floats are floored to ``2 ** bits`` levels,
    ``min(floor(v * levels), levels - 1) / levels``. Alpha untouched."""
    if u >= p:
        return v
    if full == 1.0:
        levels = 2.0 ** bits
        return min(max(math.floor(v * levels), 0.0), levels - 1.0) * (1.0 / levels)
    # full + 1 is the type's 2 ** bits (exact): the step is a power of two, so the division
    # and product are exact
    step = (full + 1.0) / 2.0 ** bits
    return math.floor(v / step) * step


POSTERIZE = define("posterize", "intensity", [posterize_value],
                   reference="torchvision.transforms.v2.functional.posterize")


def _bits(kind: ImageKind, bits: Any, what: str) -> float:
    b = integer(bits, "bits", 0)
    if b > 8:
        raise ValueError(f"{what} bits must be an int in 0..8 (torchvision's range), got {b}")
    unsigned_only(kind, what, "torchvision masks signed values by their bits")
    return float(b)


@POSTERIZE.form(template=True)
def posterize(kind: ImageKind, bits: int) -> tuple:
    """torchvision ``posterize``: keep the top ``bits`` (0..8) bits of each value (floats:
    ``2 ** bits`` levels); alpha untouched."""
    return (_bits(kind, bits, "posterize"), *ALWAYS)


@POSTERIZE.form(random=True, template=True)
def random_posterize(kind: ImageKind, bits: int, p: float = 0.5) -> Ranges:
    """torchvision ``RandomPosterize``: ``posterize(bits)`` with probability ``p``."""
    b = _bits(kind, bits, "random_posterize")
    return Ranges([(b, b), *coin(p)])
