"""Every generated CUDA kernel compiles to PTX for sm_90 without a GPU (numba-cuda + NVVM).

Runs in the cpu-backend process: ``millipyde.graph.codegen.ptx`` compiles with NVVM, no device.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np
import pytest
from ptx_compile import ptx_of
from tiers import tiered

from millipyde.graph.codegen import ptx
from millipyde.graph.codegen.gather import gather_items, gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams, stat_width
from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.stencil import stencil_kernels
from millipyde.graph.codegen.target import DEVICE_DECORATOR, HEADER
from millipyde.kernels import REGISTRY

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx

ELEMENTWISE = tuple(s.name for s in REGISTRY.values() if s.kind == "elementwise")


def arr(dtype: np.dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def _twice_plus_one(x):
    return x * 2.0 + 1.0


_twice_device = cuda.jit(device=True)(_twice_plus_one)


def _scaled(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = _twice_device(a[i])


def test_calls_names_a_device_function_left_uninlined() -> None:
    # without NVVM's optimiser (-opt=0) the device function stays a call: what ptx_of (every
    # PTX test's compile) refuses
    argtys = (arr(np.float64, 1),)
    with ptx.device_compute_capability(ptx.CC):
        unoptimised, _ = cuda.compile_ptx(_scaled, argtys, cc=ptx.CC, opt=False)
    assert len(ptx.calls(unoptimised)) == 1 and "twice_plus_one" in ptx.calls(unoptimised)[0]
    assert ptx.calls(ptx.compile_ptx(_scaled, argtys)) == []


def test_compile_ptx_gives_the_device_lookup_back() -> None:
    from numba.cuda import dispatcher

    real = dispatcher.get_current_device
    ptx.compile_ptx(_scaled, (arr(np.float32, 1),))
    assert dispatcher.get_current_device is real


def test_generated_cuda_device_functions_are_inlined_by_nvvm() -> None:
    # the GPU's form (forceinline), the simulator's plain device functions
    head = HEADER["cuda"]
    assert f"_dev = {DEVICE_DECORATOR}\n" in head and "forceinline=True" in DEVICE_DECORATOR
    assert "inline=True)" not in head.replace("forceinline=True)", "")


def gather_cases() -> list[tuple[GatherSig, np.dtype]]:
    cases = []
    for cin, sampler, grey in itertools.product((1, 3, 4), (False, True), ("", "rgb2grey")):
        if grey and cin == 1:
            continue
        cases.append((GatherSig(cin, "lut", True, sampler, grey,
                                        grey_ops=ELEMENTWISE if grey else ()), np.uint8))
    for dtype, sampler in itertools.product((np.float64, np.uint16), (False, True)):
        is_int = np.dtype(dtype).kind == "u"
        cases.append((GatherSig(1, "chain", is_int, sampler, "", pre=ELEMENTWISE,
                                        post=ELEMENTWISE if sampler else ()), dtype))
    return cases


def gather_ci(case: tuple[GatherSig, np.dtype]) -> bool:
    """The CI tier's gather cases: every elementwise op through a table (RGB, sampler, grey
    ops) and through float64 and uint16 chains, RGBA without a sampler, one-channel with one;
    each case compiles every elementwise kernel, so the rest vary channels and samplers only."""
    sig, dtype = case
    if sig.mode == "chain":
        return sig.sampler == (np.dtype(dtype) == np.float64)
    return (sig.cin, sig.sampler, sig.grey) in ((3, True, "rgb2grey"), (4, False, ""),
                                                (1, True, ""))


def gather_id(case: tuple[GatherSig, np.dtype]) -> str:
    sig, dtype = case
    return (f"{sig.mode}-c{sig.cin}-{'sampler' if sig.sampler else 'nosampler'}-"
            f"{sig.grey or 'colour'}-{np.dtype(dtype).name}")


@pytest.mark.parametrize("sig,dtype", tiered(gather_cases(), gather_ci, several=True,
                                                     ids=gather_id))
def test_gather_kernel_compiles_to_ptx(sig: GatherSig, dtype: np.dtype) -> None:
    mod = load(gather_source(sig, "cuda"), "cuda")
    out_dtype = np.float64 if sig.grey else dtype
    # on CUDA the parameters are scalar arguments (gather_source); ops reading a per-image
    # statistic (equalize, autocontrast, adjust_contrast) add its row
    stat = (arr(np.float64, 1),) if stat_width(sig) else ()
    argtys = (arr(dtype, 3), arr(out_dtype, 3), arr(np.uint8, 3)) + stat + (
        types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".target sm_90" in ptx
    assert ".entry" in ptx


def test_packed_sampler_gather_converts_no_integers_to_float64() -> None:
    # 64-bit conversions run at a quarter of the FMA rate: bytes become doubles through _b2f's
    # bit pattern and _rint_clip rounds with adds; the floors left are the six of the integer
    # map (once per thread) and the two of the sample position (four channels' rint added 8)
    sig = GatherSig(4, "lut", True, True, "rgb2grey", packed=True)
    mod = load(gather_source(sig, "cuda"), "cuda")
    # packed: flat source words and flat output
    argtys = (arr(np.uint32, 1), arr(np.float64, 1), arr(np.uint8, 3)) + (
        types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert "cvt.rn.f64.u32" not in ptx
    assert ptx.count("cvt.rmi.f64.f64") <= 8
    # rgb2grey scales the colours by multiplying, as skimage's img_as_float does: the one
    # float64 division left is alpha's
    assert ptx.count("div.rn.f64") == 1


def test_packed_grey_gather_issues_its_loads_first() -> None:
    # rgb2grey alone: each thread loads GATHER_ITEMS words of a row before it converts any
    sig = GatherSig(4, "lut", True, False, "rgb2grey", lut_stages=(False, False), packed=True)
    mod = load(gather_source(sig, "cuda"), "cuda")
    argtys = (arr(np.uint32, 1), arr(np.float64, 1), arr(np.uint8, 3)) + (
        types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    lines = ptx.splitlines()
    loads = [i for i, line in enumerate(lines) if "ld.global" in line]
    n = gather_items(sig, "cuda")
    assert n > 1 and len(loads) == n
    assert all("ld.global.u32" in lines[i] for i in loads)
    assert max(loads) < min(i for i, line in enumerate(lines) if "div.rn.f64" in line)


@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.uint16])
def test_stencil_kernels_compile_to_ptx(dtype: np.dtype) -> None:
    rows, cols = stencil_kernels("cuda")
    src, tmp, taps = arr(dtype, 3), arr(np.float64, 3), arr(np.float64, 1)
    ptx_rows = ptx_of(rows.py_func, (src, tmp, taps, types.int64))
    ptx_cols = ptx_of(
        cols.py_func, (src, tmp, arr(dtype, 3), taps, types.int64, types.boolean, types.float64)
    )
    assert ".entry" in ptx_rows and ".entry" in ptx_cols


@pytest.mark.parametrize("c, dtype", tiered(
    itertools.product([1, 2, 3, 4], [np.uint8, np.float64, np.uint16]),
    # (one case per dtype and the two-channel form; RGB uint8 is RGBA's without the alpha
    # pass-through and two channels' with a third plane)
    lambda case: case in ((1, np.uint16), (2, np.uint8), (4, np.float64)),
    several=True))
def test_tiled_stencil_kernels_compile_to_ptx(c: int, dtype: np.dtype) -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    nc = min(c, 3)
    rows, cols = codegen_gpu.stencil_tiled_kernels(c, nc)
    src, tmp, taps = arr(dtype, 3), arr(np.float64, 3), arr(np.float64, 1)
    ptx_rows = ptx_of(rows.py_func, (src, tmp, taps, types.int64))
    ptx_cols = ptx_of(
        cols.py_func, (src, tmp, arr(dtype, 3), taps, types.boolean, types.float64)
    )
    assert ".entry" in ptx_rows and ".entry" in ptx_cols
    # the window lives in registers: no local-memory array
    assert ".local" not in ptx_rows and ".local" not in ptx_cols


def test_rgba_lut_kernels_compile_to_ptx() -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    flat, mapped = codegen_gpu.lut_rgba_kernels()
    lut = arr(np.uint8, 3)
    ptx_flat = ptx_of(
        flat.py_func, (arr(np.uint32, 1), arr(np.uint32, 1), lut, types.boolean))
    ptx_mapped = ptx_of(
        mapped.py_func,
        (arr(np.uint32, 2), arr(np.uint32, 2), lut, arr(np.float64, 1), types.boolean))
    assert ".entry" in ptx_flat and ".entry" in ptx_mapped
    assert "ld.global.u32" in ptx_flat or "ld.global.nc.u32" in ptx_flat


def batched_cases() -> list[tuple[GatherSig, np.dtype, bool, bool]]:
    """(sig, dtype, gates, every_op): the full tier compiles every form with every op; the CI
    tier the gated forms of ``gather_ci`` with a few ops (each op's device code is the one
    test_gather_kernel_compiles_to_ptx compiles: with every op a batched sampler kernel costs
    60-90 CPU-s of NVVM) and one table form with every op."""
    full = [(*case, gates, True) for gates in (False, True) for case in gather_cases()]
    few = [(*case, True, False) for case in gather_cases() if gather_ci(case)]
    return full + few


def batched_ci(case: tuple[GatherSig, np.dtype, bool, bool]) -> bool:
    """The CI tier's batched gathers: a table form with a sampler and grey ops (RGB), a chain
    form (uint16, no sampler) and RGBA's table form with every op, all gated. The rest are
    these forms with another channel count or dtype: the float64 chain around a sampler is the
    plain gather's CI case (test_gather_kernel_compiles_to_ptx), the batch's indexing the
    three kept here's (18 + 7 + 2 CPU-s of PTX moved to the full tier, 2026-11-29)."""
    sig, dtype, gates, every_op = case
    if every_op:
        return gates and (sig.cin, sig.sampler, sig.grey) == (4, False, "")
    return (sig.mode, sig.cin, sig.sampler, sig.grey) in (("lut", 3, True, "rgb2grey"),
                                                          ("chain", 1, False, ""))


