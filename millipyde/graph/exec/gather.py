"""Run a fused gather kernel: its signature, tables and parameter block from the planned nodes
(remembered across replays), the packed and RGBA-table variants, and the per-image statistics
some ops read (one reduction each, ``codegen.stat``)."""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any

import numpy as np

from ... import faults
from ...backend import ACTIVE as runtime
from ...backend.pool import stream_handle
from ...kernels.clip import warp_clip_bounds
from ...kernels.stats import STATISTICS, stat_channels
from ..codegen import gpu as codegen_gpu
from ..codegen.gather import gather_items, gather_kernel
from ..codegen.gather_sig import (
    A_OFF,
    BOUNDED_SLOTS,
    CLIP_HI_OFF,
    CLIP_OFF,
    FULL_OFF,
    MID_OFF,
    P_OFF,
    PROJECTIVE_SLOTS,
    GatherSig,
    gather_nparams,
    op_offsets,
    stat_width,
    tabled_fits,
)
from ..codegen.stat import CPU_CHUNKS, STAT_GRID, gather_stat_kernel
from ..ir.node import Node
from ..plan.schedule import Gather, Kernel, full_range
from . import execute, variants
from .tables import IDENTITY_LUT, STAT_ROWS, host_tables, identity_table, op_params, stat_row
from .variants import c_contiguous, words


@functools.cache
def _gather_fn(sig: GatherSig):
    return gather_kernel(sig, runtime.codegen_target, runtime.simulated)


@functools.cache
def _lut_rgba_fns():
    return codegen_gpu.lut_rgba_kernels(runtime.simulated)


def warp_clip(k: Gather) -> tuple[float, float]:
    """scikit-image's warp clip: the bounds (input minimum, maximum) that can bind, else -inf
    and +inf.

    Only kernels whose sampler reads the stored source ask (``Gather.clip_check``); the
    bounds are map-reduces over every channel, as ``np.min(image)`` in skimage, made bounds by
    ``kernels.clip.warp_clip_bounds`` (the batched kernels' reduction compiles the same).
    """
    if not k.clip_check or 0 in k.source.shape:
        return -np.inf, np.inf
    from ..ir.lazy import REDUCE

    def reduced(name: str) -> float:
        node = Node(REDUCE[name], (k.source,), (), (), k.source.dtype, k.source.device)
        return float(runtime.to_host(execute.materialize(node))[0])

    lo = reduced("min")
    return warp_clip_bounds(lo, reduced("max") if lo < 0 else lo)


