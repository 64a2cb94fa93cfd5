"""Intensity kernels: brightness and gamma, on values in ``[0, full]``."""

from .registry import elementwise


@elementwise(nparams=1)
def brightness(v, c, full, delta, _b, _d):
    """Add ``delta`` (a fraction of the full range) and clip to the range.

    Float images (``full`` 1) are clipped to [0, 1] here; integer results are clipped to their
    type's range (negative values included for signed types) by the cast after every op.
    """
    s = v + delta * full
    if full == 1.0:
        s = min(max(s, 0.0), 1.0)
    return s


@elementwise(nparams=2)
def adjust_gamma(v, c, full, gamma, gain, _d):
    """skimage ``adjust_gamma``: ``full * gain * (v / full) ** gamma``.

    Written as skimage's uint8 table computes it (``255 * gain * linspace(0, 1, 256) ** gamma``,
    where ``linspace`` multiplies by the step) so the uint8 results are exact.
    """
    return full * gain * (v * (1.0 / full)) ** gamma