@pytest.mark.parametrize("sig, dtype, gates, every_op", tiered(
    batched_cases(), batched_ci, several=True,
    ids=lambda case: (f"{gather_id(case[:2])}-{'gated' if case[2] else 'plain'}-"
                      f"{'every-op' if case[3] else 'few-ops'}")))
def test_batched_gather_kernel_compiles_to_ptx(sig: GatherSig, dtype: np.dtype,
                                               gates: bool, every_op: bool) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    # (ops reading a per-image statistic are never in a batched gather: exec.batch)
    no_stat = tuple(n for n in ELEMENTWISE if not REGISTRY[n].stat)
    ops = no_stat if every_op else no_stat[:4]
    sig = dataclasses.replace(sig, pre=ops if sig.pre else (), post=ops if sig.post else (),
                              grey_ops=ops if sig.grey_ops else ())
    kernel = codegen_batch.gather_batch_kernel(sig, "cuda", gates=gates)
    out_dtype = np.float64 if sig.grey else dtype
    # flat buffers (batch_gather.launch_args): src, sidx, lut, p, nb, h, w, sn_, sw_, dst
    argtys = (arr(dtype, 1), arr(np.int64, 1), arr(np.uint8, 1), arr(np.float64, 1),
              *(types.int64,) * 5, arr(out_dtype, 1))
    ptx = ptx_of(kernel.py_func, argtys)
    assert ".entry" in ptx
    assert "%ctaid.z" in ptx  # the image index comes from the grid's z axis
    assert not GENERIC_LOAD.findall(ptx)