def gather_args(k: Gather, tables: bool = True, gates: bool = False
                ) -> tuple[GatherSig, np.ndarray, np.ndarray]:
    """Signature, LUT array and parameter array of a fused gather kernel.

    ``tables=False``: uint8 elementwise chains are inlined (``"chain"`` mode, their scalars in
    the parameters) instead of folded into host-built tables (see ``tables_inline``).
    ``gates``: nodes recorded gated off (a policy's ops not drawn for this image) are left
    out of the tables and, when chained, flagged after the parameters (``GatherSig.gates``),
    so the kernel does not call them; without, the caller handles them (the batch paths).
    """
    lut_mode = k.lut_mode and tables
    memo = k.__dict__.get("_memo")  # shared by a replayed plan's kernels (replay._skeleton)
    got = None if memo is None else memo.get(tables)
    if got is not None:
        return _replayed_args(k, lut_mode, *got)
    c = k.channels
    full = full_range(k.source.dtype)
    names = lambda ns: tuple(n.op.name for n in ns)  # noqa: E731
    for node, prefix in k.stats:
        if node not in STAT_ROWS:
            STAT_ROWS[node] = statistic_row(prefix, node.op.stat)
    chained = ([] if lut_mode else k.pre + k.post) + k.grey_ops
    sig = GatherSig(
        cin=c,
        gates=gates and any(n.gated_off for n in chained),
        nearest=k.nearest,
        mode="lut" if lut_mode else "chain",
        is_int=k.source.dtype.kind in "ui",
        sampler=k.A is not None,
        grey=k.grey if k.phase == 2 else "",
        pre=() if lut_mode else names(k.pre),
        post=() if lut_mode else names(k.post),
        grey_ops=names(k.grey_ops),
        lut_stages=(bool(k.pre), bool(k.post)) if lut_mode else (False, False),
        clip=bool(k.clip_check),
        bounded=k.fill is not None,
        edge=k.edge,
        umap="" if k.umap is None else k.umap.op.name,
        guard=k.guard,
        projective=k.projective,
    )
    if lut_mode and (k.pre or k.post):
        ran = (lambda ns: [n for n in ns if not n.gated_off]) if gates else list  # noqa: E731
        lut = host_tables(ran(k.pre), ran(k.post), c, full)
    else:
        lut = IDENTITY_LUT[:, :c]
    offsets = op_offsets(names(chained))
    p = np.zeros(gather_nparams(sig))
    p[P_OFF:P_OFF + 6] = k.P[:2].ravel()
    if k.A is not None:
        p[A_OFF:A_OFF + 6] = k.A[:2].ravel()
        p[MID_OFF:MID_OFF + 2] = k.mid
    p[FULL_OFF] = full
    p[CLIP_OFF], p[CLIP_HI_OFF] = warp_clip(k)
    for i, n in enumerate(chained):
        p[offsets[i]:offsets[i + 1]] = op_params(n)
    e = offsets[-1]
    if sig.bounded:
        p[e:e + 4] = k.window or (0, 0) + tuple(k.source.shape[:2])
        fill = k.fill
        for ch in range(c):
            # uint8 tables apply to what is read: the fill goes through the first stage too
            p[e + 4 + ch] = lut[0, ch, int(fill)] if lut_mode and k.pre else fill
        e += BOUNDED_SLOTS
    if sig.projective:
        p[e:e + PROJECTIVE_SLOTS] = k.A[2]
        e += PROJECTIVE_SLOTS
    if k.umap is not None:
        p[e:e + k.umap.op.nparams] = [float(v) for v in k.umap.params]
    if sig.gates:  # one flag per chained op, then the sampler's (never gated here)
        p = np.concatenate([p, [float(n.gated_off) for n in chained], [0.0]])
    if memo is not None and _memoizable(k, lut_mode):
        memo[tables] = (sig, p.copy(), offsets)
    return sig, lut, p


def _memoizable(k: Gather, lut_mode: bool) -> bool:
    """Whether all but the chained ops' slots of ``k``'s parameters are fixed by its replay key.

    The key holds every node's op, shape and dtype, and the parameters of all but elementwise
    ops: the signature, the maps (P, A, mid) and ``full`` follow from it. Statistics, the warp
    clip (data), fills and user maps are left to the full computation, and so are host-built
    tables (made from the elementwise parameters).
    """
    return (not k.stats and not k.clip_check and k.umap is None and k.fill is None
            and not (lut_mode and (k.pre or k.post)))


def _replayed_args(k: Gather, lut_mode: bool, sig: GatherSig, base: np.ndarray,
                   offsets: list[int]) -> tuple[GatherSig, np.ndarray, np.ndarray]:
    """``gather_args`` of a replayed kernel: its plan's parameters with the chained ops' slots
    taken from the bound nodes."""
    p = base.copy()
    chained = ([] if lut_mode else k.pre + k.post) + k.grey_ops
    for i, n in enumerate(chained):
        p[offsets[i]:offsets[i + 1]] = op_params(n)
    return sig, IDENTITY_LUT[:, :sig.cin], p


@functools.cache
def _stat_fn(sig: GatherSig, stat_name: str):
    return gather_stat_kernel(sig, stat_name, runtime.codegen_target, runtime.simulated)


def stat_rows(k: Gather, lut_mode: bool) -> np.ndarray:
    """The statistic rows the chained ops of gather ``k`` read, end to end as its kernel's
    ``stat`` (``gather_sig.stat_layout``; uint8 tables hold the rest)."""
    chained = ([] if lut_mode else k.pre + k.post) + k.grey_ops
    first_grey = len(chained) - len(k.grey_ops)
    rows = [stat_row(n, stat_channels(k.channels, i >= first_grey and k.phase == 2))
            for i, n in enumerate(chained) if n.op.stat]
    return np.concatenate(rows) if rows else np.zeros(1)


