"""What a user op's function computes, made fixed: its key, its frozen copy, its compile check.

A ``@mp.elementwise`` / ``@mp.pixelwise`` / ``@mp.index_map`` function becomes code inside
generated kernels, which are cached by name in memory and on disk (Numba's cache). The name
must therefore change whenever what the function computes changes, and what it computes must
not change after it was named. So, when it is decorated:

- its *key* is a digest of its bytecode (nested code included), the values in its closure
  cells, the values of the globals it reads, its defaults, the arguments a
  ``functools.partial`` binds, the decorator kind and the ``shape`` rule: two closures of one
  factory, one function under two decorators, or a global changed between two processes get
  their own kernels;
- its *frozen copy* is the same code over a snapshot of those globals and cells (arrays
  copied, read-only), so rebinding a global later cannot change a compiled kernel under the
  same name;
- what cannot be keyed by value (an arbitrary object in a global or a cell) is refused with a
  ``TypeError`` naming the function and the name;
- the function is compiled once on the host for the argument types the kernels pass it, and
  its return type checked: constructs Numba cannot compile, and returns of the wrong kind or
  arity, raise a ``TypeError`` naming the function there, not deep in a kernel compile.

Captures that are keyed by value: numbers (Python and NumPy), booleans, None, strings,
bytes, tuples of these, NumPy arrays, modules (by name), built-in and NumPy functions (by
name), and other jitted (``numba.njit``) or plain functions (by their own key).
"""

from __future__ import annotations

import builtins
import dis
import functools
import hashlib
import inspect
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .array import ArgumentError


class UserFunctionError(ArgumentError):
    """A user op's function that millipyde cannot key, freeze or compile (``TypeError`` and
    ``ValueError`` both catch it)."""


@dataclass(frozen=True)
class UserFunction:
    """A user op's function, resolved: ``fn`` the frozen function the kernels call, ``params``
    the parameters a caller passes it (after what a partial binds), ``before`` / ``after``
    the bound values passed in front of / after them, ``name`` a Python identifier."""

    fn: Callable
    params: tuple[str, ...]
    before: tuple
    after: tuple
    name: str


def resolve(obj: Any, what: str) -> UserFunction:
    """``obj`` (a function, lambda, jitted function or ``functools.partial`` of one) as the
    function the kernels call, its free parameters and bound values; ``what`` names the
    decorator in messages."""
    before: list = []
    after_kw: dict[str, Any] = {}
    inner = obj
    while isinstance(inner, functools.partial):
        # nested partials bind left to right; later keywords override earlier ones
        before[:0] = list(inner.args)
        after_kw = {**(inner.keywords or {}), **after_kw}
        inner = inner.func
    py = getattr(inner, "py_func", inner)  # a numba dispatcher: its Python function
    if not isinstance(py, types.FunctionType):
        raise UserFunctionError(
            f"@mp.{what} needs a Python function (def or lambda), a numba.njit function or a "
            f"functools.partial of one; got {type(obj).__name__} {obj!r}")
    code = py.__code__
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        raise UserFunctionError(f"@mp.{what} function {_label(py)} must take positional "
                                "parameters only (no *args or **kwargs)")
    if code.co_kwonlyargcount:
        raise UserFunctionError(f"@mp.{what} function {_label(py)} must take positional "
                                "parameters only (no keyword-only parameters)")
    names = code.co_varnames[:code.co_argcount]
    if len(before) > len(names):
        raise UserFunctionError(f"@mp.{what}: the partial of {_label(py)} binds "
                                f"{len(before)} arguments; it takes {len(names)}")
    rest = list(names[len(before):])
    unknown = [k for k in after_kw if k not in rest]
    if unknown:
        raise UserFunctionError(f"@mp.{what}: the partial of {_label(py)} binds "
                                f"{', '.join(unknown)}, which it does not take (or binds twice)")
    # keywords a partial binds are passed after the free parameters: they must be the last
    bound_tail = rest[len(rest) - len(after_kw):] if after_kw else []
    if sorted(bound_tail) != sorted(after_kw):
        raise UserFunctionError(
            f"@mp.{what}: the partial of {_label(py)} binds {', '.join(after_kw)} by keyword; "
            "keyword-bound parameters must be its last ones")
    free = tuple(rest[:len(rest) - len(after_kw)])
    after = tuple(after_kw[k] for k in bound_tail)
    return UserFunction(py, free, tuple(before), after, _identifier(py.__name__))


