"""A replay launch's parameters: the same tuple of an op's parameters (a kept call's) gives the
launch the parameters made for it before; any other gives its own."""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.graph.exec.execute import ReplayLaunch
from millipyde.graph.ir.node import Node


def _launch(slots):
    got = []

    def bound(src, params, table=None):
        got.append(params)
        return object()

    return ReplayLaunch(bound, 0, 1, [0.0, 0.0, 0.0, -1.0], slots), got


def _chain(params):
    src = Node(None, (), (), (4, 4, 3), np.uint8, 0, buffer=object())
    return [src, Node("copy", (src,), params, (4, 4, 3), np.uint8, 0)]


@pytest.mark.cudasim_ok
def test_the_same_tuple_gives_the_same_parameters_and_another_its_own():
    launch, got = _launch(((1, 0, 3),))
    p, q = (2.0, 1), (0.5, 3)
    for params in (p, p, q, p):
        seq = _chain(params)
        assert launch(seq) and seq[1].buffer is not None
    assert [tuple(g) for g in got] == [(2.0, 1.0, 0.0, -1.0), (2.0, 1.0, 0.0, -1.0),
                                       (0.5, 3.0, 0.0, -1.0), (2.0, 1.0, 0.0, -1.0)]
    # the second sighting of a tuple: the launch's parameters as one tuple from then on
    # (RawBound2D packs a tuple it was given before once)
    assert type(got[1]) is tuple and type(got[0]) is list and type(got[3]) is list
    for _ in range(3):
        launch(_chain(p))
    assert type(got[4]) is tuple and got[4] is got[5] is got[6]
    equal = tuple([2.0, 1])  # an equal tuple, another object: made afresh
    launch(_chain(equal))
    assert tuple(got[-1]) == got[4] and got[-1] is not got[4]


@pytest.mark.cudasim_ok
def test_chains_of_two_ops_make_their_parameters_every_call():
    launch, got = _launch(((1, 0, 2), (2, 2, 3)))
    src, (a, b) = _chain((1.0,))[0], ((1.0, 2.0), (3.0,))
    n1 = Node("copy", (src,), a, (4, 4, 3), np.uint8, 0)
    for _ in range(2):
        n2 = Node("copy", (n1,), b, (4, 4, 3), np.uint8, 0)
        launch([src, n1, n2])
    assert [tuple(g) for g in got] == [(1.0, 2.0, 3.0, -1.0)] * 2 and got[0] is not got[1]


@pytest.mark.cudasim_ok
def test_without_slots_the_plans_parameters_are_made_once():
    launch, got = _launch(())
    for _ in range(2):
        launch(_chain((45.0,)))
    assert got == [(0.0, 0.0, 0.0, -1.0)] * 2 and got[0] is got[1]
