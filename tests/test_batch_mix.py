"""mp.MixUp / mp.CutMix (torchvision v2's batch mixers): in place on the device, one kernel each,
equal to NumPy transcriptions of torchvision's formulas (tests/reference_aug.py) at the
mixer's own draws, lam ~ Beta(alpha, alpha), the same mix for the same seed and step."""

from __future__ import annotations

import numpy as np
import pytest
import reference_aug as tv
from scipy import stats

import millipyde as mp
import millipyde.transforms as T

pytestmark = pytest.mark.cudasim_ok


def _batch(n=6, c=3, h=9, w=11, seed=0, layout="NCHW"):
    x = np.random.default_rng(seed).random((n, c, h, w)).astype(np.float32)
    return x if layout == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))


LABELS = np.array([0, 1, 2, 3, 4, 0])


@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("step", [0, 5, 17])
def test_mixup_is_torchvisions(device, step):
    mix = mp.MixUp(alpha=0.4, num_classes=5, seed=3)
    x = _batch(seed=step)
    lam = mix.params(step, 9, 11)[0]
    got, soft = mix(mp.gpuarray(x) if device else x.copy(),
                    mp.gpuarray(LABELS) if device else LABELS, step=step)
    want, want_soft = tv.mixup(x, LABELS, lam, 5)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(soft), want_soft, atol=1e-6)
    assert np.asarray(soft).dtype == np.float32 and np.allclose(np.asarray(soft).sum(1), 1)


