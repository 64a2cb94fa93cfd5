"""Plans that replay: a chain planned once is bound to new nodes, not planned again.

A training loop or a bench calls the same short chain (``img.adjust_gamma(g)``, ``rotate``,
``gaussian``...) on images of the same shape again and again, with new scalars each time.
``schedule.plan`` walks the graph and decides fusion each time (~20 us of Python per op on an
H200). Here a pending chain (each node with one input, back to one stored source) is keyed on
what planning looks at: each node's op, shape, dtype, device, label, whether another handle
holds it, its parameters unless the op is elementwise (those only reach the kernel's table or
parameter block, computed at run time from the bound nodes), the source's shape, dtype and
device, and whether fusion is on. A hit rebuilds the planned kernels around the new nodes; the
kernel's parameters, tables and buffers are still made by ``execute`` from those nodes, so a
replay runs exactly what a fresh plan would.

The cache holds positions in the chain, never nodes, so it keeps no buffer alive.

One op recorded on a stored source (``img.adjust_gamma(g)`` then a read: the chain ``[source,
node]``) is the case a loop repeats: its last hit per op and source (shape, device, dtype) is
kept (``_last``) with what its key was built from, so the next such chain whose fields are the
same objects (or equal) finds the plan without building and hashing the key. The memo holds
only plans that are in the cache under that key (any change of the cache empties it), so it
finds exactly what the key would.

A plan of one kernel may also learn a *replay launch* (``_Plan.fast``, made by the kernel
kind's binder, see ``execute.binds``): on later hits ``execute.materialize`` hands it the
chain and it allocates, launches and stores the output itself, without rebuilding kernels.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import config
from ...kernels import OpSpec
from ..ir.node import Node
from ..plan import schedule
from ..plan.schedule import Expr, Gather, Kernel, Stencil

#: kernel fields that hold nodes (remapped on a hit); other fields are copied as they are
_NODE_LISTS = ("nodes", "pre", "post", "grey_ops")
# a chain with a random non-elementwise op (a drawn angle) is a new key per output: a small
# cache keeps what that costs bounded and small, and replays of a repeated chain still hit
_MAX = 64
_MAX_CHAIN = 64
_cache: dict[tuple, _Plan] = {}
_SEEN_MAX = 256
_seen: dict[int, None] = {}
_lock = threading.Lock()
#: (id(op), source shape, device, id(dtype)) -> the last hit of that op alone on such a stored
#: source (sources in turn on two devices, or of two shapes, each keep theirs): (op, fused,
#: source dtype (held: its id is in the key), label, shape, dtype, device, params or None,
#: plan); emptied when ``_cache`` changes (and when it holds ``_MAX`` hits)
_last: dict[tuple[int, tuple[int, ...]], tuple] = {}
_UNREAD = object()  # (a setting not read since the last refresh)
#: whether a one-op chain is looked up in ``_last`` first (False: always through its key;
#: the probes and tests compare the two)
SINGLE = True
stats = {"hits": 0, "misses": 0, "uncached": 0}


#: a replay launch: run the plan on the bound chain, store the output; False: not run (the
#: caller takes the general path)
Fast = Callable[[list[Node]], bool]
# how often a plan's first replays may try to learn a replay launch (a binder says None while
# what it needs is not there yet: a kernel's first launch, say)
_FAST_TRIES = 3


@dataclass
class _Plan:
    ops: tuple[Any, ...]  # the op objects keyed by id(), held so that no id is reused
    kernels: tuple[tuple[Kernel, int, dict[str, tuple[int, ...]]], ...]
    fast: Fast | None = None  # set once, by ``learn``
    tries: int = 0


def _chain(target: Node) -> list[Node] | None:
    """The source then every pending node up to ``target``, or None when not a plain chain."""
    seq = []
    n = target
    while n.buffer is None:  # (``materialized``, without a call per node)
        if len(n.inputs) != 1 or n.gated_off or len(seq) >= _MAX_CHAIN:
            return None
        op = n.op
        if not (isinstance(op, OpSpec) or op in ("copy", "move")):
            return None
        seq.append(n)
        n = n.inputs[0]
    seq.append(n)
    seq.reverse()
    return seq


def _key(seq: list[Node]) -> tuple:
    src = seq[0]
    # (``schedule.fusion_enabled()``, its two calls inlined: this runs on every op)
    override = schedule.fusion_override
    fused = override[-1] if override else config.once(config.fusion)
    parts: list[Any] = [fused, src.shape, src.dtype, src.device]
    last = len(seq) - 1
    for i in range(1, len(seq)):
        n = seq[i]
        op = n.op
        if type(op) is str:
            ident, free = op, False
        else:
            ident, free = id(op), op.kind == "elementwise"
        # a node another handle holds is stored on its own (plan's ``fusable``)
        parts.append((ident, n.label, n.shape, n.dtype, n.device,
                      None if free else n.params, i == last or n.users == 1))
    return tuple(parts)


def _skeleton(kernels: list[Kernel], seq: list[Node]) -> tuple | None:
    pos = {n.id: i for i, n in enumerate(seq)}
    out = []
    for k in kernels:
        if isinstance(k, Expr) or type(k) not in (Kernel, Gather, Stencil):
            return None
        lists = {}
        for name in _NODE_LISTS:
            nodes = getattr(k, name, None)
            if nodes is None:
                continue
            if any(n.id not in pos for n in nodes):
                return None
            lists[name] = tuple(pos[n.id] for n in nodes)
        if k.source.id not in pos:
            return None
        shell = copy.copy(k)
        shell.source = None
        # what execute derives from the structure alone, worked out on the first replay and
        # shared by every later one (``gather.gather_args``)
        shell._memo = {}
        for name in lists:
            setattr(shell, name, None)
        out.append((shell, pos[k.source.id], lists))
    return tuple(out)


def bind(entry: _Plan, seq: list[Node]) -> list[Kernel]:
    """The kernels of a cached plan around the nodes of ``seq`` (a hit of ``resolve``)."""
    kernels = []
    for shell, src, lists in entry.kernels:
        k = object.__new__(type(shell))  # a shallow copy, without copy.copy's protocol
        k.__dict__.update(shell.__dict__)
        k.source = seq[src]
        for name, idx in lists.items():
            setattr(k, name, [seq[i] for i in idx])
        kernels.append(k)
    return kernels


def plan(target: Node) -> list[Kernel]:
    """``schedule.plan(target)``, from the cache when this chain's structure was planned."""
    kernels, seq, entry = resolve(target)
    return kernels if entry is None else bind(entry, seq)


