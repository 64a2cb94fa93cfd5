"""A batched group's launches (``graph.exec.batch``): members of one structure, their stacked
arguments in one upload (``Pack``), one launch per kernel for all of them.

A gather whose sampler needs scikit-image's data-dependent warp clip (``GatherSig.clip``) gets
its members' bounds from a batched reduction over what it reads (``codegen.batch_bounds``),
written into their parameter rows on the device right before it runs: the clip is data, not a
reason to leave the batch, and nothing waits for the device.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime  # the active backend: buffers, copies, launches
from ..codegen import batch as codegen_batch
from ..codegen import batch_bounds as codegen_bounds
from ..codegen import batch_gather, batch_perm, batch_tables
from ..codegen import gather_sig as codegen
from ..ir.node import Node
from ..plan.schedule import Kernel
from . import batch_stencil, gather
from .batch_launch import launch


def _empty(shape: tuple[int, ...], dtype: Any, device: int) -> Any:
    """A batch buffer (the pool's allocator of its layout on backends that have one)."""
    make = getattr(runtime, "empty_batched", None)
    return runtime.empty(shape, dtype, device) if make is None else make(shape, dtype, device)


@functools.cache
def gather_fn(sig: Any, gates: bool, wide: bool = False, tabled: bool = False):
    """The batched gather kernel of ``sig`` for the active backend, compiled once.

    Parameters
    ----------
    sig : GatherSig
        The gather.
    gates : bool
        Members' ops gated on and off by their parameter rows.
    wide : bool, optional
        64-bit offsets.
    tabled : bool, optional
        Through per-block tables (``codegen.batch_tables.tabled`` says where).

    Returns
    -------
    Any
        The kernel ``codegen.batch.gather_batch_kernel`` makes.
    """
    return codegen_batch.gather_batch_kernel(sig, runtime.codegen_target, runtime.simulated,
                                             gates, wide, tabled)


@functools.cache
def _axis_fn(sig: Any, gates: bool):
    return batch_gather.gather_axis_kernel(sig, runtime.codegen_target, runtime.simulated, gates)


def tables_of(k: Any) -> bool:
    """Whether a batch gives gather ``k``'s uint8 elementwise chains per-member tables.

    As per image (``gather.tables_inline``): on device backends an image of up to
    ``INLINE_TABLE_MAX_PIXELS`` runs its chain per pixel from the members' scalars in their
    parameter rows, so no table is built on the host or uploaded per member (a batch of 256
    held ~400 KB of them); the values are the tables' (the same scalar functions, rounded
    after each op).
    """
    return k.lut_mode and not gather.tables_inline(k)


def _bounds_threads() -> int:
    # The one-block kernel (members too small to split, SPLIT_BOUNDS off) scans a member's
    # whole image in one block: as large as blocks go. The simulator runs a thread per Python
    # thread: a small block there.
    return 32 if runtime.simulated else 1024


#: Whether GPU bounds spread each member over several blocks (``codegen.batch_bounds``'s split
#: form; its bounds are the one-block kernel's); benchmarks turn it off to compare.
SPLIT_BOUNDS = True


def _split_threads() -> int:
    # a member's image over many blocks: blocks of 256 threads fill the SMs' slots in any mix
    return 32 if runtime.simulated else 256


@functools.cache
def _bounds_fn():
    return codegen_bounds.bounds_kernel(runtime.codegen_target, runtime.simulated,
                                        _bounds_threads())


@functools.cache
def _split_fns() -> tuple:
    return codegen_bounds.split_kernels(runtime.codegen_target, runtime.simulated,
                                        _split_threads())


def _launch_1d(fn: Any, blocks: int, threads: int, device: int, args: tuple) -> None:
    direct = getattr(runtime, "launch_batched", None)
    if direct is None or not runtime.fast_launch or not direct(fn, (blocks, 1, 1),
                                                              (threads, 1, 1), device, args):
        runtime.launch_blocks(fn, blocks, threads, device, *args)


def clip_bounds(src: Any, sidx: Any, p: Any, nb: int, device: int) -> None:
    """Write each member's warp-clip bounds (from ``src[sidx[b]]``) into ``p[b]``'s clip slots."""
    if nb == 0:
        return
    n = 1
    for d in src.shape[1:]:
        n *= int(d)
    flat = runtime.reshape(src, (src.shape[0], n))
    sim = runtime.simulated
    parts = codegen_bounds.parts_of(n, _split_threads(), sim)
    if SPLIT_BOUNDS and runtime.codegen_target != "cpu" and parts > 1:
        # each member over ``parts`` blocks, then one block per member reduces their triples
        # (the scratch is stream-ordered: the pool hands it out again only after both ran)
        partial, finish = _split_fns()
        part = _empty((nb * parts * 3,), np.float64, device)
        _launch_1d(partial, nb * parts, _split_threads(), device, (flat, sidx, part, parts))
        _launch_1d(finish, nb, codegen_bounds.parts_max(sim), device,
                   (part, p, codegen.CLIP_OFF, parts))
        return
    _launch_1d(_bounds_fn(), nb, _bounds_threads(), device, (flat, sidx, p, codegen.CLIP_OFF))


class Pack:
    """Host arrays laid out in one buffer, uploaded once, handed back as device views.

    Arrays that are the same every batch (a group key's one shared table, the members'
    0, 1, 2, ...) are :meth:`constant` slots instead: their device copies are made once per
    device and kept by their owner, not copied into every batch's pack.
    """

    ALIGN = 16

    def __init__(self, members: int = 0) -> None:
        # offset and array; a constant: -1 and (array, where its device copies are kept)
        self.parts: list[tuple[int, Any]] = []
        self.size = 0
        self.views: list[Any] = []
        # one 0, 1, 2, ... for every group of up to ``members`` (kernels read its first nb)
        self._arange = self.constant(*_arange(members)) if members else None
        self._members = members

    def arange(self, n: int) -> int:
        """The slot of an int64 array whose first ``n`` entries are 0 .. n - 1."""
        if self._arange is not None and n <= self._members:
            return self._arange
        return self.add(np.arange(n, dtype=np.int64))

    def add(self, array: np.ndarray) -> int:
        # (columns of a wider array, ``batch_fill.RowsFill``, are copied as they are into
        # the upload: ``staging.put``)
        if type(array) is not np.ndarray:  # (a claim's arrays are: no call for them)
            array = np.asarray(array)
        self.parts.append((self.size, array))
        self.size += -(-(array.nbytes or 1) // self.ALIGN) * self.ALIGN
        return len(self.parts) - 1

    def constant(self, array: np.ndarray, held: Any) -> int:
        """The slot of ``array``, a value that does not change: its device copy is
        ``held[device]`` (a dict its owner keeps, made here on first use), or
        ``runtime.constant(held, ...)`` where ``held`` is a key (the backend keeps it;
        ``array`` may then be a function that makes it, called only when the copy is made)."""
        self.parts.append((-1, (array, held)))
        return len(self.parts) - 1

    def upload(self, device: int) -> None:
        # (the alignment gaps between parts are never read: left as they are)
        packed = [(off, a) for off, a in self.parts if off >= 0]
        # one copy (pinned and asynchronous on GPUs, the parts written straight into the
        # pinned slot: the worker does not wait for the stream to reach it, so the previous
        # batch's kernels still run while it launches)
        views = runtime.upload_parts(packed, max(self.size, self.ALIGN), device)
        if len(packed) < len(self.parts):
            it = iter(views)
            views = [next(it) if off >= 0 else _constant(*a, device) for off, a in self.parts]
        self.views = views

    def __getitem__(self, slot: int) -> Any:
        return self.views[slot]


def _constant(array: np.ndarray, held: Any, device: int) -> Any:
    """The device copy of a ``Pack.constant``.

    A held array's copy is the backend's constant of its contents (``runtime.constant``:
    complete before it returns, so any stream may read it; it waits for the device once
    per distinct contents in the process): a plan rebuilt, or another Generator's plan,
    with the same table finds it there without waiting for the device again (the queued
    batches' kernels: a ~5 ms stall of the worker)."""
    if not isinstance(held, dict):
        return runtime.constant(held, array, device)
    got = held.get(device)
    if got is None:
        a = np.ascontiguousarray(array)
        key = ("batch-pack-constant", a.dtype.str, a.shape, a.tobytes())
        with runtime.on_device(device):
            got = held[device] = runtime.constant(key, a, device)
    return got


def _arange(n: int) -> tuple[np.ndarray, tuple]:
    """0 .. n - 1 as int64 and its ``runtime.constant`` key (``Pack.constant``)."""
    return np.arange(n, dtype=np.int64), ("batch-pack-arange", n)


@dataclass
class Member:
    """One output: its handle, its kernels (in order) and what they need per member."""

    index: int
    node: Node
    kernels: list[Kernel]
    sidx: int
    stack: Any
    names: list[str]  # op names of every planned kernel, in order (fault points)
    # per kernel: (lut, p, gate flags or None) or taps (None: the stencil is gated off)
    args: list[Any] = field(default_factory=list)


def as4(shape: tuple[int, ...]) -> tuple[int, ...]:
    """An image's shape with its channel axis: (h, w) as (h, w, 1).

    Parameters
    ----------
    shape : tuple of int
        (h, w) or (h, w, c).

    Returns
    -------
    tuple of int
        (h, w, c).
    """
    return tuple(shape) if len(shape) == 3 else (*shape, 1)


class Group:
    """Members of one structure: their stacked arguments and the launches that make them."""

    def __init__(self, key: tuple, stack: Any, device: int) -> None:
        self.key = key
        self.stack = stack
        self.device = device
        self.members: list[Member] = []
        self.slots: list[Any] = []
        self.gated: list[bool] = []  # per kernel: a gather that reads gate flags
        # compiled kernels by (what, ...): looked up without hashing the signatures again
        self.memo: dict[Any, Any] = {}

    def rebound(self, stack: Any) -> Group:
        """A light copy of the group over another stack, nothing recorded or packed again.

        Parameters
        ----------
        stack : Any
            A stack of the group's stack's layout (None: none, a copy kept for later stacks).

        Returns
        -------
        Group
            The copy: its members' arguments, packed slots and memo shared with this group.
        """
        g = copy.copy(self)
        g.stack = stack
        return g

    def cached(self, key: Any, make: Any) -> Any:
        """``make()``, remembered under ``key`` for the group (and a recorded group's key)."""
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = make()
        return got

    def pack(self, pk: Pack) -> None:
        ms = self.members
        self.slots = [pk.add(np.array([m.sidx for m in ms], dtype=np.int64)),
                      pk.arange(len(ms))]
        self.gated = []
        for i, k in enumerate(ms[0].kernels):
            if k.kind == "gather":
                lut = np.stack([m.args[i][0] for m in ms]) if tables_of(k) else \
                    ms[0].args[i][0][None]
                p = np.stack([m.args[i][1] for m in ms])
                flags = [m.args[i][2] for m in ms]
                # the flagged kernel only where some member needs it: ungated groups keep theirs
                self.gated.append(any(f is not None for f in flags))
                if self.gated[-1]:
                    n = codegen.gather_ngates(self.key[2 + i][1])
                    p = np.concatenate([p, np.stack([np.zeros(n) if f is None else f
                                                     for f in flags])], axis=1)
                self.slots.append((pk.add(lut), pk.add(p)))
            else:
                self.gated.append(False)
                taps = [m.args[i] for m in ms]
                arr = np.zeros((len(ms), max((len(t) for t in taps if t is not None),
                                             default=1)))
                for j, t in enumerate(taps):
                    if t is not None:
                        arr[j, :len(t)] = t
                # radius -1: the stencil is gated off for that member and copies
                rad = np.array([-1 if t is None else len(t) // 2 for t in taps], dtype=np.int64)
                self.slots.append((pk.add(arr), pk.add(rad)))

    def pack_arrays(self, pk: Pack, sidx: np.ndarray, arrays: list[dict[str, Any]],
                    start: int = 0) -> None:
        """``pack``'s slots from stacked per-kernel arrays (``batch_groups.group_arrays``'
        dicts: ``lut``/``p``/``gated`` of a gather, ``taps``/``rad`` of a stencil).

        ``start`` > 0: the group runs from kernel ``start`` on (``launch(start=...)``, after
        a shared prefix that has its own arrays): its first kernels' arrays and its stack
        indices are not read, so not uploaded (their slots are None)."""
        self.slots = [pk.add(sidx) if not start else None, pk.arange(len(sidx))]
        self.gated = []
        for i, a in enumerate(arrays):
            if i < start:
                self.gated.append(a.get("gated", False))
                self.slots.append(None)
            elif "p" in a:
                self.gated.append(a["gated"])
                held = a.get("lut_held")  # (the plan's one table: a constant)
                lut = pk.add(a["lut"]) if held is None else pk.constant(a["lut"], held)
                self.slots.append((lut, pk.add(a["p"])))
            else:
                self.gated.append(False)
                self.slots.append((pk.add(a["taps"]), pk.add(a["rad"])))

    def run(self, pk: Pack) -> None:
        out = self.launch(pk)
        for member, view in zip(self.members, runtime.members(out), strict=True):
            with member.node.lock:
                if not member.node.materialized:
                    member.node.settle(view)

    # what launch reads of the members (a group made from arrays overrides these)
    def kernels(self) -> list[Kernel]:
        """The kernels every member runs."""
        return self.members[0].kernels

    def sidx_host(self) -> list[int]:
        """Per member, its source's index in the stack."""
        return [m.sidx for m in self.members]

    def size(self) -> int:
        """Members of the group."""
        return len(self.members)

    def taps_host(self, i: int) -> list[Any]:
        """Per member, the taps of stencil kernel ``i`` (None: gated off)."""
        return [m.args[i] for m in self.members]

    def radius(self, i: int) -> int:
        """The largest radius of stencil kernel ``i``'s taps over the members."""
        return max((len(t) for t in self.taps_host(i) if t is not None), default=1) // 2

    def _stack4(self) -> Any:
        """The stack as (S, H, W, C), made once per stack (kept in the group key's memo)."""
        return self.stack4_of(self.memo, self.stack)

    @staticmethod
    def stack4_of(memo: dict, stack: Any) -> Any:
        """``stack`` as (S, H, W, C), kept in ``memo`` while the stack is the same."""
        got = memo.get("stack4")
        if got is None or got[0] is not stack:
            got = memo["stack4"] = (stack, runtime.reshape(stack, (stack.shape[0],
                                                                   *as4(stack.shape[1:]))))
        return got[1]

    def launch(self, pk: Pack, fused: Any = None, start: int = 0, src: Any = None,
               sidx: Any = None, into: Any = None) -> Any:
        """Run the group's kernels; the last one's (M, ...) batch buffer, member m at m
        (``into``, where given: a C-contiguous buffer of that shape and dtype on the group's
        device, which the last kernel writes).

        ``fused(sig, gated, src, sidx, lut, p)``, when given and the last kernel is a gather,
        launches instead of it (a gather that writes elsewhere); None is then returned.
        ``start`` > 0: kernels ``start ..`` only, reading member m at ``src[sidx[m]]`` (a
        shared prefix's batch buffer, ``batch_prefix``), not the stack.
        """
        dev = self.device
        kernels = self.kernels()
        nb = self.size()
        views = pk.views  # (indexed directly: no call per view)
        if not start:
            src, sidx = self._stack4(), views[self.slots[0]]
        out = None
        for i in range(start, len(kernels)):
            k = kernels[i]
            a, b = self.slots[2 + i]
            if k.kind == "gather":
                sig = self.key[2 + i][1]
                if sig.clip:
                    clip_bounds(src, sidx, views[b], nb, dev)
                if fused is not None and i == len(kernels) - 1:
                    fused(sig, self.gated[i], src, sidx, views[a], views[b])
                    return None
            node = k.output
            if i == len(kernels) - 1:  # handed back: each member of its node's shape
                out = _empty((nb, *node.shape), node.dtype, dev) if into is None else into
                dst = runtime.reshape(out, (nb, *as4(node.shape)))
            else:  # read by the next kernel only
                dst = _empty((nb, *as4(node.shape)), node.dtype, dev)
            h, w, c = dst.shape[1:]
            if k.kind == "gather":
                gated = self.gated[i]
                args, wide = batch_gather.launch_args(sig, gated, src, sidx, views[a], views[b],
                                                      (h, w), runtime.flat, nb=nb)
                dflat = runtime.flat(dst)
                # whole pixels through a table: the words-and-tiles kernel where the buffers
                # are whole words (batch_perm), else the general gather; which one the
                # signature allows is worked out once per key and kernel (the source's dtype
                # is in the key)
                rkey = ("route", i, wide, batch_perm.ENABLED, batch_tables.TABLED)
                route = self.memo.get(rkey)
                if route is None:
                    target = runtime.codegen_target
                    route = self.memo[rkey] = (
                        not wide and batch_perm.applies(sig, target, src.dtype),
                        batch_gather.tabled(sig, target, src.dtype))
                words = batch_perm.launch_words(runtime, runtime.flat(src), dflat,
                                                int(src.shape[2]), w) if route[0] else None
                if words is not None:
                    fn = self.cached(("axis", i, gated),
                                     lambda s=sig, gt=gated: _axis_fn(s, gt))
                    launch(fn, nb, h, w, dev, *args, dflat, *words)
                else:
                    tab = route[1]
                    fn = self.cached(("gather", i, gated, wide, tab),
                                     lambda s=sig, gt=gated, wd=wide, tb=tab: gather_fn(
                                         s, gt, wd, tb))
                    launch(fn, nb, h, w, dev, *args, dflat)
            elif not runtime.caps.shared_memory and batch_stencil.CPU_FUSED_STENCIL:
                batch_stencil.stencil_cpu_batch(node, src, sidx, dst, views[a], views[b],
                                                self.radius(i), dev)
            else:
                batch_stencil.stencil_gpu(node, src, sidx, dst, views[a], views[b], self.radius(i),
                                          dev)
            # later kernels read this kernel's batch buffer, member m at index m
            src, sidx = dst, views[self.slots[1]]
        return out
