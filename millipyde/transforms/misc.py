"""torchvision's ``Lambda`` (a callable Operation) and ``JPEG``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..array import ArgumentError
from ..operation import Operation
from ..ops import FORMS
from ..ops.base import kind_for
from .base import Transform


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


class JPEG(Transform):
    """torchvision ``JPEG(quality)``: the JPEG round trip on the device (``jpeg``) at
    ``quality`` (an int in [1, 100]), or with an integer quality drawn per sample from
    ``quality = (min, max)`` (``random_jpeg``). uint8 images (as torchvision's); a float DCT
    where libjpeg's is integer: within a few levels of Pillow's round trip."""

    def __init__(self, quality: int | Sequence[int]) -> None:
        ranged = isinstance(quality, Sequence) and not isinstance(quality, str)
        method = "random_jpeg" if ranged else "jpeg"
        arg = tuple(quality) if ranged else quality
        # the op's own checks, now rather than at the first image (ValueError naming quality)
        FORMS[method].parse(kind_for(3, np.uint8), arg)
        super().__init__(method, arg)
        self._remember(quality=quality)
