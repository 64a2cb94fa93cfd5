"""``adjust_sigmoid`` / ``random_adjust_sigmoid``: scikit-image's sigmoid (contrast)
correction."""

import math
from collections.abc import Sequence

import numpy as np

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, define, number, span, unsigned_only


@elementwise(nparams=3, name="adjust_sigmoid")
def sigmoid_curve(v, c, full, cutoff, gain, inv):
    """skimage ``adjust_sigmoid``: ``full / (1 + exp(gain * (cutoff - v / full)))``, or with
    ``inv`` (1.0) ``full`` minus it; truncated on integer images (skimage's ``astype``);
    alpha untouched."""
    s = full / (1.0 + math.exp(gain * (cutoff - v * (1.0 / full))))
    if inv != 0.0:
        s = full - s
    s = min(max(s, 0.0), full)
    return math.floor(s) if full != 1.0 else s


SIGMOID = define("adjust_sigmoid", "intensity", [sigmoid_curve],
                 reference="skimage.exposure.adjust_sigmoid")


def _cutoff(value: float, name: str) -> float:
    c = number(value, name)
    if not 0.0 <= c <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1] (a fraction of the range), got {c}")
    return c


def _gain(value: float, name: str) -> float:
    g = number(value, name)
    if abs(g) > 100:
        raise ValueError(f"{name} must lie within +-100, got {g}")
    return g


def _inv(value: bool) -> float:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"inv must be True or False, got {value!r}")
    return 1.0 if value else 0.0


@SIGMOID.form(template=True)
def adjust_sigmoid(kind: ImageKind, cutoff: float = 0.5, gain: float = 10,
                   inv: bool = False) -> tuple:
    """skimage ``adjust_sigmoid``: ``full / (1 + exp(gain * (cutoff - v / full)))`` (``inv``:
    one minus it), ``cutoff`` a fraction of the range; alpha untouched."""
    unsigned_only(kind, "adjust_sigmoid")
    return _cutoff(cutoff, "cutoff"), _gain(gain, "gain"), _inv(inv)


@SIGMOID.form(random=True, template=True)
def random_adjust_sigmoid(kind: ImageKind, cutoff_range: Sequence[float] = (0.4, 0.6),
                          gain_range: Sequence[float] = (5.0, 10.0),
                          inv: bool = False) -> Ranges:
    """``adjust_sigmoid`` with the cutoff and the gain drawn uniformly from their ranges."""
    unsigned_only(kind, "random_adjust_sigmoid")
    c = span(cutoff_range, "cutoff_range")
    g = span(gain_range, "gain_range")
    for v in (*c,):
        _cutoff(v, "cutoff_range")
    for v in g:
        _gain(v, "gain_range")
    i = _inv(inv)
    return Ranges([c, g, (i, i)])
