"""GPU arena kernels hold their gate flags as bits of integer words (``gather_body.gate_words``):
every test takes the branch the float flag took, and the CPU's texts keep their float flags."""

from __future__ import annotations

import math

import pytest

import millipyde.ops  # noqa: F401  (the op registry the kernel sources read, filled on import)
from millipyde.graph.codegen import arena, stat
from millipyde.graph.codegen.gather_body import GATE_BITS, gate_words
from millipyde.graph.codegen.gather_sig import GatherSig

POLICY = GatherSig(3, "chain", True, True, "",
                   post=("adjust_brightness", "adjust_contrast", "posterize", "autocontrast"),
                   lut_stages=(False, False), clip=False, edge=True)


def _branches(per_image: str, body: str, row: list[float]) -> list[int]:
    """Which of ``body``'s branches run for the flags ``row`` (executed as Python)."""
    code = ("def f(p):\n    taken = []\n" + "".join(f"    {ln}\n" for ln in per_image.splitlines())
            + "".join(f"    {ln}\n" for ln in body.splitlines()) + "    return taken\n")
    env: dict = {}
    exec(code, env)  # noqa: S102  (the texts are this test's own)
    return env["f"](row)


@pytest.mark.parametrize("n", [3, GATE_BITS + 2])
def test_every_branch_is_the_float_flags_one(n) -> None:
    per = "\n".join([f"g{i}_ = p[{i}]" for i in range(n)] + [f"gs_ = p[{n}]"])
    body = "\n".join([f"if g{i}_ == 0.0:\n    taken.append({i})" for i in range(n)]
                     + [f"if g{i}_ != 0.0:\n    taken.append(-{i})" for i in range(n)]
                     + ["if gs_ != 0.0:\n    taken.append(999)"])
    wper, wbody = gate_words(per, body)
    assert "g0_" not in wper + wbody and "gw0_" in wper
    assert ("gw1_" in wper) == (n > GATE_BITS)
    flags = [0.0, -0.0, 1.0, math.nan, -3.5, math.inf]
    for k in range(len(flags)):
        row = [flags[(i + k) % len(flags)] for i in range(n + 1)]
        assert _branches(wper, wbody, row) == _branches(per, body, row), row


def test_a_flag_used_otherwise_leaves_the_texts() -> None:
    per = "g0_ = p[0]\ngs_ = p[1]"
    body = "v = g0_ * 2.0\nif gs_ == 0.0:\n    v = 1.0"
    assert gate_words(per, body) == (per, body)


def test_gpu_arena_kernels_read_words_and_the_cpus_floats() -> None:
    gpu = arena.arena_gather_source(POLICY, "cuda", False, True, "NCHW", 3)
    assert "gw0_ = 0" in gpu and "== 0.0:" not in gpu.split("def kernel")[1].replace(
        "of0_ == 0.0", "")
    assert "g0_ = p[" in arena.arena_gather_source(POLICY, "cpu", False, True, "NCHW", 3)
    red = stat.arena_stat_source(POLICY, "channel_range", "cuda", False, True)
    assert "gw0_ = 0" in red and "g0_" not in red
