"""Per-image statistics that elementwise ops read: what one reduction kernel accumulates over
the image an op sees (its *prefix*: the fused gather as it stands before the op).

An op declares the statistic it reads (``@elementwise(stat=...)``); the planner puts one
reduction before the gather that holds the op, and the op's scalar function reads the result
as ``st[o + j]`` (``st`` the image's statistic row, ``o`` the op's offset in it).

A statistic's row is ``width(channels)`` float64 slots. Every slot combines partial results
by one rule (:attr:`Statistic.merges`: a sum, a minimum or a maximum), so a reduction may split
an image among GPU threads and blocks, or CPU row chunks, in any way: sums are of whole
numbers (counts, grey values of uint8 pixels), exact in float64 in any order, and minima and
maxima are exact too. The one exception is the grey sum of a float image, whose value depends
on the order (``exact_on_floats``): batched kernels leave such images to the per-image path.

Histograms are stored *cumulative*: each partial (a GPU block, a CPU chunk) turns its own
counts into running sums before it is merged, and sums of running sums are the running sums
of the total, so no pass over the whole image's histogram is needed after the reduction.

This is engine math that no single op owns (as ``clip`` and ``convert``); the code generators
(``graph.codegen.stat``) turn it into kernel text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CHANNEL_HIST", "CHANNEL_RANGE", "GREY_SUM", "LIGHTNESS_MOMENTS", "STATISTICS",
           "Statistic",
           "hist_bin", "stat_channels"]

#: bins of a histogram statistic: the values of a uint8 image
BINS = 256


def hist_bin(v: float, full: float) -> int:
    """The histogram bin of value ``v``: the value itself on uint8 images, torchvision's
    float-to-uint8 conversion (``v * (255 + 1 - 1e-3)``, truncated) on float images.

    The reduction kernels emit this expression as text (``graph.codegen.stat``) and
    ``equalize`` computes it in its scalar function: a kernel calls no host function, so the
    one-line rule is written in those two places, and tests hold them to this one."""
    return int(v * (255.0 + 1.0 - 1e-3)) if full == 1.0 else int(v)


@dataclass(frozen=True)
class Statistic:
    """One kind of per-image statistic (see the module doc).

    ``per_channel``: whether the row holds ``slots`` values per channel (of the first three:
    alpha is never measured) or ``slots`` values for the whole image; ``merges`` the rule of
    each of those slots (``"sum"``, ``"min"``, ``"max"``); ``hist``: the first ``BINS``
    slots of each channel are its cumulative histogram (:func:`hist_bin`); ``exact_on_floats``:
    whether float images get the same row however the image is split.
    """

    name: str
    merges: tuple[str, ...]
    per_channel: bool
    hist: bool = False
    exact_on_floats: bool = True
    doc: str = ""

    def width(self, channels: int) -> int:
        """Slots of the row for an image of ``channels`` measured channels."""
        return len(self.merges) * (channels if self.per_channel else 1)

    def slot_merges(self, channels: int) -> tuple[str, ...]:
        """The merge rule of every slot of the row."""
        return self.merges * (channels if self.per_channel else 1)

    def init(self, channels: int) -> np.ndarray:
        """The row before anything is accumulated: 0 for sums, +inf / -inf for min / max."""
        start = {"sum": 0.0, "min": np.inf, "max": -np.inf}
        return np.array([start[m] for m in self.slot_merges(channels)], dtype=np.float64)

    def merge(self, partials: np.ndarray) -> np.ndarray:
        """Partial rows (r, width) combined into one row, slot by slot by its rule."""
        channels = partials.shape[1] // max(1, len(self.merges)) if self.per_channel else 1
        rules = np.array(self.slot_merges(channels))
        out = np.empty(partials.shape[1])
        for rule, fn in (("sum", np.sum), ("min", np.min), ("max", np.max)):
            cols = rules == rule
            if cols.any():
                out[cols] = fn(partials[:, cols], axis=0) if len(partials) else \
                    self.init(channels)[cols]
        return out


#: ``adjust_contrast``: the sum of torchvision's floored grey values (the value itself on one
#: channel) and the pixel count; the op divides one by the other
GREY_SUM = Statistic("grey_sum", ("sum", "sum"), per_channel=False, exact_on_floats=False,
                     doc="the image's grey mean")
#: ``autocontrast``: each channel's minimum and maximum (slots ``2c``, ``2c + 1``)
CHANNEL_RANGE = Statistic("channel_range", ("min", "max"), per_channel=True,
                          doc="each channel's minimum and maximum")
#: ``equalize``: each channel's cumulative 256-bin histogram (slots ``257c .. 257c + 255``)
#: and the largest bin that holds a value (slot ``257c + 256``)
CHANNEL_HIST = Statistic("channel_hist", ("sum",) * BINS + ("max",), per_channel=True,
                         hist=True, doc="each channel's 256-bin histogram")

#: ``iso_noise``: the sum of ``max + min`` of each pixel's R, G, B (twice its HLS lightness,
#: in image units), the sum of its square and the pixel count: the lightness's mean and
#: standard deviation (whole numbers on integer images, exact in any order)
LIGHTNESS_MOMENTS = Statistic("lightness_moments", ("sum", "sum", "sum"), per_channel=False,
                              exact_on_floats=False,
                              doc="the HLS lightness's sum and sum of squares")

STATISTICS = {s.name: s for s in (GREY_SUM, CHANNEL_RANGE, CHANNEL_HIST, LIGHTNESS_MOMENTS)}


def stat_channels(cin: int, grey: bool = False) -> int:
    """Channels a statistic measures on an image of ``cin`` channels (alpha never; one after
    a grey conversion)."""
    return 1 if grey else min(cin, 3)
