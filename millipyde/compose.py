"""Per-sample choices among Operations: ``OneOf``, ``RandomChoice`` and ``SomeOf``.

A choice is an :class:`~millipyde.operation.Operation` (usable wherever operations are:
Pipelines, Generators, ``batches()``; callable on an image) holding a list of Operations. For
each sample it draws which of them run from the counter-based stream of (seed, sample, its
own index), and each chosen Operation runs with its own stream, ``(seed, sample,
child_index(index, i))``: the choice and every child's draws are pure functions of the
sample, whatever device or worker makes it.

In ``Generator.batches`` a choice among method Operations that keep the image's size is data:
every child is recorded for the whole batch with a per-sample gate (chosen, and its own coin
if it has one), so the batch stays one fused gather whatever is drawn (``batch_ops``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import random as mprandom
from .array import ArgumentError
from .operation import Operation, WholeImageOperation, check_p

__all__ = ["Choice", "OneOf", "RandomChoice", "RandomOrder", "SomeOf", "child_index",
           "weights_of"]

# a constant mixed into the children's stream indices (their own namespace of op indices)
_CHILD = 0x51B1_C0DE


def child_index(index: int, i: int) -> int:
    """The stream index of child ``i`` of the choice at Operation index ``index``: a 64-bit
    mix of both (distinct from the small indices of a list of Operations, and from another
    choice's children, nested ones included)."""
    return mprandom.key64(_CHILD, index, i, 0)


def _operations(operations: Any, owner: str) -> tuple[Operation, ...]:
    if isinstance(operations, Operation) or not isinstance(operations, (list, tuple)):
        raise ArgumentError(f"{owner} needs a list of Operations, got "
                            f"{type(operations).__name__}")
    if not operations:
        raise ArgumentError(f"{owner} needs at least one Operation")
    for i, op in enumerate(operations):
        if not isinstance(op, Operation):
            raise ArgumentError(f"{owner} operations[{i}] must be an Operation, got "
                                f"{type(op).__name__}")
    return tuple(operations)


def weights_of(weights: Any, k: int, owner: str, name: str) -> np.ndarray:
    """Non-negative weights of the ``k`` Operations, normalised (None: equal)."""
    if weights is None:
        return np.full(k, 1.0 / k)
    if isinstance(weights, (str, bytes)) or not isinstance(weights, (Sequence, np.ndarray)):
        raise ArgumentError(f"{owner} {name} must be a sequence of {k} weights, got "
                            f"{weights!r}")
    if len(weights) != k:
        raise ArgumentError(f"{owner} {name} must have one weight per Operation ({k}), got "
                            f"{len(weights)}")
    w = []
    for i, v in enumerate(weights):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(v)) or float(v) < 0:
            raise ArgumentError(f"{owner} {name}[{i}] must be a finite number >= 0, got {v!r}")
        w.append(float(v))
    total = math.fsum(w)
    if total <= 0:
        raise ArgumentError(f"{owner} {name} must not all be 0")
    return np.array(w) / total


