"""The cpu target's pixel loops two pixels a trip (``codegen.cpu_jam``): the same values, or
the loop left as it was where they could differ. Run as Python (no compile)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from millipyde.graph.codegen.arena import arena_gather_source, jam_pixels
from millipyde.graph.codegen.cpu_jam import pixel_loop
from millipyde.graph.codegen.gather_sig import GatherSig

# a pixel as the gathers write one: loads, a gate shared by the row's pixels, a branch on the
# pixel's own value, a tuple assignment, stores
BODY = """\
v0 = float(src[y, x, 0])
v1 = float(src[y, x, 1])
if g_ == 0.0:
    v0, v1 = v1 * k, v0 - k
    v0 = v0 if v0 > 0.5 else math.floor(v0 * 3.7)
if v1 > 2.0:
    v1 = v1 / 3.0
else:
    v1 = -v1
out[y, x, 0] = v0
out[y, x, 1] = v1
"""


def _run(loop: str, src: np.ndarray, g: float) -> np.ndarray:
    out = np.full(src.shape, np.nan)
    env = {"src": src, "out": out, "k": 1.25, "g_": g, "w": src.shape[1], "math": math}
    code = "for y in range(src.shape[0]):\n" + "".join(
        "    " + line + "\n" for line in loop.splitlines())
    exec(compile(code, "<loop>", "exec"), env)  # noqa: S102 - the generated text under test
    return out


@pytest.mark.parametrize("width", [1, 2, 5, 6])
@pytest.mark.parametrize("gate", [0.0, 1.0])
def test_two_pixels_a_trip_give_the_same_values(width: int, gate: float) -> None:
    src = np.random.default_rng(width).uniform(0, 4, (3, width, 2))
    jammed = pixel_loop("x", "w", BODY)
    assert "x_j1 = x + 1" in jammed and "v0_j1" in jammed
    # the gate is the member's: one if for both pixels
    assert jammed.count("if g_ == 0.0:") == 2  # (the pair's, and the odd column's)
    plain = "for x in range(w):\n" + "".join("    " + s + "\n" for s in BODY.splitlines())
    assert np.array_equal(_run(jammed, src, gate), _run(plain, src, gate))


@pytest.mark.parametrize("body", [
    # a running sum carried from pixel to pixel (a reduction's order would change)
    "s_ += float(src[y, x, 0])\nout[y, x, 0] = s_\n",
    # a value read on a path where this pixel has not assigned it
    "if src[y, x, 0] > 1.0:\n    t = 2.0\nout[y, x, 0] = t\n",
    # an array read and written: the second pixel could read what the first stored
    "out[y, x, 0] = out[y, x - 1, 0] + 1.0\n",
    "for c in range(2):\n    out[y, x, c] = src[y, x, c]\n    break\n",
])
def test_bodies_that_could_differ_are_left_as_they_were(body: str) -> None:
    assert pixel_loop("x", "w", body) == "for x in range(w):\n" + "".join(
        "    " + s + "\n" for s in body.splitlines())


def test_colour_gathers_are_jammed_and_others_not() -> None:
    base = GatherSig(cin=3, mode="chain", is_int=True, sampler=True, grey="", pre=(),
                     post=("adjust_contrast",), lut_stages=(False, False), clip=False)
    hue = dataclasses.replace(base, post=("adjust_contrast", "adjust_hue"))
    assert not jam_pixels(base) and jam_pixels(hue)
    assert "x_j1" in arena_gather_source(hue, "cpu", layout="NCHW")
    assert "x_j1" not in arena_gather_source(base, "cpu", layout="NCHW")
    # before a sampler, on each of its four taps: not jammed; without one, jammed
    before = dataclasses.replace(base, pre=("adjust_hue",), post=())
    assert not jam_pixels(before)
    assert "x_j1" not in arena_gather_source(before, "cpu", layout="NCHW")
    assert jam_pixels(dataclasses.replace(before, sampler=False))
