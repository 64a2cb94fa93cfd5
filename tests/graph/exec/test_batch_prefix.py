"""Shared prefixes of a recorded batch's groups (``graph.exec.batch_prefix``)."""

from __future__ import annotations

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.exec import batch_prefix
from millipyde.training.batches import convert_reference

pytestmark = pytest.mark.cudasim_ok

# figure 5.1's kinds of kernel: a gather, the Gaussian, then a colour or a grey tail
OPS = [mp.Operation("transpose", probability=0.3),
       mp.Operation("random_brightness", -0.2, 0.2),
       mp.Operation("random_gaussian", 0, 1.5),
       mp.Operation("rgb2grey", probability=0.4),
       mp.Operation("random_rotate", 0, 40, probability=0.5)]


def _images(n: int = 3, shape: tuple = (12, 12, 3)) -> list:
    rng = np.random.default_rng(3)
    return [mp.gpuimage(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(n)]


def test_groups_share_their_first_kernels_and_equal_the_outputs(monkeypatch) -> None:
    if not runtime.caps.grid_launches:
        pytest.skip("the cpu backend runs a batch member by member: no shared launches")
    runs = []
    found = batch_prefix.prefixes

    def spy(groups):
        got = found(groups)
        runs.extend((len(gs), k, sum(g.size() for g in gs)) for gs, k in got)
        return got

    monkeypatch.setattr(batch_prefix, "prefixes", spy)
    imgs, outputs, size = _images(), 12, 6
    want = eager_outputs(imgs, OPS, outputs, 4)
    spec = batch_spec(size)
    with mp.Generator(imgs, OPS, outputs=outputs, seed=4).batches(size) as bs:
        got = [np.asarray(b) for b in bs]
    for k in range(outputs):
        ref = convert_reference(want[k], spec)
        assert np.array_equal(got[k // size][k % size], ref), f"output {k} differs"
    # a colour and a grey group ran their gather and Gaussian as one launch each
    assert any(n >= 2 and k == 2 for n, k, _ in runs), runs


def test_prefix_stops_where_arguments_do_not_stack() -> None:
    class G:
        def __init__(self, key, arrays, n):
            self.key, self.arrays, self._n = key, arrays, n

        def kernels(self):
            return [type("K", (), {"lut_mode": False})()] * (len(self.key) - 2)

    lut = np.zeros((1, 2, 3, 256), np.uint8)
    a = {"lut": lut, "p": np.zeros((2, 5)), "gated": False}
    taps = {"taps": np.ones((2, 3)), "rad": np.ones(2, np.int64)}
    key = ("s", 0, "gather", "stencil", "writer")
    same = [G(key, [a, taps, a], 2), G(key + ("more",), [a, taps, a, a], 2)]
    assert batch_prefix.shared_prefix(same) == 2
    gated = dict(a, gated=True)
    assert batch_prefix.shared_prefix([G(key, [a, taps, a], 2), G(key, [gated, taps, a], 2)]) == 0
    other_lut = dict(a, lut=lut + 1)
    assert batch_prefix.shared_prefix([G(key, [a, taps, a], 2),
                                       G(key, [other_lut, taps, a], 2)]) == 0
    other_key = ("s", 0, "gather", "stencil2", "writer")
    assert batch_prefix.shared_prefix([G(key, [a, taps, a], 2),
                                       G(other_key, [a, taps, a], 2)]) == 1
