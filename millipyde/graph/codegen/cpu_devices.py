"""The cpu target's device functions: one Numba dispatcher per function and process, compiled
for plain argument types.

Generated cpu modules wrap the scalar kernels they call (``_dev(_R[name].fn)``) and define
helpers of their own (``_rint_clip``, ``_b2f``, user-op adapters). With a dispatcher per module
each was compiled again in every module, and once more for each integer literal a call site
passed (the channel ``0``, ``1``, ``2`` of a per-channel op: three compiles of 0.1-0.6 CPU-s);
in the ImageNet recipe's cold start these were 13.6 of 32 CPU-s. Here ``device`` returns one
dispatcher for every function of the same code and the same global objects it reads (so a
helper defined in many generated modules is compiled once), and its calls are typed with
integer literals as plain integers (one compile for every channel). LLVM still inlines the
function into each kernel and folds the constant channel there: the kernels compute what they
did.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable
from typing import Any

from numba import types
from numba.core.registry import CPUDispatcher

from .target import RINT_CLIP_CPU


def _plain(t: Any) -> Any:
    return types.unliteral(t) if isinstance(t, types.IntegerLiteral) else t


class PlainArgsDispatcher(CPUDispatcher):
    """A Numba CPU dispatcher that compiles for the non-literal type of integer literal
    arguments (one overload serves every constant a call site passes)."""

    def get_call_template(self, args: Any, kws: Any) -> Any:
        return super().get_call_template(tuple(_plain(a) for a in args),
                                         {k: _plain(v) for k, v in kws.items()})


#: what ``njit(cache=False, error_model='numpy')`` gives its dispatcher: NumPy's error model,
#: as on GPUs (a division by zero gives inf or NaN, never an exception in a kernel)
_OPTIONS = {"nopython": True, "error_model": "numpy"}
_shared: dict[Hashable, PlainArgsDispatcher] = {}
_lock = threading.Lock()


def _key(fn: Callable) -> Hashable:
    """Functions of equal keys compute the same: the same code (not its file or line) and
    defaults, reading the same global objects. A closure is keyed by itself."""
    if fn.__closure__ or fn.__kwdefaults__:
        return fn
    code = fn.__code__
    reads = tuple((n, id(fn.__globals__[n])) for n in code.co_names if n in fn.__globals__)
    return (code.co_name, code.co_code, code.co_consts, code.co_names, code.co_varnames,
            code.co_argcount, code.co_flags, fn.__defaults__, reads)


def device(fn: Callable) -> PlainArgsDispatcher:
    """The process's dispatcher of ``fn`` (or of a function computing the same, see ``_key``)
    as a cpu device function (``target.HEADER["cpu"]``'s ``_dev``).

    A function of a generated module is shared only with one of an importable module (the
    helpers defined below): a kernel loaded from Numba's disk cache in another process
    imports the modules of the functions it calls, and a generated module is imported only
    by the loader, when a kernel of its own is asked for."""
    key = _key(fn)
    generated = fn.__module__.startswith(GENERATED)
    with _lock:
        disp = _shared.get(key)
        if disp is None and generated:
            disp = _shared.get(fn)
        if disp is None:
            disp = PlainArgsDispatcher(py_func=fn, locals={}, targetoptions=dict(_OPTIONS))
            _shared[fn if generated else key] = disp
        return disp


_inlined: dict[Hashable, Any] = {}


def inlined(fn: Callable) -> Any:
    """``fn`` as a cpu device function that Numba inlines into each kernel calling it
    (``inline='always'``: its IR, typed at the call site), for the pixelwise ops' functions
    (``_dev3`` in generated text: three channel values in, three out).

    LLVM leaves those as calls (their bodies are large: HSV round trips, the saturation
    blend's overflow rules), returning the tuple through memory, with every live value of
    the kernel spilled around each call. Inlined, the ImageNet recipe's colour gather costs
    3.9 ms of core time an image instead of 4.7 (2-core machine). The arithmetic is the
    function's own, in the same order: results are bit-identical. A kernel's compile grows by
    the function's (tenths of a second), not by the inlined copies of the helpers (``device``
    shares those)."""
    from numba import njit

    key = _key(fn)
    with _lock:
        disp = _inlined.get(key)
        if disp is None:
            disp = _inlined[key] = njit(inline="always", **{k: v for k, v in _OPTIONS.items()
                                                            if k != "nopython"})(fn)
        return disp


#: the most calls of one pixelwise op's function a generated module may have for it to be
#: inlined (``_dev3``) there: one pixel's chain, the two pixels of a jammed trip and the odd
#: last column (``cpu_jam``), is three; more are the taps of a sampler it runs before (four
#: for a bilinear one) or a ``RandomOrder``'s positions
INLINE_SITES = 3
_INLINE_BINDINGS = (re.compile(r"^(\w+) = _dev3\(", re.M),
                    re.compile(r"^@_dev3\ndef (\w+)\(", re.M))


def limit_inlining(source: str) -> str:
    """``source`` with each function it binds with ``_dev3`` (``inlined``) bound with ``_dev``
    (``device``: one compile per process, a call in each kernel) where the module calls it
    more than ``INLINE_SITES`` times.

    Numba's typing and lowering of a kernel grow faster than its length: every inlined copy
    of an HSV round trip adds its blocks to one function. A kernel that applies pixelwise ops
    before a bilinear sampler (four taps) in a ``RandomOrder`` (``k * k`` gated ops for ``k``
    ops, each position a copy) has dozens of copies: ColorJitter's brightness, saturation and
    hue before a resize, 36 copies each of the saturation and hue functions, took 152 CPU-s
    to compile inlined (2-core machine). The function called is the same function: results
    are bit-identical (no kernel is compiled with ``fastmath``)."""
    names = [m.group(1) for pattern in _INLINE_BINDINGS for m in pattern.finditer(source)]
    for name in names:
        calls = len(re.findall(rf"(?<![\w.]){re.escape(name)}\(", source))
        defined = source.count(f"\ndef {name}(")
        if calls - defined > INLINE_SITES:
            source = source.replace(f"\n{name} = _dev3(", f"\n{name} = _dev(")
            source = source.replace(f"\n@_dev3\ndef {name}(", f"\n@_dev\ndef {name}(")
    return source


#: the names of generated modules start so (``loader.load``)
GENERATED = "millipyde_gen_"


_dev = device
# The helpers every generated cpu module defines, defined once here, in an importable module:
# the generated modules' copies (the same code) get these dispatchers. Compiled without this
# module's ``from __future__`` flags (``dont_inherit``): the generated modules have none, and
# a code object's flags are part of ``_key`` (with them inherited, no generated copy matched
# and every generated module compiled its own ``_rint_clip``, 0.4-0.6 CPU-s each).
exec(compile("@_dev\ndef _b2f(b):\n    return float(b)\n" + RINT_CLIP_CPU, __file__, "exec",
             dont_inherit=True))
