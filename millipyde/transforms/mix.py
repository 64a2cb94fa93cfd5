"""torchvision v2's ``MixUp`` and ``CutMix`` (``millipyde.training.batch_mix``): called on a batch,
``images, labels = mix(images, labels)``."""

from __future__ import annotations

from typing import Any

from ..array import ArgumentError
from ..training import batch_mix


def _getter(labels_getter: Any, owner: str) -> None:
    if labels_getter != "default":
        raise ArgumentError(f"{owner} labels_getter must be 'default': millipyde's mixers take "
                            "(images, labels) as they are")


class MixUp(batch_mix.MixUp):
    """torchvision ``MixUp(alpha=1.0, num_classes=None)`` (``layout`` and ``seed``:
    millipyde's batch layout and the draws' seed)."""

    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None,
                 labels_getter: Any = "default", layout: str = "NCHW",
                 seed: int | None = None) -> None:
        _getter(labels_getter, "MixUp")
        super().__init__(alpha=alpha, num_classes=num_classes, layout=layout, seed=seed)


class CutMix(batch_mix.CutMix):
    """torchvision ``CutMix(alpha=1.0, num_classes=None)`` (``layout`` and ``seed``:
    millipyde's batch layout and the draws' seed)."""

    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None,
                 labels_getter: Any = "default", layout: str = "NCHW",
                 seed: int | None = None) -> None:
        _getter(labels_getter, "CutMix")
        super().__init__(alpha=alpha, num_classes=num_classes, layout=layout, seed=seed)
