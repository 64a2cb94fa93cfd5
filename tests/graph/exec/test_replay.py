"""Plans that replay (``graph/exec/replay.py``): a hit is what a fresh plan would be."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde.graph.exec import replay
from millipyde.graph.ir.node import Node, apply, leaf
from millipyde.graph.plan import schedule
from millipyde.kernels import REGISTRY


@pytest.fixture(autouse=True)
def _fresh_cache():
    replay.clear()
    yield
    replay.clear()


def _same_kernels(got: list, want: list) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert type(a) is type(b) and a.kind == b.kind
        assert a.source is b.source
        for name in ("nodes", "pre", "post", "grey_ops"):
            x, y = getattr(a, name, None), getattr(b, name, None)
            assert (x is None) == (y is None), name
            if x is not None:
                assert [n.id for n in x] == [n.id for n in y], name
        for name in ("P", "A"):
            x, y = getattr(a, name, None), getattr(b, name, None)
            assert (x is None) == (y is None), name
            if x is not None:
                np.testing.assert_array_equal(x, y)
        for name in ("mid", "phase", "clip_check", "cur"):
            assert getattr(a, name, None) == getattr(b, name, None), name


CHAINS = {
    "gamma": lambda im, s: im.adjust_gamma(1.0 + s),
    "brightness+gamma": lambda im, s: (im.brightness(0.1 * s), im.adjust_gamma(2 - s)),
    "five ops": lambda im, s: (im.gaussian(1.5), im.adjust_gamma(1 + s), im.fliplr(),
                               im.rotate(30), im.rgb2grey()),
    "transpose+colorize": lambda im, s: (im.transpose(), im.colorize(s, 1 - s, 0.5)),
    "gaussian+brightness": lambda im, s: (im.gaussian(2), im.brightness(s / 3)),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("fuse", [True, False])
def test_a_hit_binds_the_plan_a_fresh_plan_makes(name, fuse):
    host = np.random.default_rng(1).integers(0, 256, (21, 34, 3), dtype=np.uint8)
    with schedule.fusion(fuse):
        for s in (0.25, 0.75):  # a plan is cached on its structure's second sighting
            first = mp.gpuimage(host)
            CHAINS[name](first, s)
            replay.plan(first._node)
        assert replay.stats["misses"] == 2 and replay.stats["hits"] == 0
        second = mp.gpuimage(host)
        CHAINS[name](second, 0.5)  # new elementwise parameters: same structure
        got = replay.plan(second._node)
        assert replay.stats["hits"] == 1
        _same_kernels(got, schedule.plan(second._node))


def test_new_parameters_give_new_results():
    host = np.random.default_rng(2).integers(0, 256, (16, 24, 3), dtype=np.uint8)
    outs = []
    for g in (0.5, 2.0, 0.5):
        im = mp.gpuimage(host)
        im.adjust_gamma(g)
        im.fliplr()
        outs.append(np.asarray(im))
    assert replay.stats["hits"] >= 1
    assert not np.array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    ref = mp.gpuimage(host)
    ref.adjust_gamma(2.0)
    ref.fliplr()
    replay.clear()
    np.testing.assert_array_equal(outs[1], np.asarray(ref))
    assert replay.stats == {"hits": 0, "misses": 1, "uncached": 0}


def _plan_twice(make) -> tuple[list, list]:
    a, b = make(0), make(1)
    replay.plan(a)
    return replay.plan(b), schedule.plan(b)


@pytest.mark.parametrize("change", ["shape", "dtype", "device", "angle", "held", "fusion"])
def test_a_structural_change_misses(change):
    def make(i: int) -> Node:
        shape = (10 + (i if change == "shape" else 0), 12, 3)
        dtype = np.float64 if change == "dtype" and i else np.uint8
        device = i if change == "device" else 0
        src = leaf(object(), shape[:2] if dtype == np.float64 else shape, dtype, device)
        if dtype == np.float64:
            x = apply(REGISTRY["adjust_gamma"], src, (2.0, 1.0), src.shape, dtype)
        else:
            x = apply(REGISTRY["adjust_gamma"], src, (2.0, 1.0), shape, dtype)
            x = apply(REGISTRY["rotate"], x, (30.0 + (i if change == "angle" else 0),),
                      shape, dtype)
        y = apply(REGISTRY["fliplr"], x, (), x.shape, dtype)
        if change == "held" and i:
            x.users += 1  # another handle holds the middle value: it must be stored
        return y

    if change == "fusion":
        replay.plan(make(0))
        with schedule.fusion(False):
            b = make(1)
            got, want = replay.plan(b), schedule.plan(b)
    else:
        got, want = _plan_twice(make)
    assert replay.stats["hits"] == 0 and replay.stats["misses"] == 2
    _same_kernels(got, want)


def test_a_plan_seen_once_is_not_kept():
    """A chain planned once (a drawn angle makes a new key per output) fills no cache."""
    host = np.random.default_rng(5).integers(0, 256, (12, 10, 3), dtype=np.uint8)
    for angle in (10.0, 20.0, 30.0):
        im = mp.gpuimage(host)
        im.rotate(angle)
        replay.plan(im._node)
    assert replay.stats["misses"] == 3 and len(replay._cache) == 0


def test_the_cache_keeps_no_node_alive():
    import gc
    import weakref

    host = np.zeros((8, 8, 3), np.uint8)
    im = mp.gpuimage(host)
    im.adjust_gamma(2)
    ref = weakref.ref(im._node)
    np.asarray(im)
    del im
    gc.collect()
    assert ref() is None


def test_graphs_that_are_not_chains_plan_every_time():
    x = mp.gpuarray(np.arange(12, dtype=np.float64))
    y = x * 2 + x
    np.asarray(y)
    assert replay.stats["uncached"] >= 1 and replay.stats["hits"] == 0
