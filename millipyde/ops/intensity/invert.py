"""``invert`` / ``random_invert``: torchvision's ``invert`` (``full - v``)."""

from ...kernels.registry import elementwise
from ..base import ALWAYS, ImageKind, Ranges, coin, define, unsigned_only

_SIGNED = "torchvision inverts signed values by their bits, not as full - v"


@elementwise(nparams=2, name="invert")
def invert_value(v, c, full, u, p, _d):
    """torchvision ``invert``: ``full - v`` (``255 - v`` on uint8, ``1 - v`` on floats) where
    the image's coin ``u`` is below ``p``; alpha untouched."""
    if u < p:
        return full - v
    return v


INVERT = define("invert", "intensity", [invert_value],
                reference="torchvision.transforms.v2.functional.invert")


@INVERT.form(template=True)
def invert(kind: ImageKind) -> tuple:
    """torchvision ``invert``: ``full - v`` per channel (alpha untouched)."""
    unsigned_only(kind, "invert", _SIGNED)
    return ALWAYS


@INVERT.form(random=True, template=True)
def random_invert(kind: ImageKind, p: float = 0.5) -> Ranges:
    """torchvision ``RandomInvert``: ``invert`` with probability ``p`` (in [0, 1])."""
    unsigned_only(kind, "random_invert", _SIGNED)
    return Ranges(coin(p))
