"""``adjust_log`` / ``random_adjust_log``: scikit-image's logarithmic correction."""

import math
from collections.abc import Sequence

import numpy as np

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, define, number, span, unsigned_only


@elementwise(nparams=2, name="adjust_log")
def log_curve(v, c, full, gain, inv, _d):
    """skimage ``adjust_log``: ``full * gain * log2(1 + v / full)``, or with ``inv`` (1.0)
    ``full * gain * (2 ** (v / full) - 1)``; clamped to [0, full] and truncated on integer
    images (skimage's ``astype``; it wraps what exceeds the type, we saturate); alpha
    untouched."""
    x = v * (1.0 / full)
    if inv != 0.0:
        s = (2.0 ** x - 1.0) * full * gain
    else:
        s = math.log2(1.0 + x) * full * gain
    s = min(max(s, 0.0), full)
    return math.floor(s) if full != 1.0 else s


LOG = define("adjust_log", "intensity", [log_curve], reference="skimage.exposure.adjust_log")


def _gain(value: float, name: str) -> float:
    g = number(value, name)
    if g < 0:
        raise ValueError(f"{name} must be >= 0, got {g}")
    return g


def _inv(value: bool) -> float:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"inv must be True or False, got {value!r}")
    return 1.0 if value else 0.0


@LOG.form(template=True)
def adjust_log(kind: ImageKind, gain: float = 1, inv: bool = False) -> tuple:
    """skimage ``adjust_log``: ``gain * full * log2(1 + v / full)`` (``inv``:
    ``gain * full * (2 ** (v / full) - 1)``), clamped to the image's range; alpha
    untouched."""
    unsigned_only(kind, "adjust_log")
    return _gain(gain, "gain"), _inv(inv)


@LOG.form(random=True, template=True)
def random_adjust_log(kind: ImageKind, gain_range: Sequence[float] = (0.8, 1.2),
                      inv: bool = False) -> Ranges:
    """``adjust_log`` with the gain drawn uniformly from ``gain_range``."""
    unsigned_only(kind, "random_adjust_log")
    lo, hi = span(gain_range, "gain_range")
    _gain(lo, "gain_range")
    i = _inv(inv)
    return Ranges([(lo, hi), (i, i)])
