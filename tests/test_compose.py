"""mp.OneOf / mp.RandomChoice / mp.SomeOf (the torchvision-style compositions): per-sample
choices drawn from the counter-based streams, the same on an image, per output and for a
whole batch (where a choice among size-keeping method Operations is gates in one fused gather)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs

import millipyde as mp
from millipyde.training import batches
from millipyde.training.batches import convert_reference

pytestmark = pytest.mark.cudasim_ok

OPS = [mp.Operation("invert"), mp.Operation("vflip"), mp.Operation("fliplr"),
       mp.Operation("solarize", 100)]


def _img(seed=0, shape=(6, 7, 3)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _which(choice, n=600, seed=3):
    """Per sample, the mask of children that ran (from the choice's own draws)."""
    return np.stack([choice._member(seed, k, 4) for k in range(n)])


def test_one_of_draws_each_operation_equally_often():
    rows = _which(mp.OneOf(OPS))
    assert (rows.sum(axis=1) == 1).all()
    counts = rows.sum(axis=0)
    assert ((counts > 110) & (counts < 190)).all(), counts  # 150 expected


def test_weights_and_random_choice_p():
    rows = _which(mp.OneOf(OPS[:2], weights=[1, 3]), n=800)
    assert 140 < rows[:, 0].sum() < 260, rows.sum(axis=0)  # 200 expected
    rc = _which(mp.RandomChoice(OPS[:3], p=[0, 1, 1]), n=400)
    assert rc[:, 0].sum() == 0 and 150 < rc[:, 1].sum() < 250


def test_some_of_draws_a_count_in_its_range_without_repeats():
    rows = _which(mp.SomeOf(OPS, n=(1, 3)), n=900)
    counts = rows.sum(axis=1)
    assert set(np.unique(counts)) == {1, 2, 3}
    assert all(220 < (counts == c).sum() < 380 for c in (1, 2, 3))  # 300 expected
    per_op = rows.sum(axis=0)  # each op 2 * 900 / 4 = 450 expected
    assert ((per_op > 370) & (per_op < 530)).all(), per_op
    fixed = _which(mp.SomeOf(OPS, n=2), n=50)
    assert (fixed.sum(axis=1) == 2).all()


def test_some_of_weights_zero_is_never_drawn_while_others_are_left():
    rows = _which(mp.SomeOf(OPS, n=3, weights=[0, 1, 1, 1]), n=200)
    assert rows[:, 0].sum() == 0 and (rows[:, 1:] == 1).all()


def test_choice_on_an_image_applies_the_drawn_child_and_is_seeded():
    img = _img()
    one = mp.OneOf([mp.Operation("invert"), mp.Operation("vflip")])
    seen = set()
    # (the draws are keyed on the choice's serial, how many Operations the process made before
    # it: for ~1% of serials seeds 0-7 all draw one child, so the seeds go on, up to 64, until
    # both are seen: 2000 serials tried needed 13 at most)
    for seed in range(64):
        if seen == {True, False} and seed >= 8:
            break
        mp.seed(seed)
        outs = []
        for _ in range(2):
            g = mp.gpuimage(img)
            one(g)
            outs.append(np.asarray(g))
            mp.seed(seed)
        assert np.array_equal(outs[0], outs[1])  # the same seed, the same choice
        is_inv = np.array_equal(outs[0], 255 - img)
        assert is_inv or np.array_equal(outs[0], img[::-1])
        seen.add(is_inv)
    assert seen == {True, False}


def test_p_zero_never_and_p_one_always():
    img = _img(1)
    for k in range(5):
        g = mp.gpuimage(img)
        mp.OneOf([mp.Operation("invert")], p=0.0).apply(g, 1, k, 0)
        assert np.array_equal(np.asarray(g), img)
        g = mp.gpuimage(img)
        mp.OneOf([mp.Operation("invert")], p=1.0).apply(g, 1, k, 0)
        assert np.array_equal(np.asarray(g), 255 - img)


def _check_batches(imgs, ops, outputs, size, arena, **kw):
    want = eager_outputs(imgs, ops, outputs, 7)
    spec = batch_spec(size, **kw)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=7)
    with gen.batches(size, **kw) as bs:
        got = np.concatenate([np.asarray(b) for b in bs])
    assert (batches.arena_recorder(gen._state) is not None) == arena
    for k in range(outputs):
        ref = convert_reference(want[k], spec)
        if mp.backend() in ("cuda", "hip"):
            assert np.abs(got[k] - ref).max() <= 1 / 255 + 1e-6, k
        else:
            assert np.array_equal(got[k], ref), f"output {k}"
    return want


def test_choices_in_a_generator_batch_are_gates_of_one_gather(monkeypatch):
    from test_generator_batches_ops import _one_batch

    imgs = [mp.gpuimage(_img(s, shape)) for s, shape in ((1, (12, 14, 3)), (2, (15, 11, 3)))]
    ops = [mp.OneOf([mp.Operation("invert"), mp.Operation("vflip"),
                     mp.Operation("solarize", 100, p=0.5)], p=0.8),
           mp.SomeOf([mp.Operation("random_adjust_brightness", 0.5, 1.5),
                      mp.Operation("fliplr"), mp.Operation("channel_shuffle"),
                      mp.OneOf([mp.Operation("posterize", 3), mp.Operation("invert")])],
                     n=(1, 3)),
           mp.Operation("resize", 10, 10)]
    want = _check_batches(imgs, ops, 12, 4, True)
    assert len({w.tobytes() for w in want}) == 12
    _, calls, n, launches = _one_batch(imgs, ops, 8, monkeypatch)
    assert len(launches) == 1 and n == 1, calls  # one launch, whatever was chosen