@pytest.mark.parametrize("device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("step", [0, 3, 11, 40])
def test_cutmix_is_torchvisions(device, step):
    mix = mp.CutMix(num_classes=5, seed=2)
    x = _batch(seed=step)
    from millipyde.training import batch_mix

    lam = batch_mix.beta_of(mix.u(step, 0), 1.0)
    r_x, r_y = int(mix.u(step, 1) * 11), int(mix.u(step, 2) * 9)
    box, lam_adj = tv.cutmix_box(lam, r_x, r_y, 9, 11)
    assert mix.params(step, 9, 11) == (0.0, box, lam_adj)
    got, soft = mix(mp.gpuarray(x) if device else x.copy(), LABELS, step=step)
    want, want_soft = tv.cutmix(x, LABELS, box, lam_adj, 5)
    assert np.array_equal(np.asarray(got), want)
    np.testing.assert_allclose(np.asarray(soft), want_soft, atol=1e-6)


def test_nhwc_batches_and_soft_labels():
    x = _batch(layout="NHWC")
    soft_in = np.eye(5, dtype=np.float32)[LABELS]
    for mix in (mp.MixUp(num_classes=5, layout="NHWC", seed=1),
                mp.CutMix(layout="NHWC", seed=1)):
        got, soft = mix(mp.gpuarray(x), soft_in, step=2)
        nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        lam, box, lam_l = mix.params(2, 9, 11)
        want = (tv.mixup(nchw, LABELS, lam, 5) if isinstance(mix, mp.MixUp)
                else tv.cutmix(nchw, LABELS, box, lam_l, 5))
        np.testing.assert_allclose(np.asarray(got).transpose(0, 3, 1, 2), want[0], atol=1e-6)
        np.testing.assert_allclose(np.asarray(soft), want[1], atol=1e-6)


def test_lam_follows_beta_alpha_alpha():
    for alpha in (0.2, 1.0):
        mix = mp.MixUp(alpha=alpha, num_classes=2, seed=9)
        lams = np.array([mix.params(s, 4, 4)[0] for s in range(4000)])
        # Kolmogorov-Smirnov against Beta(alpha, alpha): 4000 draws, p far from rejection
        assert stats.kstest(lams, stats.beta(alpha, alpha).cdf).pvalue > 1e-3, alpha


def test_draws_made_ahead_are_each_steps_own():
    # a mixer draws 64 steps at once (at the stride of the steps asked for): each step's values
    # must be the scalar stream's, across block edges, below zero and past int64's range
    from millipyde import random as mprandom
    from millipyde.training import batch_mix

    for mix in (mp.MixUp(alpha=0.3, num_classes=2, seed=5), mp.CutMix(num_classes=2, seed=6)):
        steps = [-65, -64, -1, 0, 1, 63, 64, 200, 2**62 + 1, -(2**62) - 1, 2**70]
        last = None
        for step in steps + [256 * b for b in range(70)] + [2**61 + 7 * b for b in range(70)]:
            got, us, lams = mix._block(step, last)  # the block a miss of ``step`` draws
            last = step
            assert got[0] == step and len(set(got)) == len(got)
            for i, s in enumerate(got):
                for t in range(3):
                    assert us[t][i] == mprandom.uniform01(mix.seed, s, mix._stream, t)
                assert lams[i] == float(batch_mix.beta_of(
                    mprandom.uniform01(mix.seed, s, mix._stream, 0), mix.alpha))


def test_a_workers_steps_are_drawn_once_per_block(monkeypatch):
    # a batch worker asks for steps a batch apart (CutMix three times each): one draw of the
    # block per 64 batches, not one every other miss (a stride taken from the misses alone)
    from millipyde import random as mprandom
    from millipyde.training import batch_mix

    calls = []
    real = mprandom.uniform01_array

    def counted(*args: object) -> object:
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(batch_mix.mprandom, "uniform01_array", counted)
    for mix in (mp.MixUp(num_classes=2, seed=5), mp.CutMix(num_classes=2, seed=6)):
        calls.clear()
        for b in range(1, 257):
            mix.params(256 * b, 8, 8)
        # (the first block at stride 1: nothing asked for before it)
        assert len(calls) == 3 * (1 + 256 // batch_mix._AHEAD), len(calls)


def test_cutmix_box_centre_is_uniform_and_lam_is_the_pasted_area():
    mix = mp.CutMix(num_classes=2, seed=4)
    centres, lams = [], []
    for s in range(3000):
        _, (x1, y1, x2, y2), lam = mix.params(s, 20, 30)
        assert 0 <= x1 <= x2 <= 30 and 0 <= y1 <= y2 <= 20
        assert lam == pytest.approx(1 - (x2 - x1) * (y2 - y1) / 600)
        centres.append(int(mix.u(s, 1) * 30))
        lams.append(lam)
    counts = np.bincount(centres, minlength=30)
    assert counts.min() > 60 and counts.max() < 145, counts  # 100 expected


def test_same_seed_and_step_same_mix_and_the_call_count_steps():
    x = _batch()
    a = mp.MixUp(num_classes=5, seed=7)
    b = mp.MixUp(num_classes=5, seed=7)
    first = [np.asarray(a(x.copy(), LABELS)[0]) for _ in range(3)]
    assert np.array_equal(first[2], np.asarray(b(x.copy(), LABELS, step=2)[0]))
    assert not np.array_equal(first[0], first[1])


def test_random_choice_of_mixers_picks_both():
    c = T.RandomChoice([T.CutMix(num_classes=5, seed=1), T.MixUp(num_classes=5, seed=1)])
    x = _batch()
    kinds = set()
    for s in range(20):
        got, _ = c(x.copy(), LABELS, step=s)
        kinds.add(bool((np.asarray(got) == x).any()))  # CutMix keeps values outside its box
    assert kinds == {True, False}


def test_with_generator_batches():
    rng = np.random.default_rng(3)
    imgs = [mp.gpuimage(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)) for _ in range(3)]
    gen = mp.Generator(imgs, [mp.Operation("fliplr", p=0.5)], outputs=6, seed=0)
    mix = mp.CutMix(num_classes=3, seed=0)
    with gen.batches(3, with_indices=True) as bs:
        for b, _, inputs in bs:
            got, soft = mix(b, inputs.astype(np.int64))
            assert got.shape == b.shape and np.asarray(soft).shape == (3, 3)


@pytest.mark.parametrize("n", [1, 4, 9, 12])
def test_every_batch_size_on_the_device(n):
    # the device kernel steps eight samples at a time (mix.AHEAD), then one: sizes around
    # its steps
    x, labels = _batch(n=n, h=3, w=5, seed=n), np.arange(n) % 5
    for mix in (mp.MixUp(alpha=0.4, num_classes=5, seed=n), mp.CutMix(num_classes=5, seed=n)):
        lam, box, lam_l = mix.params(1, 3, 5)
        got, _ = mix(mp.gpuarray(x), labels, step=1)
        want = (tv.mixup(x, labels, lam, 5) if isinstance(mix, mp.MixUp)
                else tv.cutmix(x, labels, box, lam_l, 5))[0]
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_an_empty_box_mixes_the_labels_only(monkeypatch, dtype):
    # (CutMix's box is empty where lam draws 1; the one launch then writes the labels alone)
    mix = mp.CutMix(num_classes=5, seed=1)
    monkeypatch.setattr(mix, "params", lambda step, h, w: (0.0, (4, 3, 4, 3), 0.75))
    x = _batch(h=5, w=6).astype(dtype)
    got, soft = mix(mp.gpuarray(x), LABELS, step=0)
    assert np.array_equal(np.asarray(got), x)
    np.testing.assert_allclose(np.asarray(soft), tv.mixup(x, LABELS, 0.75, 5)[1], atol=1e-6)


def _labelled(outputs=7):
    rng = np.random.default_rng(5)
    imgs = [mp.gpuimage(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)) for _ in range(4)]
    return mp.Generator(imgs, [mp.Operation("fliplr", p=0.5)], outputs=outputs, seed=2,
                        labels=[3, 0, 2, 1])


