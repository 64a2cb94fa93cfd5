"""``autocontrast`` / ``random_autocontrast``: torchvision's per-channel min/max stretch.

Each channel's minimum and maximum over the image the op sees are a per-image statistic
(``kernels.stats.CHANNEL_RANGE``): one reduction kernel runs before the fused gather.
"""

import math

import numpy as np

from ...kernels.registry import elementwise
from ..base import Draws, Emit, ImageKind, chance, columns, define


@elementwise(nparams=0, stat="channel_range", name="autocontrast")
def autocontrast_value(v, c, full, _a, _b, st, o):
    """torchvision ``autocontrast``: ``(v - min) / ((max - min) / full)``, clamped to
    [0, full] and truncated on integer images; a channel whose minimum is its maximum is left
    as it is (torchvision: minimum 0, scale 1)."""
    lo = st[o + 2 * c]
    hi = st[o + 2 * c + 1]
    if hi == lo:
        return v
    s = (v - lo) / ((hi - lo) * (1.0 / full))
    s = min(max(s, 0.0), full)
    # torchvision converts back with a cast (truncation); floats stay as they are
    return math.floor(s) if full != 1.0 else s


AUTOCONTRAST = define("autocontrast", "intensity", [autocontrast_value],
                      reference="torchvision.transforms.v2.functional.autocontrast")


def sample_coin(kernel: str):
    """The ``sample`` of a parameterless op applied where the image's draw 0 is below ``p``:
    the others record nothing (no reduction runs for them; gated off in a batch)."""

    def sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
        (p,) = args
        return [Emit(kernel, columns(n=len(hw)), skip=~(d.u(0) < p))]

    return sample


@AUTOCONTRAST.form()
def autocontrast(kind: ImageKind) -> tuple:
    """torchvision ``autocontrast``: each channel stretched from its [min, max] to the full
    range (alpha untouched)."""
    return ()


@AUTOCONTRAST.form(random=True, skips=True, sample=sample_coin("autocontrast"))
def random_autocontrast(kind: ImageKind, p: float = 0.5) -> tuple:
    """torchvision ``RandomAutocontrast``: ``autocontrast`` with probability ``p`` (in [0, 1],
    both ends included)."""
    return (chance(p),)