def statistic_row(k: Gather, stat_name: str) -> np.ndarray:
    """Statistic ``stat_name`` (``kernels.stats``) of what gather ``k`` would store: one
    reduction kernel over ``k.source``, nothing stored; read back to the host (uint8 tables
    are built there) as the row the op reads."""
    sig, lut, p = gather_args(k, gates=True)
    stat = STATISTICS[stat_name]
    init = stat.init(stat_channels(k.channels, k.phase == 2))
    h, w = k.cur
    if h * w == 0:
        return init
    device = k.source.device
    p = np.concatenate([p, [h, w]])
    cpu = runtime.codegen_target == "cpu"
    with runtime.on_device(device):
        src = runtime.as_3d(k.source.buffer)
        # the CPU's chunks each fill a partial row, merged here; GPU threads merge into one
        acc = runtime.from_host(np.tile(init, (min(h, CPU_CHUNKS), 1)) if cpu else init,
                                device)
        args = [src, acc, runtime.upload_small(np.ascontiguousarray(lut), device)]
        if stat_width(sig):
            args.append(runtime.from_host(stat_rows(k, sig.mode == "lut"), device))
        params = tuple(p.tolist()) if runtime.codegen_target == "cuda" else (p,)
        grid = (h, w) if cpu else (min(h, STAT_GRID[0]), min(w, STAT_GRID[1]))
        runtime.launch_2d(_stat_fn(sig, stat_name), *grid, device, *args, *params)
        got = runtime.to_host(acc)
    return stat.merge(np.asarray(got).reshape(-1, len(init)))


def _rgba_lut_fast(sig: GatherSig, src: Any) -> bool:
    return (sig.plain and sig.mode == "lut" and sig.cin == 4 and not sig.sampler and not sig.grey
            and src.ndim == 3 and src.shape[2] == 4 and src.is_c_contiguous())


def _run_gather_rgba(k: Gather, src: Any, dst: Any, lut: np.ndarray, p: np.ndarray,
                     device: int) -> tuple:
    """uint8 RGBA, LUT and/or integer index map only: one uint32 load/store per pixel.

    Returns the launch: (kernel, grid, block, arguments, the views of source and output the
    first two arguments are).
    """
    flat, mapped = _lut_rgba_fns()
    use_lut = bool(k.pre)
    lut_d = runtime.upload_small(np.ascontiguousarray(lut), device)
    h, w = dst.shape[0], dst.shape[1]
    if tuple(src.shape) == tuple(dst.shape) and np.array_equal(p[:6], [1, 0, 0, 0, 1, 0]):
        blocks, threads = codegen_gpu.lut_launch(h * w, runtime.simulated)
        args = (*_flat_words(src, dst), lut_d, use_lut)
        runtime.launch_blocks(flat, blocks, threads, device, *args)
        return flat, (blocks,), (threads,), args, _flat_words
    grid, block = codegen_gpu.mapped_launch(h, w, runtime.simulated)
    args = (*_mapped_words(src, dst), lut_d, runtime.upload_small(p, device), use_lut)
    runtime.launch_grid(mapped, grid, block, device, *args)
    return mapped, grid, block, args, _mapped_words


#: ``memo["bound"]``'s third field for a launch whose table is made per call
TABLE = "table"


def _table_replayable(k: Gather, tables: bool) -> bool:
    """Whether the ``flat`` RGBA table kernel of ``k`` differs between replays only by its
    table, made from the chained elementwise ops' parameters alone (no statistic, fill,
    clip or user map)."""
    return (tables and k.lut_mode and bool(k.pre or k.post) and not k.stats
            and not k.clip_check and k.umap is None and k.fill is None and not k.grey_ops
            and not any(n.op.stat for n in k.pre + k.post))


_KEPT_LOCK = threading.Lock()


class TableLaunch:
    """The replay launch of a replayed ``flat`` RGBA table gather (above
    ``INLINE_TABLE_MAX_PIXELS``): per call the table is built on the host from the bound
    nodes, as ``gather_args`` builds it (``host_tables``), uploaded (``upload_small``: shared
    by content, on the launch's stream) and its address written into the kept launch.

    The tables of the last ``KEEP`` parameter sets are kept by (stream, parameters): a
    repeated one (a bench's fixed gamma) is neither built nor looked up by content again.
    """

    KEEP = 16
    __slots__ = ("bound", "src", "out", "pre", "post", "channels", "full", "device", "kept")

    def __init__(self, bound: Any, src: int, out: int, pre: tuple[int, ...],
                 post: tuple[int, ...], channels: int, full: float, device: int) -> None:
        self.bound, self.src, self.out, self.pre, self.post = bound, src, out, pre, post
        self.channels, self.full, self.device = channels, full, device
        self.kept: dict[tuple, Any] = {}

    def __call__(self, seq: list[Node]) -> bool:
        if faults.ARMED:
            return False  # the general path checks each op's fault point
        pre, post = [seq[i] for i in self.pre], [seq[i] for i in self.post]
        with runtime.on_device(self.device):
            # the stream in the key: a table is read only after its upload on that stream
            key = (stream_handle(runtime.current_stream()), tuple(n.params for n in pre),
                   tuple(n.params for n in post))
            table = self.kept.get(key)
            if table is None:
                lut = host_tables(pre, post, self.channels, self.full)
                table = runtime.upload_small(lut, self.device)
                with _KEPT_LOCK:  # (two threads' misses: the oldest dropped once)
                    kept = self.kept
                    if len(kept) >= self.KEEP:
                        kept.pop(next(iter(kept)))
                    kept[key] = table
        buf = self.bound(seq[self.src].buffer, [], table)
        if buf is None:
            return False  # a source of another layout: the general path picks its kernel
        seq[self.out].settle(buf)
        return True