@pytest.mark.parametrize("kind", ["MixUp", "CutMix", "choice"])
def test_batches_mixed_as_made_equal_the_mixer_after(kind):
    # batches(mix=) mixes each batch in its worker at step = its first output index: the
    # same values as the mixer called on the unmixed batch with that step
    def mixer():
        if kind == "choice":
            return T.RandomChoice([T.CutMix(num_classes=4, seed=8),
                                   T.MixUp(num_classes=4, seed=8)])
        return getattr(mp, kind)(alpha=0.7, num_classes=4, seed=8)

    with _labelled().batches(3, with_indices=True, with_labels=True) as bs:
        plain = [(np.asarray(b), ks, np.asarray(y)) for b, ks, _, y in bs]
    with _labelled().batches(3, with_labels=True, mix=mixer()) as bs:
        mixed = [(np.asarray(b), np.asarray(y)) for b, y in bs]
    assert len(mixed) == len(plain) == 3
    ref = mixer()
    changed = 0
    for (b, ks, y), (got, soft) in zip(plain, mixed, strict=True):
        # (the same kernel on a copy: exactly equal on a GPU too, where its float32 blend
        # may contract to a fused multiply-add that NumPy's does not)
        want, want_soft = ref(mp.gpuarray(b), y, step=int(ks[0]))
        np.testing.assert_array_equal(got, np.asarray(want))
        np.testing.assert_array_equal(soft, np.asarray(want_soft))
        assert soft.shape == (len(ks), 4) and soft.dtype == np.float32
        changed += not np.array_equal(got, b)
    assert changed >= 2  # the batches were mixed (a 1-sample last batch mixes with itself)


BAD_BATCHES = [({"mix": "mixup"}, "MixUp, CutMix"), ({}, "with_labels"),
               ({"with_labels": True, "layout": "NHWC"}, "layout"),
               ({"with_labels": True, "with_targets": True}, "with_targets")]


@pytest.mark.parametrize(("kw", "match"), BAD_BATCHES, ids=[b[1] for b in BAD_BATCHES])
def test_batches_mix_arguments_raise_naming_them(kw, match):
    kw = {"mix": mp.MixUp(num_classes=4), **kw}
    with pytest.raises(ValueError, match=match):
        _labelled().batches(2, **kw)


def test_batches_mix_labels_out_of_range_name_the_batch():
    with _labelled().batches(3, with_labels=True, mix=mp.MixUp(num_classes=3)) as bs, \
            pytest.raises(ValueError, match="0..2"):
        list(bs)


BAD = [(lambda: mp.MixUp(alpha=0), "alpha"), (lambda: mp.MixUp(num_classes=0), "num_classes"),
       (lambda: mp.CutMix(layout="CHW"), "layout"),
       (lambda: mp.MixUp()(_batch(), LABELS), "num_classes"),
       (lambda: mp.MixUp(num_classes=5)(_batch()[0], LABELS), "batch"),
       (lambda: mp.MixUp(num_classes=5)(_batch(), LABELS[:3]), "labels"),
       (lambda: mp.MixUp(num_classes=3)(_batch(), LABELS), "0..2"),
       (lambda: T.MixUp(labels_getter=len), "labels_getter"),
       (lambda: mp.MixUp(num_classes=6)(np.zeros((2, 1, 2, 2)).tolist(), LABELS[:2]),
        "in place")]


@pytest.mark.parametrize(("make", "match"), BAD, ids=[b[1] for b in BAD])
def test_bad_arguments_raise_naming_them(make, match):
    with pytest.raises(ValueError, match=match):
        make()


