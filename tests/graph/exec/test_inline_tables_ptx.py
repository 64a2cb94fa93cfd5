"""The gathers ``exec_gather.tables_inline`` picks on GPUs (uint8, elementwise chains inlined, no
table) compile to PTX for sm_90 without a GPU."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from ptx_compile import ptx_of
from source_lines import lines_within
from tiers import tiered

from millipyde.graph.codegen.gather import gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams, stat_width, tabled_fits
from millipyde.graph.codegen.loader import load
from millipyde.kernels import REGISTRY

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx

ELEMENTWISE = tuple(s.name for s in REGISTRY.values() if s.kind == "elementwise")


def _arr(dtype: np.dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def _args(sig: GatherSig) -> tuple:
    """The kernel's argument types: source, output, tables, the statistic row where an op
    reads a per-image statistic (equalize, autocontrast, adjust_contrast), the parameters."""
    stat = (_arr(np.float64, 1),) if stat_width(sig) else ()
    return (_arr(np.uint8, 3), _arr(np.uint8, 3), _arr(np.uint8, 3)) + stat + (
        types.float64,) * gather_nparams(sig)


def _inline_chain(cin: int, sampler: bool) -> GatherSig:
    return GatherSig(cin, "chain", True, sampler, "", pre=("adjust_gamma",),
                     post=ELEMENTWISE if sampler else (), lut_stages=(False, False))


# (the CI tier compiles the RGBA chains, whose kernels hold the RGB ones' lines:
# test_rgb_inline_chains_are_the_rgba_ones_without_alpha)
@pytest.mark.parametrize("cin, sampler", tiered(itertools.product((3, 4), (False, True)),
                                                lambda case: case[0] == 4, several=True))
def test_inline_uint8_chain_compiles_to_ptx(cin: int, sampler: bool) -> None:
    sig = _inline_chain(cin, sampler)
    mod = load(gather_source(sig, "cuda"), "cuda")
    argtys = _args(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".target sm_90" in ptx and ".entry" in ptx


@pytest.mark.parametrize("sampler", [False, True])
def test_rgb_inline_chains_are_the_rgba_ones_without_alpha(sampler: bool) -> None:
    # why the CI tier compiles only the RGBA chains to PTX: typing and lowering each line of
    # the RGB kernel is done in the RGBA one. If this stops holding, compile both in CI.
    assert lines_within(gather_source(_inline_chain(3, sampler), "cuda"),
                        gather_source(_inline_chain(4, sampler), "cuda"))


# (the CI tier takes one channel and RGBA; RGB is RGBA's kernel with one plane fewer)
@pytest.mark.parametrize("cin", tiered([1, 3, 4], [0, 2]))
def test_a_tabled_uint8_chain_compiles_to_ptx(cin: int) -> None:
    """The table in shared memory, the barrier and the lookups compile for sm_90."""
    sig = GatherSig(cin, "chain", True, False, "", pre=ELEMENTWISE,
                    lut_stages=(False, False), clip=False, tabled=True)
    mod = load(gather_source(sig, "cuda"), "cuda")
    argtys = _args(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".shared" in ptx and "bar.sync" in ptx and ".entry" in ptx


def test_only_a_lone_elementwise_chain_is_tabled() -> None:
    base = GatherSig(3, "chain", True, False, "", pre=("adjust_gamma",),
                     lut_stages=(False, False), clip=False)
    assert tabled_fits(base)
    for change in ({"sampler": True}, {"grey": True}, {"post": ("brightness",)},
                   {"mode": "lut"}, {"is_int": False}, {"pre": ()}, {"bounded": True}):
        assert not tabled_fits(dataclasses.replace(base, **change)), change
    with pytest.raises(ValueError):
        gather_source(dataclasses.replace(base, sampler=True, tabled=True), "cuda")
