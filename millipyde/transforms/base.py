"""What every class of ``millipyde.transforms`` shares: a transform is an Operation (usable in
lists of operations, Generators, Pipelines and ``batches()``), made from torchvision v2's
constructor arguments, rebuilt from them when pickled."""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..array import ArgumentError
from ..operation import Operation, check_p


class InterpolationMode(enum.Enum):
    """torchvision's ``InterpolationMode`` names (millipyde samples bilinearly)."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


#: PIL's integer codes, which torchvision also accepts
_PIL_CODES = {0: "nearest", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming", 1: "lanczos"}


def interpolation(mode: Any, owner: str) -> None:
    """Accept torchvision's ``interpolation`` (its enum, ours, a name or PIL code): bilinear
    is what millipyde samples with; nearest (torchvision's default for rotations and affines)
    is taken as bilinear with a ``UserWarning``; anything else is refused."""
    name = getattr(mode, "value", mode)
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        name = _PIL_CODES.get(int(name), name)
    if name == "bilinear":
        return
    if name in ("nearest", "nearest-exact"):
        warnings.warn(f"{owner}: interpolation {name!r} is not implemented; millipyde samples "
                      "bilinearly", UserWarning, stacklevel=3)
        return
    raise ArgumentError(f"{owner} interpolation must be BILINEAR (or NEAREST, sampled "
                        f"bilinearly), got {mode!r}")


def antialias(value: Any, owner: str) -> None:
    """torchvision's ``antialias`` (True by default for resizes): millipyde's resize is
    scikit-image's without anti-aliasing, so True warns once."""
    if value not in (True, False, None):
        raise ArgumentError(f"{owner} antialias must be True or False, got {value!r}")
    if value:
        warnings.warn(f"{owner}: antialias=True is not implemented yet; millipyde resizes "
                      "bilinearly without anti-aliasing (scikit-image's resize)", UserWarning,
                      stacklevel=3)


def size_hw(size: Any, owner: str, name: str = "size") -> tuple[int, int]:
    """torchvision's ``size``: an int (square) or a sequence of one or two ints (h, w)."""
    if isinstance(size, (Sequence, np.ndarray)) and not isinstance(size, (str, bytes)):
        vals = list(size)
        if len(vals) == 1:
            vals = vals * 2
        if len(vals) != 2:
            raise ArgumentError(f"{owner} {name} must be an int or a sequence of 1 or 2 ints, "
                                f"got {size!r}")
    else:
        vals = [size, size]
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ArgumentError(f"{owner} {name} must hold ints >= 1, got {size!r}")
    return int(vals[0]), int(vals[1])


def jitter(value: Any, owner: str, name: str, centre: float = 1.0,
           bound: tuple[float, float] = (0.0, math.inf),
           clip_first: bool = True) -> tuple[float, float] | None:
    """torchvision ``ColorJitter._check_input``: a number ``v`` gives
    ``[centre - v, centre + v]`` (the low end at least ``bound[0]`` with ``clip_first``), a pair
    is taken as it is; within ``bound``; None where it is ``centre`` itself (no op)."""
    if value is None:
        return None
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        v = float(value)
        if v < 0:
            raise ArgumentError(f"{owner} {name} must be non-negative if a single number, "
                                f"got {v}")
        lo, hi = centre - v, centre + v
        if clip_first:
            lo = max(lo, 0.0)
    elif isinstance(value, (Sequence, np.ndarray)) and len(value) == 2:
        lo, hi = float(value[0]), float(value[1])
    else:
        raise ArgumentError(f"{owner} {name} must be a number or a (min, max) pair, got "
                            f"{value!r}")
    if not bound[0] <= lo <= hi <= bound[1]:
        raise ArgumentError(f"{owner} {name} values must lie in {list(bound)}, got "
                            f"({lo}, {hi})")
    return None if lo == hi == centre else (lo, hi)


class TorchvisionArgs:
    """The constructor's arguments of a torchvision-named class, kept for its repr and
    pickling (``_tv_args``, set by the constructor)."""

    _tv_args: dict

    def _remember(self, **kwargs: Any) -> None:
        """The constructor's arguments (repr, pickling)."""
        self._tv_args = kwargs

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in getattr(self, "_tv_args", {}).items())
        return f"{type(self).__name__}({args})"

    def __reduce__(self) -> tuple:
        return _rebuild, (type(self), getattr(self, "_tv_args", {}))


def _rebuild(cls: type, kwargs: dict) -> Any:
    return cls(**kwargs)


class Transform(TorchvisionArgs, Operation):
    """A torchvision-named transform: one method Operation of the op library (its
    ``p``, where torchvision's class has one, the Operation's coin or the method's own)."""

    def __init__(self, method: str, *args: Any, p: Any = None, **kwargs: Any) -> None:
        if p is None:
            super().__init__(method, *args, **kwargs)
        else:
            super().__init__(method, *args, p=p, **kwargs)

    def __call__(self, image: Any) -> Any:
        """Apply to ``image`` in place (``run_on``: the global seed's stream); returns it, as
        a torchvision transform returns its output."""
        self.run_on(image)
        return image


def coin(p: Any, owner: str) -> float:
    """``p`` in [0, 1] (torchvision's), as a float."""
    v = check_p(p, owner)
    return 1.0 if v is None else v
