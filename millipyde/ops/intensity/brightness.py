"""``brightness`` / ``random_brightness``: the thesis's additive brightness."""

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, bounds, define, number


@elementwise(nparams=1, name="brightness")
def add_brightness(v, c, full, delta, _b, _d):
    """Add ``delta`` (a fraction of the full range) and clip to the range.

    Float images (``full`` 1) are clipped to [0, 1] here; integer results are clipped to their
    type's range (negative values included for signed types) by the cast after every op.
    """
    s = v + delta * full
    if full == 1.0:
        s = min(max(s, 0.0), 1.0)
    return s


BRIGHTNESS = define("brightness", "intensity", [add_brightness],
                    reference="the thesis: add delta * full range, clip")


@BRIGHTNESS.form(template=True)
def brightness(kind: ImageKind, delta: float) -> tuple:
    """Add ``delta`` (fraction of full range, in [-1, 1]) and clip; alpha untouched."""
    d = number(delta, "delta")
    if not -1.0 <= d <= 1.0:
        raise ValueError(f"brightness delta must be in [-1, 1], got {d}")
    return (d,)


@BRIGHTNESS.form(random=True, template=True)
def random_brightness(kind: ImageKind, min_delta: float, max_delta: float) -> Ranges:
    """``brightness`` with ``delta`` drawn uniformly from [min_delta, max_delta]."""
    lo, hi = bounds(min_delta, max_delta, "min_delta", "max_delta")
    if lo < -1.0 or hi > 1.0:
        raise ValueError(f"random_brightness min_delta and max_delta must lie in [-1, 1], "
                         f"got [{lo}, {hi}]")
    return Ranges([(lo, hi)])
