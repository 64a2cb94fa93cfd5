"""Recorded templates shared between Generators whose recordings are the same.

A ``batch_record.Recorder`` records one template output per coin pattern (and warp-clip
variant) it meets, ~0.5 ms each on a 2-core host: a thesis chain meets ~80-100 in 1024
outputs. What a template holds depends on the Operations (their methods, callables,
arguments and probabilities), the inputs' type, shape, dtype and device, the device it is
recorded for, the coin pattern and the variant, and the planner's switches; not on the seed
nor on which input it was recorded from: every output of the pattern gets its drawn values
from the batch's draws (``batch_groups``), as outputs of one Generator always did, and its
launch reads the batch's own stack of inputs. So Generators of the same chain over inputs of
the same kind (a new seed, a new epoch) share one :class:`TemplateStore` here: the templates
and their group keys' ``KeyPlan`` (whose compiled launches and constant tables are the same
for them), and a second Generator records none it shares.

The cache is process-wide, bounded (:data:`MAX_CHAINS` stores, least recently used out) and
taken only where the inputs are small (:data:`MAX_INPUT_BYTES` in all: a template keeps the
input node it was recorded from, so a store keeps some inputs' values alive until it is
dropped; large images also make a template's recording a small share of a batch). A key
holds only values compared by equality (numbers, strings, tuples, arrays by their bytes)
or objects by identity (a callable, an op): an argument of another kind keeps the
Generator's templates its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from .. import targets
from ..backend import ACTIVE as runtime
from ..graph.exec import batch
from ..graph.exec import gather as exec_gather

#: Share templates between Generators (False: each Generator records its own; tests compare).
ENABLED = True
#: Stores kept (one per chain, input kind and capture kind), least recently used dropped.
MAX_CHAINS = 8
#: Inputs larger than this in all (bytes) keep their templates per Generator.
MAX_INPUT_BYTES = 64 << 20

#: Templates recorded since the process started (by every recorder; ``Recorder.template``).
recorded = 0


class TemplateStore:
    """What recorders of one chain keep of their templates: per (device, pattern bytes,
    variant) the template (None: the pattern does not batch), the tries that failed, per
    group key its ``KeyPlan``, per device the templates by pattern integer (``by_dev``, and
    ``by_dev1`` for variant 1), a callable's shapes (``shapes``) and a fixed chain's
    recorded Pipeline chunks (``reused``). ``lock`` guards recording into it
    (``Recorder.template``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.templates: dict[tuple[int, bytes, int], Any] = {}
        self.failed: dict[tuple[int, bytes, int], int] = {}
        self.plans: dict[tuple, Any] = {}
        self.by_dev: dict[int, dict[int, Any]] = {}
        # the same for the patterns' other plans (variant 1: outputs whose warp clip
        # differs from their pattern's first template's)
        self.by_dev1: dict[int, dict[int, Any]] = {}
        # a callable's recorder (``generator_callables``): the (shape, dtype) its outputs have
        # when the callable gets them, per input kind and coin pattern of the Operations
        # before it
        self.shapes: dict[tuple, tuple] = {}
        # a fixed chain's Pipeline chunks (``pipeline.chunks.StageChunks.record``): per
        # (group key, device, stream or thread), chunk size -> (groups without a stack,
        # uploaded pack) of the last chunk of that size recorded
        self.reused: dict[tuple, dict[int, tuple]] = {}


_LOCK = threading.Lock()
_STORES: OrderedDict[tuple, TemplateStore] = OrderedDict()


class Same:
    """An object as a part of a key: equal to another only where it is the same object (held
    alive by the key, so its identity is not taken by another)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


class _Unkeyable(Exception):
    """A value that cannot be part of a key (compared neither by value nor by identity)."""


def _freeze(v: Any) -> Any:
    """``v`` as a hashable value equal exactly where ``v``'s recordings are the same."""
    if isinstance(v, Same):
        return v
    if isinstance(v, float):  # (exactly: -0.0 is not 0.0)
        return ("float", v.hex())
    if v is None or isinstance(v, (bool, int, complex, str, bytes)):
        return (type(v).__name__, v)
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.tobytes())
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, (tuple, list)):
        return (type(v).__name__, tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((_freeze(k), _freeze(x)) for k, x in v.items())))
    if callable(v):  # (a function: by identity; the key holds it alive)
        return ("callable", Same(v))
    raise _Unkeyable(type(v).__name__)


def chain_key(inputs: list, operations: list, *extra: Any) -> tuple | None:
    """The key of the templates a recorder of these inputs and Operations records (``extra``:
    what else decides them, frozen as arguments are), or None where they are not shared."""
    if not ENABLED or not inputs:
        return None
    if runtime.is_recording():
        # a compiling-ahead twin records with launches skipped (``Backend.recording``): what
        # its kernels would have written is not there, and a callable may read it, so its
        # templates stay its own; the Generators that run share theirs
        return None
    try:
        total = 0
        kinds = set()
        for x in inputs:
            node = x._node
            if targets.of(node) is not None:
                return None  # (targets travel with the recording)
            total += int(np.prod(x.shape, dtype=np.int64)) * np.dtype(x.dtype).itemsize
            kinds.add((type(x), tuple(x.shape), np.dtype(x.dtype).str, node.device))
        if total > MAX_INPUT_BYTES or len(kinds) != 1:
            return None
        ops = tuple((type(op), op.method, _freeze(op.function), _freeze(op.args),
                     _freeze(op.kwargs), _freeze(op.probability)) for op in operations)
        return (runtime.name, kinds.pop(), ops, _freeze(extra), batch.LIFT_GATES,
                exec_gather.INLINE_TABLE_MAX_PIXELS, exec_gather.PACKED_MAX_ELEMENTS,
                exec_gather.TABLED)
    except (_Unkeyable, TypeError, AttributeError):
        return None


def store(key: tuple | None) -> TemplateStore:
    """The shared store of ``key`` (made if missing), or a private one where ``key`` is None."""
    if key is None:
        return TemplateStore()
    with _LOCK:
        got = _STORES.get(key)
        if got is None:
            got = _STORES[key] = TemplateStore()
            while len(_STORES) > MAX_CHAINS:
                _STORES.popitem(last=False)
        else:
            _STORES.move_to_end(key)
        return got


def clear() -> None:
    """Drop every shared store (Generators made after record their templates again)."""
    with _LOCK:
        _STORES.clear()


def count_recorded() -> None:
    """One template more recorded (:data:`recorded`)."""
    global recorded
    with _LOCK:
        recorded += 1
