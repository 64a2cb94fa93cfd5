"""Materialize many same-structure outputs with one launch per kernel (DESIGN.md "Batches").

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

Every per-member array of a whole call travels in one upload (``_Pack``): on GPUs each upload
and launch costs host time that per-image work cannot hide.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import config, devices, faults
from ...backend import ACTIVE as runtime  # the active backend: buffers, copies, launches
from ...kernels import REGISTRY, OpSpec
from ..codegen import batch as codegen_batch
from ..codegen import batch_gather
from ..codegen import gather_sig as codegen
from ..codegen import gpu as codegen_gpu
from ..ir.node import Node
from ..plan import footprint
from ..plan.schedule import Gather, Kernel, full_range, plan
from . import execute, gather, stencil, tables, variants

# On the cpu backend the stencil step runs the per-image fused tiled kernel (codegen_cpu, the
# same values) member by member: it is several times faster there than the generic two-pass
# kernel and a CPU launch costs almost nothing. Tests turn this off to check the batched pass.
CPU_FUSED_STENCIL = True

#: Outputs a Generator makes per batch (``MILLIPYDE_GENERATOR_BATCH``; 1 turns batches off).
BATCH = 64
#: Batched Generators record gated-off Operations as per-member identities (one group for all
#: coin patterns); False records nothing for them, as per-output work does (tests compare).
LIFT_GATES = True
# Bound on one batch's float64-sized working set (stencil temporaries are float64): large
# images get smaller batches.
BATCH_BYTES = 1 << 30


@functools.cache
def _gather_fn(sig: Any, gates: bool, wide: bool = False):
    return codegen_batch.gather_batch_kernel(sig, runtime.codegen_target, runtime.simulated,
                                             gates, wide)


@functools.cache
def _stencil_fns():
    return codegen_batch.stencil_batch_kernels(runtime.codegen_target, runtime.simulated)


@functools.cache
def _stencil_tiled_fns(c: int, nc: int):
    return codegen_batch.stencil_tiled_batch_kernels(c, nc, runtime.simulated)


@functools.cache
def _stencil_2d_fn(c: int, nc: int, unsigned: bool,
                   geometry: tuple[int, int, int, int, int]):
    return codegen_batch.stencil_2d_batch_kernel(c, nc, runtime.simulated, unsigned, geometry)


class _Pack:
    """Host arrays laid out in one buffer, uploaded once, handed back as device views."""

    ALIGN = 16

    def __init__(self) -> None:
        self.parts: list[tuple[int, np.ndarray]] = []
        self.size = 0
        self.views: list[Any] = []

    def add(self, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array)
        self.parts.append((self.size, array))
        self.size += -(-max(array.nbytes, 1) // self.ALIGN) * self.ALIGN
        return len(self.parts) - 1

    def upload(self, device: int) -> None:
        host = np.zeros(max(self.size, self.ALIGN), dtype=np.uint8)
        for off, a in self.parts:
            host[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
        buf = runtime.from_host(host, device)
        self.views = [runtime.part(buf, off, a.dtype, a.shape) if a.size
                      else runtime.empty(a.shape, a.dtype, device) for off, a in self.parts]

    def __getitem__(self, slot: int) -> Any:
        return self.views[slot]


@dataclass
class _Member:
    """One output: its handle, its kernels (in order) and what they need per member."""

    index: int
    node: Node
    kernels: list[Kernel]
    sidx: int
    stack: Any
    names: list[str]  # op names of every planned kernel, in order (fault points)
    # per kernel: (lut, p, gate flags or None) or taps (None: the stencil is gated off)
    args: list[Any] = field(default_factory=list)


def _as4(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape) if len(shape) == 3 else (*shape, 1)


def _analyse(node: Node, index: int, stacks: dict) -> tuple[tuple, _Member] | None:
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
    member = _Member(index, node, ks, int(sidx), stack, names)
    key: list[Any] = [id(stack), node.device]
    for i, k in enumerate(ks):
        if i and k.source is not ks[i - 1].output:
            return None
        src, out = k.source, k.output
        shapes = (_as4(src.shape), _as4(out.shape), src.dtype.str, out.dtype.str)
        if k.kind == "gather" and isinstance(k, Gather) and not k.clip_check:
            # every gather kind batches (codegen_batch uses the per-image body of any kind);
            # a per-image statistic (adjust_contrast) plans a Stat kernel: per output
            sig, *args = _gather_member_args(k)
            member.args.append(tuple(args))
            key.append(("gather", sig, *shapes))
        elif k.kind == "stencil":
            if out.gated_off:
                member.args.append(None)
            else:
                taps = np.asarray(REGISTRY[out.op.name].fn(*out.params), dtype=np.float64)
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
    are rebuilt from the ops that ran, other chained ops and a sampler get a flag.
    """
    sig, lut, p = gather.gather_args(k)
    if not any(n.gated_off for n in k.nodes):
        return sig, lut, p, None
    c, full = k.channels, full_range(k.source.dtype)
    if k.lut_mode and any(n.gated_off for n in k.pre + k.post):
        lut = tables.IDENTITY_LUT[:, :c].copy()  # a stage left without ops: identity table
        for stage, ops in enumerate((k.pre, k.post)):
            ran = [n for n in ops if not n.gated_off]
            if ran:
                lut[stage] = tables.build_lut(ran, c, full)
    chained = ([] if k.lut_mode else k.pre + k.post) + k.grey_ops
    flags = [n.gated_off for n in chained]
    flags.append(any(n.gated_off and n.op.kind == "sampler" for n in k.nodes))
    return sig, lut, p, np.array(flags, dtype=np.float64) if any(flags) else None


