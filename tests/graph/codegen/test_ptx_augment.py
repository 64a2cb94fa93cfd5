"""The new gather shapes of issue 15 compile to PTX for sm_90 without a GPU: pads (bounded
reads with fills), edge-mode samplers (resize), chained pixelwise/positional ops on uint8
colour, user maps and ops, and the reductions of every per-image statistic (test_ptx.py's
style)."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of
from source_lines import lines_within
from tiers import tiered

import millipyde as mp
from millipyde.graph.codegen.gather import gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams, stat_width
from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.stat import gather_stat_source
from millipyde.kernels.stats import STATISTICS

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx



@mp.elementwise
def _ptx_user_curve(v, c, k):
    return v * v * k


@mp.pixelwise
def _ptx_user_mix(r, g, b, t):
    return g + t, b, r


@mp.index_map
def _ptx_user_map(row, col, height, width, a):
    return row + a * col * col / (width + 1.0), col


COLOUR = ("adjust_saturation", "adjust_hue", "gaussian_noise", "erase",
          _ptx_user_curve.name, _ptx_user_mix.name)


def _shapes(cin: int) -> list[tuple[GatherSig, np.dtype]]:
    """The uint8 gather shapes of ``cin`` channels."""
    return [
        # a pad, table mode, no sampler; and before an edge sampler
        (GatherSig(cin, "lut", True, False, "", bounded=True), np.uint8),
        (GatherSig(cin, "lut", True, True, "", bounded=True, edge=True, clip=False),
         np.uint8),
        # chained colour ops on uint8 after an edge sampler (the ImageNet chain), then grey
        (GatherSig(cin, "chain", True, True, "", post=COLOUR, edge=True, clip=False),
         np.uint8),
        (GatherSig(cin, "chain", True, False, "rgb2grey",
                   pre=("adjust_contrast", "equalize") + COLOUR,
                   grey_ops=("gaussian_noise", "autocontrast")), np.uint8),
        (GatherSig(cin, "chain", True, True, "", post=COLOUR,
                           umap=_ptx_user_map.name, clip=False), np.uint8),
    ]


# the RGB shapes whose kernels are their RGBA ones less the alpha channel's lines
# (test_rgb_gathers_are_the_rgba_ones_without_alpha): compiling the RGBA kernel compiles theirs
RGB_WITHIN_RGBA = (0, 1, 2, 4)


def _cases() -> list[tuple[GatherSig, np.dtype]]:
    rgb = [case for i, case in enumerate(_shapes(3)) if i not in RGB_WITHIN_RGBA]
    return rgb + _shapes(4) + [
        (GatherSig(1, "chain", False, True, "", post=("adjust_contrast", "erase",
                                                                 "gaussian_noise"),
                           bounded=True, edge=True, clip=False), np.float64),
        # a built-in non-affine map, then a pixelwise op that draws per pixel and reads a
        # statistic (elastic_grid, iso_noise)
        (GatherSig(4, "chain", True, True, "", post=("iso_noise",), umap="elastic_grid",
                   clip=False), np.uint8)]


def _argtys(sig: GatherSig, dtype: np.dtype, n: int, out: types.Array):
    # (a kernel whose ops read statistics takes their rows after the tables)
    stat = (types.Array(types.float64, 1, "C"),) if stat_width(sig) else ()
    return (types.Array(from_dtype(np.dtype(dtype)), 3, "C"), out,
            types.Array(from_dtype(np.dtype(np.uint8)), 3, "C")) + stat + (types.float64,) * n


@pytest.mark.parametrize("sig,dtype", _cases(), ids=lambda v: str(v)[:80])
def test_gather_compiles_to_ptx(sig: GatherSig, dtype: np.dtype) -> None:
    mod = load(gather_source(sig, "cuda"), "cuda")
    out = types.Array(from_dtype(np.dtype(np.float64 if sig.grey else dtype)), 3, "C")
    ptx = ptx_of(mod.kernel.py_func,
                 _argtys(sig, dtype, gather_nparams(sig), out))
    assert ".target sm_90" in ptx and ".entry" in ptx


def test_rgb_gathers_are_the_rgba_ones_without_alpha() -> None:
    # why test_gather_compiles_to_ptx leaves out these RGB shapes (half a minute of CI each).
    # If one stops being a part of its RGBA kernel, take it out of RGB_WITHIN_RGBA.
    for i, ((rgb, _), (rgba, _)) in enumerate(zip(_shapes(3), _shapes(4), strict=True)):
        within = lines_within(gather_source(rgb, "cuda"),
                              gather_source(rgba, "cuda"))
        # the grey shape is not: rgb2grey is called without an alpha there
        assert within == (i in RGB_WITHIN_RGBA), rgb


#: (prefix shape, statistic): every statistic over a table-mode prefix, and each over a
#: chain-mode prefix whose own ops read statistics (grey sum after a grey conversion)
_STAT_CASES = ([(_shapes(3)[0], s) for s in STATISTICS]
               # (the lightness reads R, G, B: no pixelwise op follows a grey conversion)
               + [(_shapes(3)[3], s) for s in STATISTICS if s != "lightness_moments"]
               + [(_shapes(3)[2], "channel_hist")])


def _stat_ci(case: tuple) -> bool:
    """The CI tier's reductions: every statistic over the table prefix (each reduction's own
    code), and the grey sum over the chain prefix whose ops read statistics (a reduction after
    such a prefix); the chain prefixes' other reductions repeat those two halves, their
    prefixes compiled by test_gather_compiles_to_ptx (6-8 CPU-s of PTX each)."""
    (sig, _), stat = case
    return sig.mode == "lut" or (sig.grey == "rgb2grey" and stat == "grey_sum")


@pytest.mark.parametrize("case,stat", tiered(_STAT_CASES, _stat_ci, several=True,
                                             ids=lambda v: f"{str(v[0])[:60]}-{v[1]}"))
def test_statistic_reductions_compile_to_ptx(case, stat) -> None:
    sig, dtype = case
    mod = load(gather_stat_source(sig, stat, "cuda"), "cuda")
    acc = types.Array(types.float64, 1, "C")
    ptx = ptx_of(mod.kernel.py_func,
                 _argtys(sig, dtype, gather_nparams(sig) + 2, acc))
    assert ".entry" in ptx
    # registers merged once per warp (sums: one add per slot); histograms counted in shared
    # memory, then one running sum per bin and block added into the row
    atoms = {"grey_sum": ["atom.global.add.f64"], "channel_range": ["atom.global.cas.b64"],
             "channel_hist": ["atom.shared.add.u32", "atom.global.add.f64"],
             "lightness_moments": ["atom.global.add.f64"]}[stat]
    assert all(a in ptx for a in atoms), (stat, atoms)
    if stat == "grey_sum":
        assert ptx.count("atom.global.add.f64") == 2 and "shfl.sync.down" in ptx