def resolve(target: Node) -> tuple[list[Kernel], None, None] | tuple[None, list[Node], _Plan]:
    """``(kernels, None, None)`` planned afresh, or ``(None, chain, plan)`` for a hit: the
    caller binds the cached plan to the chain (``bind``) or runs its replay launch."""
    if target.buffer is not None:
        return [], None, None
    inputs = target.inputs
    if len(inputs) == 1 and inputs[0].buffer is not None and SINGLE:
        entry = _single(target, inputs[0])
        if entry is not None:
            stats["hits"] += 1
            return None, [inputs[0], target], entry
    seq = _chain(target)
    if seq is None:
        stats["uncached"] += 1
        return schedule.plan(target), None, None
    key = _key(seq)
    try:
        entry = _cache.get(key)
    except TypeError:  # a parameter that cannot be hashed (an array): plan every time
        stats["uncached"] += 1
        return schedule.plan(target), None, None
    if entry is not None:
        # the key holds id() of each op; the entry holds the ops themselves, so no id in a
        # live entry's key can have been reused by another object
        stats["hits"] += 1
        if len(seq) == 2:
            _remember(key, seq[1], entry)
        return None, seq, entry
    stats["misses"] += 1
    kernels = schedule.plan(target)
    if not _seen_before(key):
        return kernels, None, None
    skeleton = _skeleton(kernels, seq)
    if skeleton is not None:
        with _lock:
            if len(_cache) >= _MAX:
                _cache.pop(next(iter(_cache)))
            _cache[key] = _Plan(tuple(n.op for n in seq[1:]), skeleton)
            _last.clear()
    return kernels, None, None


