"""Lazy NumPy arithmetic on gpuarrays: recorded as graph nodes, fused, run on the device.

Supported: ``+ - * / **``, ``minimum maximum clip where abs exp log sqrt`` and comparisons, with
NumPy broadcasting and dtype rules (result dtypes are asked of NumPy itself on empty arrays), and
the full reductions ``sum mean min max`` as map-reduce kernels. Anything else falls back to NumPy
on a host copy.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .node import Node, apply

# weak: a recorded value is shared while something still holds it, then forgotten
_cse: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_cse_lock = threading.Lock()


@dataclass(frozen=True)
class ArithOp:
    """An elementwise NumPy operation; ``template`` formats its operands into an expression."""

    name: str
    template: str
    kind: str = "arith"


@dataclass(frozen=True)
class ReduceOp:
    """A full reduction of its (fused) input expression."""

    name: str
    kind: str = "reduce"


ARITH: dict[str, ArithOp] = {
    op.name: op
    for op in (
        ArithOp("add", "({0} + {1})"),
        ArithOp("subtract", "({0} - {1})"),
        ArithOp("multiply", "({0} * {1})"),
        ArithOp("true_divide", "({0} / {1})"),
        ArithOp("power", "({0} ** {1})"),
        ArithOp("minimum", "_minimum({0}, {1})"),
        ArithOp("maximum", "_maximum({0}, {1})"),
        ArithOp("absolute", "abs({0})"),
        ArithOp("negative", "(-{0})"),
        ArithOp("exp", "math.exp({0})"),
        ArithOp("log", "math.log({0})"),
        ArithOp("sqrt", "math.sqrt({0})"),
        ArithOp("less", "({0} < {1})"),
        ArithOp("less_equal", "({0} <= {1})"),
        ArithOp("greater", "({0} > {1})"),
        ArithOp("greater_equal", "({0} >= {1})"),
        ArithOp("clip", "_minimum(_maximum({0}, {1}), {2})"),
        ArithOp("where", "({1} if {0} else {2})"),
    )
}
REDUCE = {name: ReduceOp(name) for name in ("sum", "mean", "min", "max")}

class LazyArray:
    """What the IR records over: ``gpuarray`` derives from this (the IR never imports it).

    A subclass provides ``shape``, ``dtype``, ``device``, ``_placed()`` (its node on the target
    device) and ``_wrap(node)`` (a plain array handle on a new node).
    """

    __slots__ = ()


def to_host_tree(obj: Any) -> Any:
    """``obj`` with every lazy array in it (nested lists, tuples, dicts) copied to the host."""
    if isinstance(obj, LazyArray):
        return obj.__array__()
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_host_tree(o) for o in obj)
    if isinstance(obj, dict):
        return {k: to_host_tree(v) for k, v in obj.items()}
    return obj


_UFUNCS = {getattr(np, name): name for name in ARITH if hasattr(np, name) and
           isinstance(getattr(np, name), np.ufunc)}
_UFUNCS[np.divide] = "true_divide"


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool, np.integer, np.floating, np.bool_)) and not isinstance(
        v, np.ndarray
    )


def _probe(v: Any) -> Any:
    return np.empty((0,), v.dtype) if isinstance(v, LazyArray) else v


def record(name: str, operands: tuple[Any, ...], dtype_of: Callable[..., Any]) -> Any:
    """Record ``name`` over gpuarrays and scalars; ``NotImplemented`` if it can't be lazy."""
    arrays = [o for o in operands if isinstance(o, LazyArray)]
    if not arrays or not all(isinstance(o, LazyArray) or _is_scalar(o) for o in operands):
        return NotImplemented
    if any(a.dtype.kind == "c" for a in arrays):
        return NotImplemented
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        dtype = np.asarray(dtype_of(*(_probe(o) for o in operands))).dtype
    except (ValueError, TypeError):
        return NotImplemented
    device = arrays[0]._placed().device
    nodes = tuple(a._placed() if a.device == device else _moved(a, device) for a in arrays)
    params = tuple(None if isinstance(o, LazyArray) else o for o in operands)
    # common subexpressions: the same op on the same nodes and scalars is the same value, so
    # `x*y + x*y` records (and computes) `x*y` once
    key = (name, tuple(n.id for n in nodes), tuple((type(p).__name__, p) for p in params),
           shape, dtype.str, device)
    with _cse_lock:
        node = _cse.get(key)
        if node is None:
            node = Node(ARITH[name], nodes, params, shape, dtype, device)
            _cse[key] = node
    return arrays[0]._wrap(node)


def _moved(a: Any, device: int) -> Node:
    return apply("move", a._placed(), (), a.shape, a.dtype, device=device)


def ufunc(uf: Any, inputs: tuple, kwargs: dict) -> Any:
    """Record ``uf(*inputs)`` lazily, or return ``NotImplemented`` for the host path."""
    name = _UFUNCS.get(uf)
    if name is None or kwargs:
        return NotImplemented
    return record(name, tuple(inputs), uf)


def _clip(a: Any, a_min: Any = None, a_max: Any = None, **kwargs: Any) -> Any:
    if kwargs or a_min is None or a_max is None:
        return NotImplemented
    return record("clip", (a, a_min, a_max), np.clip)


def _where(cond: Any, x: Any = None, y: Any = None) -> Any:
    if x is None or y is None:
        return NotImplemented
    return record("where", (cond, x, y), np.where)


def reduce(name: str, a: Any, axis: Any = None, **kwargs: Any) -> Any:
    """A full reduction of ``a`` as a lazy 0-d gpuarray; ``NotImplemented`` otherwise."""
    if axis is not None or any(v is not None for v in kwargs.values()) or a.size == 0:
        return NotImplemented
    if a.dtype.kind in "cb":
        return NotImplemented
    probe = np.zeros((1,), a.dtype)
    dtype = getattr(np, name)(probe).dtype
    node = apply(REDUCE[name], a._placed(), (), (), dtype)
    return a._wrap(node)


def _host_or_lazy(lazy_fn: Callable[..., Any], np_fn: Callable[..., Any]) -> Callable[..., Any]:
    def impl(*args: Any, **kwargs: Any) -> Any:
        out = lazy_fn(*args, **kwargs)
        if out is NotImplemented:
            return np_fn(*to_host_tree(args), **to_host_tree(kwargs))
        return out

    return impl


FUNCTIONS: dict[Callable, Callable] = {
    np.clip: _host_or_lazy(_clip, np.clip),
    np.where: _host_or_lazy(_where, np.where),
}
for _name, _fns in {"sum": (np.sum,), "mean": (np.mean,), "min": (np.min, np.amin),
                    "max": (np.max, np.amax)}.items():
    for _fn in _fns:
        FUNCTIONS[_fn] = _host_or_lazy(
            lambda a, axis=None, _n=_name, **kw: reduce(_n, a, axis, **kw), _fn
        )