class Choice(WholeImageOperation):
    """A per-sample choice among Operations (the base of :class:`OneOf` and :class:`SomeOf`).

    ``choose(u)`` gives, from a function ``u(t)`` returning draw ``t`` of each of ``n``
    samples, the (n, k) mask of the children that run: the same code for one sample (an
    image's call) and for a whole batch, so the same choices.
    """

    def __init__(self, operations: Any, p: Any, owner: str) -> None:
        ops = _operations(operations, owner)
        prob = check_p(p, owner)
        super().__init__(self)  # a callable Operation: this object (a stable repr)
        self.probability = prob
        self._p = prob is not None
        self.operations = ops

    # -- the choice ---------------------------------------------------------------------
    def choose(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n, k) bool: which children run for each of ``n`` samples."""
        raise NotImplementedError

    def sequence(self, u: Callable[[int], np.ndarray], n: int) -> list[tuple[int, np.ndarray]]:
        """The children in recording order, each with the (n,) mask of the samples it runs
        on: every child once, in list order, where :meth:`choose` says (``RandomOrder``
        repeats each child per position instead)."""
        chosen = self.choose(u, n)
        return [(i, chosen[:, i]) for i in range(len(self.operations))]

    def _member(self, seed: int, sample: int, index: int) -> np.ndarray:
        """The (k,) mask of one sample."""
        return self.choose(lambda t: np.array([mprandom.uniform01(seed, sample, index, t)]),
                           1)[0]

    def _member_sequence(self, seed: int, sample: int, index: int) -> list[tuple[int, bool]]:
        """:meth:`sequence` of one sample."""
        seq = self.sequence(lambda t: np.array([mprandom.uniform01(seed, sample, index, t)]), 1)
        return [(i, bool(m[0])) for i, m in seq]

    # -- Operation ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{type(self).__name__}[{', '.join(op.name for op in self.operations)}]"

    def apply(self, x: Any, seed: int, sample: int, index: int, lift: bool = False) -> bool:
        """Flip this choice's coin, draw the chosen children and apply them in order (each
        with its own coin and stream); with ``lift`` the others are recorded gated off where
        they can be (see :meth:`Operation.apply`)."""
        if not mprandom.gate(seed, sample, index, self.probability):
            self.skip(x, seed, sample, index, lift)
            return False
        for i, runs in self._member_sequence(seed, sample, index):
            op, sub = self.operations[i], child_index(index, i)
            if runs:
                op.apply(x, seed, sample, sub, lift)
            else:
                op.skip(x, seed, sample, sub, lift)
        return True

    def skip(self, x: Any, seed: int, sample: int, index: int, lift: bool = False) -> None:
        """Every child skipped (recorded gated off where it can be, with ``lift``)."""
        for i, op in enumerate(self.operations):
            op.skip(x, seed, sample, child_index(index, i), lift)

    def _bound(self, instance: Any) -> Callable[[], Any]:
        # every child's call, unconditionally: what a batch may record on each input (the
        # arena recorder's argument check runs it once per input)
        bound = [op._bound(instance) for op in self.operations]
        return lambda: [b() for b in bound][-1]

    def _args_repr(self) -> list[str]:
        return []

    def __repr__(self) -> str:
        parts = ["[" + ", ".join(repr(op) for op in self.operations) + "]",
                 *self._args_repr()]
        if self.probability is not None:
            parts.append(f"p={self.probability}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self) -> tuple:
        # rebuilt from its arguments (an Operation's lock and call count are per process)
        return _rebuild, (type(self), self._state_args())

    def _state_args(self) -> dict:
        raise NotImplementedError


def _rebuild(cls: type, kwargs: dict) -> Choice:
    return cls(**kwargs)


def _p_of(op: Choice) -> float:
    return 1.0 if op.probability is None else op.probability


class OneOf(Choice):
    """With probability ``p``, one of ``operations``, drawn per sample (``weights``: their
    relative chances; equal by default), as albumentations' ``OneOf``.

    Parameters
    ----------
    operations : list of Operation
        The candidates; each keeps its own probability (applied once chosen).
    p : float, default 1.0
        Chance in [0, 1] that one of them runs.
    weights : sequence of float, optional
        Relative chance of each candidate (>= 0, not all 0).

    Examples
    --------
    >>> import millipyde as mp
    >>> blur_or_noise = mp.OneOf([mp.Operation("gaussian", 1.0),
    ...                           mp.Operation("gaussian_noise", 0.05)], p=0.5)
    """

    def __init__(self, operations: Any, p: Any = 1.0, weights: Any = None) -> None:
        owner = type(self).__name__
        super().__init__(operations, p, owner)
        self.weights = weights_of(weights, len(self.operations), owner, self._weights_name)
        cum = np.cumsum(self.weights)
        cum[-1] = 1.0  # a draw below 1 always finds a candidate
        self._cum = cum

    _weights_name = "weights"

    def choose(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n, k) bool: per sample the one candidate that draw 0 picks by ``weights``
        (``u(t)``: draw ``t`` of each of the ``n`` samples, as :meth:`Choice.choose`).

        Returns
        -------
        numpy.ndarray
            One True per row, at the chosen candidate.
        """
        pick = np.searchsorted(self._cum, u(0), side="right")
        pick = np.minimum(pick, len(self.operations) - 1)
        return pick[:, None] == np.arange(len(self.operations))[None, :]

    def _args_repr(self) -> list[str]:
        w = self.weights
        return [] if np.allclose(w, w[0]) else [f"weights={w.tolist()}"]

    def _state_args(self) -> dict:
        return {"operations": list(self.operations), "p": _p_of(self),
                "weights": self.weights.tolist()}


class RandomChoice(OneOf):
    """torchvision's ``RandomChoice``: one of ``operations`` per sample, ``p`` their relative
    chances (torchvision's meaning of ``p`` here: a list of weights; equal by default).

    Parameters
    ----------
    operations : list of Operation
    p : sequence of float, optional
        One weight per Operation (>= 0, not all 0).
    """

    _weights_name = "p"

    def __init__(self, operations: Any, p: Any = None) -> None:
        super().__init__(operations, 1.0, p)

    def _args_repr(self) -> list[str]:
        w = self.weights
        return [] if np.allclose(w, w[0]) else [f"p={w.tolist()}"]

    def _state_args(self) -> dict:
        return {"operations": list(self.operations), "p": self.weights.tolist()}


