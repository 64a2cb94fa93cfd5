"""A batch's statistic rows and stages' outputs in one buffer, the rows filled by one copy
(``batch_arena._batch_buffers``), and the ranks of a batch's structure codes
(``batch_arena._groups_of``)."""

from __future__ import annotations

import numpy as np
import pytest
from tiers import exhaustive_in_simulator

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.training import batch_arena, batches

pytestmark = pytest.mark.cudasim_ok


def _imgs(seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [mp.gpuimage(rng.integers(0, 256, (30 + s, 26 + 2 * s, 3), dtype=np.uint8))
            for s in (1, 2, 3)]


def _ops(policy: object) -> list:
    return [mp.Operation("random_resized_crop", 20, 20), mp.Operation("fliplr", p=0.5), policy]


def _host(buffer: object) -> np.ndarray:
    return runtime.to_host(buffer) if runtime.caps.device_memory else np.asarray(buffer)


@pytest.mark.parametrize("make", [lambda: mp.RandAugment(2, 9), mp.TrivialAugmentWide])
def test_a_batchs_statistic_rows_are_each_gathers_starting_rows(make) -> None:
    """Every gather with statistics gets its (m, width) rows at its rules' starting values,
    the bytes :func:`batch_arena._stat_rows` gives it alone, each in a part of its own."""
    rec = batches.arena_recorder(mp.Generator(_imgs(1), _ops(make()), seed=4)._state)
    rec.stat_cut = False  # (as a GPU records: a gather's statistics and its stages')
    seen = 0
    for b in range(3):
        launches, _ = rec.record(list(range(b * 64, b * 64 + 64)))
        with runtime.on_device(0):
            stats = batch_arena._batch_buffers(launches, 0)
            gathers: list = []
            temps: list = []
            for L in launches:
                batch_arena._stat_gathers(L, len(L.pos), gathers, temps)
            # (+ "held")
            assert len(stats) == len(gathers) + len(temps) + (1 if gathers or temps else 0)
            for st, shape, dtype in temps:
                out = stats[(id(st), "out")]
                assert tuple(out.shape) == shape and np.dtype(out.dtype) == dtype
            for G, m, init in gathers:
                got = _host(stats[id(G)])
                want = _host(batch_arena._stat_rows(init, G.sig, m, 0))
                assert got.shape == want.shape == (m, len(init))
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            if not runtime.caps.device_memory:  # the parts do not overlap
                parts = [stats[id(G)] for G, _, _ in gathers] + \
                    [stats[(id(st), "out")] for st, _, _ in temps]
                for i, part in enumerate(parts):
                    part[...] = i
                for i, part in enumerate(parts):
                    assert (part == i).all()
        seen += len(gathers) * len(temps)
    assert seen  # (the policies' equalize and autocontrast keep statistics; slots stages)


@exhaustive_in_simulator
def test_past_the_kept_layouts_each_gather_gets_its_own_rows(monkeypatch) -> None:
    """With no layout kept (the bound reached) a batch's gathers take statistic rows of their
    own, and the batches are the same, bit for bit, as with the rows in the one buffer."""
    ops = _ops(mp.RandAugment(2, 9))
    imgs = _imgs(2)
    used: list = []
    temps: list = []
    real = batch_arena._batch_buffers

    def counted(launches: list, device: int) -> dict:
        got = real(launches, device)
        # (the gathers' statistic rows; the stages' outputs)
        used.append(sum(isinstance(k, int) for k in got))
        temps.append(sum(isinstance(k, tuple) for k in got))
        return got

    monkeypatch.setattr(batch_arena, "_batch_buffers", counted)
    outs = []
    for bound, whole in ((batch_arena.STAT_LAYOUTS_MAX, True), (0, True), (0, False)):
        monkeypatch.setattr(batch_arena, "STAT_LAYOUTS_MAX", bound)
        monkeypatch.setattr(batch_arena, "_STAT_LAYOUTS", {})
        if not whole:  # (and every stage's output a buffer of its own)
            monkeypatch.setattr(batch_arena, "_batch_buffers", lambda launches, device: {})
        used.clear()
        temps.clear()
        gen = mp.Generator(imgs, ops, outputs=24, seed=7)
        with gen.batches(8) as bs:
            outs.append([np.asarray(b) for b in bs])
        assert any(used) == (bound > 0), used
        assert any(temps) == whole, temps
    for a, b, c in zip(*outs, strict=True):
        assert a.dtype == b.dtype == c.dtype and a.tobytes() == b.tobytes() == c.tobytes()


@pytest.mark.parametrize("top", [1, 2, 5, 50, 3000, 10 ** 12])
def test_groups_of_ranks_codes_as_a_sorted_unique(top: int) -> None:
    rng = np.random.default_rng(top)
    for n in (1, 2, 7, 256):
        code = rng.integers(0, top + 1, n).astype(np.int64)
        got = batch_arena._groups_of(code)
        want = np.unique(code, return_inverse=True)[1].reshape(-1)
        assert got.dtype == np.int64 and np.array_equal(got, want)


def test_a_layout_past_the_kept_bytes_leaves_the_rows_to_each_gather(monkeypatch) -> None:
    """A new layout whose starting values would take the kept bytes past
    ``STAT_LAYOUTS_BYTES`` is not kept: its gathers' rows are their own (the stages' outputs
    still in the batch's buffer)."""
    rec = batches.arena_recorder(mp.Generator(_imgs(3), _ops(mp.RandAugment(2, 9)),
                                              seed=4)._state)
    rec.stat_cut = False
    launches, _ = rec.record(list(range(64)))
    monkeypatch.setattr(batch_arena, "_STAT_LAYOUTS", {})
    with runtime.on_device(0):
        monkeypatch.setattr(batch_arena, "STAT_LAYOUTS_BYTES", 0)
        got = batch_arena._batch_buffers(launches, 0)
        assert not any(isinstance(k, int) for k in got) and not batch_arena._STAT_LAYOUTS
        assert any(isinstance(k, tuple) for k in got)
        monkeypatch.setattr(batch_arena, "STAT_LAYOUTS_BYTES", 64 << 20)
        got = batch_arena._batch_buffers(launches, 0)
        assert any(isinstance(k, int) for k in got) and len(batch_arena._STAT_LAYOUTS) == 1
