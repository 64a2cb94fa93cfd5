"""Argument checks shared by the image methods: ValueError naming the argument."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: ints up to this convert to float exactly (and are finite)
EXACT = 1 << 53

#: the largest image side an op may make (an output's size is checked when the op is
#: recorded: this, and the bytes against the device's memory)
MAX_SIDE = 2**31 - 1


def number(value: Any, name: str) -> float:
    """A finite real number as a float.

    Parameters
    ----------
    value : Any
        The argument: a Python or NumPy int or float (not a bool).
    name : str
        The argument's name, for the error.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        Naming ``name``, if ``value`` is not a real number or not finite.
    """
    if type(value) is float and math.isfinite(value):
        return value  # the common case, without the checks below
    if type(value) is int and -EXACT <= value <= EXACT:
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


def number_range(value: Any, name: str) -> tuple[float, float]:
    """A ``[low, high]`` pair of finite numbers, ``low <= high``.

    Parameters
    ----------
    value : Any
        The argument: a sequence or array of two numbers.
    name : str
        The argument's name, for the error (its items are ``name[0]``, ``name[1]``).

    Returns
    -------
    tuple of float
        ``(low, high)``.

    Raises
    ------
    ValueError
        Naming ``name``, if ``value`` is not such a pair.
    """
    if type(value) in (list, tuple) and len(value) == 2:
        # the common case, a pair of finite Python floats in order: what the checks below
        # return for it, without their isinstance of an ABC and their names built
        lo, hi = value
        if type(lo) is float and type(hi) is float and math.isfinite(lo) and \
                math.isfinite(hi) and lo <= hi:
            return lo, hi
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise ValueError(f"{name} must be a [low, high] pair, got {value!r}")
    if len(value) != 2:
        raise ValueError(f"{name} must be a [low, high] pair, got {len(value)} values")
    lo, hi = number(value[0], f"{name}[0]"), number(value[1], f"{name}[1]")
    if lo > hi:
        raise ValueError(f"{name} low bound {lo} is greater than its high bound {hi}")
    return lo, hi


def bounds(lo: Any, hi: Any, lo_name: str, hi_name: str) -> tuple[float, float]:
    """Two finite numbers given as separate arguments, ``lo <= hi``.

    Parameters
    ----------
    lo, hi : Any
        The arguments (as :func:`number` takes them).
    lo_name, hi_name : str
        Their names, for the error.

    Returns
    -------
    tuple of float
        ``(lo, hi)``.

    Raises
    ------
    ValueError
        Naming the argument, if either is not a finite number or ``lo > hi``.
    """
    a, b = number(lo, lo_name), number(hi, hi_name)
    if a > b:
        raise ValueError(f"{lo_name} ({a}) is greater than {hi_name} ({b})")
    return a, b


def integer(value: Any, name: str, low: int | None = None) -> int:
    """A Python or NumPy int (not a bool), at least ``low`` when given.

    Parameters
    ----------
    value : Any
        The argument.
    name : str
        The argument's name, for the error.
    low : int, optional
        The smallest value allowed.

    Returns
    -------
    int
        ``value`` as a Python int.

    Raises
    ------
    ValueError
        Naming ``name``, if ``value`` is not an int or is below ``low``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    return v
