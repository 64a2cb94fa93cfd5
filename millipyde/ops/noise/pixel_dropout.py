"""``pixel_dropout``: albumentations' ``PixelDropout`` (pixels, or single values, set to a
drop value) from counter-based per-pixel draws."""

from typing import Any

import numpy as np

from ...kernels.registry import positional
from ..base import Draws, Emit, ImageKind, channel_values, columns, define
from .salt_and_pepper import fraction, keys


def drop_value(v, c, full, y, x, u1, u2, key_hi, key_lo, prob, v0, v1, v2):
    """albumentations ``pixel_dropout``: channel ``c``'s drop value (``v0`` .. ``v2``) where
    the draw ``u1 < prob``, else ``v``; alpha untouched."""
    if u1 < prob:
        if c == 0:
            return v0
        if c == 1:
            return v1
        return v2
    return v


# one kernel per draw layout: a draw per pixel (every channel dropped together, the default)
# or a draw per value (``per_channel``)
positional(nparams=6, draws=True, shared=True, name="pixel_dropout")(drop_value)
positional(nparams=6, draws=True, name="pixel_dropout_values")(drop_value)

PIXEL_DROPOUT = define("pixel_dropout", "noise", ["pixel_dropout", "pixel_dropout_values"],
                       reference="albumentations.PixelDropout (own draws)")


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    prob, per_channel, values = args
    kernel = "pixel_dropout_values" if per_channel else "pixel_dropout"
    return [Emit(kernel, columns(*keys(d), prob, *values[:3], n=len(hw)))]


@PIXEL_DROPOUT.form(draws=True, sample=_sample)
def pixel_dropout(kind: ImageKind, dropout_prob: float = 0.01, per_channel: bool = False,
                  drop_value: Any = 0) -> tuple:
    """albumentations ``PixelDropout``: each pixel, with probability ``dropout_prob``, set to
    ``drop_value`` (image units; one number or one per channel) in every colour channel, or,
    ``per_channel``, each value on its own; alpha untouched; same seed, same dropout on every
    device."""
    if not isinstance(per_channel, (bool, np.bool_)):
        raise ValueError(f"per_channel must be True or False, got {per_channel!r}")
    values = channel_values(kind, drop_value, "drop_value")
    return fraction(dropout_prob, "dropout_prob"), bool(per_channel), values
