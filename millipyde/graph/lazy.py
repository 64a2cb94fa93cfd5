"""Lazy NumPy arithmetic on gpuarrays (recorded, fused, run on the device).

``FUNCTIONS`` maps NumPy functions to lazy implementations and :func:`ufunc` records ufunc calls;
what is not implemented here falls back to NumPy on a host copy (API.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FUNCTIONS: dict[Callable, Callable] = {}


def ufunc(uf: Any, inputs: tuple, kwargs: dict) -> Any:
    """Record ``uf(*inputs, **kwargs)`` lazily, or return ``NotImplemented`` for the host path."""
    return NotImplemented
