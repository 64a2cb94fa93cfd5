"""``colorize`` / ``random_colorize``: per-channel gains on RGB (the thesis's colour op)."""

from collections.abc import Sequence

from ...kernels.registry import elementwise
from ..base import ImageKind, Ranges, colour_only, define, number, span

_CHANNELS = ("r", "g", "b")
# the arguments' names in errors (made once: a Generator's callable parses per output)
_MULTS = tuple(f"{c}_mult" for c in _CHANNELS)
_RANGES = tuple(f"{c}_range" for c in _CHANNELS)


@elementwise(nparams=3, name="colorize")
def channel_gain(v, c, full, r_mult, g_mult, b_mult):
    """Multiply channel ``c`` by its gain; the uint8 cast clips to 0..255."""
    if c == 0:
        return v * r_mult
    if c == 1:
        return v * g_mult
    return v * b_mult


COLORIZE = define("colorize", "colour", [channel_gain], reference="the thesis (uint8 clip)")


@COLORIZE.form(template=True)
def colorize(kind: ImageKind, r_mult: float, g_mult: float, b_mult: float) -> tuple:
    """Multiply the R, G and B channels (clipped to 0..255); colour images only."""
    gains = tuple(number(v, name) for v, name in zip((r_mult, g_mult, b_mult), _MULTS,
                                                     strict=True))
    colour_only(kind, "colorize")
    for g, c in zip(gains, _CHANNELS, strict=True):
        if g < 0:
            raise ValueError(f"colorize {c}_mult must be >= 0, got {g}")
    return gains


@COLORIZE.form(random=True, template=True)
def random_colorize(kind: ImageKind, r_range: Sequence[float], g_range: Sequence[float],
                    b_range: Sequence[float]) -> Ranges:
    """``colorize`` with gains drawn uniformly from the three ranges."""
    ranges = [span(r, name) for r, name in zip((r_range, g_range, b_range), _RANGES,
                                                strict=True)]
    colour_only(kind, "random_colorize")
    for (lo, _), c in zip(ranges, _CHANNELS, strict=True):
        if lo < 0:
            raise ValueError(f"random_colorize {c}_range must be >= 0, got low bound {lo}")
    return Ranges(ranges)
