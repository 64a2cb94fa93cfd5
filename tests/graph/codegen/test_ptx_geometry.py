"""The gathers of the geometric ops rot90, translate, shear and their kin compile to PTX for
sm_90 without a GPU:
the projective sampler (``perspective``: its third map row read once per launch, positions
divided and guarded) with a fused pad's bounded reads and chained ops, in the per-image gather
and in the arena gather that writes a training batch (test_ptx_tv.py's style)."""

from __future__ import annotations

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.graph.codegen import arena
from millipyde.graph.codegen.gather import gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams
from millipyde.graph.codegen.loader import load

pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import types  # noqa: E402
from numba.np.numpy_support import from_dtype  # noqa: E402

pytestmark = pytest.mark.ptx


def arr(dtype, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def test_projective_gather_compiles_to_ptx() -> None:
    sig = GatherSig(3, "chain", True, True, "", pre=("invert",), post=("solarize",),
                    bounded=True, clip=False, guard=True, projective=True)
    source = gather_source(sig, "cuda")
    assert "fz = z0_ * y + z1_ * x + z2_" in source
    mod = load(source, "cuda")
    argtys = (arr(np.uint8, 3), arr(np.float64, 3), arr(np.uint8, 3)) + \
        (types.float64,) * gather_nparams(sig)
    ptx = ptx_of(mod.kernel.py_func, argtys)
    assert ".target sm_90" in ptx and ".entry" in ptx and "div.rn.f64" in ptx


def test_projective_arena_gather_compiles_to_ptx() -> None:
    # gated (a member's perspective may be gated off: its third row is then 0, 0, 1)
    sig = GatherSig(3, "chain", True, True, "", post=("invert",), lut_stages=(False, False),
                    clip=False, guard=True, projective=True)
    mod = load(arena.arena_gather_source(sig, "cuda", False, True, "NCHW", 3), "cuda")
    argtys = (arr(np.uint8, 1), arr(np.int64, 2), arr(np.float64, 2), arr(np.float64, 1),
              arr(np.float32, 4), arr(np.int64, 1), arr(np.float64, 1), arr(np.float64, 1),
              types.float64)
    assert ".entry" in ptx_of(mod.kernel.py_func, argtys)


def test_the_affine_gathers_keep_their_text() -> None:
    # the projective lines are added only where the signature asks for them
    sig = GatherSig(3, "chain", True, True, "", post=("invert",), clip=False, guard=True)
    assert "fz" not in gather_source(sig, "cuda")
    assert GatherSig(3, "lut", True, True, "").plain
    assert not GatherSig(3, "lut", True, True, "", guard=True, projective=True).plain
