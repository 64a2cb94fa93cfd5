"""Run a separable stencil kernel: the fused CPU kernel, the one-pass 2-D tiled GPU kernel,
the tiled two-pass GPU kernels or the generic passes (``variants`` picks); a stencil whose
taps function gives a ``Window`` (taps per axis, border modes, medians) runs the generic
window passes, one that gives a ``BlockCodec`` (``jpeg``) the block codec passes
(``codec``)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from ...kernels import REGISTRY
from ...kernels.registry import BlockCodec, Window
from ..codegen import gpu as codegen_gpu
from ..codegen.stencil import BORDER_CODES, stencil_kernels, window_kernels
from ..plan import footprint
from ..plan.schedule import Gather, Stencil, full_range
from . import execute, variants
from .codec import run_codec
from .tables import IDENTITY_LUT, stencil_tables
from .variants import words


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
def _stencil_cpu_fn():
    # imported here: only the cpu backend uses the fused CPU stencil
    from ..codegen import cpu as codegen_cpu

    return codegen_cpu.stencil_kernel(), codegen_cpu.stencil_tiles


@functools.cache
def _window_fns(pre: bool, post: bool, median: int, plane: bool = False):
    return window_kernels(runtime.codegen_target, runtime.simulated, pre, post, median, plane)


def run_window(k: Stencil, src: Any, device: int, win: Window) -> Any:
    """A ``Window`` stencil's output: its two separable passes (or its median or plane pass)
    with the border mode as an argument."""
    out = k.output
    src3 = runtime.as_3d(src)
    h, w, c = src3.shape
    nc = min(c, 3)
    lut = stencil_tables(k, c)
    dst = runtime.empty(out.shape, out.dtype, device)
    dst3 = runtime.as_3d(dst)
    if h == 0 or w == 0:
        return dst
    is_int, full = out.dtype.kind in "ui", full_range(out.dtype)
    mode = BORDER_CODES[win.border]
    table = runtime.upload_small(np.ascontiguousarray(IDENTITY_LUT[:, :c] if lut is None
                                                      else lut), device)
    pre, post = bool(k.pre), bool(k.post)
    if win.plane is not None:
        (fn,) = _window_fns(pre, post, 0, True)
        k2 = runtime.upload_small(np.ascontiguousarray(win.plane, dtype=np.float64).ravel(),
                                  device)
        runtime.launch_2d(fn, h, w * c, device, src3, dst3, k2, len(win.ty), nc, is_int, full,
                          mode, table)
        return dst
    if win.median:
        (fn,) = _window_fns(pre, post, len(win.ty))
        runtime.launch_2d(fn, h, w * c, device, src3, dst3, nc, is_int, full, mode, table)
        return dst
    rows, cols = _window_fns(pre, post, 0)
    tmp = runtime.empty((h, w, nc), np.float64, device)
    tx = runtime.upload_small(np.ascontiguousarray(win.tx, dtype=np.float64), device)
    ty = runtime.upload_small(np.ascontiguousarray(win.ty, dtype=np.float64), device)
    runtime.launch_2d(rows, h, w * nc, device, src3, tmp, tx, nc, mode, table)
    runtime.launch_2d(cols, h, w * c, device, src3, tmp, dst3, ty, nc, is_int, full, mode,
                      table)
    return dst


@execute.runs("stencil")
def run_stencil(k: Stencil, src: Any, device: int, reader: Gather | None = None
                ) -> tuple[Any, bool]:
    """The stencil's output, and whether it holds only what ``reader`` reads (see
    ``footprint``: the one-pass GPU tile kernel skips the rest)."""
    n = k.stencil
    out = k.output
    taps = REGISTRY[n.op.name].fn(*n.params)
    if isinstance(taps, Window):
        return run_window(k, src, device, taps), False
    if isinstance(taps, BlockCodec):
        return run_codec(k, src, device, taps), False
    taps = np.ascontiguousarray(taps, dtype=np.float64)
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
        fn, tiles = _stencil_cpu_fn()
        band, strip = tiles(h, w, nc, len(taps))
        args = (src3, dst3, taps, nc, is_int, full, band, strip,
                IDENTITY_LUT if lut is None else lut, pre, post)
        runtime.launch_2d(fn, h, w, device, *args)
        if _keeps(k, lut, reader):
            _keep(k, runtime.bind_2d(fn, h, w, device, src, dst, args, len(args) - 2, _views))
        return dst, False
    taps_d = runtime.upload_small(taps, device)
    radius = len(taps) // 2
    if variants.stencil_2d_fits(radius) and variants.stencil_2d_reads(src3, src3.shape):
        launch = run_stencil_2d(src3, dst3, taps_d, radius, is_int, full, device, lut, pre,
                                post, reader=reader)
        if _keeps(k, lut, reader):
            fn, grid, block, args, shared, views = launch
            # the taps, table and spans were uploaded on this stream: done before any other
            # stream's replay reads them (once per plan)
            runtime.synchronize(device)
            _keep(k, runtime.bind_grid(fn, grid, block, device, src, dst, args, len(args) - 2,
                                       views, shared))
        return dst, reader is not None
    tmp = runtime.empty((h, w, nc), np.float64, device)
    if variants.gpu_variants_enabled() and lut is None:
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


#: uint8 images take the one-pass tile with its tables on (identity where the chain has none:
#: uint8 values map to themselves, so the outputs are the same): one kernel per channel count,
#: tile and prologue instead of one per prologue and epilogue, fewer kernels to compile at a
#: cold start (the thesis recipe's 11 tile kernels became 6). The epilogue costs a table read
#: per output value; a packed (RGBA) tile's prologue one per staged value (the others keep
#: theirs off: they would read a table per tap). False: the variants (GPU benchmarks compare).
TABLES_ALWAYS = True


def _with_identity_tables(lut: np.ndarray | None, pre: bool, post: bool, c: int,
                          with_pre: bool) -> tuple[np.ndarray | None, bool, bool]:
    """``(lut, pre, post)`` with the epilogue on, and the prologue where ``with_pre``: an
    identity row in the table for each one turned on here (the caller's ``lut`` is copied,
    never changed)."""
    add_pre, add_post = with_pre and not pre, not post
    if not (add_pre or add_post):
        return lut, pre, post
    table = (IDENTITY_LUT[:, :c] if lut is None else lut).copy()
    if add_pre:
        table[0] = IDENTITY_LUT[0, :c]
    if add_post:
        table[1] = IDENTITY_LUT[1, :c]
    return table, pre or add_pre, True


def run_stencil_2d(src3: Any, dst3: Any, taps_d: Any, radius: int, is_int: bool, full: float,
                   device: int, lut: np.ndarray | None = None, pre: bool = False,
                   post: bool = False, packed: bool | None = None,
                   reader: Gather | None = None) -> tuple:
    """The one-pass 2-D tiled stencil; ``lut`` (2, C, 256) uint8 holds the pre/post tables.

    ``packed`` (default: ``stencil_2d_packs``) picks the kernel that stages uint8 RGBA tiles as
    words; tests turn it off to compare the two. With a ``reader`` (``private_reader``) each
    band of tile rows computes only the columns that gather reads (``footprint.spans``).
    Returns the launch: (kernel, grid, block, arguments, shared bytes, the views of source and
    output buffers the first two arguments are).
    """
    h, w, c = src3.shape
    if packed is None:
        packed = variants.stencil_2d_packs(src3, dst3, radius)
    if TABLES_ALWAYS and src3.dtype == np.uint8 and dst3.dtype == np.uint8:
        lut, pre, post = _with_identity_tables(lut, pre, post, c, packed)
    geometry = codegen_gpu.tile_geometry(runtime.simulated, radius, packed,
                                         runtime.SHARED_DEFAULT)
    fn = _stencil_2d_fn(c, min(c, 3), pre, post, packed, geometry,
                        codegen_gpu.unsigned_source(src3.dtype))
    table = IDENTITY_LUT[:, :c] if lut is None else lut
    if packed:
        shared = codegen_gpu.packed_shared_bytes(radius, geometry)
        views = _word_views
    else:
        shared = codegen_gpu.tile_shared_bytes(radius, geometry)
        views = _flat_views
    band = codegen_gpu.tile_size(geometry)[0]
    span = (footprint.full_spans(h, w, band) if reader is None
            else footprint.spans(reader, band))
    args = (*views(src3, dst3), h, w, taps_d, is_int, full, runtime.upload_small(table, device),
            runtime.upload_small(span, device))
    grid = codegen_gpu.tile_grid(h, w, geometry)
    runtime.launch_grid(fn, grid, geometry[:2], device, *args, shared=shared)
    return fn, grid, geometry[:2], args, shared, views


def _views(src: Any, dst: Any) -> tuple[Any, Any]:
    return runtime.as_3d(src), runtime.as_3d(dst)


def _flat_views(src: Any, dst: Any) -> tuple[Any, Any]:
    return runtime.flat(runtime.as_3d(src)), runtime.flat(runtime.as_3d(dst))


def _word_views(src: Any, dst: Any) -> tuple[Any, Any]:
    return words(runtime.as_3d(src), flat=True), words(runtime.as_3d(dst), flat=True)


def _keeps(k: Stencil, lut: np.ndarray | None, reader: Gather | None) -> bool:
    """Whether to keep this launch for replays of ``k``'s plan: a replayed kernel (``_memo``)
    whose every argument but its source and output follows from the replay key (the stencil's
    parameters are in it; tables made from elementwise ops' parameters are not), computing
    its whole output."""
    memo = k.__dict__.get("_memo")
    return memo is not None and "bound" not in memo and lut is None and reader is None


def _keep(k: Stencil, bound: Any) -> None:
    if bound is not None:
        k._memo["bound"] = bound


@execute.binds("stencil")
def bind_stencil(k: Stencil, src: int, lists: dict[str, tuple[int, ...]], n: int
                 ) -> execute.ReplayLaunch | None:
    """The replay launch of a replayed one-stencil plan whose launch the runner kept: no
    parameter changes between replays (the stencil's are in the key)."""
    bound = k.__dict__.get("_memo", {}).get("bound")
    if bound is None or lists["nodes"][-1] != n - 1:
        return None
    return execute.ReplayLaunch(bound, src, n - 1, [], ())


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