def test_batched_gather_refuses_a_statistic() -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    sig = GatherSig(3, "chain", True, False, "", pre=("equalize",))
    with pytest.raises(ValueError, match="statistic"):
        codegen_batch.gather_batch_kernel(sig, "cuda")


@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.uint16])
def test_batched_stencil_kernels_compile_to_ptx(dtype: np.dtype) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    rows, cols = codegen_batch.stencil_batch_kernels("cuda")
    src, tmp, taps = arr(dtype, 4), arr(np.float64, 4), arr(np.float64, 2)
    idx = arr(np.int64, 1)
    ptx_rows = ptx_of(rows.py_func, (src, idx, tmp, taps, idx, types.int64))
    ptx_cols = ptx_of(
        cols.py_func, (src, idx, tmp, arr(dtype, 4), taps, idx, types.int64, types.boolean,
                       types.float64))
    assert ".entry" in ptx_rows and ".entry" in ptx_cols


# (the CI tier takes RGB and RGBA, the alpha passed through; one channel is RGB's kernel with
# fewer planes)
@pytest.mark.parametrize("c", tiered([1, 3, 4], [1, 2]))
def test_batched_tiled_stencil_kernels_compile_to_ptx(c: int) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    rows, cols = codegen_batch.stencil_tiled_batch_kernels(c, min(c, 3))
    src, tmp, taps, idx = arr(np.uint8, 4), arr(np.float64, 4), arr(np.float64, 2), arr(
        np.int64, 1)
    ptx_rows = ptx_of(rows.py_func, (src, idx, tmp, taps, idx, types.int64))
    ptx_cols = ptx_of(
        cols.py_func, (src, idx, tmp, arr(np.uint8, 4), taps, idx, types.boolean, types.float64))
    assert ".entry" in ptx_rows and ".entry" in ptx_cols
    assert ".local" not in ptx_rows and ".local" not in ptx_cols


