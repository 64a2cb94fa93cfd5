"""Public decorators for user ops that fuse with the built-ins: ``@mp.elementwise``,
``@mp.pixelwise`` and ``@mp.index_map``.

A decorated function is written once as scalar Python (the subset Numba compiles) and becomes
a :class:`UserOp`: ``f(img, *params)`` records it on a gpuimage like a method (lazy, in place,
returns None), and ``mp.Operation(f, *params)`` runs it in Pipelines and Generators. A
parameter given as a ``(low, high)`` tuple is drawn uniformly from the image's counter-based
stream, as the built-in ``random_*`` methods draw theirs. The generated kernels call the
function inline, so it fuses with its neighbours into one gather.

Value conventions (what the function sees and returns):

- ``elementwise``: ``f(v, c, *params) -> v`` with ``v`` a channel value divided by the image's
  full range (so in [0, 1]: 255 for uint8, 1 for float greyscale as stored) and ``c`` the
  channel (0 for grey); the result is clipped to [0, 1] and rounded back like the built-ins'.
  Alpha is untouched.
- ``pixelwise``: ``f(r, g, b, *params) -> (r, g, b)`` on values in [0, 1]; colour images only.
- ``index_map``: ``m(row, col, height, width, *params) -> (row, col)``: where output pixel
  ``(row, col)`` reads in the op's input (of ``height`` x ``width``), sampled bilinearly with
  zero outside; ``shape=lambda h, w, *params: (h2, w2)`` gives the output size (default:
  the input's).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._args import _number, _range
from .kernels.registry import OpSpec, register, source_digest
from .locks import commit_lock

#: parameters a user elementwise or pixelwise op may take (a fused kernel's slots per op)
MAX_VALUE_PARAMS = 3


def _params_of(fn: Callable, leading: int, what: str) -> int:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise ValueError(f"@mp.{what} needs a Python function, got {fn!r}") from None
    ps = list(sig.parameters.values())
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ps):
        raise ValueError(f"@mp.{what} function {fn.__name__} must take positional "
                         "parameters only")
    if len(ps) < leading:
        raise ValueError(f"@mp.{what} function {fn.__name__} must take at least {leading} "
                         f"parameters, got {len(ps)}")
    return len(ps) - leading


class UserOp:
    """A user's scalar function registered as a fusable op; call it on a gpuimage."""

    def __init__(self, fn: Callable, kind: str, nparams: int,
                 shape: Callable | None = None, digest: str | None = None) -> None:
        self.fn = fn
        self.kind = kind
        self.nparams = nparams
        self.shape = shape
        digest = source_digest(fn) if digest is None else digest
        self.name = f"user_{fn.__name__}_{digest}"
        spec = OpSpec(self.name, "user_map" if kind == "index_map" else kind, fn, nparams,
                      shape_fn=shape, user=fn, digest=digest)
        # the same source twice (a re-run cell, a re-imported module) is the same op
        self.spec = register(spec, replace_existing=True)
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"<millipyde {self.kind} op {self.__qualname__}>"

    def __reduce__(self) -> tuple:
        # unpickled in another process (a Dask worker), the op registers itself there
        return (UserOp, (self.fn, self.kind, self.nparams, self.shape, self.spec.digest))

    def __call__(self, img: Any, *params: Any) -> None:
        """Record this op on ``img`` (a gpuimage) with ``params``; ranges are drawn."""
        from .image import gpuimage

        if not isinstance(img, gpuimage):
            raise ValueError(f"{self.__name__} needs a gpuimage first, got "
                             f"{type(img).__name__}")
        if len(params) != self.nparams:
            raise ValueError(f"{self.__name__} takes {self.nparams} parameters, got "
                             f"{len(params)}")
        if self.kind == "pixelwise" and not img.is_colour:
            raise ValueError(f"{self.__name__} is pixelwise: it needs an RGB/RGBA image; this "
                             f"one is greyscale {img.shape}")
        # draws and record land together (the built-in methods' commit lock, ``locks.py``)
        with commit_lock(img):
            values = self._values(img, params)
            img._record(self.name, tuple(values))

    def _values(self, img: Any, params: Sequence[Any]) -> list[float]:
        ranges = [i for i, p in enumerate(params)
                  if isinstance(p, (tuple, list, np.ndarray))]
        draw = img._drawer() if ranges else None
        out = []
        for i, p in enumerate(params):
            name = f"{self.__name__} parameter {i}"
            if i in ranges:
                lo, hi = _range(p, name)
                out.append(lo + (hi - lo) * draw(i))
            else:
                out.append(_number(p, name))
        return out


def elementwise(fn: Callable) -> UserOp:
    """Decorate ``f(v, c, *params) -> v``: a per-channel value map (see the module doc)."""
    n = _params_of(fn, 2, "elementwise")
    if n > MAX_VALUE_PARAMS:
        raise ValueError(f"@mp.elementwise function {fn.__name__} takes {n} parameters; at "
                         f"most {MAX_VALUE_PARAMS}")
    return UserOp(fn, "elementwise", n)


def pixelwise(fn: Callable) -> UserOp:
    """Decorate ``f(r, g, b, *params) -> (r, g, b)``: a colour pixel map (see the module doc)."""
    n = _params_of(fn, 3, "pixelwise")
    if n > MAX_VALUE_PARAMS:
        raise ValueError(f"@mp.pixelwise function {fn.__name__} takes {n} parameters; at "
                         f"most {MAX_VALUE_PARAMS}")
    return UserOp(fn, "pixelwise", n)


def index_map(fn: Callable | None = None, *,
              shape: Callable | None = None) -> UserOp | Callable[[Callable], UserOp]:
    """Decorate ``m(row, col, height, width, *params) -> (row, col)``: where each output pixel
    reads (bilinear, zero outside); ``shape`` optionally gives the output height and width."""

    def deco(f: Callable) -> UserOp:
        return UserOp(f, "index_map", _params_of(f, 4, "index_map"), shape)

    if fn is None:
        return deco
    return deco(fn)
