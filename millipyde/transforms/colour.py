"""torchvision v2's colour and erasing transforms over millipyde's value ops."""

from __future__ import annotations

from typing import Any

from ..array import ArgumentError
from ..compose import RandomOrder
from ..operation import Operation
from .base import Transform, coin, jitter


class ColorJitter(RandomOrder):
    """torchvision ``ColorJitter``: multiplicative brightness (``random_adjust_brightness``),
    contrast, saturation and hue, each drawn as torchvision draws it, applied in an order drawn
    per sample (every order equally likely, as torchvision's ``randperm``).

    In ``Generator.batches`` the order is gates in one gather, except with ``contrast``
    (its grey mean depends on where it runs; one mean per gather): those batches are made per
    output.
    """

    def __init__(self, brightness: Any = None, contrast: Any = None, saturation: Any = None,
                 hue: Any = None) -> None:
        b = jitter(brightness, "ColorJitter", "brightness")
        c = jitter(contrast, "ColorJitter", "contrast")
        s = jitter(saturation, "ColorJitter", "saturation")
        h = jitter(hue, "ColorJitter", "hue", centre=0.0, bound=(-0.5, 0.5), clip_first=False)
        ops = []
        if b is not None:
            ops.append(Operation("random_adjust_brightness", *b))
        if c is not None:
            ops.append(Operation("random_contrast", *c))
        if s is not None:
            ops.append(Operation("random_saturation", *s))
        if h is not None:
            ops.append(Operation("random_hue", *h))
        if not ops:  # torchvision's identity
            ops.append(Operation("adjust_brightness", 1.0))
        super().__init__(ops)
        self._tv_args = dict(brightness=brightness, contrast=contrast, saturation=saturation,
                             hue=hue)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._tv_args.items() if v is not None)
        return f"ColorJitter({args})"

    def _state_args(self) -> dict:
        return dict(self._tv_args)


class Grayscale(Transform):
    """torchvision ``Grayscale`` (``num_output_channels`` 1: gpuimage's float64 grey)."""

    def __init__(self, num_output_channels: int = 1) -> None:
        super().__init__("grayscale", num_output_channels)
        self._remember(num_output_channels=num_output_channels)


class RandomGrayscale(Transform):
    """torchvision ``RandomGrayscale``: three-channel grey with probability ``p``."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__("random_grayscale", p=coin(p, "RandomGrayscale"))
        self._remember(p=p)


class RandomInvert(Transform):
    """torchvision ``RandomInvert``."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__("random_invert", p=coin(p, "RandomInvert"))
        self._remember(p=p)


class RandomPosterize(Transform):
    """torchvision ``RandomPosterize``."""

    def __init__(self, bits: int, p: float = 0.5) -> None:
        super().__init__("random_posterize", bits, p=coin(p, "RandomPosterize"))
        self._remember(bits=bits, p=p)


class RandomSolarize(Transform):
    """torchvision ``RandomSolarize`` (``threshold`` in the image's units: 0..255 on uint8)."""

    def __init__(self, threshold: float, p: float = 0.5) -> None:
        super().__init__("random_solarize", threshold, p=coin(p, "RandomSolarize"))
        self._remember(threshold=threshold, p=p)


class RandomChannelPermutation(Transform):
    """torchvision ``RandomChannelPermutation`` on R, G, B (alpha stays last)."""

    def __init__(self) -> None:
        super().__init__("channel_shuffle")
        self._remember()


class RandomErasing(Transform):
    """torchvision ``RandomErasing``: ``random_erasing`` with probability ``p``. ``value`` is
    in the units of the image where it stands: after ``Normalize`` (its usual place in
    torchvision recipes) a Generator translates it to the uint8 value that normalises to it,
    per channel (``transforms.options``)."""

    def __init__(self, p: float = 0.5, scale: Any = (0.02, 0.33), ratio: Any = (0.3, 3.3),
                 value: Any = 0, inplace: bool = False) -> None:
        if isinstance(value, str):
            raise ArgumentError("RandomErasing value='random' is not supported yet (a number "
                                "or one per channel)")
        super().__init__("random_erasing", tuple(scale), tuple(ratio), value,
                         p=coin(p, "RandomErasing"))
        self._remember(p=p, scale=scale, ratio=ratio, value=value, inplace=inplace)

    @property
    def value(self) -> Any:
        """The erased value, as given (torchvision's ``value``)."""
        return self._tv_args["value"]

    def with_value(self, value: Any) -> RandomErasing:
        """The same erasing with another ``value`` (image units)."""
        args = dict(self._tv_args)
        args["value"] = value
        return RandomErasing(**args)
