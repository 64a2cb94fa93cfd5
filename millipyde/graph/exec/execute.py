"""Run planned kernels: each kernel kind's runner, the stored sources it reads, private
intermediates, and ``materialize``, which plans a node and runs what it needs (or, for a
replayed one-kernel plan that learnt one, its replay launch: ``binds``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import devices, faults
from ...backend import ACTIVE as runtime  # the active backend: buffers, copies, launches
from ..ir.node import Node
from ..plan.schedule import Gather, Kernel, Stencil
from . import replay
from .tables import op_params

#: A kernel kind's runner: (kernel, its source's buffer, device, the private reader) to the
#: output buffer and whether it is partial (only the reader's footprint computed). Each kind's
#: module registers its own (``runs``); the package imports them all. Registered, not imported
#: here: the gather runner materializes reductions (the warp clip's bounds) through this driver.
Runner = Callable[[Kernel, Any, int, "Gather | None"], "tuple[Any, bool]"]
RUNNERS: dict[str, Runner] = {}
#: A kernel kind's binder: (a replayed kernel just run, its source's position in the chain,
#: its node fields' positions, the chain's length) to a replay launch of the plan, or None
#: (see ``replay.learn``).
Binder = Callable[[Kernel, int, "dict[str, tuple[int, ...]]", int], "replay.Fast | None"]
BINDERS: dict[str, Binder] = {}


def runs(*kinds: str) -> Callable[[Runner], Runner]:
    """Register the decorated function as the runner of kernels of ``kinds``."""
    def register(fn: Runner) -> Runner:
        for kind in kinds:
            RUNNERS[kind] = fn
        return fn
    return register


def binds(*kinds: str) -> Callable[[Binder], Binder]:
    """Register the decorated function as the binder of kernels of ``kinds``."""
    def register(fn: Binder) -> Binder:
        for kind in kinds:
            BINDERS[kind] = fn
        return fn
    return register


_UNSEEN = object()  # (no parameters seen yet: ``ReplayLaunch.last``)


class ReplayLaunch:
    """The replay launch of a one-kernel plan (``replay.learn``): the kernel's parameters are
    ``base`` with each chained op's slots (position in the chain, first slot, end) taken from
    the bound nodes, as ``gather._replayed_args`` does; ``bound`` is the launch the kind's
    runner kept (``Backend.bind_2d``), called with the source's buffer and those parameters."""

    __slots__ = ("bound", "src", "out", "base", "slots", "one", "last")

    def __init__(self, bound: Any, src: int, out: int, base: list[float],
                 slots: tuple[tuple[int, int, int], ...]) -> None:
        self.bound, self.src, self.out, self.base, self.slots = bound, src, out, base, slots
        self.one = slots[0] if len(slots) == 1 else None  # (one op's slots: the common case)
        # (that op's parameters, a tuple of numbers, and the launch's parameters made of them:
        # a repeat with the same tuple, a kept call's (``image.KEPT_CALLS``), takes them as
        # they are, as a tuple from its second sighting, so that the bound launch finds them
        # packed already; without slots, all the plan's own, made once)
        self.last: tuple = (_UNSEEN, None if slots else tuple(base))

    def __call__(self, seq: list[Node]) -> bool:
        if faults.ARMED:
            return False  # the general path checks each op's fault point
        one, last = self.one, self.last
        if one is not None and seq[one[0]].params is last[0]:
            p = last[1]  # (a repeat: the same parameters' tuple)
            if type(p) is list:  # (a second sighting: a tuple from now on)
                p = tuple(p)
                self.last = (last[0], p)
        elif not self.slots:
            p = last[1]
        else:
            p = self.base.copy()
            for pos, a, b in self.slots:
                n = seq[pos]
                ps = n.params
                m = len(ps)
                # ``op_params``: the parameters, then zeros (already in ``base``) up to the
                # slots
                if m <= b - a:
                    p[a:a + m] = map(float, ps)
                else:
                    p[a:b] = op_params(n)
            if one is not None:
                ps = seq[one[0]].params
                if type(ps) is tuple and len(ps) <= one[2] - one[1]:
                    self.last = (ps, p)  # (never changed: the launches read it)
        buf = self.bound(seq[self.src].buffer, p)
        if buf is None:
            return False  # a source of another layout: the general path picks its kernel
        seq[self.out].settle(buf)
        return True


