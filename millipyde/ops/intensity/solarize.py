"""``solarize`` / ``random_solarize``: torchvision's ``solarize`` (values at or above a
threshold inverted)."""

from typing import Any

from ...kernels.registry import elementwise
from ..base import ALWAYS, ImageKind, Ranges, coin, define, number, unsigned_only

_SIGNED = "torchvision inverts signed values by their bits, not as full - v"


@elementwise(nparams=3, name="solarize")
def solarize_value(v, c, full, threshold, u, p):
    """torchvision ``solarize``: ``full - v`` where ``v >= threshold`` (image units), where the
    image's coin ``u`` is below ``p``; alpha untouched."""
    if u < p and v >= threshold:
        return full - v
    return v


SOLARIZE = define("solarize", "intensity", [solarize_value],
                  reference="torchvision.transforms.v2.functional.solarize")


def _threshold(kind: ImageKind, threshold: Any, what: str) -> float:
    t = number(threshold, "threshold")
    unsigned_only(kind, what, _SIGNED)
    if t > kind.full:
        raise ValueError(f"{what} threshold must be <= {kind.full:g}, the largest value of "
                         f"{kind.dtype} images (image units, as torchvision's), got {t}")
    return t


@SOLARIZE.form(template=True)
def solarize(kind: ImageKind, threshold: float) -> tuple:
    """torchvision ``solarize``: values ``>= threshold`` (in the image's units: 0..255 for
    uint8, [0, 1] for floats) become ``full - v``; alpha untouched."""
    return (_threshold(kind, threshold, "solarize"), *ALWAYS)


@SOLARIZE.form(random=True, template=True)
def random_solarize(kind: ImageKind, threshold: float, p: float = 0.5) -> Ranges:
    """torchvision ``RandomSolarize``: ``solarize(threshold)`` with probability ``p``."""
    t = _threshold(kind, threshold, "random_solarize")
    return Ranges([(t, t), *coin(p)])
