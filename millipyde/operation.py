"""``Operation``: a callable or a gpuimage method name, its arguments and an optional probability.

Thesis section 4.4.1 / 9.4. Pipelines and Generators call :meth:`Operation.apply`, which flips
the probability coin and draws random parameters from the counter-based stream of
``(seed, sample, operation index)``, so results do not depend on which worker or device ran it.
"""

from __future__ import annotations

import inspect
import itertools
import math
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from . import random as mprandom
from . import targets
from .array import ArgumentError, gpuarray
from .graph.exec import batch
from .image import RECORDING_METHODS, gpuimage

_MISSING: Any = object()
# Distinct coin streams for Operations run outside executors (run / run_on); the offset keeps
# them apart from executor streams, whose op index is a small position in a list.
_serials = itertools.count(1 << 40)


def _check_probability(probability: Any) -> float | None:
    if probability is None:
        return None
    # ints (even 0/1) and bools are refused: the thesis asks for a float strictly inside (0, 1).
    if isinstance(probability, bool) or not isinstance(probability, (float, np.floating)):
        raise ArgumentError(
            f"Operation probability must be a float strictly between 0 and 1, got "
            f"{type(probability).__name__} {probability!r}"
        )
    p = float(probability)
    if not (math.isfinite(p) and 0.0 < p < 1.0):
        raise ArgumentError(f"Operation probability must be strictly between 0 and 1, got {p}")
    return p