class CopyLaunch:
    """The replay launch of a replayed same-device copy plan (``clone()``): the backend's
    bound copy (``Backend.bind_copy``) of the source's buffer, stored on the output node."""

    __slots__ = ("bound", "src", "out")

    def __init__(self, bound: Callable[[Any], Any], src: int, out: int) -> None:
        self.bound, self.src, self.out = bound, src, out

    def __call__(self, seq: list[Node]) -> bool:
        if faults.ARMED:
            return False  # the general path checks the op's fault point
        buf = self.bound(seq[self.src].buffer)
        if buf is None:
            return False  # not covered (another layout, another context): the general path
        seq[self.out].settle(buf)
        return True


def run_kernel(k: Kernel, private: dict[int, Any] | None = None,
               reader: Gather | None = None) -> None:
    """Launch one planned kernel and store its output node's value.

    With a ``reader`` (see ``private_reader``) a stencil may compute only what that gather
    reads; its output then goes into ``private`` (keyed by node id), never onto the node,
    and the reader takes it from there.
    """
    out = k.output
    if k.kind == "stat":
        # the reduction a fused op needs: a value for its parameters, no node stored
        RUNNERS["stat"](k, None, out.device, None)
        return
    with out.lock:
        if not out.materialized:
            _run_locked(k, out, {} if private is None else private, reader)


# Below this many output pixels a stencil computes everything: its launch is too short for
# skipped tiles to pay back the host time of working out which (~0.1 ms).
FOOTPRINT_MIN_PIXELS = 1 << 20


def private_reader(k: Kernel, later: list[Kernel], target: Node) -> Gather | None:
    """The gather right after stencil ``k`` when it is the only reader of ``k``'s output.

    Then the output is an intermediate nobody else can see: no other node reads it (``users``),
    it isn't the value asked for, no later kernel reads it, and the gather needs no global
    statistic of it (skimage's warp clip takes its minimum).
    """
    if not (isinstance(k, Stencil) and later and isinstance(later[0], Gather)):
        return None
    out, nxt = k.output, later[0]
    if out.shape[0] * out.shape[1] < FOOTPRINT_MIN_PIXELS:
        return None
    if out is target or nxt.source is not out or out.users != 1 or nxt.clip_check:
        return None
    if nxt.umap is not None or nxt.edge or nxt.guard:
        return None  # reads where no matrix says (footprint knows affine zero-fill maps)
    if any(out in (getattr(m, "leaves", None) or [m.source]) for m in later[1:]):
        return None
    return nxt


def _run_locked(k: Kernel, out: Node, private: dict[int, Any],
                reader: Gather | None) -> None:
    src = private.pop(k.source.id, None)
    if src is None:
        src = k.source.buffer
    device = out.device
    for n in k.nodes:
        faults.check(f"op:{n.name}", device)
    runner = RUNNERS.get(k.kind)
    if runner is None:  # pragma: no cover - plan() only makes registered kinds
        raise TypeError(f"unknown kernel kind {k.kind}")
    with runtime.on_device(device):
        buf, partial = runner(k, src, device, reader)
    if partial:
        # only the reader's footprint is computed: it must never be the node's value
        private[out.id] = buf
        return
    out.settle(buf)


@runs("copy", "move")
def _run_copy(k: Kernel, src: Any, device: int, reader: Gather | None) -> tuple[Any, bool]:
    return runtime.copy(src, device, k.source.device,
                        devices.can_peer(k.source.device, device)), False


@binds("copy")
def _bind_copy(k: Kernel, src: int, lists: dict[str, tuple[int, ...]], n: int
               ) -> CopyLaunch | None:
    if lists["nodes"][-1] != n - 1 or k.source.device != k.output.device:
        return None
    with runtime.on_device(k.output.device):  # (the bound copy keeps that context)
        bound = runtime.bind_copy(k.source.buffer, k.output.device)
    return None if bound is None else CopyLaunch(bound, src, n - 1)


def materialize(target: Node) -> Any:
    """Compute ``target`` (and what it needs) and return its buffer; a no-op when stored."""
    if target.buffer is not None:  # (``materialized``, without a call on the per-op path)
        return target.buffer
    with target.lock:
        if target.buffer is not None:
            return target.buffer
        # schedule.plan, or a cached plan of this chain's structure
        kernels, seq, entry = replay.resolve(target)
        if entry is None:
            _run_all(kernels, target)
        elif entry.fast is not None and entry.fast(seq):
            pass  # the replay launch stored the output
        else:
            kernels = replay.bind(entry, seq)
            _run_all(kernels, target)
            replay.learn(entry, kernels, seq, BINDERS)
    return target.buffer


def _run_all(kernels: list[Kernel], target: Node) -> None:
    private: dict[int, Any] = {}
    for i, k in enumerate(kernels):
        for src in getattr(k, "leaves", None) or [k.source]:
            if src.buffer is None and src.id not in private:
                materialize(src)
        run_kernel(k, private, private_reader(k, kernels[i + 1:], target))