#: sha256 (first 16 hex digits) of seeded mix streams as 0c4c1bf made them (cpu backend and
#: CUDASIM alike): the params (lam, box, labels' lam) per step, and batches(mix=)'s two
#: batches of 8 per mixer
MIX_DIGESTS = {
    "mixup worker (224, 224)": "152d7be5a67d967f", "mixup worker (9, 11)": "94db80824cdfcb86",
    "mixup ones (224, 224)": "4269081c075f69b4", "mixup ones (9, 11)": "2fb70e51c0067644",
    "mixup far (224, 224)": "be8d615cfdd148e3", "mixup far (9, 11)": "65bf100ff88dd153",
    "cutmix worker (224, 224)": "30a202cd1ca7e0ab", "cutmix worker (9, 11)": "ec1d5c1ced4ea9a2",
    "cutmix ones (224, 224)": "a0d38fa4e0296646", "cutmix ones (9, 11)": "1a18f613a1ea0c8d",
    "cutmix far (224, 224)": "0f3b439e5643da6c", "cutmix far (9, 11)": "0b88fa4140855db9",
    "batches MixUp images": "ae82f80807b4ab8e", "batches MixUp labels": "e253ba1d31e116a6",
    "batches CutMix images": "27fa4bb814f8296a", "batches CutMix labels": "ff0e78fc5d8513ff",
    "batches choice images": "df2b2effb330bb51", "batches choice labels": "8c0c0596d3359cf6",
}


def _digest(*arrays):
    import hashlib

    d = hashlib.sha256()
    for a in arrays:
        d.update(np.ascontiguousarray(a).tobytes())
    return d.hexdigest()[:16]


def _batches_digests(mixers=None):
    """batches(mix=)'s images and soft labels, digested, per kind of mixer."""
    got = {}
    rng = np.random.default_rng(5)
    imgs = [mp.gpuimage(rng.integers(0, 256, (4, 6, 3), dtype=np.uint8)) for _ in range(4)]
    for kind in ("MixUp", "CutMix", "choice"):
        # torchvision's RandomChoice takes no seed: its choice reads the global seed at
        # construction, which the digests were recorded with (0, the default) and which an
        # earlier test in the same process may have set otherwise
        mp.seed(0)
        mix = (T.RandomChoice([T.CutMix(num_classes=4, seed=8), T.MixUp(num_classes=4, seed=8)])
               if kind == "choice" else getattr(mp, kind)(alpha=0.7, num_classes=4, seed=8))
        if mixers is not None:
            mixers.append(mix)
        gen = mp.Generator(imgs, [mp.Operation("fliplr", p=0.5)], outputs=16, seed=2,
                           labels=[3, 0, 2, 1])
        with gen.batches(8, with_labels=True, mix=mix) as bs:
            made = [(np.asarray(b), np.asarray(y)) for b, y in bs]
        got[f"batches {kind} images"] = _digest(*[b for b, _ in made])
        got[f"batches {kind} labels"] = _digest(*[y for _, y in made])
    if mp.backend() not in ("cpu", "cudasim"):
        # (a GPU's float32 blend may contract to a fused multiply-add: its images are checked
        # against the mixer called after, test_batches_mixed_as_made_equal_the_mixer_after)
        got = {k: v for k, v in got.items() if not k.endswith("images")}
    return got


def test_seeded_mix_streams_equal_the_recorded_ones():
    # the draws made ahead and the worker's mix must keep every value of the seeded streams:
    # per step (a worker's steps a batch apart, steps one apart, steps near int64's ends) and
    # batches(mix=)'s images and soft labels, bit for bit
    got = {}
    makers = {"mixup": lambda: mp.MixUp(alpha=0.7, num_classes=4, seed=8),
              "cutmix": lambda: mp.CutMix(alpha=0.5, num_classes=4, seed=8)}
    for name, make in makers.items():
        for label, steps in (("worker", [256 * b for b in range(300)]),
                             ("ones", list(range(300))),
                             ("far", [2**62 + 1, -(2**62) - 1, 2**70, -5, 2**61 + 3])):
            for hw in ((224, 224), (9, 11)):
                mix = make()
                rows = [(lam, *box, lam_l) for lam, box, lam_l in
                        (mix.params(s, *hw) for s in steps)]
                got[f"{name} {label} {hw}"] = _digest(np.array(rows, dtype=np.float64))
    got.update(_batches_digests())
    assert got == {k: MIX_DIGESTS[k] for k in got}


def test_a_workers_kept_launch_mixes_as_the_first(monkeypatch):
    # from a batch shape's second batch on, a worker's mix is its kept launch (a GPU's driver
    # template) with the batch's addresses and scalars written over it: CutMix's boxes on the
    # whole image's grid. The simulator keeps the general one (Bound2D); taken here, it must
    # give the recorded values
    from millipyde.training import batch_mix

    if mp.backend() == "cpu":
        pytest.skip("the cpu backend's kept launches pass their scalars as one array")
    monkeypatch.setattr(batch_mix, "GENERIC_BOUND", True)
    mixers = []
    got = _batches_digests(mixers)
    assert got == {k: MIX_DIGESTS[k] for k in got}
    for mix in (mixers[0], mixers[1], *mixers[2].mixers):
        assert any(mix._bound.values()), mix
