"""Run planned kernels: allocate outputs, build parameters, launch, store, free intermediates."""

from __future__ import annotations

import dataclasses
import functools
import weakref
from typing import Any

import numpy as np

from ... import config, devices, faults
from ...backend import ACTIVE as runtime  # the active backend: buffers, copies, launches
from ...kernels import REGISTRY
from ..codegen import gpu as codegen_gpu
from ..codegen.expr import REDUCE_BLOCK, ExprSig, expr_kernel
from ..codegen.gather import gather_items, gather_kernel, gather_mean_source
from ..codegen.gather_sig import (
    A_OFF,
    CLIP_HI_OFF,
    CLIP_OFF,
    FULL_OFF,
    MID_OFF,
    P_OFF,
    GatherSig,
    gather_nparams,
    op_offsets,
)
from ..codegen.loader import load
from ..codegen.lut import lut_builder
from ..codegen.stencil import stencil_kernels
from ..ir.node import Node
from ..plan import footprint
from ..plan.schedule import Expr, Gather, Kernel, Stencil, full_range
from . import replay

IDENTITY_LUT = np.tile(np.arange(256, dtype=np.uint8), (2, 4, 1))


@functools.cache
def _gather_fn(sig: GatherSig):
    return gather_kernel(sig, runtime.codegen_target, runtime.simulated)


@functools.cache
def _stencil_fns(pre: bool = False, post: bool = False):
    return stencil_kernels(runtime.codegen_target, runtime.simulated, pre, post)


@functools.cache
def _stencil_tiled_fns(c: int, nc: int):
    return codegen_gpu.stencil_tiled_kernels(c, nc, runtime.simulated)


@functools.cache
def _stencil_2d_fn(c: int, nc: int, pre: bool, post: bool, packed: bool,
                   geometry: tuple[int, int, int, int, int], unsigned: bool = False):
    return codegen_gpu.stencil_2d_kernel(c, nc, pre, post, runtime.simulated, packed,
                                         geometry, unsigned=unsigned)


@functools.cache
def _lut_rgba_fns():
    return codegen_gpu.lut_rgba_kernels(runtime.simulated)


def gpu_variants_enabled() -> bool:
    """Hand-tuned GPU variants run on the real ``cuda``/``hip`` backends only.

    ``MILLIPYDE_GPU_VARIANTS=0`` forces the generic kernels (benchmarks compare both).
    """
    return runtime.caps.tuned_kernels and config.gpu_variants()


@functools.cache
def _expr_fn(sig: ExprSig):
    return expr_kernel(sig, runtime.codegen_target, runtime.simulated)


@functools.cache
def _lut_build(_registered: int = 0):
    # keyed on the registry's size: a user op registered later needs a builder that knows it
    return lut_builder()


# per-image statistics (adjust_contrast's grey mean) computed by Stat kernels, by op node
_STATS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _op_params(n: Node) -> list[float]:
    vals = [float(v) for v in n.params]
    if n.op.stat:
        vals.append(_STATS.get(n, 0.0))
    return (vals + [0.0] * n.op.slots)[:n.op.slots]


def build_lut(nodes: list[Node], channels: int, full: float) -> np.ndarray:
    """Compose uint8 elementwise ops into one (channels, 256) table, rounding after each op."""
    out = np.empty((channels, 256), dtype=np.uint8)
    codes = np.array([n.op.code for n in nodes], dtype=np.int64)
    params = np.array([_op_params(n)[:3] for n in nodes], dtype=np.float64).reshape(
        len(nodes), 3)
    _lut_build(len(REGISTRY))(codes, params, channels, full, out)
    return out


def warp_clip(k: Gather) -> tuple[float, float]:
    """scikit-image's warp clip: the bounds (input minimum, maximum) that can bind, else -inf
    and +inf.

    Only kernels whose sampler reads the stored source ask (``Gather.clip_check``); the
    bounds are map-reduces over every channel, as ``np.min(image)`` in skimage. With a fill of
    0, blends stay within [min(lo, 0), max(hi, 0)]: the minimum binds when positive, the
    maximum only when negative (signed images whose values are all negative).
    """
    if not k.clip_check or 0 in k.source.shape:
        return -np.inf, np.inf
    from ..ir.lazy import REDUCE

    def reduced(name: str) -> float:
        node = Node(REDUCE[name], (k.source,), (), (), k.source.dtype, k.source.device)
        return float(runtime.to_host(materialize(node))[0])

    lo = reduced("min")
    if lo > 0:
        return lo, np.inf
    hi = reduced("max") if lo < 0 else 0.0
    return -np.inf, (hi if hi < 0 else np.inf)


