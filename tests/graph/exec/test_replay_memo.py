"""A replayed gather's parameters, worked out once per plan (``exec_gather.gather_args``'s memo),
are those a fresh plan of the same nodes gives, for every later call's new scalars."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde.graph.exec import gather as exec_gather
from millipyde.graph.exec import replay
from millipyde.graph.plan import schedule

CHAINS = {
    "gamma": lambda im, s: im.adjust_gamma(0.5 + s),
    "brightness, rotate, gamma": lambda im, s: (im.brightness(s / 4), im.rotate(30),
                                                im.adjust_gamma(1 + s)),
    "fliplr, colorize": lambda im, s: (im.fliplr(), im.colorize(s, 1 - s, 0.5)),
    "gamma, grey, brightness": lambda im, s: (im.adjust_gamma(2 - s), im.rgb2grey(),
                                              im.brightness(-s / 3)),
    "transpose": lambda im, s: im.transpose(),
}


@pytest.fixture(autouse=True)
def _fresh_cache():
    replay.clear()
    yield
    replay.clear()


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("tables", [True, False])
def test_replayed_gather_args_are_a_fresh_plans(name, tables):
    host = np.random.default_rng(2).integers(0, 256, (24, 16, 3), dtype=np.uint8)
    src = mp.gpuimage(host)
    src._materialize()
    memoized = 0
    for s in (0.1, 0.2, 0.35, 0.8, 0.9):
        img = src.clone()
        CHAINS[name](img, s)
        got = replay.plan(img._node)
        want = schedule.plan(img._node)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            if a.kind != "gather":
                continue
            memoized += tables in a.__dict__.get("_memo", {})
            sa, la, pa = exec_gather.gather_args(a, tables)
            sb, lb, pb = exec_gather.gather_args(b, tables)
            assert sa == sb
            np.testing.assert_array_equal(la, lb)
            np.testing.assert_array_equal(pa, pb)
    assert replay.stats["hits"] >= 3
    if not tables or name == "transpose":  # (host-built tables are made every call)
        assert memoized >= 2  # the memo was taken after the first replay