def test_a_choice_with_a_resizing_child_is_made_per_output():
    imgs = [mp.gpuimage(_img(s, (12, 12, 3))) for s in (3, 4)]
    ops = [mp.OneOf([mp.Operation("resize", 8, 8), mp.Operation("center_crop", 8, 8)]),
           mp.Operation("invert", p=0.5)]
    _check_batches(imgs, ops, 6, 3, False)


def test_choice_outputs_equal_next():
    imgs = [mp.gpuimage(_img(s, (10, 10, 3))) for s in (4, 5)]
    ops = [mp.RandomChoice([mp.Operation("invert"), mp.Operation("vflip")], p=[1, 2]),
           mp.SomeOf([mp.Operation("fliplr"), mp.Operation("posterize", 2)], n=(0, 2))]
    want = eager_outputs(imgs, ops, 8, 7)
    gen = mp.Generator(imgs, ops, outputs=8, seed=7)
    for k, out in enumerate(gen):
        assert np.array_equal(np.asarray(out), want[k]), k


def test_choices_pickle_and_repr():
    import millipyde.distributed  # noqa: F401  (registers Operation pickling)

    one = mp.OneOf([mp.Operation("invert"), mp.Operation("vflip", p=0.0)], p=0.3,
                   weights=[2, 1])
    some = mp.SomeOf([one, mp.Operation("fliplr")], n=(0, 2))
    got = pickle.loads(pickle.dumps(some))
    assert repr(got) == repr(some)
    assert np.array_equal(_which(got, 50), _which(some, 50))
    assert "weights" in repr(one) and "p=0.3" in repr(one)


BAD = [
    (lambda: mp.OneOf(mp.Operation("invert")), "list of Operations"),
    (lambda: mp.OneOf([]), "at least one"),
    (lambda: mp.OneOf(["invert"]), r"operations\[0\]"),
    (lambda: mp.OneOf(OPS, p=1.5), "p"),
    (lambda: mp.OneOf(OPS, weights=[1, 2]), "one weight per Operation"),
    (lambda: mp.OneOf(OPS[:2], weights=[1, -1]), r"weights\[1\]"),
    (lambda: mp.OneOf(OPS[:2], weights=[0, 0]), "all be 0"),
    (lambda: mp.RandomChoice(OPS[:2], p=[1]), "p must have"),
    (lambda: mp.SomeOf(OPS, n=5), "n must lie"),
    (lambda: mp.SomeOf(OPS, n=(2, 1)), "n must lie"),
    (lambda: mp.SomeOf(OPS, n=1.5), "n must be"),
]


@pytest.mark.parametrize(("make", "match"), BAD, ids=[b[1] for b in BAD])
def test_bad_arguments_raise_naming_them(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_operation_p_is_torchvisions_and_probability_the_thesiss():
    assert mp.Operation("invert", p=1).probability is None
    assert mp.Operation("invert", p=0).probability == 0.0
    assert mp.Operation("invert", p=0.25).probability == 0.25
    for bad in (1.5, -0.1, "0.5", True, float("nan")):
        with pytest.raises(ValueError, match="p"):
            mp.Operation("invert", p=bad)
    with pytest.raises(ValueError, match="not both"):
        mp.Operation("invert", p=0.5, probability=0.5)
    with pytest.raises(ValueError, match="strictly between"):
        mp.Operation("invert", probability=1.0)
    # a method with its own p (torchvision's RandomInvert(p)) takes it
    op = mp.Operation("random_invert", p=0.3)
    assert op.probability is None and op.kwargs == {"p": 0.3}
    with pytest.raises(ValueError, match="p must lie"):
        mp.gpuimage(_img()).random_invert(p=3)


def test_random_order_draws_every_order_and_applies_it():
    order = mp.RandomOrder([mp.Operation("invert"), mp.Operation("posterize", 1),
                            mp.Operation("solarize", 60)])
    perms = [tuple(order.order(lambda t, k=k: np.array([
        __import__("millipyde").random.uniform01(3, k, 4, t)]), 1)[0]) for k in range(600)]
    counts = {p: perms.count(p) for p in set(perms)}
    assert len(counts) == 6 and all(60 < c < 140 for c in counts.values()), counts
    img = _img(6)
    steps = {0: lambda a: 255 - a, 1: lambda a: a & 128,
             2: lambda a: np.where(a >= 60, 255 - a, a)}
    for k in range(6):
        g = mp.gpuimage(img)
        order.apply(g, 3, k, 4)
        want = img
        for i in perms[k]:
            want = steps[i](want)
        assert np.array_equal(np.asarray(g), want), (k, perms[k])


# On the cpu backend its gather's compile took ~150 CPU-s before the generated cpu modules
# stopped inlining a pixelwise op's function at every call site and jamming ops before a
# sampler (~25 CPU-s for the test since): in the CI tier as a guard against that blow-up.
def test_random_order_in_a_batch_is_one_gather(monkeypatch):
    from test_generator_batches_ops import _one_batch

    imgs = [mp.gpuimage(_img(s, shape)) for s, shape in ((7, (12, 14, 3)), (8, (15, 11, 3)))]
    ops = [mp.RandomOrder([mp.Operation("random_adjust_brightness", 0.6, 1.4),
                           mp.Operation("random_saturation", 0.6, 1.4),
                           mp.Operation("random_hue", -0.1, 0.1)]),
           mp.Operation("resize", 9, 9)]
    _check_batches(imgs, ops, 8, 4, True)
    _, calls, n, launches = _one_batch(imgs, ops, 6, monkeypatch)
    assert len(launches) == 1 and n == 1, calls
