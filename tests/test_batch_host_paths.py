"""The shortcuts of a recorded batch's host path give what the general paths give: a key plan's
gathers' rows in one fill (``batch_fill.RowsFill``), a batch grouped without a loop over
patterns (``Recorder._grouped_fast``), strided parts copied into a pack (``staging.put``)."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.backend.staging import put
from millipyde.training import batch_fill, batch_record


def _fig51() -> list:
    return [
        mp.Operation("transpose", probability=0.2),
        mp.Operation("fliplr", probability=0.2),
        mp.Operation("random_brightness", -0.2, 1),
        mp.Operation("random_gaussian", 0.0, 1.0),
        mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5], probability=0.3),
        mp.Operation("rgb2grey", probability=0.3),
        mp.Operation("random_rotate", 0, 120, probability=0.5),
    ]


def _two_samplers() -> list:
    """Two gathers with drawn maps of their own (rotations on either side of the stencil):
    the second one's source columns sit after the first one's in the combined fill."""
    return [
        mp.Operation("random_rotate", -30, 30, probability=0.5),
        mp.Operation("random_brightness", -0.2, 0.2),
        mp.Operation("random_gaussian", 0.0, 1.0),
        mp.Operation("random_rotate", 0, 120, probability=0.5),
    ]


def _recorder(ops: list):
    rng = np.random.default_rng(5)
    imgs = [mp.gpuimage(rng.integers(30, 256, (24, 24, 3), dtype=np.uint8)) for _ in range(3)]
    gen = mp.Generator(imgs, ops, seed=11)
    st = gen._state
    rec = batch_record.Recorder(st, batch_record.rules_for(st.inputs, st.operations))
    return gen, rec, st.stacks_on(0, None)


def _same_groups(a: list, b: list) -> None:
    assert len(a) == len(b)
    for g, h in zip(a, b, strict=True):
        assert g.key == h.key and np.array_equal(g.index, h.index)
        assert np.array_equal(g.sidx, h.sidx)
        for x, y in zip(g.arrays, h.arrays, strict=True):
            assert x.keys() == y.keys()
            for name, v in x.items():
                if isinstance(v, np.ndarray):
                    assert v.shape == y[name].shape and v.dtype == y[name].dtype, name
                    assert np.array_equal(v, y[name]), name
                else:
                    assert v == y[name] or v is y[name], name


@pytest.mark.parametrize("ops", [_fig51, _two_samplers])
def test_fast_grouping_and_one_fill_equal_the_general_paths(monkeypatch, ops) -> None:
    gen, rec, stacks = _recorder(ops())
    fills = []
    real = batch_fill.RowsFill.rows

    def counted(self, *args):
        fills.append(len(self.cols))
        return real(self, *args)

    monkeypatch.setattr(batch_fill.RowsFill, "rows", counted)
    fast_paths = []
    real_fast = batch_record.Recorder._grouped_fast

    def fast_counted(*args):
        got = real_fast(*args)
        fast_paths.append(got is not None)
        return got

    monkeypatch.setattr(batch_record.Recorder, "_grouped_fast", staticmethod(fast_counted))
    size = 64
    rec.groups(list(range(size)), 0, stacks, ahead=True)  # the templates, as batches() does
    for b in range(1, 6):
        ks = list(range(b * size, (b + 1) * size))
        fast_paths.clear()
        fast, left = rec.groups(ks, 0, stacks)
        assert fast_paths == [True]  # grouped without the loop over patterns
        assert fills and max(fills) > 1  # some plan filled several gathers at once
        fills.clear()
        # the general paths: patterns looked up one by one, and one fill per gather
        with monkeypatch.context() as m:
            m.setattr(rec, "by_dev", {})
            m.setattr(batch_fill.RowsFill, "of", classmethod(lambda cls, kernels: None))
            for plan in {id(t.plan): t.plan for t in rec.templates.values() if t}.values():
                if plan.kernels:
                    m.setattr(plan, "kernels", batch_fill.KernelPlans(plan.kernels))
                    m.setattr(plan, "state", (plan.templates[:], plan.kernels))
            slow, left2 = rec.groups(ks, 0, stacks)
        assert not fills and not any(fast_paths[1:])  # the general paths only
        assert left == left2
        _same_groups(fast, slow)
    # whether a gather reads its source columns elsewhere in the combined fill than in its
    # own (``batch_fill._moved``): the second chain's do; the first's do not on the cpu
    # backend (a GPU plans the first chain with kernels of its own, and on an H200 its
    # columns moved too)
    shifted = []
    for plan in rec.plans.values():
        fill = getattr(plan.kernels, "fill", None)
        if fill is not None:
            own = np.concatenate([plan.kernels[i].pieces[2] for i, _, _ in fill.cols])
            shifted.append(bool((own != fill.pieces[2]).any()))
    assert shifted
    if ops is _two_samplers:
        assert any(shifted)
    elif runtime.name == "cpu":
        assert not any(shifted)
    gen.close()


def test_put_copies_strided_parts_in_c_order() -> None:
    wide = np.arange(60, dtype=np.float64).reshape(6, 10)
    host = np.zeros(6 * 4 * 8 + 16, dtype=np.uint8)
    put(host, 16, wide[:, 3:7])  # columns of a wider array: not C-contiguous
    got = host[16:16 + 6 * 4 * 8].view(np.float64).reshape(6, 4)
    assert np.array_equal(got, wide[:, 3:7]) and not host[:16].any()
    put(host, 0, np.arange(2, dtype=np.int64))
    assert host[:16].view(np.int64).tolist() == [0, 1]
