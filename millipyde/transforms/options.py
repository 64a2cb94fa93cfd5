"""torchvision's conversions (``ToImage``, ``ToDtype``, ``Normalize``, ...) in a list of
Operations: settings of ``Generator.batches`` (its ``dtype``, ``mean`` and ``std``), not
per-image work. :func:`split_options` takes them out of a list of Operations (a Generator
does, when it is made) and checks what follows them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..array import ArgumentError
from ..operation import Operation
from .base import TorchvisionArgs

#: torchvision dtype names (``str(torch.float32)`` is "torch.float32") to batches' dtypes
_DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16"}


def _nothing(image: Any) -> None:
    """A batch option does no per-image work."""


class BatchOption(TorchvisionArgs, Operation):
    """A conversion of torchvision's transforms: a setting of ``Generator.batches`` (``dtype``,
    ``mean``, ``std``), no per-image work (in a Pipeline or on one image it does nothing)."""

    options: dict = {}

    def __init__(self) -> None:
        super().__init__(_nothing)

    def __call__(self, image: Any) -> Any:
        """Nothing per image (a batch setting): returns ``image``."""
        return image


class ToImage(BatchOption):
    """torchvision ``ToImage``: nothing to do (a Generator's images are on the device)."""


class PILToTensor(BatchOption):
    """torchvision ``PILToTensor``: nothing to do."""


class ToPureTensor(BatchOption):
    """torchvision ``ToPureTensor``: nothing to do."""


def _dtype(dtype: Any, owner: str) -> str:
    if isinstance(dtype, dict):
        raise ArgumentError(f"{owner} dtype must be one dtype (a dict per tv_tensor type is "
                            "not supported)")
    name = str(getattr(dtype, "name", dtype) if isinstance(dtype, np.dtype) else dtype)
    name = name.removeprefix("torch.")
    if name not in _DTYPES:
        raise ArgumentError(f"{owner} dtype must be float32 or float16 (millipyde's batch "
                            f"dtypes), got {dtype!r}")
    return _DTYPES[name]


class ToDtype(BatchOption):
    """torchvision ``ToDtype(torch.float32, scale=True)``: the batches' ``dtype`` (values
    scaled to [0, 1], as every millipyde batch; ``scale=False`` is refused)."""

    def __init__(self, dtype: Any, scale: bool = False) -> None:
        super().__init__()
        d = _dtype(dtype, "ToDtype")
        if not scale:
            raise ArgumentError("ToDtype scale=False is not supported: millipyde batches hold "
                                "values scaled to [0, 1] (pass scale=True)")
        self.options = {"dtype": d}
        self._tv_args = {"dtype": dtype, "scale": scale}


class ConvertImageDtype(ToDtype):
    """torchvision ``ConvertImageDtype``: ``ToDtype(dtype, scale=True)``."""

    def __init__(self, dtype: Any = "float32") -> None:
        super().__init__(dtype, scale=True)
        self._tv_args = {"dtype": dtype}


class ToTensor(ToDtype):
    """torchvision's (v1) ``ToTensor``: float32 values in [0, 1]."""

    def __init__(self) -> None:
        super().__init__("float32", scale=True)
        self._tv_args = {}


def _channels(values: Any, name: str) -> tuple[float, ...]:
    if isinstance(values, (Sequence, np.ndarray)) and not isinstance(values, (str, bytes)):
        out = tuple(float(v) for v in values)
    else:
        out = (float(values),)
    if not out or not all(math.isfinite(v) for v in out):
        raise ArgumentError(f"Normalize {name} must be finite numbers, got {values!r}")
    return out


class Normalize(BatchOption):
    """torchvision ``Normalize(mean, std)``: the batches' ``mean`` and ``std``."""

    def __init__(self, mean: Any, std: Any, inplace: bool = False) -> None:
        super().__init__()
        m, s = _channels(mean, "mean"), _channels(std, "std")
        if any(v == 0 for v in s):
            raise ArgumentError(f"Normalize std must be nonzero, got {std!r}")
        self.options = {"mean": m, "std": s}
        self._tv_args = {"mean": mean, "std": std}


def _geometric(op: Operation) -> bool:
    """Whether ``op`` only moves pixels (its values' units do not matter)."""
    from ..compose import Choice
    from ..ops import FORMS

    if isinstance(op, Choice):
        return all(_geometric(c) for c in op.operations)
    form = FORMS.get(op.method) if op.method is not None else None
    return form is not None and all(s.kind in ("index_map", "sampler") for s in form.op.specs)


def split_options(operations: list) -> tuple[list, dict]:
    """``operations`` without their batch options, and the options (``dtype``, ``mean``,
    ``std``).

    A Generator's image Operations run on uint8 images and the conversions at the end, in
    ``batches()``: what torchvision runs after ``ToDtype`` / ``Normalize`` must mean the same
    there. Geometric ops do; ``RandomErasing`` gets its ``value`` translated to uint8 units
    (from [0, 1] after ``ToDtype``; through ``mean`` and ``std`` after ``Normalize``); any other
    op after them raises ``ValueError`` naming it.
    """
    from .colour import RandomErasing

    out: list = []
    options: dict = {}
    for op in operations:
        if isinstance(op, BatchOption):
            options.update(op.options)
            continue
        if ("dtype" in options or "mean" in options) and not _geometric(op):
            if isinstance(op, RandomErasing):
                op = op.with_value(_uint8_value(op.value, options))
            else:
                raise ArgumentError(
                    f"{op!r} comes after ToDtype/Normalize: millipyde runs image ops on uint8 "
                    "images and converts at the end (batches()); move it before them")
        out.append(op)
    return out, options


def _uint8_value(value: Any, options: dict) -> Any:
    """A value of the converted (and normalised) batch as the uint8 value that converts to
    it, per channel (rounded to the nearest level)."""
    vals = _channels(value, "value")
    mean = options.get("mean", (0.0,))
    std = options.get("std", (1.0,))
    n = max(len(vals), len(mean), len(std))
    if n > 1:
        vals, mean, std = (v * n if len(v) == 1 else v for v in (vals, mean, std))
    out = [min(255, max(0, round((m + v * s) * 255))) for v, m, s in zip(vals, mean, std,
                                                                         strict=True)]
    return out[0] if n == 1 else out
