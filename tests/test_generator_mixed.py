"""``next()`` over inputs of several sizes: outputs made a chunk at a time as arena gathers
(``generator_state._make_arena``), every coin pattern through one compiled gather, equal to
the outputs made one by one."""

from __future__ import annotations

import numpy as np

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.training import batch_arena, generator_state, recipes

OPS = [mp.Operation("random_resized_crop", 12, 10), mp.Operation("fliplr", probability=0.5),
       mp.Operation("random_brightness", -0.2, 0.2, probability=0.5),
       mp.Operation("random_contrast", 0.6, 1.4, probability=0.5),
       mp.Operation("random_saturation", 0.6, 1.4, probability=0.5),
       mp.Operation("random_hue", -0.1, 0.1, probability=0.5)]


def _mixed(seed=0, shapes=((20, 26, 3), (24, 18, 3), (17, 17, 3), (15, 21))):
    rng = np.random.default_rng(seed)
    return [mp.gpuimage(rng.integers(0, 256, s, dtype=np.uint8)) for s in shapes]


def _one_by_one(monkeypatch, inputs, ops, n, seed):
    with monkeypatch.context() as m:
        m.setattr(generator_state, "MIXED_BATCH", 1)
        gen = mp.Generator(inputs, ops, outputs=n, seed=seed)
        assert not gen._state.mixed
        return list(gen)


def _same(a, b) -> None:
    if mp.backend() in ("cuda", "hip"):  # two kernels: a rounding tie may land one level off
        assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).max() <= 1
    else:
        assert np.array_equal(a, b)


def test_mixed_sizes_are_made_as_arena_gathers_equal_to_one_by_one(monkeypatch):
    # 12 outputs: chunks of 1, 3 and 8 (the ramp, a short last one), every coin both
    # ways and both channel counts; each output's one-by-one reference is a kernel of its own
    # coin pattern, a compile of a second on the cpu backend (40 outputs: 29 patterns, 12: 11)
    n = 12
    inputs = _mixed()
    gen = mp.Generator(inputs, OPS, outputs=n, seed=5)
    assert gen._state.mixed
    got = list(gen)
    assert getattr(gen._state, "arena_recorder", None) is not None
    ref = _one_by_one(monkeypatch, inputs, OPS, n, 5)
    for a, b in zip(got, ref, strict=True):
        _same(np.asarray(a), np.asarray(b))
        assert type(a) is type(b) and a.dtype == b.dtype


def test_every_coin_pattern_shares_one_compiled_gather():
    batch_arena._gather_fn.cache_clear()
    batch_arena._stat_fn.cache_clear()
    gen = mp.Generator(_mixed(1), OPS, outputs=64, seed=2)
    list(gen)
    # 64 outputs, five coins each: one gather (and one grey-mean reduction for the
    # contrast) per channel count, whatever the coins drew; on the cpu two gathers, the crop
    # and flip run as a stage before the contrast (``VGather.stat_cut``)
    kinds = {(1,), (3,)}
    gathers = 1 if runtime.caps.grid_launches else 2
    assert 1 <= batch_arena._gather_fn.cache_info().currsize <= gathers * len(kinds)
    assert 1 <= batch_arena._stat_fn.cache_info().currsize <= len(kinds)


def test_targets_follow_the_arena_outputs(monkeypatch):
    inputs = recipes.detection_samples()
    ops = recipes.operations("detection")
    gen = mp.Generator(inputs, ops, outputs=12, seed=3)
    assert gen._state.mixed
    got = list(gen)
    ref = _one_by_one(monkeypatch, inputs, ops, 12, 3)
    for a, b in zip(got, ref, strict=True):
        _same(np.asarray(a), np.asarray(b))
        assert a.boxes is not None and np.array_equal(a.boxes, b.boxes)
        assert np.array_equal(a.labels, b.labels)


def test_callables_keep_the_per_output_path():
    gen = mp.Generator(_mixed(), [mp.Operation(lambda x: x.fliplr())], outputs=2, seed=0)
    assert not gen._state.mixed and len(list(gen)) == 2
