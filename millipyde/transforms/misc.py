"""torchvision's ``Lambda``: a callable Operation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..array import ArgumentError
from ..operation import Operation


class Lambda(Operation):
    """torchvision ``Lambda(fn)``: ``fn(image)`` as a callable Operation (it changes the image
    in place, or returns a gpuarray / ndarray that replaces it; batches of a Generator with one
    are made per output)."""

    def __init__(self, lambd: Callable[[Any], Any]) -> None:
        if not callable(lambd):
            raise ArgumentError(f"Lambda needs a callable, got {type(lambd).__name__}")
        super().__init__(lambd)

    def __call__(self, image: Any) -> Any:
        """``fn(image)``: what it returns, or ``image`` (changed in place) if None."""
        got = self.run_on(image)
        return image if got is None else got