def _check_faults(member: _Member, device: int) -> None:
    # the fault points execute.run_kernel checks, per member and in its order (tests count on
    # the n-th check failing the same output as without batches)
    for name in member.names:
        faults.check(f"op:{name}", device)


#: Blocks a batched launch aims at: several waves of 256-thread blocks on a 132-SM GPU.
_TARGET_BLOCKS = 2048


def _launch(kernel: Any, nb: int, h: int, w: int, device: int, *args: Any) -> None:
    """Run a batched kernel over ``nb`` images of ``h`` x ``w`` (grid z = images on GPUs)."""
    if nb == 0 or h == 0 or w == 0:
        return
    if not runtime.caps.grid_launches:
        runtime.launch_2d(kernel, h, w, device, *args)
        return
    if runtime.simulated:
        block = (min(8, w), min(4, h), 1)
    else:
        block = (32, 8, 1)
    gx, gz = min(-(-w // block[0]), 65535), min(nb, 65535)
    # Rows stride over the grid (the kernels loop): only enough blocks in y to fill the GPU,
    # so each thread runs its image's prologue (parameters, index map, gates) once for many
    # rows instead of once per pixel.
    gy = max(1, min(-(-h // block[1]), -(-_TARGET_BLOCKS // (gx * gz)), 65535))
    runtime.launch_grid(kernel, (gx, gy, gz), block, device, *args)


class _Group:
    """Members of one structure: their stacked arguments and the launches that make them."""

    def __init__(self, key: tuple, stack: Any, device: int) -> None:
        self.key = key
        self.stack = stack
        self.device = device
        self.members: list[_Member] = []
        self.slots: list[Any] = []
        self.gated: list[bool] = []  # per kernel: a gather that reads gate flags

    def pack(self, pk: _Pack) -> None:
        ms = self.members
        self.slots = [pk.add(np.array([m.sidx for m in ms], dtype=np.int64)),
                      pk.add(np.arange(len(ms), dtype=np.int64))]
        self.gated = []
        for i, k in enumerate(ms[0].kernels):
            if k.kind == "gather":
                lut = np.stack([m.args[i][0] for m in ms]) if k.lut_mode else \
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

    def run(self, pk: _Pack) -> None:
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

    def taps_host(self, i: int) -> list[Any]:
        """Per member, the taps of stencil kernel ``i`` (None: gated off)."""
        return [m.args[i] for m in self.members]

    def radius(self, i: int) -> int:
        """The largest radius of stencil kernel ``i``'s taps over the members."""
        return max((len(t) for t in self.taps_host(i) if t is not None), default=1) // 2

    def launch(self, pk: _Pack, fused: Any = None) -> Any:
        """Run the group's kernels; the last one's (M, ...) batch buffer, member m at m.

        ``fused(sig, gated, src, sidx, lut, p)``, when given and the last kernel is a gather,
        launches instead of it (a gather that writes elsewhere); None is then returned.
        """
        dev = self.device
        kernels = self.kernels()
        sidx_h = self.sidx_host()
        nb = len(sidx_h)
        src = runtime.reshape(self.stack, (self.stack.shape[0], *_as4(self.stack.shape[1:])))
        sidx = pk[self.slots[0]]
        out = None
        for i, k in enumerate(kernels):
            if fused is not None and k.kind == "gather" and i == len(kernels) - 1:
                a, b = self.slots[2 + i]
                fused(self.key[2 + i][1], self.gated[i], src, sidx, pk[a], pk[b])
                return None
            node = k.output
            out = runtime.empty((nb, *node.shape), node.dtype, dev)
            dst = runtime.reshape(out, (nb, *_as4(node.shape)))
            a, b = self.slots[2 + i]
            h, w, c = dst.shape[1:]
            if k.kind == "gather":
                sig = self.key[2 + i][1]
                args, wide = batch_gather.launch_args(sig, self.gated[i], src, sidx, pk[a],
                                                      pk[b], (h, w), runtime.flat)
                _launch(_gather_fn(sig, self.gated[i], wide), nb, h, w, dev, *args,
                        runtime.flat(dst))
            elif not runtime.caps.shared_memory and CPU_FUSED_STENCIL:
                _stencil_cpu(node, [src[j] for j in sidx_h], dst, self.taps_host(i), dev)
            else:
                _stencil_gpu(node, src, sidx, dst, pk[a], pk[b], self.radius(i), dev)
            # later kernels read this kernel's batch buffer, member m at index m
            src, sidx, sidx_h = dst, pk[self.slots[1]], range(nb)
        return out


def _stencil_gpu(n: Node, src: Any, sidx: Any, dst: Any, taps: Any, rad: Any, rmax: int,
                 device: int) -> None:
    """Both separable passes over a batch: one-pass 2-D tiles or two tiled passes on real GPUs
    (as ``execute``), else the generic passes."""
    nb, h, w, c = dst.shape
    nc = min(c, 3)
    is_int, full = n.dtype.kind in "ui", full_range(n.dtype)
    if variants.stencil_2d_fits(rmax) and 0 < nb <= 65535 and h > 0 and w > 0 and \
            variants.stencil_2d_reads(src, dst.shape[1:]):
        # the tile run_stencil_2d takes for this radius (taller where its shared memory fits)
        geometry = codegen_gpu.tile_geometry(runtime.simulated, rmax, False,
                                             runtime.SHARED_DEFAULT)
        fn = _stencil_2d_fn(c, nc, codegen_gpu.unsigned_source(src.dtype), geometry)
        runtime.launch_grid(fn, (*codegen_gpu.tile_grid(h, w, geometry), nb),
                            geometry[:2], device, runtime.flat(src), sidx, runtime.flat(dst),
                            h, w, taps, rad, is_int, full,
                            runtime.upload_small(tables.IDENTITY_LUT[:, :c].copy(), device),
                            runtime.upload_small(footprint.full_spans(
                                h, w, codegen_gpu.tile_size(geometry)[0]), device),
                            shared=codegen_gpu.tile_shared_bytes(rmax, geometry))
        return
    tmp = runtime.empty((nb, h, w, nc), np.float64, device)
    rb, cb = codegen_gpu.ROWS_BLOCK, codegen_gpu.COLS_BLOCK
    shared = (codegen_gpu.rows_shared_bytes(rb, nc, rmax),
              codegen_gpu.cols_shared_bytes(cb, rmax))
    if variants.gpu_variants_enabled() and max(shared) <= runtime.SHARED_DEFAULT and \
            0 < nb <= 65535 and h > 0 and w > 0:
        rows, cols = _stencil_tiled_fns(c, nc)
        sw = codegen_gpu.rows_segment_width(rb[0], rmax)
        runtime.launch_grid(rows, (*codegen_gpu.rows_grid(h, w, rb), nb), rb, device,
                            src, sidx, tmp, taps, rad, sw, shared=shared[0])
        runtime.launch_grid(cols, (*codegen_gpu.cols_grid(h, w, c, cb), nb), cb, device,
                            src, sidx, tmp, dst, taps, rad, is_int, full, shared=shared[1])
        return
    rows, cols = _stencil_fns()
    _launch(rows, nb, h, w * nc, device, src, sidx, tmp, taps, rad, nc)
    _launch(cols, nb, h, w * c, device, src, sidx, tmp, dst, taps, rad, nc, is_int, full)


def _stencil_cpu(n: Node, srcs: list[Any], dst: Any, taps: list[np.ndarray | None],
                 device: int) -> None:
    """The cpu backend's fused per-image stencil (``execute``'s), one call per member; a
    member whose stencil is gated off (taps None) is copied."""
    fn, tiles = stencil._stencil_cpu_fn()
    h, w, c = dst.shape[1:]
    nc = min(c, 3)
    for m, src in enumerate(srcs):
        if taps[m] is None:
            np.copyto(dst[m], src)
            continue
        band, strip = tiles(h, w, nc, len(taps[m]))
        runtime.launch_2d(fn, h, w, device, src, dst[m], taps[m], nc, n.dtype.kind in "ui",
                          full_range(n.dtype), band, strip, tables.IDENTITY_LUT)


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
    groups: dict[tuple, _Group] = {}
    for i, x in enumerate(handles):
        node = x._node
        try:
            if node.materialized:
                continue
            got = _analyse(node, i, stacks)
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
            g = groups[key] = _Group(key, member.stack, node.device)
        g.members.append(member)
    # one upload per device for every group's per-member arrays
    packs: dict[int, _Pack] = {}
    for g in groups.values():
        g.pack(packs.setdefault(g.device, _Pack()))
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
