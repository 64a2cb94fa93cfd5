"""``Generator.batches`` of the ops that read per-image statistics (adjust_contrast,
autocontrast, equalize and their random forms) recorded as arena gathers: each sample equal to
the Generator's own output (``next()``), converted the same way; one reduction kernel per
statistic op, then one gather, and no host sync."""

from __future__ import annotations

import numpy as np
import pytest
from generator_reference import assert_device_same, batch_spec, eager_outputs
from tiers import cpu_backend, tiered

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.training import batches
from millipyde.training.batches import convert_reference

pytestmark = pytest.mark.cudasim_ok


def _imgs(seed, shapes, dtype=np.uint8):
    rng = np.random.default_rng(seed)
    if dtype == np.float64:
        return [mp.gpuimage(rng.random(s)) for s in shapes]
    return [mp.gpuimage(rng.integers(0, 256, s, dtype=dtype)) for s in shapes]


def _same(got, ref, k):
    if mp.backend() not in ("cuda", "hip"):
        assert np.array_equal(got, ref), f"output {k} differs"
    else:  # one uint8 level on real GPUs (README "Guarantees"), as test_generator_batches_ops
        assert np.abs(got.astype(np.float64) - ref).max() <= 1 / 255 + 1e-6, k


def _check(imgs, ops, outputs, size, arena=True, seed=5, **kw):
    want = eager_outputs(imgs, ops, outputs, seed)
    spec = batch_spec(size, **kw)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    with gen.batches(size, **kw) as bs:
        got = [np.asarray(b) for b in bs]
    assert (batches.arena_recorder(gen._state) is not None) == arena
    k = 0
    for arr in got:
        for i in range(arr.shape[0]):
            _same(arr[i], convert_reference(want[k], spec), k)
            k += 1
    assert k == outputs
    if mp.backend() == "cudasim":
        return  # (the simulator runs one kernel at a time: the Generator's workers would not)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    for k, out in enumerate(gen):
        assert_device_same(out, want[k], f"next() output {k}")


MIXED = ((20, 26, 3), (24, 18, 3), (17, 17, 3))

OPS = {
    "random": [mp.Operation("random_equalize", p=0.5),
               mp.Operation("adjust_hue", 0.1, probability=0.5),
               mp.Operation("random_autocontrast", p=0.5)],
    "all": [mp.Operation("random_resized_crop", 11, 11),
            mp.Operation("random_contrast", 0.5, 1.5, probability=0.7),
            mp.Operation("random_equalize", p=0.6),
            mp.Operation("random_saturation", 0.5, 1.5, probability=0.5),
            mp.Operation("random_autocontrast", p=0.6)],
}


# the seed of a chain's 8 outputs: "all"'s seed 13 draws 4 coin patterns (seed 5: 7), each
# coin both ways still; each pattern is a reference chain of its own (a statistic op cuts it
# into ~3 kernels), compiled for seconds on the cpu backend
SEED = {"all": 13}


# (on the cpu backend the CI tier takes "all": every statistic op's arena reduction and gather
# over mixed sizes; "random", the same ops and hue on two same-size members, runs under
# CUDASIM in the CI tier, and the cpu forms of the same-size statistic batches in
# test_one_reduction_per_statistic_then_one_gather_no_sync and test_grey_float_images)
@pytest.mark.parametrize("name", tiered(sorted(OPS), lambda name: not cpu_backend()
                                        or name == "all"))
def test_batches_equal_next(name) -> None:
    shape = None if name == "all" else (16, 16)
    imgs = _imgs(2, MIXED if shape is None else ((16, 16, 3), (16, 16, 4)))
    _check(imgs, OPS[name], 8, 4, seed=SEED.get(name, 5), shape=shape)


def test_grey_float_images() -> None:
    # ranges and histograms are exact on floats in any order: batched; a float grey sum is not
    imgs = _imgs(3, ((15, 13), (15, 13)), np.float64)
    _check(imgs, [mp.Operation("equalize"), mp.Operation("random_autocontrast", p=0.5)], 4, 4)
    _check(imgs, [mp.Operation("adjust_contrast", 1.5)], 4, 4, arena=False)


class _Count:
    """Counts kernel launches and device-to-host copies of the active backend."""

    NAMES = ("launch_2d", "launch_grid", "launch_1d", "launch_blocks", "to_host",
             "synchronize")

    def __init__(self, monkeypatch) -> None:
        self.calls: dict[str, int] = dict.fromkeys(self.NAMES, 0)
        for name in self.NAMES:
            orig = getattr(runtime, name)

            def wrapped(*a, _orig=orig, _name=name, **kw):
                self.calls[_name] += 1
                return _orig(*a, **kw)

            monkeypatch.setattr(runtime, name, wrapped)

    @property
    def launches(self) -> int:
        return sum(self.calls[n] for n in self.NAMES[:4])


def _count(imgs, ops, size, monkeypatch):
    gen = mp.Generator(imgs, ops, outputs=size, seed=3)
    bs = gen.batches(size)
    rec = batches.arena_recorder(gen._state)
    assert rec is not None
    rec.arena(0)
    bs._make(0, 0, None)  # compiles outside the count
    count = _Count(monkeypatch)
    launches, left = rec.record(list(range(size)))
    assert left == []
    bs._make(0, 0, None)
    calls = dict(count.calls)
    monkeypatch.undo()
    bs.close()
    return calls, count.launches, launches


@pytest.mark.parametrize(("ops", "reductions"), [
    (["equalize"], 1), (["adjust_contrast", "equalize", "autocontrast"], 3)])
def test_one_reduction_per_statistic_then_one_gather_no_sync(ops, reductions,
                                                             monkeypatch) -> None:
    imgs = _imgs(6, MIXED)
    chain = [mp.Operation("random_resized_crop", 8, 8), mp.Operation("fliplr", probability=0.5)]
    chain += [mp.Operation(m, *((1.4,) if m == "adjust_contrast" else ()), probability=0.5)
              for m in ops]
    calls, n, launches = _count(imgs, chain, 8, monkeypatch)
    # the cpu runs the crop and flip once, as a stage that the reductions and the last gather
    # read (``VGather.stat_cut``); GPUs recompute them inside each reduction
    stages = 0 if runtime.caps.grid_launches else 1
    assert len(launches) == 1 and len(launches[0].stages) == stages, launches
    assert n == reductions + 1 + stages, calls
    assert calls["to_host"] == 0 and calls["synchronize"] == 0, calls