def _flat_words(src: Any, dst: Any) -> tuple[Any, Any]:
    return words(src, flat=True), words(dst, flat=True)


def _mapped_words(src: Any, dst: Any) -> tuple[Any, Any]:
    return words(src), words(dst)


# The packed kernel's offsets are 32-bit (``GatherSig.packed``)
PACKED_MAX_ELEMENTS = 2**31


def _packable(sig: GatherSig, src: Any, out: Node) -> bool:
    """uint8 RGBA read pixel by pixel as uint32: one load per tap instead of four."""
    return (sig.plain and sig.mode == "lut" and sig.cin == 4 and (sig.sampler or sig.grey)
            and src.ndim == 3 and src.shape[2] == 4 and c_contiguous(src)
            and src.shape[0] * src.shape[1] < PACKED_MAX_ELEMENTS
            and out.shape[0] * out.shape[1] * sig.cout < PACKED_MAX_ELEMENTS)


#: Output pixels up to which a device backend computes a uint8 elementwise chain in the
#: kernel (``tables_inline``). Above, the host-built table pays: inlined per pixel, each
#: channel value costs a ``pow`` or the like on the GPU (fp64), against 256 per channel on
#: the host (a ``tabled`` gather pays 256 per channel per block; not measured above this).
INLINE_TABLE_MAX_PIXELS = 1 << 20


#: Inlined uint8 chains run as ``tabled`` gathers where they fit: each block runs the chain on
#: the 256 values once, not on every pixel (False: per pixel; tests compare the two)
TABLED = True


def tables_inline(k: Gather) -> bool:
    """Whether gather ``k``'s uint8 table chain runs in the kernel, from the ops' scalars (per
    pixel, or per block into a shared table: ``TABLED``), instead of a 256-entry table built
    on the host and uploaded per call.

    On device backends, for outputs up to ``INLINE_TABLE_MAX_PIXELS``: there the host time of
    building and uploading a table (tens of microseconds) outweighs the kernel's work. The
    values are the same: the table is made by the same scalar functions, rounded after each
    op as the inlined chain is (``chain.chain_all``).
    """
    if not (runtime.caps.device_memory and (k.pre or k.post) and k.lut_mode):
        return False
    shape = k.output.shape
    return shape[0] * shape[1] <= INLINE_TABLE_MAX_PIXELS