class SomeOf(Choice):
    """With probability ``p``, ``n`` of ``operations`` drawn per sample without repeats and
    applied in their listed order (imgaug's ``SomeOf(random_order=False)``; albumentations'
    ``SomeOf`` picks the same way).

    Parameters
    ----------
    operations : list of Operation
    n : int or (int, int)
        How many run: a number, or an inclusive range drawn uniformly per sample.
    p : float, default 1.0
        Chance in [0, 1] that any run.
    weights : sequence of float, optional
        Relative chances (a weighted draw without replacement: Efraimidis and Spirakis'
        keys ``-log(u) / w``, the ``n`` smallest chosen); equal by default.
    """

    def __init__(self, operations: Any, n: Any = 1, p: Any = 1.0, weights: Any = None) -> None:
        owner = type(self).__name__
        super().__init__(operations, p, owner)
        k = len(self.operations)
        lo_hi = (n, n) if not isinstance(n, (Sequence, np.ndarray)) or \
            isinstance(n, (str, bytes)) else tuple(n)
        if len(lo_hi) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                  for v in lo_hi):
            raise ArgumentError(f"{owner} n must be an int or a (low, high) pair of ints, got "
                                f"{n!r}")
        lo, hi = int(lo_hi[0]), int(lo_hi[1])
        if not 0 <= lo <= hi <= k:
            raise ArgumentError(f"{owner} n must lie in 0..{k} (low <= high), got {n!r}")
        self.n = (lo, hi)
        self.weights = weights_of(weights, k, owner, "weights")

    def choose(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n, k) bool: per sample which Operations run (``u(t)``: draw ``t`` of each of the
        ``n`` samples, as :meth:`Choice.choose`).

        A sample's count is uniform in ``n``'s (low, high) (draw 0; fixed where they are
        equal), and the Operations that run are the first ``count`` of a race of
        exponential keys ``-log(1 - u(1 + i)) / weights[i]`` (an Operation of weight 0
        never wins while others are left).

        Returns
        -------
        numpy.ndarray
            ``count`` True values per row.
        """
        lo, hi = self.n
        count = np.full(n, lo) if lo == hi else \
            lo + np.minimum((u(0) * (hi - lo + 1)).astype(np.int64), hi - lo)
        # exponential races: a weight-0 Operation never wins while others are left
        keys = np.stack([-np.log1p(-u(1 + i)) / w if w > 0 else np.full(n, np.inf)
                         for i, w in enumerate(self.weights.tolist())], axis=1)
        rank = np.argsort(np.argsort(keys, axis=1, kind="stable"), axis=1, kind="stable")
        return rank < count[:, None]

    def _args_repr(self) -> list[str]:
        out = [f"n={self.n[0] if self.n[0] == self.n[1] else self.n}"]
        w = self.weights
        return out + ([] if np.allclose(w, w[0]) else [f"weights={w.tolist()}"])

    def _state_args(self) -> dict:
        return {"operations": list(self.operations), "n": self.n, "p": _p_of(self),
                "weights": self.weights.tolist()}


class RandomOrder(Choice):
    """torchvision's ``RandomOrder``: every one of ``operations``, in an order drawn per sample
    (every order equally likely, as ``torch.randperm``).

    In a batch the order is data too: position ``s`` holds every Operation, each gated on
    being the sample's ``s``-th (``k * k`` gated ops for ``k`` Operations, one kernel), and
    each Operation's parameters are drawn once from its own stream whatever its position.

    Parameters
    ----------
    operations : list of Operation
    """

    def __init__(self, operations: Any) -> None:
        super().__init__(operations, 1.0, type(self).__name__)

    def order(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n, k): each sample's order of the children (sorting k uniform draws)."""
        keys = np.stack([u(i) for i in range(len(self.operations))], axis=1)
        return np.argsort(keys, axis=1, kind="stable")

    def choose(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n, k) bool, all True: every Operation runs on every sample."""
        return np.ones((n, len(self.operations)), dtype=bool)

    def sequence(self, u: Callable[[int], np.ndarray], n: int) -> list[tuple[int, np.ndarray]]:
        """The Operations in recording order with the samples each runs on: for each position
        ``s`` in turn, every Operation ``i``, with the (n,) mask of the samples whose ``s``-th
        Operation (:meth:`order`) is ``i`` (``k * k`` entries).

        Returns
        -------
        list of (int, numpy.ndarray)
            (Operation index, sample mask) pairs.
        """
        perm = self.order(u, n)
        k = len(self.operations)
        return [(i, perm[:, s] == i) for s in range(k) for i in range(k)]

    def _state_args(self) -> dict:
        return {"operations": list(self.operations)}
