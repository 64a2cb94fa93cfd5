"""What the window filters share (``box_blur``, ``gaussian_blur``, ``median_blur``): their
border modes and kernel sizes, checked once.

Their kernels are ``stencil`` kernels whose taps function returns a
``kernels.registry.Window``: taps per axis and a border mode (``BORDERS``: numpy.pad's and
torchvision's names), or a median window, all run by the same generic window passes
(``graph.codegen.stencil.window_source``), the border a run-time argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...kernels.registry import BORDERS
from ..base import integer

#: the border modes a filter takes
MODES = BORDERS


def border_code(mode: Any, what: str) -> float:
    """``mode`` (one of :data:`MODES`) as the number a stencil node carries."""
    if mode not in MODES:
        raise ValueError(f"{what} mode must be one of {MODES}, got {mode!r}")
    return float(BORDERS.index(mode))


def border_of(code: float) -> str:
    """The border mode a node's number stands for."""
    return BORDERS[int(code)]


def sizes(value: Any, name: str, odd: bool = False) -> tuple[int, int]:
    """A kernel size: one positive integer for both axes, or a pair (``odd``: odd ones)."""
    if isinstance(value, (Sequence,)) and not isinstance(value, str):
        if len(value) != 2:
            raise ValueError(f"{name} must be one integer or a pair, got {len(value)} values")
        pair = (integer(value[0], f"{name}[0]"), integer(value[1], f"{name}[1]"))
    else:
        k = integer(value, name)
        pair = (k, k)
    for k in pair:
        if k < 1 or (odd and k % 2 == 0):
            raise ValueError(f"{name} must be {'odd and ' if odd else ''}positive, got {value}")
    return pair
