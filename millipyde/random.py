"""Counter-based random streams: every draw is a pure function of (seed, sample, op, k).

No generator state is shared between threads or devices, so the same seed gives bit-identical
parameters whatever the scheduling. The mixer is SplitMix64's finaliser applied to a combined key
(the construction of Philox-style counter-based generators, cheap enough to run in Python).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np

#: 64 bits: the streams' integer arithmetic is modulo 2**64
MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15

class _Keys(threading.local):
    """Per thread: the stream key an Operation's executor set (None outside one). A class
    default, not a missing attribute: ``getattr`` of a missing attribute of a thread-local
    costs ~0.4 us (the AttributeError raised and caught) against ~0.05 us."""

    key: Any = None


#: this thread's stream key (read directly by a Generator's callable capture)
STREAM_KEYS = _Keys()
_global = {"seed": 0, "next_sample": 0, "epoch": 0}
_global_lock = threading.Lock()


def mix(z: int) -> int:
    """SplitMix64's finaliser: one round of the streams' mixer.

    Parameters
    ----------
    z : int
        A 64-bit key.

    Returns
    -------
    int
        The mixed 64-bit value (the batched draws compute the same bits in compiled code).
    """
    z = (z + _GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def key64(seed: int, sample: int, op: int, k: int) -> int:
    """A 64-bit integer that depends only on its four integer arguments."""
    z = mix(seed & MASK)
    z = mix(z ^ (sample & MASK))
    z = mix(z ^ (op & MASK))
    return mix(z ^ (k & MASK))


def uniform01(seed: int, sample: int, op: int, k: int) -> float:
    """A float in [0, 1) that depends only on its four integer arguments."""
    return (key64(seed, sample, op, k) >> 11) * (1.0 / (1 << 53))


def uniforms(seed: int, sample: int, op: int, n: int) -> list[float]:
    """``[uniform01(seed, sample, op, t) for t in range(n)]``, the key's first three rounds
    mixed once (an op drawing several parameters per image: the same bits, fewer rounds)."""
    z = mix(mix(mix(seed & MASK) ^ (sample & MASK)) ^ (op & MASK))
    return [(mix(z ^ (t & MASK)) >> 11) * (1.0 / (1 << 53)) for t in range(n)]


def as_seed(n: Any, what: str = "seed") -> int:
    """``n`` as a Python int seed: Python or NumPy integers (not bools), else ``ValueError``."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"{what} must be an int (Python or NumPy integer), got "
                         f"{type(n).__name__}")
    return int(n)


def seed(n: int) -> None:
    """Set the global seed (a Python or NumPy integer) and restart the per-image sample counter."""
    n = as_seed(n)
    with _global_lock:
        _global["seed"] = n
        _global["next_sample"] = 0
        _global["epoch"] += 1


def global_seed() -> int:
    """The seed set by :func:`seed` (0 by default)."""
    return _global["seed"]


def seed_epoch() -> int:
    """How many times :func:`seed` has been called: counters keyed on it restart after a seed."""
    return _global["epoch"]


def next_sample_index() -> int:
    """A fresh sample index for an image made outside a Pipeline or Generator."""
    with _global_lock:
        i = _global["next_sample"]
        _global["next_sample"] = i + 1
    return i


def sample_indices(n: int) -> int:
    """The first of ``n`` consecutive fresh sample indices (:func:`next_sample_index` called
    ``n`` times in one thread: one lock for a batch's outputs)."""
    with _global_lock:
        i = _global["next_sample"]
        _global["next_sample"] = i + n
    return i


class StreamKey(NamedTuple):
    """Where draws come from while an execution construct applies an operation."""

    seed: int
    sample: int
    op: int


class ClaimDraws:
    """What the outputs of one claim of a batched Generator's callable Operation share
    (``generator_callables``): ``block``, their draws 0 .. T - 1 of the Operation's stream
    ((m, T) float64, row ``at`` of output ``at``: :func:`uniforms` of its key, bit for bit,
    drawn in one compiled call); ``args``, the Operation's own arguments (``nargs`` of
    them); ``parsed``, the claim's parses of them by (form parse, the image's ``shape[2:]``
    and dtype: its kind), with their parameter rows where the form draws plain uniform
    ranges (``image._method``)."""

    __slots__ = ("block", "args", "nargs", "parsed")

    def __init__(self, block: np.ndarray, args: tuple) -> None:
        self.block = block
        self.args, self.nargs = args, len(args)
        self.parsed: dict[tuple, tuple] = {}


class DrawnKey(StreamKey):
    """The :class:`StreamKey` of a batched Generator's callable Operation for one output:
    ``claim``, its claim's :class:`ClaimDraws`, and ``at``, its row there. Made as
    ``tuple.__new__(DrawnKey, (seed, sample, op))``, then the two set (a call less than the
    NamedTuple's ``__new__``)."""

    claim: ClaimDraws
    at: int


def current_key() -> StreamKey | None:
    """The key set by the enclosing :func:`operation_stream`, if any (per thread)."""
    return getattr(STREAM_KEYS, "key", None)


class operation_stream:
    """Make draws inside the block come from ``(seed_, sample, op)``.

    A class, not a generator context manager: a Generator enters one per operation and output,
    and this costs half as much (bench/RESULTS.md).
    """

    __slots__ = ("key", "_previous")

    def __init__(self, seed_: int, sample: int, op: int) -> None:
        self.key = StreamKey(seed_, sample, op)

    def __enter__(self) -> StreamKey:
        self._previous = current_key()
        STREAM_KEYS.key = self.key
        return self.key

    def __exit__(self, *exc: object) -> None:
        STREAM_KEYS.key = self._previous


def gate(seed_: int, sample: int, op: int, probability: float | None) -> bool:
    """Whether an operation with ``probability`` runs for this sample (a pure function)."""
    if probability is None:
        return True
    # k = -1 keeps the coin flip independent of the parameter draws (k >= 0).
    return uniform01(seed_, sample, op, -1) < probability



def _mix_array(z: np.ndarray) -> np.ndarray:
    """:func:`mix` on a uint64 array (NumPy's uint64 arithmetic wraps modulo 2**64)."""
    z = z + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform01_array(seed: int, samples: np.ndarray, op: int, k: int) -> np.ndarray:
    """:func:`uniform01` for many samples at once: float64 values bit-identical to it.

    Parameters
    ----------
    seed, op, k : int
        As in :func:`uniform01`.
    samples : array_like of int
        Sample indices (any shape; negative values wrap modulo 2**64 as in ``uniform01``).

    Returns
    -------
    numpy.ndarray
        float64 array of ``samples``' shape.
    """
    s = np.asarray(samples)
    if s.dtype.kind == "i":
        s = s.astype(np.int64).view(np.uint64)
    else:
        s = s.astype(np.uint64)
    with np.errstate(over="ignore"):
        head = mix(seed & MASK)  # the same for every sample: Python integers
        z = _mix_array(np.uint64(head) ^ s)
        z = _mix_array(z ^ np.uint64(op & MASK))
        z = _mix_array(z ^ np.uint64(k & MASK))
    # (z >> 11) < 2**53 converts to float64 exactly; the scale is a power of two
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def gate_array(seed_: int, samples: np.ndarray, op: int,
               probability: float | None) -> np.ndarray:
    """:func:`gate` for many samples at once: a bool array."""
    if probability is None:
        return np.ones(np.shape(samples), dtype=bool)
    return uniform01_array(seed_, samples, op, -1) < probability
