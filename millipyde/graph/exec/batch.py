"""Materialize many same-structure outputs with one launch per kernel.

A Generator makes its outputs from a few same-shape inputs through the same Operations; only
the random parameters and the probability coins differ. ``materialize_batch`` plans each output
as usual (``schedule.plan``), groups the outputs whose plans have the same structure (kernel
kinds, gather signatures, shapes and dtypes at every step), and runs each group's kernels once
for all its members: per-member parameters (LUTs, parameter rows, taps) are stacked, outputs
are (M, h, w, c) batch buffers, and each member's node is settled with a view of its slice.
The kernels are the per-image kernels' body text with an image index (``codegen_batch``), so
values are bit-identical to ``execute.materialize``.

Probability gates do not split a batch: a Generator records an Operation whose coin said skip
as if it ran, its nodes marked ``gated_off`` (:func:`record_gated_off`), wherever that op
has an exact identity form inside the batched kernels: a table stage without it (uint8), a
per-member flag that skips the call (other chained ops) or the sampler's blend, an unchanged
index map, a stencil radius of -1 (a copy). Outputs that differ only in their coins then plan
alike and share one group; a member that runs alone has its gated-off nodes dropped first.

Every per-member array of a whole call travels in one upload (``Pack``): on GPUs each upload
and launch costs host time that per-image work cannot hide.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from ... import config, devices, faults
from ...backend import ACTIVE as runtime  # the active backend: buffers, copies, launches
from ...kernels import REGISTRY, OpSpec
from ...kernels.registry import BlockCodec, Window
from ..codegen.gather_sig import extras_offset
from ..ir.node import Node
from ..plan.schedule import Gather, full_range, plan
from . import execute, gather, tables
from .batch_group import (  # noqa: F401
    Group,
    Member,
    Pack,
    as4,
    gather_fn,
    launch,  # noqa: F401  (re-exported: batch_arena, batches)
    tables_of,
)
from .batch_stencil import stencil_gpu as _stencil_gpu  # noqa: F401  (re-exported: probes)

#: Outputs a Generator makes per batch (``MILLIPYDE_GENERATOR_BATCH``; 1 turns batches off).
BATCH = 64
#: Batched Generators record gated-off Operations as per-member identities (one group for all
#: coin patterns); False records nothing for them, as per-output work does (tests compare).
LIFT_GATES = True
# Bound on one batch's float64-sized working set (stencil temporaries are float64): large
# images get smaller batches.
BATCH_BYTES = 1 << 30


def analyse(node: Node, index: int, stacks: dict) -> tuple[tuple, Member] | None:
    """The group key and member record of ``node``, or None when it must run unbatched."""
    ks = plan(node, stencil_tables=False)
    if not ks:
        return None
    first = ks[0].source
    # gated-off nodes never ran per output: they are no fault points either
    names = [n.name for k in ks for n in k.nodes if not n.gated_off]
    if ks[0].kind == "copy" and len(ks) > 1 and ks[1].source is ks[0].output:
        # a copy of a stacked input that the next kernel reads: read the stack instead
        ks = ks[1:]
    entry = stacks.get(first.id)
    if entry is None:
        return None
    stack, sidx = entry
    member = Member(index, node, ks, int(sidx), stack, names)
    key: list[Any] = [id(stack), node.device]
    for i, k in enumerate(ks):
        if i and k.source is not ks[i - 1].output:
            return None
        src, out = k.source, k.output
        shapes = (as4(src.shape), as4(out.shape), src.dtype.str, out.dtype.str)
        if k.kind == "gather" and isinstance(k, Gather):
            # every gather kind batches (codegen_batch uses the per-image body of any kind);
            # a per-image statistic (adjust_contrast) plans a Stat kernel: per output. A
            # warp clip's bounds are measured on the device at launch (batch_group)
            sig, *args = _gather_member_args(k)
            member.args.append(tuple(args))
            key.append(("gather", sig, *shapes))
        elif k.kind == "stencil":
            if out.gated_off:
                member.args.append(None)
            else:
                taps = REGISTRY[out.op.name].fn(*out.params)
                if isinstance(taps, (Window, BlockCodec)):
                    return None  # (the window and codec passes run per output)
                taps = np.asarray(taps, dtype=np.float64)
                if taps.ndim != 1 or len(taps) % 2 != 1:
                    return None
                member.args.append(taps)
            key.append(("stencil", *shapes))
        else:
            return None
    return tuple(key), member


def _gather_member_args(k: Gather) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray | None]:
    """``gather.gather_args`` of ``k`` for one member, and its gate flags (None: no flag set).

    Gated-off nodes keep the kernel's signature (so every coin pattern shares it) but not
    their effect: index maps already left the matrices alone (``Gather.add``), uint8 tables
    (where the batch builds them: ``tables_of``) are rebuilt from the ops that ran, other
    chained ops (inlined uint8 chains too) and a sampler get a flag.
    """
    use_tables = tables_of(k)
    if k.clip_check:
        # the bounds are measured at launch (batch_group.clip_bounds): no reduction of an
        # intermediate here; the clip slots stay -inf / +inf until then
        k = copy.copy(k)
        k.__dict__.pop("_memo", None)
        k.clip_check = False
        sig, lut, p = gather.gather_args(k, use_tables)
        sig = dataclasses.replace(sig, clip=True)
    else:
        sig, lut, p = gather.gather_args(k, use_tables)
    if not any(n.gated_off for n in k.nodes):
        return sig, lut, p, None
    c, full = k.channels, full_range(k.source.dtype)
    if use_tables and any(n.gated_off for n in k.pre + k.post):
        lut = tables.IDENTITY_LUT[:, :c].copy()  # a stage left without ops: identity table
        for stage, ops in enumerate((k.pre, k.post)):
            ran = [n for n in ops if not n.gated_off]
            if ran:
                lut[stage] = tables.build_lut(ran, c, full)
        if sig.bounded and k.pre:
            # a fused pad's fill goes through the first table (``gather.gather_args``): through
            # the ops that ran, not the template's full table
            e = extras_offset(sig)
            p = p.copy()
            p[e + 4:e + 4 + c] = lut[0, np.arange(c), int(k.fill)]  # after the window
    chained = ([] if use_tables else k.pre + k.post) + k.grey_ops
    flags = [n.gated_off for n in chained]
    flags.append(any(n.gated_off and n.op.kind == "sampler" for n in k.nodes))
    return sig, lut, p, np.array(flags, dtype=np.float64) if any(flags) else None


def _check_faults(member: Member, device: int) -> None:
    # the fault points execute.run_kernel checks, per member and in its order (tests count on
    # the n-th check failing the same output as without batches)
    for name in member.names:
        faults.check(f"op:{name}", device)


def materialize_batch(handles: list[Any], stacks: dict[int, tuple[Any, int]]) -> list:
    """Compute the pending values of ``handles``, batching outputs of the same structure.

    Parameters
    ----------
    handles : list of gpuarray
        Arrays with pending work, each a copy of a stacked input followed by recorded ops.
    stacks : dict
        Source leaf node id -> ``(stack, index)``: a stacked buffer (S, H, W[, C]) on the
        handles' device holding that node's value at ``stack[index]``.

    Returns
    -------
    list of Exception or None
        Per handle, the error that stopped it (its value is then not stored), else None.

    Notes
    -----
    Handles that cannot be batched (a plan starting elsewhere than a stacked value, a sampler
    that needs scikit-image's data-dependent clip, device moves, NumPy expressions) run
    through ``execute.materialize``. Fault points are checked per handle, in order.
    """
    errors: list[Exception | None] = [None] * len(handles)
    groups: dict[tuple, Group] = {}
    for i, x in enumerate(handles):
        node = x._node
        try:
            if node.materialized:
                continue
            got = analyse(node, i, stacks)
            if got is None:
                _materialize_alone(node)
                continue
            key, member = got
            _check_faults(member, node.device)
        except Exception as err:
            errors[i] = err
            continue
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(key, member.stack, node.device)
        g.members.append(member)
    # one upload per device for every group's per-member arrays
    packs: dict[int, Pack] = {}
    for g in groups.values():
        g.pack(packs.setdefault(g.device, Pack()))
    for dev, pk in packs.items():
        try:
            pk.upload(dev)
        except Exception as err:
            for g in groups.values():
                if g.device == dev:
                    for m in g.members:
                        errors[m.index] = err
                    g.members = []
    for g in groups.values():
        if not g.members:
            continue
        try:
            with runtime.on_device(g.device):
                g.run(packs[g.device])
        except Exception as err:
            for m in g.members:
                if not m.node.materialized:
                    errors[m.index] = err
    return errors


def _materialize_alone(node: Node) -> None:
    """``execute.materialize`` of ``node`` as if its gated-off nodes had never been recorded."""
    alone = _without_gated_off(node)
    execute.materialize(alone)
    if alone is not node:
        with node.lock:
            if not node.materialized:
                node.settle(alone.buffer)


def _without_gated_off(node: Node) -> Node:
    """``node``'s pending graph re-recorded without its gated-off nodes (``node`` if none).

    The replaced nodes are disconnected from their inputs, so use counts (which decide what
    fuses) are those of a graph recorded without them.
    """
    memo: dict[int, Node] = {}
    replaced: list[Node] = []

    def rebuild(n: Node) -> Node:
        if n.materialized:
            return n
        got = memo.get(n.id)
        if got is not None:
            return got
        ins = [rebuild(i) for i in n.inputs]
        if n.gated_off:
            r = ins[0]
        elif all(a is b for a, b in zip(ins, n.inputs, strict=True)):
            r = n
        else:
            r = Node(n.op, tuple(ins), n.params, n.shape, n.dtype, n.device, label=n.label)
        if r is not n:
            replaced.append(n)
        memo[n.id] = r
        return r

    out = rebuild(node)
    for n in replaced:
        for i in n.inputs:
            i.users -= 1
        n.inputs = ()
    return out


def drop_gated_off(x: Any) -> None:
    """Rebind the array ``x`` to its value without gated-off nodes (before anything reads it)."""
    node = _without_gated_off(x._node)
    if node is not x._node:
        x._bind(node)


def _identity_form(n: Node) -> bool:
    """Whether ``n`` can be recorded gated off: the batched kernels then leave its input's
    value exactly as if ``n`` were not there."""
    spec = n.op
    if not isinstance(spec, OpSpec) or len(n.inputs) != 1 or n.materialized:
        return False
    src = n.inputs[0]
    if n.shape != src.shape or n.dtype != src.dtype:
        return False  # a transpose of a non-square image, a grey conversion
    if spec.kind in ("elementwise", "index_map", "sampler"):
        return True
    # a stencil cuts the fused kernel there, storing its input in the image dtype: exact where
    # the fused kernel holds that same value (integers are rounded after each op, uint8
    # tables, float64), not for narrower floats
    return spec.kind == "stencil" and (n.dtype.kind in "ui" or n.dtype == np.float64)


def record_gated_off(x: Any, record: Any) -> bool:
    """Run ``record()`` (which records an Operation on ``x``) and mark what it recorded as
    gated off, if every recorded node has an identity form; else undo the recording.

    Returns whether ``x`` now holds gated-off nodes. Errors of ``record`` undo it too: a
    skipped Operation must not fail.
    """
    old = x._node
    try:
        record()
        ok = True
    except Exception:
        ok = False
    new, chain = x._node, []
    n = new
    while n is not old and len(n.inputs) == 1 and not n.materialized:
        chain.append(n)
        n = n.inputs[0]
    ok = ok and n is old and all(_identity_form(m) for m in chain)
    if ok:
        for m in chain:
            m.gated_off = True
        return bool(chain)
    if new is not old:
        x._bind(old)
        for m in chain:  # drop what was recorded: the old value's use count as before
            for i in m.inputs:
                i.users -= 1
            m.inputs = ()
    return False


def batch_size(nodes: list[Node]) -> int:
    """Outputs per batch for a Generator over these input nodes (1: no batching).

    Batches need inputs of one shape and dtype, 2-D or 3-D (images): mixed inputs keep the
    per-output path.
    """
    n = config.generator_batch(BATCH)
    first = nodes[0]
    if len(first.shape) not in (2, 3) or any(
            x.shape != first.shape or x.dtype != first.dtype for x in nodes):
        return 1
    per = 8 * max(1, int(np.prod(first.shape, dtype=np.int64)))
    return max(1, min(n, BATCH_BYTES // per))


def stack_inputs(nodes: list[Node], device: int) -> dict[int, tuple[Any, int]]:
    """Copy the stored values of ``nodes`` into one (S, ...) buffer on ``device``.

    Returns the ``stacks`` mapping of :func:`materialize_batch`. Nodes not stored, or of
    another shape or dtype than the first, are left out (their outputs run unbatched).
    """
    first = nodes[0]
    keep: dict[int, Node] = {}
    for n in nodes:
        if n.materialized and n.shape == first.shape and n.dtype == first.dtype:
            keep.setdefault(n.id, n)
    if not keep:
        return {}
    stack = runtime.empty((len(keep), *first.shape), first.dtype, device)
    with runtime.on_device(device):
        for i, n in enumerate(keep.values()):
            buf = n.buffer
            if n.device != device:
                buf = runtime.copy(buf, device, n.device, devices.can_peer(n.device, device))
            buf = runtime.reshape(buf, first.shape)
            if runtime.caps.device_memory:
                stack[i].copy_to_device(buf, stream=runtime.current_stream())
            else:
                stack[i] = buf
    return {nid: (stack, i) for i, nid in enumerate(keep)}
