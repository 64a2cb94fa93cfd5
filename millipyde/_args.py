"""Argument checks shared by the image methods: ValueError naming the argument."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

_EXACT = 1 << 53  # ints up to this convert to float exactly (and are finite)

#: the largest image side an op may make (an output's size is checked when the op is
#: recorded: this, and the bytes against the device's memory)
MAX_SIDE = 2**31 - 1


def _number(value: Any, name: str) -> float:
    if type(value) is float and math.isfinite(value):
        return value  # the common case, without the checks below
    if type(value) is int and -_EXACT <= value <= _EXACT:
        return float(value)  # (a default such as ``gain=1``: what the checks below give)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:  # a Python int beyond float64
        raise ValueError(f"{name} must be finite, got an integer of {int(value).bit_length()} "
                         "bits") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def _range(value: Any, name: str) -> tuple[float, float]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise ValueError(f"{name} must be a [low, high] pair, got {value!r}")
    if len(value) != 2:
        raise ValueError(f"{name} must be a [low, high] pair, got {len(value)} values")
    lo, hi = _number(value[0], f"{name}[0]"), _number(value[1], f"{name}[1]")
    if lo > hi:
        raise ValueError(f"{name} low bound {lo} is greater than its high bound {hi}")
    return lo, hi


def _bounds(lo: Any, hi: Any, lo_name: str, hi_name: str) -> tuple[float, float]:
    a, b = _number(lo, lo_name), _number(hi, hi_name)
    if a > b:
        raise ValueError(f"{lo_name} ({a}) is greater than {hi_name} ({b})")
    return a, b


def _int(value: Any, name: str, low: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    return v
