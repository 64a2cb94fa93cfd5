"""``equalize`` / ``random_equalize``: torchvision's per-channel histogram equalization.

Each channel's cumulative 256-bin histogram over the image the op sees is a per-image statistic
(``kernels.stats.CHANNEL_HIST``): one reduction kernel runs before the fused gather, and each
value's new value is torchvision's (Pillow's) table entry, computed from that row.
"""

import math

from ...kernels.registry import elementwise
from ..base import ImageKind, chance, define
from .autocontrast import sample_coin


@elementwise(nparams=0, stat="channel_hist", name="equalize")
def equalize_value(v, c, full, _a, _b, st, o):
    """torchvision ``equalize`` of one value: with ``cum`` the channel's cumulative histogram
    and ``step`` the count of values below its largest, over 255 (floored), value ``b`` maps
    to ``(cum[b - 1] + step // 2) // step`` (0 for ``b = 0``), capped at 255; a channel with
    ``step`` 0 is left as it is. Float images are binned as torchvision converts them to uint8
    (``kernels.stats.hist_bin``) and come back divided by 255."""
    base = o + 257 * c
    if full == 1.0:
        b = min(max(int(v * (255.0 + 1.0 - 1e-3)), 0), 255)
    else:
        b = int(v)
    top = int(st[base + 256])  # the largest value the channel holds
    below = st[base + top - 1] if top > 0 else 0.0
    step = math.floor(below / 255.0)
    if step == 0.0:
        out = float(b)
    elif b == 0:
        out = 0.0
    else:
        out = min(math.floor((st[base + b - 1] + math.floor(step / 2.0)) / step), 255.0)
    # torchvision's uint8 to float conversion: a multiply by 1 / 255
    return out * (1.0 / 255.0) if full == 1.0 else out


EQUALIZE = define("equalize", "intensity", [equalize_value],
                  reference="torchvision.transforms.v2.functional.equalize")


def _uint8_or_float(kind: ImageKind, what: str) -> None:
    if kind.dtype != "uint8" and kind.dtype.kind != "f":
        raise ValueError(f"{what} needs a uint8 or float image (256 bins, as torchvision); this "
                         f"one is {kind.dtype}")


@EQUALIZE.form()
def equalize(kind: ImageKind) -> tuple:
    """torchvision ``equalize``: each channel's histogram equalized (alpha untouched; uint8
    or float images, floats binned as torchvision converts them to uint8)."""
    _uint8_or_float(kind, "equalize")
    return ()


@EQUALIZE.form(random=True, skips=True, sample=sample_coin("equalize"))
def random_equalize(kind: ImageKind, p: float = 0.5) -> tuple:
    """torchvision ``RandomEqualize``: ``equalize`` with probability ``p`` (in [0, 1], both
    ends included)."""
    _uint8_or_float(kind, "random_equalize")
    return (chance(p),)