def check_p(p: Any, owner: str = "Operation") -> float | None:
    """torchvision's ``p``: a real number in [0, 1], both ends included (1: always, stored as
    None, the same draws as no probability), else ``ValueError``."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{owner} p must be a number in [0, 1], got "
                            f"{type(p).__name__} {p!r}")
    v = float(p)
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise ArgumentError(f"{owner} p must lie in [0, 1], got {v}")
    return None if v == 1.0 else v


def _takes_p(method: Any) -> bool:
    """Whether a gpuimage method has a parameter named ``p`` (its own coin, as
    ``random_invert``'s): an Operation's ``p=`` is then that argument."""
    try:
        return "p" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _check_finite(method: str, args: tuple, kwargs: dict) -> None:
    """NaN or infinity in a method Operation's arguments: refused now, not in a worker later
    (no image method computes with them; a callable's arguments are its own business)."""
    def bad(v: Any) -> bool:
        if isinstance(v, (float, np.floating)):
            return not math.isfinite(float(v))
        if isinstance(v, (list, tuple, np.ndarray)):
            return any(bad(e) for e in np.asarray(v, dtype=object).ravel())
        return False

    named = [(f"argument {i}", v) for i, v in enumerate(args)] + list(kwargs.items())
    for name, v in named:
        if bad(v):
            raise ArgumentError(f"Operation({method!r}, ...): {name} must be finite, got {v!r}")


def _callable_name(function: Callable[..., Any]) -> str:
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if not isinstance(name, str):
        return repr(function)
    return name.rsplit("<locals>.", 1)[-1]  # "Class.method" is useful, "f.<locals>." is noise


class Operation:
    """One step of a Pipeline or Generator: a function or method call, maybe with a probability.

    Parameters
    ----------
    function : callable or str
        A callable, or the name of a gpuimage/gpuarray method (``"rotate"``, ``"gaussian"``...).
    *args
        Positional arguments for the call (after the instance, for method names and when the
        Operation runs inside a Pipeline or Generator).
    probability : float, optional
        Chance, strictly between 0 and 1, that the call happens each time the Operation is used
        (the thesis's contract).
    p : float, optional
        The same chance with torchvision's meaning: a number in [0, 1], both ends included
        (1: always, 0: never). Give `probability` or `p`, not both. For a method that takes a
        ``p`` of its own (``random_invert``, ``random_vflip``...: torchvision's ``p`` of
        ``RandomInvert``...), ``p=`` is that argument.
    **kwargs
        Keyword arguments for the call.

    Raises
    ------
    ValueError
        `function` missing, neither callable nor a known method name, arguments that do not fit
        the named method's signature, or an invalid `probability`.

    Examples
    --------
    >>> import millipyde as mp
    >>> op = mp.Operation(max, 4, 6)
    >>> op.run()
    6
    >>> blur = mp.Operation("gaussian", 2, probability=0.5)
    """

    #: whether this Operation draws a serial of its own (its direct calls' stream)
    _takes_serial = True

    def __init__(self, function: Any = _MISSING, *args: Any, probability: Any = None,
                 p: Any = _MISSING, **kwargs: Any) -> None:
        if function is _MISSING or function is None:
            raise ArgumentError("Operation needs a function: a callable or a method name (str)")
        self.probability: float | None = _check_probability(probability)
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        method = None
        if isinstance(function, str):
            method = getattr(gpuimage, function, None) if not function.startswith("_") else None
            if method is None or not callable(method) or isinstance(method, property):
                raise ArgumentError(
                    f"Operation method name {function!r} is not a gpuimage/gpuarray method"
                )
        self._p = p is not _MISSING
        if self._p and method is not None and _takes_p(method):
            self.kwargs["p"] = p  # the method's own coin (validated with its arguments)
            self._p = False
        elif self._p:
            if probability is not None:
                raise ArgumentError("Operation takes probability= or p=, not both")
            self.probability = check_p(p)
        if isinstance(function, str):
            try:  # catch a wrong argument count now rather than deep inside a worker
                signature = inspect.signature(method)
            except (TypeError, ValueError):  # builtins may have no signature: check at call
                signature = None
            if signature is not None:
                try:
                    signature.bind(None, *self.args, **self.kwargs)
                except TypeError as err:
                    raise ArgumentError(f"Operation({function!r}, ...): {err}") from None
            _check_finite(function, self.args, self.kwargs)
            self.method: str | None = function
            self.function: Callable[..., Any] | None = None
        elif callable(function):
            self.method = None
            self.function = function
        else:
            raise ArgumentError(
                f"Operation function must be a callable or a method name (str), got "
                f"{type(function).__name__}"
            )
        # (an Operation made inside another one, never called on its own, takes its owner's
        # serial afterwards: the serials of the Operations made after it stay as they were)
        self._serial = next(_serials) if self._takes_serial else -1
        self._lock = threading.Lock()
        self._epoch = -1
        self._calls = 0

    @property
    def name(self) -> str:
        """The method name, or the callable's qualified name (used in error messages)."""
        return self.method if self.method is not None else _callable_name(self.function)

    def __repr__(self) -> str:
        parts = [repr(self.method) if self.method is not None else self.name]
        parts += [repr(a) for a in self.args]
        parts += [f"{k}={v!r}" for k, v in self.kwargs.items()]
        if self.probability is not None:
            parts.append(f"{'p' if self._p else 'probability'}={self.probability}")
        return f"Operation({', '.join(parts)})"

    @classmethod
    def rebuild(cls, function: Any, args: tuple, kwargs: dict,
                probability: float | None) -> Operation:
        """An Operation from the parts of another (``function``, ``args``, ``kwargs`` and its
        stored ``probability``, which ``p=`` may have set to 0): pickling, warmup workers."""
        op = cls(function, *args, **kwargs)
        if probability is not None:
            v = check_p(probability)
            op.probability, op._p = v, v is not None and not 0.0 < v < 1.0
        return op

    # -- outside executors ----------------------------------------------------------------
    def _next_call(self) -> int:
        """This Operation's next call index outside executors (its draws are keyed on the
        global seed and it); ``mp.seed()`` restarts the count: deterministic reruns."""
        with self._lock:
            epoch = mprandom.seed_epoch()
            if epoch != self._epoch:
                self._epoch, self._calls = epoch, 0
            call = self._calls
            self._calls += 1
        return call

    def _coin(self) -> bool:
        """The coin for run()/run_on(): global seed and this Operation's call counter."""
        if self.probability is None:
            return True
        return mprandom.gate(mprandom.global_seed(), self._next_call(), self._serial,
                             self.probability)

    def run(self) -> Any:
        """Call the function with the stored arguments.

        Returns
        -------
        object
            The function's result, or None when the probability coin says skip.

        Raises
        ------
        ValueError
            The Operation names a method: use :meth:`run_on`.
        """
        if self.function is None:
            raise ArgumentError(
                f"Operation {self.method!r} names an instance method: use run_on(instance)"
            )
        if not self._coin():
            return None
        return self.function(*self.args, **self.kwargs)

    def run_on(self, instance: Any) -> Any:
        """Call the method on `instance` (a callable gets `instance` as its first argument).

        Parameters
        ----------
        instance : object
            Usually a gpuimage or gpuarray.

        Returns
        -------
        object
            What the call returns (None for image methods), or None when the coin says skip.

        Raises
        ------
        ValueError
            `instance` has no method of that name.
        """
        bound = self._bound(instance)
        if not self._coin():
            return None
        return bound()

    def _records_only(self, instance: Any) -> bool:
        """Whether this is a gpuimage method that only records nodes (not overridden)."""
        name = self.method
        return (name in RECORDING_METHODS and isinstance(instance, gpuimage)
                and getattr(type(instance), name, None) is getattr(gpuimage, name))

    def _bound(self, instance: Any) -> Callable[[], Any]:
        if self.method is None:
            return lambda: self.function(instance, *self.args, **self.kwargs)
        method = getattr(instance, self.method, None)
        if method is None or not callable(method):
            raise ArgumentError(
                f"{type(instance).__name__} has no method {self.method!r} for this Operation"
            )
        return lambda: method(*self.args, **self.kwargs)

    # -- inside executors -----------------------------------------------------------------
    def apply(self, x: gpuarray, seed: int, sample: int, index: int,
              lift: bool = False) -> bool:
        """Apply to `x` in place as executors do; return False when the coin skipped it.

        The coin and every random draw are pure functions of ``(seed, sample, index)``. A
        callable that returns a new gpuarray or an ndarray replaces `x`'s value with it (so
        user functions can be written functionally; an ndarray is uploaded to `x`'s device
        with `x`'s type's conversion rules), checked against gpuimage's shape rules. Any other
        value but None is ignored with a ``RuntimeWarning``.

        With `lift` (batched Generators) a method the coin skipped is still recorded, marked
        gated off, where its kernels have an identity form (``graph.exec.batch.record_gated_off``):
        `x`'s value is unchanged, but its plan matches the outputs whose coin ran it, so they
        share one batched launch per kernel.
        """
        records = lift and self._records_only(x)
        if not mprandom.gate(seed, sample, index, self.probability):
            self.skip(x, seed, sample, index, lift)
            return False
        if lift and not records:
            # this call may read x's value, which the per-image path would compute with the
            # gated-off ops run: drop them first (the rebuilt value keeps x's targets)
            kept = targets.of(x._node)
            batch.drop_gated_off(x)
            if kept is not None and targets.of(x._node) is None:
                targets.attach(x._node, kept)
        self.call_drawn(x, seed, sample, index)
        return True

    def call_drawn(self, x: gpuarray, seed: int, sample: int, index: int) -> None:
        """What :meth:`apply` does once its coin said run: the call on `x` with its draws
        from ``(seed, sample, index)``, a callable's returned gpuarray or ndarray bound to `x`
        (a batched Generator's callable, whose coins it draws for many outputs at once)."""
        bound = self._bound(x)  # (subclasses bind their own call: ``compose.Choice``)
        with mprandom.operation_stream(seed, sample, index):
            result = bound()
        if self.method is None and result is not None and result is not x:
            use_result(x, result, self.name)

    def skip(self, x: gpuarray, seed: int, sample: int, index: int, lift: bool = False) -> None:
        """What :meth:`apply` does when its coin (or a choice, ``millipyde.compose``) skips
        it: nothing, or with ``lift`` the method recorded gated off where it can be."""
        if lift and self._records_only(x):
            bound = self._bound(x)
            with mprandom.operation_stream(seed, sample, index):
                batch.record_gated_off(x, bound)


class WholeImageOperation(Operation):
    """An Operation that applies to an image as a whole with draws of its own (the choices of
    ``compose``, the policies, ``AugMix``): called on an image it applies in place, its draws
    keyed on the global seed and its call count; it has no call without an image."""

    def run_on(self, instance: Any) -> Any:
        """Apply to ``instance`` outside executors: the draws keyed on the global seed and this
        Operation's call count (as :meth:`Operation.run_on`)."""
        self.apply(instance, mprandom.global_seed(), self._next_call(), self._serial)
        return None

    def __call__(self, image: Any) -> Any:
        """Apply to ``image`` in place (:meth:`run_on`); returns it."""
        self.run_on(image)
        return image

    def run(self) -> Any:
        raise ArgumentError(f"{self.name} applies to an image: call it on one, or use it in "
                            "a Pipeline or Generator")


def use_result(x: gpuarray, result: Any, name: str) -> None:
    """Bind ``x`` to a callable's gpuarray / ndarray result; warn that anything else is unused."""
    if isinstance(result, np.ndarray):
        try:
            result = type(x)(result)  # on this thread's target device, with x's type's rules
        except ValueError as err:
            raise ValueError(f"Operation {name} returned an ndarray that is not a valid "
                             f"{type(x).__name__}: {err}") from err
    if not isinstance(result, gpuarray):
        warnings.warn(f"Operation {name} returned a {type(result).__name__}, which is ignored: "
                      "a callable changes its input in place, or returns a gpuarray or ndarray "
                      "to replace it", RuntimeWarning, stacklevel=4)
        return
    if isinstance(x, gpuimage):
        _check_image_result(result, name)
    x._bind(result._node)


def _check_image_result(result: gpuarray, name: str) -> None:
    """A callable's result may only replace a gpuimage's value if it is a valid image."""
    shape, dtype = result.shape, result.dtype
    ok = (len(shape) == 2 and dtype.kind in "iuf") or (
        len(shape) == 3 and shape[2] in (3, 4) and dtype == np.uint8
    )
    if not ok:
        raise ValueError(
            f"Operation {name} returned a gpuarray of shape {shape} and dtype {dtype}, which "
            "is not a valid gpuimage value"
        )
