"""The arena gathers and statistic reductions of ``Generator.batches`` compile to PTX for sm_90
without a GPU (numba-cuda + NVVM), with the ImageNet recipe's chain and every new op kind."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of
from tiers import tiered

import millipyde.ops  # noqa: F401  (the op registry the kernel sources read, filled on import)
from millipyde.graph.codegen import arena, stat
from millipyde.graph.codegen.gather_sig import GatherSig
from millipyde.graph.codegen.loader import load

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx

RECIPE = GatherSig(3, "chain", True, True, "",
                           post=("brightness", "adjust_contrast", "adjust_saturation",
                                 "adjust_hue", "gaussian_noise", "erase"),
                           lut_stages=(False, False), clip=False, edge=True)
GREY = GatherSig(1, "chain", True, True, "", pre=("brightness", "equalize"),
                         post=("adjust_contrast", "autocontrast"), lut_stages=(False, False),
                         clip=False)


def arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


# (the CI tier takes the recipe's chain writing the batch (NCHW) and the grey chain into the
# uint8 arena: each chain and each output form once; the two other pairs repeat them)
@pytest.mark.parametrize("sig, layout", tiered(
    [(RECIPE, "NCHW"), (RECIPE, ""), (GREY, "NCHW"), (GREY, "")], [0, 3], several=True,
    ids=lambda case: f"{case[1]}-{'recipe' if case[0] is RECIPE else 'grey'}"))
def test_arena_gather_compiles_to_ptx(sig, layout) -> None:
    mod = load(arena.arena_gather_source(sig, "cuda", False, True, layout, 3), "cuda")
    if layout:
        argtys = (arr(np.uint8, 1), arr(np.int64, 2), arr(np.float64, 2), arr(np.float64, 2),
                  arr(np.float32, 4), arr(np.int64, 1), arr(np.float64, 1),
                  arr(np.float64, 1), types.float64)
    else:
        argtys = (arr(np.uint8, 1), arr(np.int64, 2), arr(np.uint8, 4), arr(np.float64, 2),
                  arr(np.float64, 2))
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".entry" in ptx


@pytest.mark.parametrize("name", ["grey_sum", "channel_range", "channel_hist"])
def test_arena_statistics_compile_to_ptx(name) -> None:
    # after a statistic op (its row read as ``st_``), with gates
    prefix = GatherSig(3, "chain", True, True, "", post=("brightness", "equalize"),
                               lut_stages=(False, False), clip=False, edge=True)
    mod = load(stat.arena_stat_source(prefix, name, "cuda", False, True), "cuda")
    argtys = (arr(np.uint8, 1), arr(np.int64, 2), arr(np.float64, 2), arr(np.float64, 2),
              *[types.int64] * len(stat.ARENA_STAT_COLS))
    ptx = ptx_of(mod.kernel.py_func, argtys)
    if name == "grey_sum":  # one atomic per warp and slot
        assert "shfl.sync.down" in ptx and "atom.global.add.f64" in ptx
    if name == "channel_hist":
        assert "atom.shared.add.u32" in ptx and "bar.sync" in ptx


def test_arena_statistics_of_one_launch_compile_to_ptx() -> None:
    # a policy position's three statistic entries, one after another, in one launch
    ops = ("brightness", "adjust_contrast", "autocontrast", "equalize")
    parts = tuple((GatherSig(3, "chain", True, True, "", post=ops[:k],
                             lut_stages=(False, False), clip=False, edge=True), name)
                  for k, name in ((1, "grey_sum"), (2, "channel_range"), (3, "channel_hist")))
    mod = load(stat.arena_stats_source(parts, "cuda", False, True), "cuda")
    argtys = (arr(np.uint8, 1), arr(np.int64, 2), arr(np.float64, 2), arr(np.float64, 2),
              *[types.int64] * (3 * len(stat.ARENA_STAT_COLS)))
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert "atom.global.add.f64" in ptx and "atom.shared.add.u32" in ptx and "bar.sync" in ptx
