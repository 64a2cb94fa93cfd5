"""``adjust_gamma`` / ``random_adjust_gamma``: scikit-image's gamma correction."""

from collections.abc import Sequence

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, define, number, span, unsigned_only


@elementwise(nparams=2, name="adjust_gamma")
def gamma_curve(v, c, full, gamma, gain, _d):
    """skimage ``adjust_gamma``: ``full * gain * (v / full) ** gamma``.

    Written as skimage's uint8 table computes it (``255 * gain * linspace(0, 1, 256) ** gamma``,
    where ``linspace`` multiplies by the step) so the uint8 results are exact.
    """
    return full * gain * (v * (1.0 / full)) ** gamma


GAMMA = define("adjust_gamma", "intensity", [gamma_curve],
               reference="skimage.exposure.adjust_gamma")


@GAMMA.form(template=True)
def adjust_gamma(kind: ImageKind, gamma: float = 1, gain: float = 1) -> tuple:
    """skimage ``adjust_gamma``: ``gain * full * (v / full) ** gamma``; alpha untouched."""
    g, k = number(gamma, "gamma"), number(gain, "gain")
    unsigned_only(kind, "adjust_gamma")
    if g < 0:
        raise ValueError(f"adjust_gamma gamma must be >= 0, got {g}")
    if k < 0:
        raise ValueError(f"adjust_gamma gain must be >= 0, got {k}")
    return g, k


@GAMMA.form(random=True, template=True)
def random_adjust_gamma(kind: ImageKind, gamma_range: Sequence[float],
                        gain_range: Sequence[float] = (1.0, 1.0)) -> Ranges:
    """``adjust_gamma`` with gamma and gain drawn uniformly from their ranges."""
    gr, kr = span(gamma_range, "gamma_range"), span(gain_range, "gain_range")
    unsigned_only(kind, "random_adjust_gamma")
    if gr[0] < 0 or kr[0] < 0:
        raise ValueError("random_adjust_gamma ranges must be >= 0")
    return Ranges([gr, kr])
