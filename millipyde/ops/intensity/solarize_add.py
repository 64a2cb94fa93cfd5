"""``solarize_add`` / ``random_solarize_add``: AutoAugment's ``SolarizeAdd`` (an addition to
the values below a threshold)."""

from typing import Any

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, bounds, define, number, unsigned_only


@elementwise(nparams=2, name="solarize_add")
def add_below(v, c, full, addition, threshold, _d):
    """AutoAugment's ``solarize_add``: ``clip(v + addition, 0, full)`` where ``v <
    threshold``, else ``v``; alpha untouched."""
    if v < threshold:
        return min(max(v + addition, 0.0), full)
    return v


SOLARIZE_ADD = define("solarize_add", "intensity", [add_below],
                      reference="AutoAugment SolarizeAdd (tensorflow/tpu autoaugment.py)")


def _threshold(kind: ImageKind, threshold: Any, what: str) -> float:
    t = number(threshold, "threshold")
    unsigned_only(kind, what, "the threshold and addition are in unsigned image units")
    if not 0.0 <= t <= kind.full + (1.0 if kind.full != 1.0 else 0.0):
        raise ValueError(f"{what} threshold must lie in [0, {kind.full:g}] (image units), "
                         f"got {t}")
    return t


def _addition(kind: ImageKind, value: Any, name: str) -> float:
    a = number(value, name)
    if abs(a) > kind.full:
        raise ValueError(f"{name} must lie within +-{kind.full:g} (image units), got {a}")
    return a


@SOLARIZE_ADD.form(template=True)
def solarize_add(kind: ImageKind, addition: float, threshold: float = 128) -> tuple:
    """AutoAugment's ``SolarizeAdd``: values below ``threshold`` get ``addition`` added and
    clamped (image units: 0..255 on uint8; pass e.g. 0.5 as the threshold of a float image);
    alpha untouched."""
    return _addition(kind, addition, "addition"), _threshold(kind, threshold, "solarize_add")


@SOLARIZE_ADD.form(random=True, template=True)
def random_solarize_add(kind: ImageKind, min_addition: float, max_addition: float,
                        threshold: float = 128) -> Ranges:
    """``solarize_add`` with the addition drawn uniformly from [min_addition, max_addition]."""
    lo, hi = bounds(min_addition, max_addition, "min_addition", "max_addition")
    _addition(kind, lo, "min_addition")
    _addition(kind, hi, "max_addition")
    t = _threshold(kind, threshold, "random_solarize_add")
    return Ranges([(lo, hi), (t, t)])
