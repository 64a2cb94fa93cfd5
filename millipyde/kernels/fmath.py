"""Float helpers for the ops' scalar kernels and generated code, the same on every target:
:func:`floorf`, :func:`lowest` (an integer type's lowest value from its full intensity),
:func:`at_least`, :func:`overflows` (a blend factor's overflow test, divided only where it
can hold), :func:`rintf` (the cpu target's rounding to whole numbers,
``target.RINT_CLIP_CPU``) and :func:`fma` (one rounding of ``a * b + c``: the cpu byte forms'
corrected quotients, ``ops.colour.hue``).

``math.floor`` of a float is an integer in Python and in Numba's compiled code. A kernel that
floors a float64 and goes on with float arithmetic (a blend truncated to whole values, a hue
taken modulo 1) then converts it to an integer and back: on x86-64 ``roundsd``,
``cvttsd2si`` and ``cvtsi2sd``, some 15 cycles of latency in the pixel's chain of dependent
operations where ``roundsd`` alone takes 3; on GPUs three conversions where ``cvt.rmi`` is
one. :func:`floorf` is the floor as a float: LLVM's ``llvm.floor.f64`` in compiled code (the
cpu backend's and CUDA's), ``float(math.floor(x))`` in plain Python (the CUDA simulator).

The values are ``math.floor``'s wherever it has one that fits an int64 (every finite value
below 2**63 in magnitude): the same number, as a float. Where it has none, ``floorf`` gives
NaN for NaN and the infinity or whole number itself where the compiled conversion gave the
target's stand-in (x86-64: -2**63 for each; PTX: 0 for NaN, the int64 bound of the value's
sign): what the ops return is rounded and clipped (``_rint_clip``) or clipped by the op
(:func:`at_least`), either mapping NaN to the type's lowest value as it did -2**63 and 0.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload, register_jitable


def floorf(x: float) -> float:
    """The largest whole number not above ``x``, as a float (``math.floor`` as a float)."""
    return float(math.floor(x))


def _llvm_f64(name: str):  # noqa: ANN202 - a Numba intrinsic
    """A Numba intrinsic calling LLVM's float64 -> float64 intrinsic ``name``."""

    @intrinsic
    def call(typingctx, x):  # noqa: ANN001, ANN202 - Numba's intrinsic protocol
        sig = types.float64(types.float64)

        def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
            fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType()])
            return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name),
                                args)

        return sig, codegen

    return call


#: ``roundsd`` (round down) on x86-64, ``cvt.rmi.f64.f64`` in PTX
_llvm_floor = _llvm_f64("llvm.floor.f64")
#: one ``roundsd`` in the current rounding mode (to nearest, halves to even: nothing here
#: changes it)
_llvm_rint = _llvm_f64("llvm.rint.f64")


@overload(floorf, inline="always")
def _floorf(x):  # noqa: ANN001, ANN202 - Numba's overload protocol
    return lambda x: _llvm_floor(float(x))


def rintf(x: float) -> float:
    """``x`` rounded to a whole number, halves to even (``numpy.rint``), as a float."""
    return float(np.rint(x))


@overload(rintf, inline="always")
def _rintf(x):  # noqa: ANN001, ANN202 - Numba's overload protocol
    return lambda x: _llvm_rint(float(x))


def fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once (to nearest, halves to even), for finite arguments."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


@intrinsic
def _llvm_fma(typingctx, a, b, c):  # noqa: ANN001, ANN202 - Numba's intrinsic protocol
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        fnty = ir.FunctionType(ir.DoubleType(), [ir.DoubleType()] * 3)
        return builder.call(cgutils.get_or_insert_function(builder.module, fnty,
                                                           "llvm.fma.f64"), args)

    return sig, codegen


@overload(fma, inline="always")
def _fma(a, b, c):  # noqa: ANN001, ANN202 - Numba's overload protocol
    # ``vfmadd`` where the CPU has FMA3 (libm's exact ``fma`` otherwise)
    return lambda a, b, c: _llvm_fma(float(a), float(b), float(c))


@register_jitable
def lowest(full: float) -> float:
    """The lowest value of the integer type whose largest is ``full`` (``_rint_clip``'s rule:
    signed types' maxima, 2**7-1, 2**15-1, 2**31-1, 2**63-1 as float64, are no unsigned
    type's), as a float: ``-full - 1`` for signed types, 0 for unsigned ones."""
    if (full == 127.0 or full == 32767.0 or full == 2147483647.0
            or full == 9223372036854775808.0):
        return -full - 1.0
    return 0.0


@register_jitable
def at_least(x: float, lo: float) -> float:
    """``x`` where it is above ``lo``, else ``lo``: NaN gives ``lo``, as ``_rint_clip``'s
    clip does (``max`` keeps a NaN)."""
    return x if x > lo else lo


@register_jitable
def overflows(factor: float, big: float) -> bool:
    """``factor > 4.4e307 / big``: whether a blend's products ``factor * x``, ``|x| <= big``
    (``big >= 1``), may overflow, tested by division so that no infinity is made (the CUDA
    simulator's NumPy scalars warn on one).

    The division is made only where the answer can be yes: with ``factor <= 1e299`` and
    ``big <= 4.4e7`` the quotient is at least 1e300 (a correctly rounded division is
    monotonic), above ``factor``. The answer is the division's in every case (a NaN fails both
    short tests and reaches it); a division a channel was 13 cycles of the divider, which
    the ImageNet recipe's colour kernel kept busy (bench/RESULTS.md, "cpu backend: the
    colour kernels' chains shortened")."""
    if factor <= 1e299 and big <= 4.4e7:
        return False
    return factor > 4.4e307 / big
