"""``drop_channels`` / ``channel_dropout``: albumentations' ``ChannelDropout`` (some of R, G,
B set to a fill value)."""

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import elementwise
from ..base import Draws, Emit, ImageKind, colour_only, columns, define, image_value, integer

#: the subsets of (R, G, B) of each size, in ``itertools.combinations``' order
SUBSETS = {k: tuple(itertools.combinations(range(3), k)) for k in (1, 2)}


@elementwise(nparams=2, name="drop_channels")
def drop_channel(v, c, full, mask, fill, _d):
    """``fill`` where channel ``c``'s bit of ``mask`` (1 R, 2 G, 4 B) is set, else ``v``;
    alpha untouched."""
    if (mask // 2.0 ** c) % 2.0 == 1.0:
        return fill
    return v


CHANNEL_DROPOUT = define("channel_dropout", "colour", [drop_channel],
                         reference="albumentations.ChannelDropout")


def _mask(channels: Sequence[int]) -> float:
    return float(sum(1 << int(c) for c in set(channels)))


@CHANNEL_DROPOUT.form()
def drop_channels(kind: ImageKind, channels: Any, fill: float = 0) -> tuple:
    """Set the channels ``channels`` (indices among R 0, G 1, B 2; not all three) to ``fill``
    (image units); alpha untouched. Colour images only."""
    colour_only(kind, "drop_channels")
    try:
        chans = [integer(c, "channels") for c in channels]
    except TypeError:
        raise ValueError(f"channels must be a sequence of channel indices, got "
                         f"{channels!r}") from None
    if not chans or any(not 0 <= c <= 2 for c in chans) or len(set(chans)) == 3:
        raise ValueError(f"channels must name one or two of R, G, B (0, 1, 2), got {channels!r}")
    return _mask(chans), image_value(kind, fill, "fill")


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    lo, hi, fill = args
    n = len(hw)
    # albumentations: randint(lo, hi) channels, then random.sample of that many
    k = np.minimum(lo + np.floor(d.u(0) * (hi - lo + 1)), hi).astype(int)
    masks = np.empty(n)
    u1 = d.u(1)
    for size, subsets in SUBSETS.items():
        rows = k == size
        pick = np.minimum(np.floor(u1[rows] * len(subsets)), len(subsets) - 1).astype(int)
        masks[rows] = [_mask(subsets[j]) for j in pick]
    return [Emit("drop_channels", columns(masks, fill, n=n))]


@CHANNEL_DROPOUT.form(random=True, sample=_sample)
def channel_dropout(kind: ImageKind, channel_drop_range: Any = (1, 1),
                    fill: float = 0) -> tuple:
    """albumentations ``ChannelDropout``: a number of channels drawn uniformly from
    ``channel_drop_range`` (within 1..2), then that many of R, G, B chosen uniformly, set to
    ``fill`` (image units); alpha untouched. Colour images only."""
    colour_only(kind, "channel_dropout")
    try:
        lo, hi = (integer(v, "channel_drop_range") for v in channel_drop_range)
    except (TypeError, ValueError):
        raise ValueError("channel_drop_range must be a (min, max) pair of integers, got "
                         f"{channel_drop_range!r}") from None
    if not 1 <= lo <= hi <= 2:
        raise ValueError("channel_drop_range must satisfy 1 <= min <= max <= 2 (not every "
                         f"channel may be dropped), got {channel_drop_range!r}")
    return lo, hi, image_value(kind, fill, "fill")
