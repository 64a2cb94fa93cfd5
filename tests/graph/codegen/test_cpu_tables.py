"""The cpu arena gathers' per-member tables (``codegen.cpu_tables``): elementwise runs read
through a uint8 member's table, axis-aligned bilinear coordinates once a row and a column.
Batches of the ImageNet and detection recipes (an axis-aligned crop; an affine map, which runs
the pixel's own coordinates) equal the eager per-output reference bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs
from tiers import EXHAUSTIVE

import millipyde as mp
from millipyde.graph.codegen import cpu_tables
from millipyde.graph.codegen.arena import arena_gather_source
from millipyde.graph.codegen.gather_sig import GatherSig
from millipyde.graph.codegen.loader import load
from millipyde.training import batches
from millipyde.training.batches import convert_reference
from millipyde.training.recipes import operations

MIXED = ((20, 26, 3), (24, 18, 3), (17, 17, 3))


def _imgs() -> list:
    rng = np.random.default_rng(7)
    return [mp.gpuimage(rng.integers(0, 256, s, dtype=np.uint8)) for s in MIXED]


# the ImageNet recipe's batches (axis-aligned samples, tabled runs) are the CI tier's
# test_generator_batches_ops.py::test_imagenet_recipe_mixed_sizes_equal_outputs; an affine map
# with a tabled run, test_generator_batches_tv.py's "rotate"
@EXHAUSTIVE
@pytest.mark.parametrize("recipe", ["imagenet", "detection"])
def test_recipe_batches_equal_the_eager_outputs(recipe: str) -> None:
    if mp.backend() != "cpu":
        pytest.skip("the tables are the cpu target's")
    ops = operations(recipe, 12) if recipe == "imagenet" else operations(recipe)
    imgs = _imgs()
    kw = {"shape": (12, 12)} if recipe == "detection" else {}
    want = eager_outputs(imgs, ops, 9, 3)
    gen = mp.Generator(imgs, ops, outputs=9, seed=3)
    spec = batch_spec(3, **kw)
    with gen.batches(3, **kw) as bs:
        got = [np.asarray(b) for b in bs]
    assert batches.arena_recorder(gen._state) is not None
    k = 0
    for arr in got:
        for i in range(arr.shape[0]):
            assert np.array_equal(arr[i], convert_reference(want[k], spec)), f"output {k}"
            k += 1
    assert k == 9


def _sig(**kw) -> GatherSig:
    base = dict(cin=3, mode="chain", is_int=True, sampler=True, grey="", pre=(),
                post=("invert",), grey_ops=(), packed=False,
                lut_stages=(False, False), clip=False, bounded=False, edge=True, umap="",
                guard=False, nearest=False, projective=False, gates=True)
    base.update(kw)
    return GatherSig(**base)


def test_which_kernels_take_them() -> None:
    text = arena_gather_source(_sig(), "cpu", gates=True)
    assert "et0_[0, _u(int(v0))]" in text and "cdc_[x]" in text
    assert "hh_[ia_, x, 0] + dr * hh_[ib_, x, 0]" in text  # rows blended once (_held_rows)
    # float images: no tables; a bounded window's fills need not be whole
    assert "et0_" not in arena_gather_source(_sig(is_int=False), "cpu", gates=True)
    assert "et0_" not in arena_gather_source(_sig(bounded=True), "cpu", gates=True)
    # GPU kernels are left as they were
    assert "et0_" not in arena_gather_source(_sig(), "cuda", gates=True)


def test_byte_forms_on_integer_chains() -> None:
    # uint8 members of integer chains call hue's and saturation's byte forms (which run the
    # ops' functions on another full); float images and GPU kernels the ops' functions
    sig = _sig(sampler=False, edge=False, pre=("adjust_saturation", "adjust_hue"), post=())
    text = arena_gather_source(sig, "cpu", gates=True)
    assert "_dev3(_BYTES['adjust_hue'])" in text and "_dev3(_BYTES['adjust_saturation'])" in text
    for other in (arena_gather_source(_sig(sampler=False, edge=False, is_int=False,
                                           pre=sig.pre, post=()), "cpu", gates=True),
                  arena_gather_source(sig, "cuda", gates=True)):
        assert "_BYTES" not in other and "_R['adjust_hue'].fn" in other


def test_other_samplers_keep_their_pixel() -> None:
    body = "fy = a0_ * y + a1_ * x + a2_\nv0 = fy"
    assert cpu_tables.separable(body) == (body, "", "")


def test_tabled_kernels_compute_the_inline_values(monkeypatch: pytest.MonkeyPatch) -> None:
    # an edge-mode bilinear stage with a gated elementwise op after it, compiled as generated
    # and with neither rewrite, run on four members: axis-aligned (row and column
    # coordinates, rows blended once and held; a flip's negative step), rotated (the pixel's
    # own coordinates), the op gated off, the sampler gated off; member 2 starts on the source
    # rows where member 0 ends, with other columns (held rows are a member's own); whole
    # launches and two parts (each fills its tables)
    sig = _sig(post=("brightness",))
    fast = load(arena_gather_source(sig, "cpu", gates=True), "cpu").kernel
    monkeypatch.setattr(cpu_tables, "tables", lambda s, g, body, b: (body, "", ""))
    monkeypatch.setattr(cpu_tables, "separable", lambda body: (body, "", ""))
    inline = load(arena_gather_source(sig, "cpu", gates=True), "cpu").kernel
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, 2 * 9 * 11 * 3, dtype=np.uint8)
    rows = np.array([[0, 11], [9 * 11 * 3, 11]] * 2, np.int64)
    p = np.zeros((4, 22))
    p[:, [0, 4]] = 1.0  # the integer map: identity
    p[:, 6:12] = [[0.7, 0.0, 0.3, 0.0, -0.8, 8.2], [0.6, 0.3, 0.1, -0.3, 0.6, 4.0],
                  [0.55, 0.0, 4.2, 0.0, 0.9, 0.2], [0.6, 0.3, 0.1, -0.3, 0.6, 4.0]]
    p[:, 12:17] = [9, 11, 255.0, 0.0, 255.0]
    p[:, 17] = [0.21, -0.13, 0.3, 0.07]
    p[2, 20] = 1.0  # the op gated off
    p[3, 21] = 1.0  # the sampler gated off
    stat = np.zeros((4, 1))
    for parts in (1, 2):
        got, want = (np.zeros((4, 7, 8, 3), np.uint8) for _ in range(2))
        for k in range(parts):
            fast(src, rows, got, p, stat, k, parts)
            inline(src, rows, want, p, stat, k, parts)
        assert np.array_equal(got, want) and want.any()
