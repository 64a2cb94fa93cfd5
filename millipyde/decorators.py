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

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .checks import MAX_SIDE, number, number_range
from .kernels.registry import OpSpec, register
from .locks import commit_lock
from .user_functions import UserFunctionError, check_compiles, freeze, key, resolve

#: parameters a user elementwise or pixelwise op may take (a fused kernel's slots per op)
MAX_VALUE_PARAMS = 3

#: the parameters each kind's function takes before the user's own
_LEADING = {"elementwise": 2, "pixelwise": 3, "index_map": 4}


class UserOp:
    """A user's scalar function registered as a fusable op; call it on a gpuimage.

    The op's name holds the key of what the function computes (``user_functions``): the
    kernels it is fused into are cached under it, in memory and on disk.

    ``check=False`` skips the host compile that proves, at decoration, that the function
    compiles and returns what ``kind`` needs (``user_functions.check_compiles``: about a
    second in a fresh process, Numba's CPU target starting): for the library's own ops,
    which a test checks (the built-in recipes' ``scale_brightness``); a user's decorated
    function is always checked.
    """

    def __init__(self, fn: Callable, kind: str, nparams: int | None = None,
                 shape: Callable | None = None, *, check: bool = True) -> None:
        what = kind
        uf = resolve(fn, what)
        leading = _LEADING[kind]
        if len(uf.params) < leading:
            raise UserFunctionError(f"@mp.{what} function {uf.name} must take at least "
                                    f"{leading} parameters, got {len(uf.params)}")
        n = len(uf.params) - leading
        if kind != "index_map" and n > MAX_VALUE_PARAMS:
            raise UserFunctionError(f"@mp.{what} function {uf.name} takes {n} parameters; "
                                    f"at most {MAX_VALUE_PARAMS}")
        if nparams is not None and nparams != n:
            raise UserFunctionError(f"@mp.{what} function {uf.name} takes {n} parameters, "
                                    f"not {nparams}")
        self.fn = fn
        self.kind = kind
        self.nparams = n
        self.shape = shape
        digest = key(uf, kind, shape, what)
        frozen = freeze(uf.fn)
        resolved = type(uf)(frozen, uf.params, uf.before, uf.after, uf.name)
        if check:
            check_compiles(resolved, kind, what)
        self.check = check
        self.name = f"user_{uf.name}_{digest}"
        spec = OpSpec(self.name, "user_map" if kind == "index_map" else kind, frozen, n,
                      shape_fn=None if shape is None else _checked_shape(shape, uf.name),
                      user=frozen, digest=digest, user_args=(uf.before, uf.after))
        # the same computation twice (a re-run cell, a re-imported module) is the same op
        self.spec = register(spec, replace_existing=True)
        self.__name__ = getattr(fn, "__name__", uf.name)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self) -> str:
        return f"<millipyde {self.kind} op {self.__qualname__}>"

    def __reduce__(self) -> tuple:
        # unpickled in another process (a Dask worker), the op keys and registers itself there
        return (functools.partial(UserOp, check=self.check),
                (self.fn, self.kind, self.nparams, self.shape))

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
        if self.kind == "index_map" and img.targets is not None:
            # before any draw or record (``targets``: its inverse is unknown)
            raise ValueError(f"{self.__name__}: targets cannot follow a user index map; set "
                             "them after it")
        # draws and record land together (the built-in methods' commit lock, ``locks.py``)
        with commit_lock(img):
            values = self._values(img, params)
            if self.spec.shape_fn is not None:
                self.spec.out_shape(tuple(img.shape), tuple(values))  # checked before recording
            img._record(self.name, tuple(values))

    def _values(self, img: Any, params: Sequence[Any]) -> list[float]:
        ranges = [i for i, p in enumerate(params)
                  if isinstance(p, (tuple, list, np.ndarray))]
        draw = img._drawer() if ranges else None
        out = []
        for i, p in enumerate(params):
            name = f"{self.__name__} parameter {i}"
            if i in ranges:
                lo, hi = number_range(p, name)
                out.append(lo + (hi - lo) * draw(i))
            else:
                out.append(number(p, name))
        return out


def elementwise(fn: Callable) -> UserOp:
    """Decorate ``f(v, c, *params) -> v``: a per-channel value map (see the module doc)."""
    return UserOp(fn, "elementwise")


def pixelwise(fn: Callable) -> UserOp:
    """Decorate ``f(r, g, b, *params) -> (r, g, b)``: a colour pixel map (see the module doc)."""
    return UserOp(fn, "pixelwise")


def index_map(fn: Callable | None = None, *,
              shape: Callable | None = None) -> UserOp | Callable[[Callable], UserOp]:
    """Decorate ``m(row, col, height, width, *params) -> (row, col)``: where each output pixel
    reads (bilinear, zero outside); ``shape`` optionally gives the output height and width."""

    def deco(f: Callable) -> UserOp:
        return UserOp(f, "index_map", shape=shape)

    if fn is None:
        return deco
    return deco(fn)


def _checked_shape(rule: Callable, name: str) -> Callable:
    """``rule`` with its errors and results checked: a ``ValueError`` naming the op when it
    raises or gives anything but two whole numbers in [0, MAX_SIDE]."""

    def shape_fn(h: int, w: int, *params: float) -> tuple[int, int]:
        try:
            out = rule(h, w, *params)
            hh, ww = out
        except Exception as err:  # noqa: BLE001 - the user's code: any error, named
            raise ValueError(f"the shape rule of @mp.index_map {name} failed for a {h}x{w} "
                             f"input with parameters {list(params)}: "
                             f"{type(err).__name__}: {err}") from err
        sides = []
        for v in (hh, ww):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, float,
                                                                     np.floating)):
                raise ValueError(f"the shape rule of @mp.index_map {name} must give two whole "
                                 f"numbers, got {out!r}")
            if v != v or v in (float("inf"), float("-inf")) or int(v) != v:
                raise ValueError(f"the shape rule of @mp.index_map {name} must give two whole "
                                 f"numbers, got {out!r}")
            if not 0 <= int(v) <= MAX_SIDE:
                raise ValueError(f"the shape rule of @mp.index_map {name} gave {out!r}: each "
                                 f"side must lie in [0, {MAX_SIDE}]")
            sides.append(int(v))
        return sides[0], sides[1]

    return shape_fn