# loads with no state space (generic: NVVM lost the pointer's address space) and 64-bit
# integer multiplies (Numba's 64-bit index arithmetic, a view's run-time stride)
GENERIC_LOAD = re.compile(r"\bld\.(?!global|shared|param|local|const)[a-z0-9]+\b")
MUL64 = re.compile(r"\b(?:mul|mad)\.lo\.[su]64\b")


def tile_argtys(img: types.Array, batch: bool) -> tuple:
    """The argument types of a ``tile2d`` launch over flat ``img`` buffers."""
    tail = (types.boolean, types.float64, arr(np.uint8, 3), arr(np.int32, 2))
    hw = (types.int64, types.int64)
    if batch:
        idx = arr(np.int64, 1)
        return (img, idx, img, *hw, arr(np.float64, 2), idx, *tail)
    return (img, img, *hw, arr(np.float64, 1), *tail)


def assert_direct_32bit(ptx: str, mul64_max: int) -> None:
    # every load names its space, and the index math of the tap loops is 32-bit: before the
    # kernels read flat buffers by 32-bit offsets, the RGB one had 66 generic loads and 184
    # 64-bit multiplies (bench/RESULTS.md)
    assert not GENERIC_LOAD.findall(ptx)
    assert len(MUL64.findall(ptx)) <= mul64_max


# (each case 10-16 CPU-s of NVVM: the CI tier takes RGB batched, RGBA per image plain and packed)
@pytest.mark.parametrize("c", tiered([1, 3, 4], [1]))
def test_batched_2d_stencil_kernel_compiles_to_ptx(c: int) -> None:
    from millipyde.graph.codegen import batch as codegen_batch

    kernel = codegen_batch.stencil_2d_batch_kernel(c, min(c, 3), unsigned=True)
    ptx = ptx_of(kernel.py_func, tile_argtys(arr(np.uint8, 1), True))
    assert ".entry" in ptx and "%ctaid.z" in ptx and ".local" not in ptx
    # a member's base offsets and the gated copy are 64-bit, nothing in the loops
    assert_direct_32bit(ptx, 48)
    # bytes become float64 through _b2f, not the quarter-rate conversion
    assert not re.search(r"cvt\.rn\.f64\.[su]", ptx)


@pytest.mark.parametrize("c,packed", tiered([(1, False), (3, False), (4, False), (4, True)],
                                            [2, 3], several=True))
def test_2d_stencil_kernel_compiles_to_ptx(c: int, packed: bool) -> None:
    from millipyde.graph.codegen import gpu as codegen_gpu

    kernel = codegen_gpu.stencil_2d_kernel(c, min(c, 3), pre=True, post=True, packed=packed)
    img = arr(np.uint32, 1) if packed else arr(np.uint8, 1)
    ptx = ptx_of(kernel.py_func, tile_argtys(img, False))
    assert ".entry" in ptx and ".local" not in ptx
    assert_direct_32bit(ptx, 32)
    if packed:
        # its staging and store loops are while loops: no 64-bit division for a trip count
        assert "div.s64" not in ptx


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
    ptx = ptx_of(kernel.py_func, tile_argtys(arr(np.float64, 1), False))
    assert ".entry" in ptx and ".local" not in ptx


# (the CI tier takes RGB, whose window reads c + 1 = 4 words; one channel is the same kernel
# with fewer planes, 7-8 CPU-s of PTX)
@pytest.mark.parametrize("c", tiered([1, 3], [1]))
def test_batched_2d_stencil_word_loads_compile_to_ptx(c: int) -> None:
    """The word-loading batched tile (``tile2d_batch.word_loads``): its interior windows'
    whole blocks read ``c + 1`` uint64 words, not 8 bytes; the same guarantees otherwise."""
    from millipyde.graph.codegen import batch as codegen_batch

    kernel = codegen_batch.stencil_2d_batch_kernel(c, min(c, 3), unsigned=True, u8=True,
                                                   words=True)
    img = arr(np.uint8, 1)
    ptx = ptx_of(kernel.py_func, (*tile_argtys(img, True), arr(np.uint64, 1)))
    assert ".entry" in ptx and ".local" not in ptx
    assert_direct_32bit(ptx, 48)
    assert not re.search(r"cvt\.rn\.f64\.[su]", ptx)
    assert len(re.findall(r"\bld\.global(?:\.nc)?\.u64\b", ptx)) >= c + 1
