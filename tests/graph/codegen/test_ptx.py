"""Every generated CUDA kernel compiles to PTX for sm_90 without a GPU (numba-cuda + NVVM).

Runs in the cpu-backend process: ``numba.cuda.compile_ptx`` needs NVVM, not a device.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from source_lines import lines_within

from millipyde.graph.codegen import core as codegen
from millipyde.kernels import REGISTRY

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx

CC = (9, 0)
ELEMENTWISE = tuple(s.name for s in REGISTRY.values() if s.kind == "elementwise")


def arr(dtype: np.dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def gather_cases() -> list[tuple[codegen.GatherSig, np.dtype]]:
    cases = []
    for cin, sampler, grey in itertools.product((1, 3, 4), (False, True), (False, True)):
        if grey and cin == 1:
            continue
        cases.append((codegen.GatherSig(cin, "lut", True, sampler, grey,
                                        grey_ops=ELEMENTWISE if grey else ()), np.uint8))
    for dtype, sampler in itertools.product((np.float64, np.uint16), (False, True)):
        is_int = np.dtype(dtype).kind == "u"
        cases.append((codegen.GatherSig(1, "chain", is_int, sampler, False, pre=ELEMENTWISE,
                                        post=ELEMENTWISE if sampler else ()), dtype))
    return cases


@pytest.mark.parametrize("sig,dtype", gather_cases(), ids=lambda v: str(v)[:60])
def test_gather_kernel_compiles_to_ptx(sig: codegen.GatherSig, dtype: np.dtype) -> None:
    mod = codegen.load(codegen.gather_source(sig, "cuda"), "cuda")
    out_dtype = np.float64 if sig.grey else dtype
    # on CUDA the parameters are scalar arguments (codegen.gather_source)
    argtys = (arr(dtype, 3), arr(out_dtype, 3), arr(np.uint8, 3)) + (
        types.float64,) * codegen.gather_nparams(sig)
    ptx, _ = cuda.compile_ptx(mod.kernel.py_func, argtys, cc=CC)
    assert ".target sm_90" in ptx
    assert ".entry" in ptx


def test_packed_sampler_gather_converts_no_integers_to_float64() -> None:
    # 64-bit conversions run at a quarter of the FMA rate: bytes become doubles through _b2f's
    # bit pattern and _rint_clip rounds with adds; the floors left are the six of the integer
    # map (once per thread) and the two of the sample position (four channels' rint added 8)
    sig = codegen.GatherSig(4, "lut", True, True, True, packed=True)
    mod = codegen.load(codegen.gather_source(sig, "cuda"), "cuda")
    # packed: flat source words and flat output
    argtys = (arr(np.uint32, 1), arr(np.float64, 1), arr(np.uint8, 3)) + (
        types.float64,) * codegen.gather_nparams(sig)
    ptx, _ = cuda.compile_ptx(mod.kernel.py_func, argtys, cc=CC)
    assert "cvt.rn.f64.u32" not in ptx
    assert ptx.count("cvt.rmi.f64.f64") <= 8
    # rgb2grey scales the colours by multiplying, as skimage's img_as_float does: the one
    # float64 division left is alpha's
    assert ptx.count("div.rn.f64") == 1


def test_packed_grey_gather_issues_its_loads_first() -> None:
    # rgb2grey alone: each thread loads GATHER_ITEMS words of a row before it converts any
    sig = codegen.GatherSig(4, "lut", True, False, True, lut_stages=(False, False), packed=True)
    mod = codegen.load(codegen.gather_source(sig, "cuda"), "cuda")
    argtys = (arr(np.uint32, 1), arr(np.float64, 1), arr(np.uint8, 3)) + (
        types.float64,) * codegen.gather_nparams(sig)
    ptx, _ = cuda.compile_ptx(mod.kernel.py_func, argtys, cc=CC)
    lines = ptx.splitlines()
    loads = [i for i, line in enumerate(lines) if "ld.global" in line]
    n = codegen.gather_items(sig, "cuda")
    assert n > 1 and len(loads) == n
    assert all("ld.global.u32" in lines[i] for i in loads)
    assert max(loads) < min(i for i, line in enumerate(lines) if "div.rn.f64" in line)


@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.uint16])
def test_stencil_kernels_compile_to_ptx(dtype: np.dtype) -> None:
    rows, cols = codegen.stencil_kernels("cuda")
    src, tmp, taps = arr(dtype, 3), arr(np.float64, 3), arr(np.float64, 1)
    ptx_rows, _ = cuda.compile_ptx(rows.py_func, (src, tmp, taps, types.int64), cc=CC)
    ptx_cols, _ = cuda.compile_ptx(
        cols.py_func, (src, tmp, arr(dtype, 3), taps, types.int64, types.boolean, types.float64),
        cc=CC,
    )
    assert ".entry" in ptx_rows and ".entry" in ptx_cols


@pytest.mark.parametrize("c", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.uint16])
def test_tiled_stencil_kernels_compile_to_ptx(c: int, dtype: np.dtype) -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    nc = min(c, 3)
    rows, cols = codegen_gpu.stencil_tiled_kernels(c, nc)
    src, tmp, taps = arr(dtype, 3), arr(np.float64, 3), arr(np.float64, 1)
    ptx_rows, _ = cuda.compile_ptx(rows.py_func, (src, tmp, taps, types.int64), cc=CC)
    ptx_cols, _ = cuda.compile_ptx(
        cols.py_func, (src, tmp, arr(dtype, 3), taps, types.boolean, types.float64), cc=CC,
    )
    assert ".entry" in ptx_rows and ".entry" in ptx_cols
    # the window lives in registers: no local-memory array
    assert ".local" not in ptx_rows and ".local" not in ptx_cols


def test_rgba_lut_kernels_compile_to_ptx() -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    flat, mapped = codegen_gpu.lut_rgba_kernels()
    lut = arr(np.uint8, 3)
    ptx_flat, _ = cuda.compile_ptx(
        flat.py_func, (arr(np.uint32, 1), arr(np.uint32, 1), lut, types.boolean), cc=CC)
    ptx_mapped, _ = cuda.compile_ptx(
        mapped.py_func,
        (arr(np.uint32, 2), arr(np.uint32, 2), lut, arr(np.float64, 1), types.boolean), cc=CC)
    assert ".entry" in ptx_flat and ".entry" in ptx_mapped
    assert "ld.global.u32" in ptx_flat or "ld.global.nc.u32" in ptx_flat


@pytest.mark.parametrize("gates", [False, True], ids=["plain", "gated"])
@pytest.mark.parametrize("sig,dtype", gather_cases(), ids=lambda v: str(v)[:60])
def test_batched_gather_kernel_compiles_to_ptx(sig: codegen.GatherSig, dtype: np.dtype,
                                               gates: bool) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    kernel = codegen_batch.gather_batch_kernel(sig, "cuda", gates=gates)
    out_dtype = np.float64 if sig.grey else dtype
    argtys = (arr(dtype, 4), arr(np.int64, 1), arr(out_dtype, 4), arr(np.uint8, 4),
              arr(np.float64, 2))
    ptx, _ = cuda.compile_ptx(kernel.py_func, argtys, cc=CC)
    assert ".entry" in ptx
    assert "%ctaid.z" in ptx  # the image index comes from the grid's z axis


@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.uint16])
def test_batched_stencil_kernels_compile_to_ptx(dtype: np.dtype) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    rows, cols = codegen_batch.stencil_batch_kernels("cuda")
    src, tmp, taps = arr(dtype, 4), arr(np.float64, 4), arr(np.float64, 2)
    idx = arr(np.int64, 1)
    ptx_rows, _ = cuda.compile_ptx(rows.py_func, (src, idx, tmp, taps, idx, types.int64), cc=CC)
    ptx_cols, _ = cuda.compile_ptx(
        cols.py_func, (src, idx, tmp, arr(dtype, 4), taps, idx, types.int64, types.boolean,
                       types.float64), cc=CC)
    assert ".entry" in ptx_rows and ".entry" in ptx_cols


@pytest.mark.parametrize("c", [1, 3, 4])
def test_batched_tiled_stencil_kernels_compile_to_ptx(c: int) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    rows, cols = codegen_batch.stencil_tiled_batch_kernels(c, min(c, 3))
    src, tmp, taps, idx = arr(np.uint8, 4), arr(np.float64, 4), arr(np.float64, 2), arr(
        np.int64, 1)
    ptx_rows, _ = cuda.compile_ptx(rows.py_func, (src, idx, tmp, taps, idx, types.int64), cc=CC)
    ptx_cols, _ = cuda.compile_ptx(
        cols.py_func, (src, idx, tmp, arr(np.uint8, 4), taps, idx, types.boolean, types.float64),
        cc=CC)
    assert ".entry" in ptx_rows and ".entry" in ptx_cols
    assert ".local" not in ptx_rows and ".local" not in ptx_cols


# c=3 is compiled as part of c=4 (test_rgb_2d_stencils_are_the_rgba_ones_without_the_alpha_copy)
@pytest.mark.parametrize("c", [1, 4])
def test_batched_2d_stencil_kernel_compiles_to_ptx(c: int) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    kernel = codegen_batch.stencil_2d_batch_kernel(c, min(c, 3))
    idx = arr(np.int64, 1)
    ptx, _ = cuda.compile_ptx(
        kernel.py_func, (arr(np.uint8, 4), idx, arr(np.uint8, 4), arr(np.float64, 2), idx,
                         types.boolean, types.float64, arr(np.uint8, 3), arr(np.int32, 2)),
        cc=CC)
    assert ".entry" in ptx and "%ctaid.z" in ptx


# c=3 is compiled as part of c=4 (the test below)
@pytest.mark.parametrize("c,packed", [(1, False), (4, False), (4, True)])
def test_2d_stencil_kernel_compiles_to_ptx(c: int, packed: bool) -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    kernel = codegen_gpu.stencil_2d_kernel(c, min(c, 3), pre=True, post=True, packed=packed)
    img = arr(np.uint32, 2) if packed else arr(np.uint8, 3)
    ptx, _ = cuda.compile_ptx(
        kernel.py_func, (img, img, arr(np.float64, 1), types.boolean, types.float64,
                         arr(np.uint8, 3), arr(np.int32, 2)), cc=CC)
    assert ".entry" in ptx and ".local" not in ptx
    if packed:
        # its staging and store loops are while loops: no 64-bit division for a trip count
        assert "div.s64" not in ptx


def test_rgb_2d_stencils_are_the_rgba_ones_without_the_alpha_copy() -> None:
    # why the two PTX tests above compile c=4 and not also c=3 (a minute of CI each): the RGB
    # kernels are the RGBA ones less the alpha channel's copy. If that stops being so, put c=3
    # back in their parametrisations.
    from millipyde.graph.codegen import batch as codegen_batch
    from millipyde.graph.codegen import gpu as codegen_gpu

    rgb = codegen_gpu.stencil_2d_source(3, 3, pre=True, post=True)
    rgba = codegen_gpu.stencil_2d_source(4, 3, pre=True, post=True)
    assert lines_within(rgb, rgba) and not lines_within(rgba, rgb)
    rgb = codegen_batch.stencil_2d_batch_source(3, 3)
    rgba = codegen_batch.stencil_2d_batch_source(4, 3)
    assert lines_within(rgb, rgba) and not lines_within(rgba, rgb)


def test_tall_tiles_only_where_their_shared_memory_fits() -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    base, limit = codegen_gpu.TILE_GEOMETRY, 48 * 1024
    tall = codegen_gpu.tile_geometry(False, 16, False, limit)
    assert tall == (*base[:4], 2 * base[4])
    assert codegen_gpu.tile_shared_bytes(16, tall) <= limit
    # too wide a halo for the tall tile, and the packed kernel's staged planes: the base tile
    assert codegen_gpu.tile_shared_bytes(40, tall) > limit
    assert codegen_gpu.tile_geometry(False, 40, False, limit) == base
    assert codegen_gpu.tile_geometry(False, 16, True, limit) == base
    assert codegen_gpu.tile_geometry(False) == base
    kernel = codegen_gpu.stencil_2d_kernel(1, 1, geometry=tall)
    img = arr(np.float64, 3)
    ptx, _ = cuda.compile_ptx(
        kernel.py_func, (img, img, arr(np.float64, 1), types.boolean, types.float64,
                         arr(np.uint8, 3), arr(np.int32, 2)), cc=CC)
    assert ".entry" in ptx and ".local" not in ptx