@execute.runs("gather")
def run_gather(k: Gather, src: Any, device: int, reader: Gather | None = None
               ) -> tuple[Any, bool]:
    """Launch gather ``k`` on ``src``: its output buffer (never partial)."""
    out = k.output
    tables = not tables_inline(k)
    sig, lut, p = gather_args(k, tables, gates=True)
    if not tables and TABLED and tabled_fits(sig):
        # (``tables_inline``: a uint8 chain) each block builds the chain's table on the device
        sig = dataclasses.replace(sig, tabled=True)
    dst = runtime.empty(out.shape, out.dtype, device)
    if variants.gpu_variants_enabled() and _rgba_lut_fast(sig, src):
        fn, grid, block, args, views = _run_gather_rgba(k, src, dst, lut, p, device)
        memo = k.__dict__.get("_memo")
        if memo is None or "bound" in memo or 0 in out.shape:
            return dst, False
        if memo.get(tables) is not None and not (k.pre or k.post):
            # no table: every argument follows from the replay key. Its uploads were made on
            # this stream: done before any other stream's replay reads them (once per plan)
            runtime.synchronize(device)
            bound = runtime.bind_grid(fn, grid, block, device, src, dst, args, len(args) - 2,
                                      views)
            if bound is not None:
                memo["bound"] = (bound, tables, None)  # None: no parameter per call
        elif fn is _lut_rgba_fns()[0] and _table_replayable(k, tables):
            # a host-built table: all but the table follows from the key (``TableLaunch``)
            bound = runtime.bind_grid(fn, grid, block, device, src, dst, args, len(args) - 2,
                                      views)
            if bound is not None:
                memo["bound"] = (bound, tables, TABLE)
        return dst, False
    h, w = out.shape[0], out.shape[1]
    views, extra = _plain_views, []
    if _packable(sig, src, out):
        sig = dataclasses.replace(sig, packed=True)
        views, extra = _packed_views, [src.shape[1], h, w]
        p = np.concatenate([p, extra])
    src_arg, dst_arg = views(src, dst)
    fn = _gather_fn(sig)
    params = tuple(p.tolist()) if runtime.codegen_target == "cuda" else (p,)
    # a thread takes `items` pixels of a row per trip: the grid covers w / items columns
    items = gather_items(sig, runtime.codegen_target, runtime.simulated)
    table = (identity_table(sig.cin, device) if not any(sig.lut_stages)
             else runtime.upload_small(np.ascontiguousarray(lut), device))
    if stat_width(sig):  # the rows its ops read (never a replayed launch: ``_memoizable``)
        table = (table, runtime.from_host(stat_rows(k, sig.mode == "lut"), device))
    else:
        table = (table,)
    args = (src_arg, dst_arg, *table, *params)
    runtime.launch_2d(fn, h, -(-w // items), device, *args)
    memo = k.__dict__.get("_memo")
    if (memo is not None and memo.get(tables) is not None and "bound" not in memo
            and not any(sig.lut_stages) and h * w > 0):
        # a replayed plan whose parameters but the chained ops' are fixed: keep the launch
        bound = runtime.bind_2d(fn, h, -(-w // items), device, src, dst, args, 1, views)
        if bound is not None:
            memo["bound"] = (bound, tables, [float(v) for v in extra])
    return dst, False


def _plain_views(src: Any, dst: Any) -> tuple[Any, Any]:
    return runtime.as_3d(src), runtime.as_3d(dst)


def _packed_views(src: Any, dst: Any) -> tuple[Any, Any]:
    return words(src, flat=True), runtime.flat(dst)


@execute.binds("gather")
def bind_gather(k: Gather, src: int, lists: dict[str, tuple[int, ...]], n: int
                ) -> execute.ReplayLaunch | None:
    """The replay launch of a replayed one-gather plan whose launch the runner kept."""
    memo = k.__dict__.get("_memo")
    got = None if memo is None else memo.get("bound")
    if got is None or lists["nodes"][-1] != n - 1:
        return None
    bound, tables, extra = got
    if extra is None:  # (the RGBA word kernel: nothing changes between replays)
        return execute.ReplayLaunch(bound, src, n - 1, [], ())
    if extra is TABLE:  # (the RGBA word kernel with a host-built table per call)
        return TableLaunch(bound, src, n - 1, lists.get("pre", ()), lists.get("post", ()),
                           k.channels, full_range(k.source.dtype), k.output.device)
    _, base, offsets = memo[tables]
    lut_mode = k.lut_mode and tables
    chained = (() if lut_mode else lists["pre"] + lists["post"]) + lists["grey_ops"]
    if any(node.op.stat for node in ([] if lut_mode else k.pre + k.post) + k.grey_ops):
        return None  # (its slots hold a statistic too; such a plan is not memoized anyway)
    slots = tuple((pos, offsets[i], offsets[i + 1]) for i, pos in enumerate(chained))
    params = base.tolist() + extra
    for _, a, b in slots:
        params[a:b] = [0.0] * (b - a)  # each call writes the op's parameters over the zeros
    return execute.ReplayLaunch(bound, src, n - 1, params, slots)


@execute.runs("stat")
def run_stat(k: Kernel, src: Any, device: int, reader: Gather | None = None
             ) -> tuple[Any, bool]:
    """The statistic row a fused op reads (``STAT_ROWS``): no buffer, no node stored."""
    out = k.output
    if not out.materialized and out not in STAT_ROWS:
        STAT_ROWS[out] = statistic_row(k.prefix, out.op.stat)
    return None, False
