"""The separable stencil step of a batched group (``batch_group``): both passes over a batch.

Real GPUs run the one-pass 2-D tiles or the two tiled passes (as ``execute`` picks them per
image), other device backends the generic batched passes, the cpu backend the fused tiled
kernel over the whole batch (``CPU_FUSED_STENCIL``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from ..codegen import batch as codegen_batch
from ..codegen import gpu as codegen_gpu
from ..codegen import tile2d_batch
from ..ir.node import Node
from ..plan import footprint
from ..plan.schedule import full_range
from . import batch_launch, tables, variants
from .batch_launch import launch

# On the cpu backend the stencil step runs the fused tiled kernel (codegen_cpu, the same
# values) over every member's tiles in one parallel loop: several times faster there than the
# generic two-pass kernel, and one thread-pool start per batch instead of one per member (a
# batch of 32 x 32 images spent most of its time starting them). Tests turn this off to check
# the generic batched pass.
CPU_FUSED_STENCIL = True


@functools.cache
def _stencil_fns():
    return codegen_batch.stencil_batch_kernels(runtime.codegen_target, runtime.simulated)


@functools.cache
def _stencil_tiled_fns(c: int, nc: int):
    return codegen_batch.stencil_tiled_batch_kernels(c, nc, runtime.simulated)


@functools.cache
def _stencil_2d_fn(c: int, nc: int, unsigned: bool,
                   geometry: tuple[int, int, int, int, int], u8: bool = False,
                   words: bool = False):
    return codegen_batch.stencil_2d_batch_kernel(c, nc, runtime.simulated, unsigned, geometry,
                                                 u8, words)


# The batched tile's interior windows load uint8 sources as uint64 words
# (``tile2d_batch.word_loads``: the rows pass was bound by L1 wavefronts of its byte loads).
WORD_LOADS = True


def _spans(device: int, h: int, w: int, tile_h: int) -> Any:
    """``footprint.full_spans`` of an ``h`` x ``w`` image on ``device``, uploaded once (the same
    for every batch of a Generator: no upload per launch)."""
    # (the host spans made only when the device copy is missing)
    return runtime.constant(("batch-stencil-spans", h, w, tile_h),
                            lambda: footprint.full_spans(h, w, tile_h), device)


def _identity_lut(device: int, c: int) -> Any:
    # (the host table made only when the device copy is missing)
    return runtime.constant(("batch-stencil-lut", c),
                            lambda: tables.IDENTITY_LUT[:, :c].copy(), device)


@functools.lru_cache(maxsize=512)
def _plan_2d(c: int, nc: int, src_dtype: np.dtype, dtype: np.dtype, h: int, w: int, rmax: int,
             ntaps: int, variants_on: bool, limit: int, sim: bool,
             word_loads: bool) -> tuple | None:
    """The one-pass 2-D launch of a batch's stencil step, worked out once per (channels,
    dtypes, image size, radius, staged taps) and the settings it depends on: (kernel, its
    word-loading form or None, grid without its member axis, block, dynamic shared bytes, tile
    height, is_int, full), or None
    where the tiles do not run (``stencil_gpu``'s generic passes then). ~25 us of geometry
    and checks per call before (2-core dev machine), for the same few plans every batch."""
    del variants_on, limit, sim  # (part of the key: what ``stencil_2d_fits`` reads)
    if not variants.stencil_2d_fits(rmax) or not codegen_gpu.indexable((h, w, c)):
        return None
    # the tile run_stencil_2d takes for this radius (taller where its shared memory fits,
    # the staged taps included; the tall tile differs from the base one only in height)
    extra = tile2d_batch.taps_shared_bytes(ntaps, codegen_gpu.tile_geometry(runtime.simulated))
    geometry = codegen_gpu.tile_geometry(runtime.simulated, rmax, False,
                                         runtime.SHARED_DEFAULT - extra)
    unsigned, u8 = codegen_gpu.unsigned_source(src_dtype), dtype == np.uint8
    fn = _stencil_2d_fn(c, nc, unsigned, geometry, u8)
    # the word-loading kernel, where it applies (``fn`` then serves buffers not in words)
    words = None
    if word_loads and src_dtype == np.uint8 and c <= 8 and \
            geometry[2] == tile2d_batch.WORD_BLOCK:
        words = _stencil_2d_fn(c, nc, unsigned, geometry, u8, True)
    # (the block as three dims: the driver template's launch takes them as they are)
    return (fn, words, codegen_gpu.tile_grid(h, w, geometry), (*geometry[:2], 1),
            tile2d_batch.batch_shared_bytes(rmax, geometry, ntaps),
            codegen_gpu.tile_size(geometry)[0], dtype.kind in "ui", full_range(dtype))


def stencil_gpu(n: Node, src: Any, sidx: Any, dst: Any, taps: Any, rad: Any, rmax: int,
                device: int) -> None:
    """Both separable passes over a batch: one-pass 2-D tiles or two tiled passes on real GPUs
    (as ``execute``), else the generic passes."""
    nb, h, w, c = dst.shape
    nc = min(c, 3)
    plan = None
    if 0 < nb <= 65535 and h > 0 and w > 0 and variants.c_contiguous(src):
        plan = _plan_2d(c, nc, np.dtype(src.dtype), np.dtype(n.dtype), h, w, rmax,
                        taps.shape[1], variants.gpu_variants_enabled(),
                        runtime.SHARED_DEFAULT, runtime.simulated, WORD_LOADS)
    if plan is not None:
        fn, words, grid, block, shared, tile_h, is_int, full = plan
        grid = (*grid, nb)
        flat = runtime.flat(src)
        args = (flat, sidx, runtime.flat(dst), h, w, taps, rad, is_int, full,
                _identity_lut(device, c), _spans(device, h, w, tile_h))
        srcw = None if words is None else runtime.words(flat)
        if srcw is not None:
            fn, args = words, (*args, srcw)
        # straight through the kernel's driver template, as the batch's gathers launch
        batch_launch.launch_grid(fn, grid, block, device, args, shared)
        return
    is_int, full = n.dtype.kind in "ui", full_range(n.dtype)
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
    launch(rows, nb, h, w * nc, device, src, sidx, tmp, taps, rad, nc)
    launch(cols, nb, h, w * c, device, src, sidx, tmp, dst, taps, rad, nc, is_int, full)


@functools.cache
def _stencil_cpu_batch_fn():
    # imported here: only the cpu backend uses the fused CPU stencil
    from ..codegen import cpu as codegen_cpu

    return codegen_cpu.stencil_batch_kernel()


def stencil_cpu_batch(n: Node, src: Any, sidx: Any, dst: Any, taps: Any, rad: Any, rmax: int,
                      device: int) -> None:
    """The cpu backend's fused stencil over a whole batch: one parallel loop over every
    member's tiles (``codegen.cpu.stencil_batch_source``; member ``m`` reads
    ``src[sidx[m]]``, radius ``rad[m]``, -1 copies). The values of ``execute``'s per-image
    fused stencil."""
    import numba

    from ..codegen import cpu as codegen_cpu

    nb, h, w, c = dst.shape
    if nb == 0 or h == 0 or w == 0:
        return
    nc = min(c, 3)
    # about four tiles a thread over the whole batch (many small members: a tile each)
    threads = max(1, -(-numba.get_num_threads() // nb))
    band, strip = codegen_cpu.stencil_tiles(h, w, nc, 2 * max(rmax, 0) + 1, threads)
    runtime.launch_2d(_stencil_cpu_batch_fn(), nb * h, w, device, src, sidx, dst,
                      np.ascontiguousarray(taps, dtype=np.float64),
                      np.ascontiguousarray(rad, dtype=np.int64), nc, n.dtype.kind in "ui",
                      full_range(n.dtype), band, strip, tables.IDENTITY_LUT)
