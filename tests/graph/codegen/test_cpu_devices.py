"""The cpu target's pixelwise op functions: inlined into a kernel calling them a few times,
called where it calls them more often (``codegen.cpu_devices.limit_inlining``)."""

from __future__ import annotations

import numpy as np

from millipyde.graph.codegen import cpu_devices
from millipyde.graph.codegen.cpu_devices import INLINE_SITES, PlainArgsDispatcher, limit_inlining
from millipyde.graph.codegen.loader import load
from millipyde.graph.codegen.target import HEADER, RINT_CLIP

_CALL = "    r, g, b = _f_permute_channels(r, g, b, full, k, 0.0, 0.0)\n"


def _source(sites: int) -> str:
    """A module binding an op's pixelwise function with ``_dev3`` and defining a function of
    its own with it, each called ``sites`` times by the kernel."""
    return (HEADER["cpu"]
            + "_f_permute_channels = _dev3(_R['permute_channels'].fn)\n"
            + "\n\n@_dev3\ndef _f_swap(r, g, b, full, a0_, a1_, a2_):\n"
            + "    return (b * a0_, r, g)\n"
            + f"\n\n# sites={sites}\n@njit(cache=True, error_model='numpy')\n"
            + "def kernel(px, full, k):\n"
            + "    r = px[0]\n    g = px[1]\n    b = px[2]\n"
            + (_CALL + "    r, g, b = _f_swap(r, g, b, full, 0.5, 0.0, 0.0)\n") * sites
            + "    return (r, g, b)\n")


def test_functions_called_more_often_than_the_limit_are_called_not_inlined() -> None:
    few = _source(INLINE_SITES)
    assert limit_inlining(few) == few
    many = limit_inlining(_source(INLINE_SITES + 1))
    assert "\n_f_permute_channels = _dev(_R['permute_channels'].fn)\n" in many
    assert "\n@_dev\ndef _f_swap(" in many
    assert "= _dev3(" not in many and "@_dev3" not in many
    assert limit_inlining(many) == many


def test_a_called_function_computes_what_the_inlined_one_does(monkeypatch) -> None:
    """The same kernel text loaded with its functions called (the limit) and inlined (no
    limit): the same values, to the bit."""
    src = _source(INLINE_SITES + 1)
    called = load(src, "cpu")
    assert isinstance(called._f_permute_channels, PlainArgsDispatcher)
    monkeypatch.setattr(cpu_devices, "INLINE_SITES", 10 ** 6)
    inlined = load(src + "\n# inlined\n", "cpu")
    assert not isinstance(inlined._f_permute_channels, PlainArgsDispatcher)
    assert inlined._f_permute_channels.targetoptions.get("inline") == "always"
    px = np.array([200.0, 37.0, 91.0])
    outs = set()
    for k in range(6):
        got, want = called.kernel(px, 255.0, float(k)), inlined.kernel(px, 255.0, float(k))
        assert np.array_equal(np.array(got), np.array(want)), k
        outs.add(got)
    assert len(outs) > 1


def test_generated_modules_share_the_helpers_of_cpu_devices() -> None:
    """A generated cpu module's ``_b2f`` (its header's) and ``_rint_clip`` (the kernels')
    are the dispatchers of ``cpu_devices``: compiled once per process, not once per kernel."""
    mod = load(HEADER["cpu"] + RINT_CLIP + "\n\n# helpers shared\n", "cpu")
    assert mod._b2f is cpu_devices._b2f
    assert mod._rint_clip is cpu_devices._rint_clip
