"""torchvision v2's containers: ``Compose`` (a list of Operations), ``RandomApply``,
``RandomChoice`` and ``RandomOrder`` (per-sample choices, ``millipyde.compose``)."""

from __future__ import annotations

from typing import Any

from .. import compose
from ..array import ArgumentError
from ..operation import Operation
from ..training import batch_mix
from .base import coin
from .options import BatchOption, split_options


def operations_of(transforms: Any, owner: str) -> list[Operation]:
    """``transforms`` flattened to Operations: nested ``Compose`` lists spliced in."""
    if isinstance(transforms, Operation) or not isinstance(transforms, (list, tuple)):
        raise ArgumentError(f"{owner} needs a list of transforms, got "
                            f"{type(transforms).__name__}")
    out: list[Operation] = []
    for i, t in enumerate(transforms):
        if isinstance(t, (list, tuple)):
            out += operations_of(t, owner)
        elif isinstance(t, Operation):
            out.append(t)
        else:
            raise ArgumentError(f"{owner} transforms[{i}] is a {type(t).__name__}, not a "
                                "millipyde transform or Operation (a class of "
                                "millipyde.transforms, or mp.Operation)")
    return out


def as_operation(t: Any, owner: str) -> Operation:
    """One Operation for a transform or a list of them (a list: all of them in order)."""
    if isinstance(t, Operation):
        return t
    ops = [op for op in operations_of(t, owner) if not isinstance(op, BatchOption)]
    if len(ops) == 1:
        return ops[0]
    return compose.SomeOf(ops, n=len(ops))


class Compose(list):
    """torchvision ``Compose``: a list of Operations (nested lists spliced in), usable wherever
    operations are (``mp.Generator``, ``mp.Pipeline``, ``batches()``; ``Normalize`` and
    ``ToDtype`` become the batches' ``mean``, ``std`` and ``dtype``) and callable on a gpuimage
    (in place; ``Normalize`` and ``ToDtype`` apply to batches only)."""

    def __init__(self, transforms: Any) -> None:
        super().__init__(operations_of(transforms, "Compose"))

    def __call__(self, image: Any) -> Any:
        """Apply to ``image`` in place (each Operation's ``run_on``); returns it."""
        ops, _ = split_options(list(self))
        for op in ops:
            op.run_on(image)
        return image

    def __repr__(self) -> str:
        return "Compose(\n" + "".join(f"    {op!r}\n" for op in self) + ")"


class RandomApply(compose.SomeOf):
    """torchvision ``RandomApply``: all of ``transforms``, in order, with probability ``p``."""

    def __init__(self, transforms: Any, p: float = 0.5) -> None:
        ops = [as_operation(t, "RandomApply") for t in operations_of(transforms, "RandomApply")]
        super().__init__(ops, n=len(ops), p=coin(p, "RandomApply"))

    def _state_args(self) -> dict:
        return {"transforms": list(self.operations),
                "p": 1.0 if self.probability is None else self.probability}


class RandomChoice(compose.RandomChoice):
    """torchvision ``RandomChoice``: one of ``transforms`` per sample, ``p`` their weights.
    Of batch mixers (``MixUp``, ``CutMix``): one of them per batch (``batch_mix.MixChoice``).
    """

    def __new__(cls, transforms: Any, p: Any = None) -> Any:
        if isinstance(transforms, (list, tuple)) and transforms and \
                all(isinstance(t, batch_mix.BatchMix) for t in transforms):
            return batch_mix.MixChoice(list(transforms), p)
        return super().__new__(cls)

    def __init__(self, transforms: Any, p: Any = None) -> None:
        if isinstance(transforms, Operation) or not isinstance(transforms, (list, tuple)):
            raise ArgumentError("RandomChoice needs a list of transforms")
        super().__init__([as_operation(t, "RandomChoice") for t in transforms], p)

    def _state_args(self) -> dict:
        return {"transforms": list(self.operations), "p": self.weights.tolist()}


class RandomOrder(compose.RandomOrder):
    """torchvision ``RandomOrder``: every one of ``transforms``, in an order drawn per
    sample."""

    def __init__(self, transforms: Any) -> None:
        if isinstance(transforms, Operation) or not isinstance(transforms, (list, tuple)):
            raise ArgumentError("RandomOrder needs a list of transforms")
        super().__init__([as_operation(t, "RandomOrder") for t in transforms])

    def _state_args(self) -> dict:
        return {"transforms": list(self.operations)}