def gather_args(k: Gather, tables: bool = True
                ) -> tuple[GatherSig, np.ndarray, np.ndarray]:
    """Signature, LUT array and parameter array of a fused gather kernel.

    ``tables=False``: uint8 elementwise chains are inlined (``"chain"`` mode, their scalars in
    the parameters) instead of folded into host-built tables (see ``tables_inline``).
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
        if node not in _STATS:
            _STATS[node] = grey_mean(prefix)
    sig = GatherSig(
        cin=c,
        mode="lut" if lut_mode else "chain",
        is_int=k.source.dtype.kind in "ui",
        sampler=k.A is not None,
        grey=k.phase == 2,
        pre=() if lut_mode else names(k.pre),
        post=() if lut_mode else names(k.post),
        grey_ops=names(k.grey_ops),
        lut_stages=(bool(k.pre), bool(k.post)) if lut_mode else (False, False),
        clip=bool(k.clip_check),
        bounded=k.fill is not None,
        edge=k.edge,
        umap="" if k.umap is None else k.umap.op.name,
    )
    if lut_mode and (k.pre or k.post):
        lut = IDENTITY_LUT[:, :c].copy()
        if k.pre:
            lut[0] = build_lut(k.pre, c, full)
        if k.post:
            lut[1] = build_lut(k.post, c, full)
    else:
        lut = IDENTITY_LUT[:, :c]
    chained = ([] if lut_mode else k.pre + k.post) + k.grey_ops
    offsets = op_offsets(names(chained))
    p = np.zeros(gather_nparams(sig))
    p[P_OFF:P_OFF + 6] = k.P[:2].ravel()
    if k.A is not None:
        p[A_OFF:A_OFF + 6] = k.A[:2].ravel()
        p[MID_OFF:MID_OFF + 2] = k.mid
    p[FULL_OFF] = full
    p[CLIP_OFF], p[CLIP_HI_OFF] = warp_clip(k)
    for i, n in enumerate(chained):
        p[offsets[i]:offsets[i + 1]] = _op_params(n)
    e = offsets[-1]
    if sig.bounded:
        p[e:e + 2] = k.source.shape[:2]
        fill = k.fill
        for ch in range(c):
            # uint8 tables apply to what is read: the fill goes through the first stage too
            p[e + 2 + ch] = lut[0, ch, int(fill)] if lut_mode and k.pre else fill
        e += 6
    if k.umap is not None:
        p[e:e + k.umap.op.nparams] = [float(v) for v in k.umap.params]
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
        p[offsets[i]:offsets[i + 1]] = _op_params(n)
    return sig, IDENTITY_LUT[:, :sig.cin], p


@functools.cache
def _mean_fn(sig: GatherSig):
    source = gather_mean_source(sig, runtime.codegen_target, runtime.simulated)
    return load(source, runtime.codegen_target).kernel


def grey_mean(k: Gather) -> float:
    """Mean of the (torchvision) grey values of what gather ``k`` would store: one reduction
    kernel over ``k.source``, nothing stored; read back to the host (tables are built there)."""
    sig, lut, p = gather_args(k)
    h, w = k.cur
    if h * w == 0:
        return 0.0
    device = k.source.device
    p = np.concatenate([p, [h, w]])
    with runtime.on_device(device):
        src = runtime.as_3d(k.source.buffer)
        rows = h if runtime.codegen_target == "cpu" else 1
        acc = runtime.from_host(np.zeros(rows), device)
        params = tuple(p.tolist()) if runtime.codegen_target == "cuda" else (p,)
        runtime.launch_2d(_mean_fn(sig), h, w, device, src, acc,
                          runtime.upload_small(np.ascontiguousarray(lut), device), *params)
        total = float(np.sum(runtime.to_host(acc)))
    return total / (h * w)


def _rgba_lut_fast(sig: GatherSig, src: Any) -> bool:
    return (sig.plain and sig.mode == "lut" and sig.cin == 4 and not sig.sampler and not sig.grey
            and src.ndim == 3 and src.shape[2] == 4 and src.is_c_contiguous())


def _run_gather_rgba(k: Gather, src: Any, dst: Any, lut: np.ndarray, p: np.ndarray,
                     device: int) -> None:
    """uint8 RGBA, LUT and/or integer index map only: one uint32 load/store per pixel."""
    flat, mapped = _lut_rgba_fns()
    use_lut = bool(k.pre)
    lut_d = runtime.upload_small(np.ascontiguousarray(lut), device)
    h, w = dst.shape[0], dst.shape[1]
    if tuple(src.shape) == tuple(dst.shape) and np.array_equal(p[:6], [1, 0, 0, 0, 1, 0]):
        runtime.launch_blocks(flat, *codegen_gpu.lut_launch(h * w, runtime.simulated), device,
                              _words(src, flat=True), _words(dst, flat=True), lut_d, use_lut)
        return
    runtime.launch_grid(mapped, *codegen_gpu.mapped_launch(h, w, runtime.simulated), device,
                        _words(src), _words(dst), lut_d, runtime.upload_small(p, device),
                        use_lut)


def _c_contiguous(a: Any) -> bool:
    return a.flags.c_contiguous if isinstance(a, np.ndarray) else a.is_c_contiguous()


def _words(a: Any, flat: bool = False) -> Any:
    """A contiguous (h, w, 4) uint8 image as its (h, w) uint32 pixels, or (h * w) ``flat``."""
    shape = (a.shape[0] * a.shape[1],) if flat else (a.shape[0], a.shape[1])
    return a.view(np.uint32).reshape(*shape)


# The packed kernel's offsets are 32-bit (``GatherSig.packed``)
PACKED_MAX_ELEMENTS = 2**31


def _packable(sig: GatherSig, src: Any, out: Node) -> bool:
    """uint8 RGBA read pixel by pixel as uint32: one load per tap instead of four."""
    return (sig.plain and sig.mode == "lut" and sig.cin == 4 and (sig.sampler or sig.grey)
            and src.ndim == 3 and src.shape[2] == 4 and _c_contiguous(src)
            and src.shape[0] * src.shape[1] < PACKED_MAX_ELEMENTS
            and out.shape[0] * out.shape[1] * sig.cout < PACKED_MAX_ELEMENTS)


#: Output pixels up to which a device backend computes a uint8 elementwise chain per pixel
#: (``tables_inline``). Above, the table pays: each channel value costs a ``pow`` or the
#: like per pixel on the GPU (fp64), against 256 per channel built on the host.
INLINE_TABLE_MAX_PIXELS = 1 << 20


def tables_inline(k: Gather) -> bool:
    """Whether gather ``k``'s uint8 table chain runs per pixel in the kernel, from the ops'
    scalars, instead of a 256-entry table built on the host and uploaded per call.

    On device backends, for outputs up to ``INLINE_TABLE_MAX_PIXELS``: there the host time of
    building and uploading a table (tens of microseconds) outweighs the kernel's work. The
    values are the same: the table is made by the same scalar functions, rounded after each
    op as the inlined chain is (``chain._chain_all``).
    """
    if not (runtime.caps.device_memory and (k.pre or k.post) and k.lut_mode):
        return False
    shape = k.output.shape
    return shape[0] * shape[1] <= INLINE_TABLE_MAX_PIXELS


def _run_gather(k: Gather, src: Any, device: int) -> Any:
    out = k.output
    sig, lut, p = gather_args(k, not tables_inline(k))
    dst = runtime.empty(out.shape, out.dtype, device)
    if gpu_variants_enabled() and _rgba_lut_fast(sig, src):
        _run_gather_rgba(k, src, dst, lut, p, device)
        return dst
    h, w = out.shape[0], out.shape[1]
    src_arg, dst_arg = runtime.as_3d(src), runtime.as_3d(dst)
    if _packable(sig, src, out):
        sig = dataclasses.replace(sig, packed=True)
        src_arg, dst_arg = _words(src, flat=True), runtime.flat(dst)
        p = np.concatenate([p, [src.shape[1], h, w]])
    fn = _gather_fn(sig)
    params = tuple(p.tolist()) if runtime.codegen_target == "cuda" else (p,)
    # a thread takes `items` pixels of a row per trip: the grid covers w / items columns
    items = gather_items(sig, runtime.codegen_target, runtime.simulated)
    table = (identity_table(sig.cin, device) if not any(sig.lut_stages)
             else runtime.upload_small(np.ascontiguousarray(lut), device))
    runtime.launch_2d(fn, h, -(-w // items), device, src_arg, dst_arg, table, *params)
    return dst


def identity_table(channels: int, device: int) -> Any:
    """The (2, channels, 256) identity tables on ``device``, uploaded once and kept: a kernel
    whose table stages hold no op takes them unread, with no upload or cache lookup per call.
    """
    return runtime.constant(("identity_lut", channels), IDENTITY_LUT[:, :channels], device)


@functools.cache
def _stencil_cpu_fn(pre: bool = False, post: bool = False):
    # imported here: only the cpu backend uses the fused CPU stencil
    from ..codegen import cpu as codegen_cpu

    return codegen_cpu.stencil_kernel(pre, post), codegen_cpu.stencil_tiles


def stencil_tables(k: Stencil, channels: int) -> np.ndarray | None:
    """The (2, channels, 256) uint8 prologue/epilogue tables of a fused stencil, or None."""
    if not (k.pre or k.post):
        return None
    lut = IDENTITY_LUT[:, :channels].copy()
    if k.pre:
        lut[0] = build_lut(k.pre, channels, 255.0)
    if k.post:
        lut[1] = build_lut(k.post, channels, 255.0)
    return lut


def _run_stencil(k: Stencil, src: Any, device: int, reader: Gather | None = None
                 ) -> tuple[Any, bool]:
    """The stencil's output, and whether it holds only what ``reader`` reads (see
    ``footprint``: the one-pass GPU tile kernel skips the rest)."""
    n = k.stencil
    out = k.output
    taps = np.ascontiguousarray(REGISTRY[n.op.name].fn(*n.params), dtype=np.float64)
    src3 = runtime.as_3d(src)
    h, w, c = src3.shape
    nc = min(c, 3)
    pre, post = bool(k.pre), bool(k.post)
    lut = stencil_tables(k, c)
    dst = runtime.empty(out.shape, out.dtype, device)
    dst3 = runtime.as_3d(dst)
    is_int, full = out.dtype.kind in "ui", full_range(out.dtype)
    if h == 0 or w == 0:  # empty in, empty out: no tiling or launch can divide by it
        return dst, False
    if not runtime.caps.shared_memory:
        fn, tiles = _stencil_cpu_fn(pre, post)
        band, strip = tiles(h, w, nc, len(taps))
        runtime.launch_2d(fn, h, w, device, src3, dst3, taps, nc, is_int, full, band, strip,
                          IDENTITY_LUT if lut is None else lut)
        return dst, False
    taps_d = runtime.upload_small(taps, device)
    radius = len(taps) // 2
    if stencil_2d_fits(radius) and stencil_2d_reads(src3, src3.shape):
        run_stencil_2d(src3, dst3, taps_d, radius, is_int, full, device, lut, pre, post,
                       reader=reader)
        return dst, reader is not None
    tmp = runtime.empty((h, w, nc), np.float64, device)
    if gpu_variants_enabled() and lut is None:
        shared = max(codegen_gpu.rows_shared_bytes(codegen_gpu.ROWS_BLOCK, nc, radius),
                     codegen_gpu.cols_shared_bytes(codegen_gpu.COLS_BLOCK, radius))
        if shared <= runtime.SHARED_DEFAULT:
            run_stencil_tiled(src3, tmp, dst3, taps_d, radius, is_int, full, device)
            return dst, False
    rows, cols = _stencil_fns(pre, post)
    extra = () if lut is None else (runtime.upload_small(lut, device),)
    runtime.launch_2d(rows, h, w * nc, device, src3, tmp, taps_d, nc, *extra)
    runtime.launch_2d(cols, h, w * c, device, src3, tmp, dst3, taps_d, nc, is_int, full, *extra)
    return dst, False


def stencil_passes(radius: int) -> int:
    """Launches (1 or 2) of a stencil of this radius on this backend; 2 means a float64
    temporary goes through device memory between them."""
    return 1 if not runtime.caps.shared_memory or stencil_2d_fits(radius) else 2


def stencil_2d_fits(radius: int) -> bool:
    """Whether the one-pass 2-D tiled stencil runs here for taps of this radius."""
    geometry = codegen_gpu.tile_geometry(runtime.simulated)
    return (gpu_variants_enabled()
            and codegen_gpu.tile_shared_bytes(radius, geometry) <= runtime.SHARED_DEFAULT)


def stencil_2d_reads(buffer: Any, image: tuple[int, ...]) -> bool:
    """Whether the one-pass stencil reads ``buffer`` as flat images of shape ``image`` (it
    must be C-contiguous; offsets in one image are 32-bit)."""
    return _c_contiguous(buffer) and codegen_gpu.indexable(image)


def stencil_2d_packs(src3: Any, dst3: Any, radius: int) -> bool:
    """Whether the one-pass stencil runs on uint32 words (uint8 RGBA, contiguous, fits)."""
    geometry = codegen_gpu.tile_geometry(runtime.simulated)
    return (src3.shape[2] == 4 and src3.dtype == np.uint8 and dst3.dtype == np.uint8
            and _c_contiguous(src3) and _c_contiguous(dst3)
            and codegen_gpu.packed_shared_bytes(radius, geometry) <= runtime.SHARED_DEFAULT)


def run_stencil_2d(src3: Any, dst3: Any, taps_d: Any, radius: int, is_int: bool, full: float,
                   device: int, lut: np.ndarray | None = None, pre: bool = False,
                   post: bool = False, packed: bool | None = None,
                   reader: Gather | None = None) -> None:
    """The one-pass 2-D tiled stencil; ``lut`` (2, C, 256) uint8 holds the pre/post tables.

    ``packed`` (default: ``stencil_2d_packs``) picks the kernel that stages uint8 RGBA tiles as
    words; tests turn it off to compare the two. With a ``reader`` (``private_reader``) each
    band of tile rows computes only the columns that gather reads (``footprint.spans``).
    """
    h, w, c = src3.shape
    if packed is None:
        packed = stencil_2d_packs(src3, dst3, radius)
    geometry = codegen_gpu.tile_geometry(runtime.simulated, radius, packed,
                                         runtime.SHARED_DEFAULT)
    fn = _stencil_2d_fn(c, min(c, 3), pre, post, packed, geometry,
                        codegen_gpu.unsigned_source(src3.dtype))
    table = IDENTITY_LUT[:, :c] if lut is None else lut
    if packed:
        shared = codegen_gpu.packed_shared_bytes(radius, geometry)
        src1, dst1 = _words(src3, flat=True), _words(dst3, flat=True)
    else:
        shared = codegen_gpu.tile_shared_bytes(radius, geometry)
        src1, dst1 = runtime.flat(src3), runtime.flat(dst3)
    band = codegen_gpu.tile_size(geometry)[0]
    span = (footprint.full_spans(h, w, band) if reader is None
            else footprint.spans(reader, band))
    runtime.launch_grid(fn, codegen_gpu.tile_grid(h, w, geometry), geometry[:2], device,
                        src1, dst1, h, w, taps_d, is_int, full,
                        runtime.upload_small(table, device),
                        runtime.upload_small(span, device), shared=shared)


def run_stencil_tiled(src3: Any, tmp: Any, dst3: Any, taps_d: Any, radius: int, is_int: bool,
                      full: float, device: int, rows_block: tuple[int, int] | None = None,
                      cols_block: tuple[int, int] | None = None) -> None:
    """Both passes of the tiled separable stencil (GPU variant; blocks overridable for tests)."""
    h, w, c = src3.shape
    nc = min(c, 3)
    rb = rows_block or codegen_gpu.ROWS_BLOCK
    cb = cols_block or codegen_gpu.COLS_BLOCK
    rows, cols = _stencil_tiled_fns(c, nc)
    sw = codegen_gpu.rows_segment_width(rb[0], radius)
    shared = codegen_gpu.rows_shared_bytes(rb, nc, radius)
    runtime.launch_grid(rows, codegen_gpu.rows_grid(h, w, rb), rb, device,
                        src3, tmp, taps_d, sw, shared=shared)
    runtime.launch_grid(cols, codegen_gpu.cols_grid(h, w, c, cb), cb, device,
                        src3, tmp, dst3, taps_d, is_int, full,
                        shared=codegen_gpu.cols_shared_bytes(cb, radius))


def _numba_type(dtype: np.dtype) -> str:
    return "boolean" if dtype == np.bool_ else dtype.name


def expr_args(k: Expr) -> tuple[ExprSig, list[Node], np.ndarray, np.ndarray, np.ndarray]:
    """Signature, leaves, scalar parameters, output shape and input strides of a fused expr."""
    reduce = k.output.op if _is_reduce(k.output) else None
    maps = k.nodes[:-1] if reduce is not None else k.nodes
    shape = (k.output.inputs[0].shape if reduce is not None else k.output.shape) or (1,)
    index = {n.id: j for j, n in enumerate(maps)}
    leaf_index = {n.id: j for j, n in enumerate(k.leaves)}
    params: list[float] = []
    steps = []
    for n in maps:
        args, inputs = [], iter(n.inputs)
        for slot in n.params:
            if slot is None:
                i = next(inputs)
                args.append(f"t{index[i.id]}" if i.id in index else f"a{leaf_index[i.id]}")
            else:
                # NumPy treats a Python scalar as the array's dtype (NEP 50): an int scalar on
                # an int array must wrap like it, not go through float64 (which saturates on
                # GPUs when converted back)
                k_ = len(params)
                args.append(f"p{k_}" if n.dtype.kind not in "iu" else f"c{k_}")
                params.append(float(slot))
        steps.append((n.op.template, tuple(args), _numba_type(n.dtype)))
    if not steps:
        steps.append(("{0}", ("a0",), ""))
    ndim = len(shape)
    strides = np.zeros((len(k.leaves), ndim), dtype=np.int64)
    bcast = []
    for j, leaf in enumerate(k.leaves):
        lshape = (1,) * (ndim - len(leaf.shape)) + tuple(leaf.shape)
        bcast.append(tuple(lshape) != tuple(shape))
        step = 1
        for d in range(ndim - 1, -1, -1):
            strides[j, d] = 0 if lshape[d] == 1 and shape[d] != 1 else step
            step *= lshape[d]
    red = None
    if reduce is not None:
        src_dtype = maps[-1].dtype if maps else k.leaves[0].dtype
        acc = "float64" if src_dtype.kind == "f" else "int64"
        red = (reduce.name, acc)
    sig = ExprSig(ndim, tuple(bcast), tuple(steps), red)
    return sig, maps, np.array(params + [0.0]), np.array(shape, dtype=np.int64), strides


def _is_reduce(n: Node) -> bool:
    return getattr(n.op, "kind", None) == "reduce"


def _run_expr(k: Expr, device: int) -> Any:
    sig, _, p, osh, st = expr_args(k)
    n = int(np.prod(osh))
    fn = _expr_fn(sig)
    ins = [runtime.flat(leaf.buffer) for leaf in k.leaves]
    small = [runtime.upload_small(a, device) for a in (p, osh, st)]
    out = k.output
    if sig.reduce is None:
        dst = runtime.empty(out.shape or (1,), out.dtype, device)
        runtime.launch_1d(fn, n, device, *ins, runtime.flat(dst), *small, n)
        return dst
    name, acc = sig.reduce
    blocks = max(1, min((n + REDUCE_BLOCK - 1) // REDUCE_BLOCK, 1024))
    part = runtime.empty((blocks,), np.dtype(acc), device)
    runtime.launch_blocks(fn, blocks, REDUCE_BLOCK, device, *ins, part, *small, n)
    host = runtime.to_host(part)
    value = {"sum": np.sum, "mean": np.sum, "min": np.min, "max": np.max}[name](host)
    if name == "mean":
        value = value / n
    return runtime.from_host(np.array([value], dtype=out.dtype), device)


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
        if not out.materialized and out not in _STATS:
            _STATS[out] = grey_mean(k.prefix)
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
    if nxt.umap is not None or nxt.edge:
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
    with runtime.on_device(device):
        if k.kind == "gather":
            buf = _run_gather(k, src, device)
        elif k.kind == "stencil":
            buf, partial = _run_stencil(k, src, device, reader)
            if partial:
                # only the reader's footprint is computed: it must never be the node's value
                private[out.id] = buf
                return
        elif k.kind == "expr":
            buf = _run_expr(k, device)
        elif k.kind in ("copy", "move"):
            buf = runtime.copy(src, device, k.source.device,
                              devices.can_peer(k.source.device, device))
        else:  # pragma: no cover - plan() only makes the kinds above
            raise TypeError(f"unknown kernel kind {k.kind}")
    out.settle(buf)


def materialize(target: Node) -> Any:
    """Compute ``target`` (and what it needs) and return its buffer; a no-op when stored."""
    if target.materialized:
        return target.buffer
    with target.lock:
        if target.materialized:
            return target.buffer
        kernels = replay.plan(target)  # schedule.plan, or a cached plan bound to these nodes
        private: dict[int, Any] = {}
        for i, k in enumerate(kernels):
            for src in getattr(k, "leaves", None) or [k.source]:
                if src.buffer is None and src.id not in private:
                    materialize(src)
            run_kernel(k, private, private_reader(k, kernels[i + 1:], target))
    return target.buffer