def _single(n: Node, src: Node) -> _Plan | None:
    """The plan ``_last`` holds for chain ``[src, n]`` (``src`` stored) when every field its
    key reads is the remembered one (the same object, or equal), else None: the fields
    ``_chain`` and ``_key`` read for a chain of one node."""
    op = n.op
    # the source's shape and device equal, its dtype the same object (the memo holds it)
    got = _last.get((id(op), src.shape, src.device, id(src.dtype)))
    if got is None or got[0] is not op or n.gated_off:
        return None
    override = schedule.fusion_override
    # (``config.once``'s kept value read here, a call only before the first read)
    fused = override[-1] if override else config.ONCE_VALUES.get(config.fusion, _UNREAD)
    if fused is _UNREAD:
        fused = config.once(config.fusion)
    _, g_fused, _, label, shape, dtype, device, params, entry = got
    # (each field the same object, as an op that keeps its input's shape and dtype passes
    # them, or else equal; written out: a helper's call per field costs more than the test)
    c, d = n.shape, n.dtype
    if not (fused is g_fused and n.label == label and (c is shape or c == shape)
            and (d is dtype or d == dtype) and n.device == device):
        return None
    if params is not None:
        try:
            if n.params != params:
                return None
        except (TypeError, ValueError):  # (an array among them: never a cached key)
            return None
    return entry


def _remember(key: tuple, n: Node, entry: _Plan) -> None:
    """Keep the hit ``entry`` of the one-node chain keyed ``key`` in ``_last``: the fields
    its key was built from (``_key``), read back from the key itself."""
    fused, shape, dtype, device, (_, label, n_shape, n_dtype, n_device, params, _) = key
    if type(fused) is not bool:
        return  # (``_single`` compares it by identity)
    with _lock:
        if _cache.get(key) is entry:  # (not evicted meanwhile)
            if len(_last) >= _MAX:
                _last.clear()
            _last[(id(n.op), shape, device, id(dtype))] = (
                n.op, fused, dtype, label, n_shape, n_dtype, n_device, params, entry)


def learn(entry: _Plan, kernels: list[Kernel], seq: list[Node],
          binders: dict[str, Callable[..., Fast | None]]) -> None:
    """After a hit ran through the general path: give a one-kernel plan its replay launch,
    from the binder of its kernel's kind (``binders[kind](kernel, source position, node
    positions by field, chain length)``), when the binder can make one."""
    if entry.fast is not None or entry.tries >= _FAST_TRIES or len(entry.kernels) != 1:
        return
    entry.tries += 1
    binder = binders.get(kernels[0].kind)
    if binder is None:
        entry.tries = _FAST_TRIES
        return
    _, src, lists = entry.kernels[0]
    fast = binder(kernels[0], src, lists, len(seq))
    if fast is not None:
        entry.fast = fast


def _seen_before(key: tuple) -> bool:
    """Whether ``key`` was planned before: a plan is cached on its second sighting only.

    A chain with a random non-elementwise op (a drawn angle) is a new key on every output; it
    would fill the cache with plans nobody replays. Only the hashes of recent keys are kept.
    """
    h = hash(key)
    with _lock:
        if h in _seen:
            return True
        _seen[h] = None
        if len(_seen) > _SEEN_MAX:
            _seen.pop(next(iter(_seen)))
    return False


def clear() -> None:
    """Forget every cached plan (tests)."""
    _forget()
    for k in stats:
        stats[k] = 0


def _forget() -> None:
    with _lock:
        _cache.clear()
        _seen.clear()
        _last.clear()


# replay launches are bound to the kernel variants the settings chose: re-read, plan again
config.on_refresh(_forget)
