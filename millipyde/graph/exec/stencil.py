"""Run a separable stencil kernel: the fused CPU kernel, the one-pass 2-D tiled GPU kernel,
the tiled two-pass GPU kernels or the generic passes (``variants`` picks)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from ...kernels import REGISTRY
from ..codegen import gpu as codegen_gpu
from ..codegen.stencil import stencil_kernels
from ..plan import footprint
from ..plan.schedule import Gather, Stencil, full_range
from . import execute, variants
from .tables import IDENTITY_LUT, stencil_tables
from .variants import _words


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
def _stencil_cpu_fn(pre: bool = False, post: bool = False):
    # imported here: only the cpu backend uses the fused CPU stencil
    from ..codegen import cpu as codegen_cpu

    return codegen_cpu.stencil_kernel(pre, post), codegen_cpu.stencil_tiles


@execute.runs("stencil")
def run_stencil(k: Stencil, src: Any, device: int, reader: Gather | None = None
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
    if variants.stencil_2d_fits(radius) and variants.stencil_2d_reads(src3, src3.shape):
        run_stencil_2d(src3, dst3, taps_d, radius, is_int, full, device, lut, pre, post,
                       reader=reader)
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
        packed = variants.stencil_2d_packs(src3, dst3, radius)
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
