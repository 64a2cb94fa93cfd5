"""The kernel registry: name -> OpSpec. Kernel math is declared once here, as scalar Python.

Kinds (what the fuser and code generator need to know about an op):

- ``elementwise``: ``f(v, c, full, a, b, d) -> v`` per channel value; alpha passes through.
- ``pixel``: ``f(r, g, b, alpha, has_alpha) -> grey`` colour pixel to one float value.
- ``index_map``: ``f(y, x, h, w) -> (sy, sx)``, an integer affine gather (flip, transpose).
- ``sampler``: ``f(y, x, h, w, *params) -> (sy, sx)``, a real affine map sampled bilinearly.
- ``stencil``: separable taps computed on the host from the parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

KINDS = ("elementwise", "pixel", "index_map", "sampler", "stencil")


@dataclass(frozen=True)
class OpSpec:
    """One registered kernel: its kind, scalar math and the shape rule of its output."""

    name: str
    kind: str
    fn: Callable
    nparams: int = 0
    swaps_axes: bool = False
    code: int = field(default=-1, compare=False)

    def out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of this op's output for an input of ``shape``."""
        if self.kind == "pixel":
            return shape[:2]
        if self.swaps_axes:
            return (shape[1], shape[0]) + tuple(shape[2:])
        return tuple(shape)


REGISTRY: dict[str, OpSpec] = {}


def _register(spec: OpSpec) -> OpSpec:
    if spec.name in REGISTRY:
        raise ValueError(f"kernel {spec.name!r} is registered twice")
    code = sum(1 for s in REGISTRY.values() if s.kind == spec.kind)
    spec = OpSpec(spec.name, spec.kind, spec.fn, spec.nparams, spec.swaps_axes, code)
    REGISTRY[spec.name] = spec
    return spec


def elementwise(nparams: int) -> Callable[[Callable], Callable]:
    """Register ``f(v, c, full, a, b, d)``: a per-channel value map (channels 0..2, or grey)."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(fn.__name__, "elementwise", fn, nparams))
        return fn

    return deco


def pixel(fn: Callable) -> Callable:
    """Register ``f(r, g, b, alpha, has_alpha) -> float``: colour pixel to a grey value."""
    _register(OpSpec(fn.__name__, "pixel", fn))
    return fn


def index_map(swaps_axes: bool = False) -> Callable[[Callable], Callable]:
    """Register ``f(y, x, h, w) -> (sy, sx)``: where output pixel (y, x) reads from."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(fn.__name__, "index_map", fn, 0, swaps_axes))
        return fn

    return deco


def sampler(nparams: int) -> Callable[[Callable], Callable]:
    """Register ``f(y, x, h, w, *params) -> (sy, sx)``: a real map sampled bilinearly."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(fn.__name__, "sampler", fn, nparams))
        return fn

    return deco


def stencil(nparams: int) -> Callable[[Callable], Callable]:
    """Register ``f(*params) -> taps``: a separable stencil whose 1-D taps come from the host."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(fn.__name__, "stencil", fn, nparams))
        return fn

    return deco


def affine_of(spec: OpSpec, h: int, w: int, params: tuple[float, ...] = ()) -> np.ndarray:
    """The 2x3 matrix ``M`` with ``(sy, sx) = M @ (y, x, 1)`` for an index map or sampler.

    The scalar map is evaluated at three points; a fourth checks that it really is affine.
    """
    # plain floats, not small NumPy arrays: this runs for every recorded map on the hot path
    f = spec.fn
    oy, ox = (float(v) for v in f(0.0, 0.0, h, w, *params))
    ay, ax = (float(v) - o for v, o in zip(f(1.0, 0.0, h, w, *params), (oy, ox), strict=True))
    by, bx = (float(v) - o for v, o in zip(f(0.0, 1.0, h, w, *params), (oy, ox), strict=True))
    py, px = (float(v) for v in f(3.0, 7.0, h, w, *params))
    if abs(3.0 * ay + 7.0 * by + oy - py) > 1e-9 or abs(3.0 * ax + 7.0 * bx + ox - px) > 1e-9:
        raise ValueError(f"{spec.name} is registered as an affine map but is not affine")
    return np.array([[ay, by, oy], [ax, bx, ox]])
