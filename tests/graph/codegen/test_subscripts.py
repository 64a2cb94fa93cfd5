"""Rewriting subscripts in generated kernel text (``codegen.subscripts``)."""

from __future__ import annotations

from millipyde.graph.codegen import subscripts


def test_rewrite_subscripts_touches_only_the_name() -> None:
    text = "dst[y, x, 0] = lut[0, 1, src[a, b, 2]] + p[3] + xp[1] + a.p[2] + (q[1, 2])"
    got = subscripts.rewrite_subscripts(text, "p", lambda ps: f"F({'|'.join(ps)})")
    assert got == "dst[y, x, 0] = lut[0, 1, src[a, b, 2]] + p[F(3)] + xp[1] + a.p[2] + (q[1, 2])"
    got = subscripts.rewrite_subscripts(text, "lut", lambda ps: "|".join(ps))
    assert "lut[0|1|src[a, b, 2]]" in got


def test_rewrite_subscripts_renames_the_array() -> None:
    text = "v = lut[0, 1, src[a, b]] + xlut[0, 2] + a.lut[1] + lut[1, 2, 3]"
    got = subscripts.rewrite_subscripts(text, "lut", lambda ps: ps[2], to="ct_")
    assert got == "v = ct_[src[a, b]] + xlut[0, 2] + a.lut[1] + ct_[3]"