def _label(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _identifier(name: str) -> str:
    """``name`` as a Python identifier for generated text (``<lambda>`` -> ``lambda``)."""
    out = re.sub(r"\W", "_", name).strip("_") or "fn"
    return out if not out[0].isdigit() else "f_" + out


# ------------------------------------------------------------------------------- the key
def _globals_read(code: types.CodeType) -> list[str]:
    """Names ``code`` (and the code nested in it) loads as globals, in first-use order."""
    out: list[str] = []
    stack = [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval not in out:
                out.append(ins.argval)
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return out


def _code_key(code: types.CodeType) -> tuple:
    """What a code object computes (not where it was written: no file or line numbers)."""
    consts = tuple(_code_key(k) if isinstance(k, types.CodeType) else (type(k).__name__, repr(k))
                   for k in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, code.co_flags)


class _Keyer:
    """Keys values a function captures (see the module doc), refusing the others."""

    def __init__(self, owner: str, what: str) -> None:
        self.owner, self.what = owner, what
        self.seen: dict[int, int] = {}  # functions being keyed (recursion: keyed by index)

    def refuse(self, where: str, value: Any) -> UserFunctionError:
        return UserFunctionError(
            f"@mp.{self.what} function {self.owner} captures {where} = {type(value).__name__}"
            f" {_short(value)}, which its kernel cannot be keyed on: capture numbers, "
            "booleans, strings, tuples of these, NumPy arrays, modules, or jitted functions "
            "(or pass the value as a parameter)")

    def value(self, v: Any, where: str) -> tuple:
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes, np.generic)):
            return (type(v).__name__, repr(v))
        if isinstance(v, tuple):
            return ("tuple",) + tuple(self.value(x, f"{where}[{i}]") for i, x in enumerate(v))
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                raise self.refuse(where, v)
            data = np.ascontiguousarray(v)
            return ("ndarray", v.dtype.str, v.shape,
                    hashlib.sha1(data.view(np.uint8).reshape(-1)).hexdigest())
        if isinstance(v, types.ModuleType):
            return ("module", v.__name__)
        if isinstance(v, (types.BuiltinFunctionType, np.ufunc)):
            return ("builtin", getattr(v, "__module__", None) or "", _label(v))
        py = getattr(v, "py_func", v)
        if isinstance(py, types.FunctionType):
            if id(py) in self.seen:
                return ("recursive", self.seen[id(py)])
            self.seen[id(py)] = len(self.seen)
            return ("function", type(v).__name__) + self.function(py)
        if isinstance(v, type) and v.__module__ in ("builtins", "numpy"):
            return ("type", v.__module__, v.__qualname__)
        raise self.refuse(where, v)

    def function(self, fn: types.FunctionType) -> tuple:
        code = fn.__code__
        cells = tuple(self.value(_cell(c, fn, name, self), f"closure variable {name!r}")
                      for name, c in zip(code.co_freevars, fn.__closure__ or (), strict=True))
        glob = []
        for name in _globals_read(code):
            if name in fn.__globals__:
                glob.append((name, self.value(fn.__globals__[name], f"global {name!r}")))
            elif hasattr(builtins, name):
                glob.append((name, ("builtin", name)))
            else:
                glob.append((name, ("missing",)))  # Numba's compile names it (check below)
        defaults = self.value(tuple(fn.__defaults__ or ()), "its defaults")
        return (_code_key(code), cells, tuple(glob), defaults)


