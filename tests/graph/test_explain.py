"""explain() on Pipeline and Generator: the fused plan of their operations, nothing runs."""

from __future__ import annotations

import numpy as np
import reference as ref

import millipyde as mp


def _ops() -> list:
    return [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2),
            mp.Operation("fliplr"), mp.Operation("rotate", 45), mp.Operation("rgb2grey")]


def test_pipeline_explain_is_the_fused_chain_and_changes_nothing() -> None:
    host = ref.photo_rgba(12, 10)
    img = mp.gpuimage(host)
    p = mp.Pipeline([img], _ops())
    plan = p.explain()
    assert [k.kind for k in plan.kernels] == ["stencil", "gather"]
    # gamma is the Gaussian's epilogue (a table applied as it stores)
    assert plan.kernels[0].ops[-2:] == ("gaussian", "adjust_gamma")
    assert plan.kernels[1].ops == ("fliplr", "rotate", "rgb2grey")
    assert plan.bytes_moved > 0 and "2 kernel(s)" in str(plan)
    np.testing.assert_array_equal(np.asarray(img), host)


def test_generator_explain_includes_the_copy_and_respects_gates() -> None:
    img = mp.gpuimage(ref.photo_rgb(8, 8))
    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation("adjust_gamma", 2)]
    with mp.Generator([img], ops, outputs=4, seed=3) as gen:
        plans = [gen.explain(i) for i in range(4)]
        outs = list(gen)
    for plan, out in zip(plans, outs, strict=True):
        # the copy of the input fuses into the gather that reads it
        assert len(plan.kernels) == 1 and plan.kernels[0].ops[0] == "copy"
        flipped = "fliplr" in plan.kernels[-1].ops
        expected = ref.adjust_gamma(ref.photo_rgb(8, 8), 2)
        np.testing.assert_array_equal(np.asarray(out),
                                      ref.fliplr(expected) if flipped else expected)