def _cell(cell: Any, fn: Callable, name: str, keyer: _Keyer) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        raise UserFunctionError(f"@mp.{keyer.what} function {keyer.owner}: closure variable "
                                f"{name!r} is not assigned yet") from None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def key(uf: UserFunction, kind: str, shape: Callable | None, what: str) -> str:
    """The digest (16 hex digits) of what ``uf`` computes as a ``kind`` op (module doc)."""
    if uf.fn.__name__ in _globals_read(uf.fn.__code__):
        # (its name is not bound yet at decoration, or bound to an older op of that name)
        raise UserFunctionError(f"@mp.{what} function {_label(uf.fn)} calls itself "
                                "(recursion), which the kernels cannot compile")
    keyer = _Keyer(_label(uf.fn), what)
    parts = [kind, keyer.function(uf.fn), keyer.value(uf.before, "a partial's arguments"),
             keyer.value(uf.after, "a partial's keyword arguments")]
    if shape is not None:
        sk = _Keyer(f"{_label(uf.fn)}'s shape rule", what)
        try:
            shape_uf = resolve(shape, what)
        except UserFunctionError as err:
            raise UserFunctionError(f"@mp.{what} shape rule of {_label(uf.fn)}: {err}") from None
        parts.append(("shape", sk.function(shape_uf.fn), sk.value(shape_uf.before, "shape"),
                      sk.value(shape_uf.after, "shape")))
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- the frozen copy
def _frozen_value(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        out = np.array(v, copy=True)
        out.flags.writeable = False
        return out
    return v


def freeze(fn: types.FunctionType) -> types.FunctionType:
    """``fn``'s code over a snapshot of the globals it reads and of its closure cells."""
    glob: dict[str, Any] = {"__builtins__": fn.__globals__.get("__builtins__", builtins)}
    for name in ("__name__", "__package__", "__file__"):
        if name in fn.__globals__:
            glob[name] = fn.__globals__[name]  # where Numba's messages say it comes from
    for name in _globals_read(fn.__code__):
        if name in fn.__globals__:
            glob[name] = _frozen_value(fn.__globals__[name])
    closure = None
    if fn.__closure__:
        closure = tuple(types.CellType(_frozen_value(c.cell_contents)) for c in fn.__closure__)
    out = types.FunctionType(fn.__code__, glob, fn.__name__, fn.__defaults__, closure)
    out.__qualname__ = fn.__qualname__
    out.__module__ = fn.__module__
    out.__doc__ = fn.__doc__
    return out


# -------------------------------------------------------------------------- the compile check
#: per kind: the types of the leading arguments the kernels pass, and the result expected
_LEADING = {"elementwise": ("float64", "int64"), "pixelwise": ("float64",) * 3,
            "index_map": ("float64", "float64", "int64", "int64")}
_RESULT = {"elementwise": ("one number", 0), "pixelwise": ("a tuple of 3 numbers (r, g, b)", 3),
           "index_map": ("a tuple of 2 numbers (row, col)", 2)}


def check_compiles(uf: UserFunction, kind: str, what: str) -> None:
    """Compile ``uf`` on the host for the argument types the kernels pass (float64
    parameters) and check its result; ``TypeError`` naming the function and what is wrong."""
    import numba
    from numba.core import types as nt

    label = _label(uf.fn)
    if uf.fn.__code__.co_flags & inspect.CO_GENERATOR:
        raise UserFunctionError(f"@mp.{what} function {label} is a generator (it yields); it "
                                f"must return {_RESULT[kind][0]}")
    args = ([numba.typeof(v) for v in uf.before] + [getattr(nt, t) for t in _LEADING[kind]]
            + [nt.float64] * (len(uf.params) - len(_LEADING[kind]))
            + [numba.typeof(v) for v in uf.after])
    disp = numba.njit(cache=False, error_model="numpy")(uf.fn)  # the kernels' error model
    try:
        disp.compile(tuple(args))
    except Exception as err:  # noqa: BLE001 - any compile failure is reported the same way
        raise UserFunctionError(f"@mp.{what} function {label} cannot be compiled for the "
                                f"kernels (Numba nopython mode): {_reason(err)}") from None
    rt = disp.nopython_signatures[-1].return_type
    want, arity = _RESULT[kind]

    def number(t: Any) -> bool:
        return isinstance(t, (nt.Integer, nt.Float, nt.Boolean))

    ok = (number(rt) if arity == 0 else
          isinstance(rt, nt.BaseTuple) and len(rt) == arity and all(number(t) for t in rt))
    if not ok:
        got = (f"a tuple of {len(rt)}" if isinstance(rt, nt.BaseTuple) else str(rt))
        raise UserFunctionError(f"@mp.{what} function {label} returns {got}; it must return "
                                f"{want}")


def _reason(err: BaseException) -> str:
    """The useful lines of a Numba compile error (its pipeline banner and source dump cut)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("Failed in ", "During:", "File ", "^",
                                                     "<source", "def ", "- Resolution",
                                                     "raised from"))]
    text = " ".join(keep[:3]) or type(err).__name__
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return text if len(text) <= 400 else text[:397] + "..."
