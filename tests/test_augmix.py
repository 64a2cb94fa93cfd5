"""``AugMix`` (torchvision v2's): its draws against torchvision's distributions, its output the
weighted sum of its chains (each chain the policies' entries as method calls), in
``Generator.batches`` a fork of the arena gather (its chains as gated policy entries, one mix
launch) equal to the per-output path, ``millipyde.transforms.AugMix``, argument errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats

import millipyde as mp
import millipyde.transforms as T
from millipyde import random as mprandom
from millipyde.augmix import AUGMIX_PARTIAL_SPACE, AUGMIX_SPACE
from millipyde.policies import entry_call
from millipyde.training import batch_arena, batches
from millipyde.training.batches import convert_reference


def _draws(a: mp.AugMix, n: int, hw=(20, 30)):
    return [a.sample_draws(7, k, 3, hw) for k in range(n)]


def test_draws_follow_torchvisions_distributions():
    # 3000 samples: the original's weight Beta(alpha, alpha), a chain's share of the rest
    # Beta(alpha, (k - 1) alpha) (a Dirichlet's marginal), depths 1..3, ops and bins uniform,
    # signs half negative (Kolmogorov-Smirnov and chi-square at p > 1e-4: a correct sampler
    # fails one of these about once in 2000 runs; a wrong table or index fails all)
    n, k, alpha = 3000, 3, 0.7
    a = mp.AugMix(severity=4, mixture_width=k, alpha=alpha)
    got = _draws(a, n)
    w = np.array([g[0] for g in got])
    assert np.allclose(w.sum(axis=1), 1.0) and (w >= 0).all()
    assert stats.kstest(w[:, 0], stats.beta(alpha, alpha).cdf).pvalue > 1e-4
    share = w[:, 1] / (1.0 - w[:, 0])
    assert stats.kstest(share, stats.beta(alpha, (k - 1) * alpha).cdf).pvalue > 1e-4
    chains = [c for g in got for c in g[1]]
    depths = np.bincount([len(c) for c in chains], minlength=4)[1:]
    assert stats.chisquare(depths).pvalue > 1e-4 and depths.sum() == n * k
    entries = [e for c in chains for e in c]
    names = list(AUGMIX_SPACE)
    ops = np.bincount([names.index(e[0]) for e in entries], minlength=len(names))
    assert stats.chisquare(ops).pvalue > 1e-4
    rot = np.array([m for name, m in entries if name == "Rotate"])
    table = AUGMIX_SPACE["Rotate"][0](10, 20, 30)
    assert set(np.round(np.abs(rot), 4)) == set(np.round(table[:4], 4))  # bins < severity
    assert stats.chisquare(np.unique(np.abs(rot), return_counts=True)[1]).pvalue > 1e-4
    assert 0.45 < np.signbit(rot).mean() < 0.55  # (bin 0's magnitude is -0.0 or 0.0)
    # the partial space and a fixed depth
    b = mp.AugMix(mixture_width=2, chain_depth=2, all_ops=False)
    for _, cs in _draws(b, 50):
        assert [len(c) for c in cs] == [2, 2]
        assert all(e[0] in AUGMIX_PARTIAL_SPACE for c in cs for e in c)


def test_magnitude_tables_are_torchvisions():
    # AugMix's own tables (10 bins): posterize 4 - i / 2.25 rounded half to even, translation
    # a third of the side
    post = AUGMIX_SPACE["Posterize"][0](10, 9, 9)
    assert post.tolist() == [4, 4, 3, 3, 2, 2, 1, 1, 0, 0]
    assert np.isclose(AUGMIX_SPACE["TranslateX"][0](10, 20, 30)[-1], 10.0)
    assert np.isclose(AUGMIX_SPACE["TranslateY"][0](10, 20, 30)[-1], 20 / 3)
    assert AUGMIX_SPACE["Solarize"][0](10, 1, 1)[[0, -1]].tolist() == [1.0, 0.0]


def _image(arr: np.ndarray) -> mp.gpuimage:
    """A gpuimage holding ``arr`` as it is (the constructor would convert a float image to
    uint8)."""
    from millipyde.backend import ACTIVE

    return mp.gpuimage.from_buffer(ACTIVE.from_host(np.ascontiguousarray(arr), 0), 0)


def _reference(img: np.ndarray, a: mp.AugMix, seed: int, sample: int, index: int):
    """The chains as method calls (materialised entry by entry), summed in NumPy float64 in
    torchvision's order, truncated as its ``.to(uint8)``."""
    h, w = img.shape[:2]
    full = 255.0 if img.dtype == np.uint8 else 1.0
    weights, chains = a.sample_draws(seed, sample, index, (h, w))
    acc = weights[0] * img.astype(np.float64)
    for wt, chain in zip(weights[1:], chains, strict=True):
        y = img
        for name, m in chain:
            call = entry_call(name, m, h, w, full)
            if call is not None:
                g = _image(y)
                getattr(g, call[0])(*call[1])
                y = np.asarray(g)
        acc = acc + wt * y.astype(np.float64)
    if full == 1.0:  # float images: the sum as it is
        return acc
    out = np.minimum(np.floor(np.maximum(acc, 0.0)), 255.0).astype(np.uint8)
    if img.ndim == 3 and img.shape[2] == 4:
        out[..., 3] = img[..., 3]
    return out


# (RGBA: one chain of one op; each op's kernels compile again for four channels, seconds each)
@pytest.mark.cudasim_ok
@pytest.mark.parametrize(("channels", "width", "depth"), [(3, 2, -1), (4, 1, 1)])
def test_augmix_is_the_weighted_sum_of_its_chains(channels, width, depth):
    img = np.random.default_rng(channels).integers(0, 256, (6, 7, channels), dtype=np.uint8)
    a = mp.AugMix(mixture_width=width, chain_depth=depth, all_ops=channels == 3)
    for sample in range(2):
        g = mp.gpuimage(img)
        a.apply(g, 5, sample, 1)
        out = np.asarray(g)
        assert out.dtype == np.uint8 and out.shape == img.shape
        assert np.array_equal(out, _reference(img, a, 5, sample, 1)), sample


@pytest.mark.cudasim_ok
def test_float_grey_images_mix_without_rounding():
    # rgb2gray's float64 grey: the entries' float forms, the sum kept as it is
    rgb = np.random.default_rng(9).integers(0, 256, (6, 7, 3), dtype=np.uint8)
    g = mp.gpuimage(rgb)
    g.rgb2gray()
    grey = np.asarray(g)
    a = mp.AugMix(mixture_width=1, chain_depth=1, all_ops=False)
    x = _image(grey)
    a.apply(x, 2, 0, 0)
    out = np.asarray(x)
    assert out.dtype == np.float64 and out.shape == grey.shape
    assert np.array_equal(out, _reference(grey, a, 2, 0, 0))


# --------------------------------------------------------------------------- in batches

def _recorded(gen, outputs):
    """The arena recorder's launches and left rows of ``gen``'s first ``outputs`` outputs."""
    rec = batches.arena_recorder(gen._state)
    assert rec is not None  # recorded as arena gathers, not per output
    return rec.record(list(range(outputs)))


@pytest.mark.cudasim_ok
def test_generator_batches_equal_its_outputs():
    # an op before (a flip: the fork reads the stage it ends), the AugMix (two chains as
    # branches of one policy), an op after (read from the mix); equal to the eager per-output
    # AugMix and to next(), bit for bit on the cpu and under CUDASIM (1 level on GPUs). The
    # cheapest chains: depth 1, the partial space (a batch's kernels compile once: 7)
    from generator_reference import batch_spec, eager_outputs
    from test_generator_batches_tv import _check, _imgs, _same
    from tiers import simulator

    # (the simulator runs every thread in Python: there 3 outputs of 12 x 12, the batch
    # alone, chains of two ops, each a stage of the branch's gather; the cpu compiles each
    # kernel: chains of one op there, 7 kernels a batch)
    n, hw, seed, depth = (3, 12, 1, 2) if simulator() else (8, 32, 5, 1)
    ops = [mp.Operation("fliplr", p=0.5),
           mp.AugMix(mixture_width=2, chain_depth=depth, all_ops=False),
           mp.Operation("adjust_brightness", 1.2)]
    imgs = _imgs(4, ((hw, hw, 3), (hw, hw, 3)))
    if simulator():
        gen = mp.Generator(imgs, ops, outputs=n, seed=seed)
        with gen.batches(n) as bs:
            got = np.asarray(next(iter(bs)))
        for k, want in enumerate(eager_outputs(imgs, ops, n, seed)):
            _same(got[k], convert_reference(want, batch_spec(n)), k)
    else:
        _check(imgs, ops, n, n, "arena", seed=seed)
    launches, left = _recorded(mp.Generator(imgs, ops, outputs=n, seed=seed), n)
    # (left: scikit-image's data-dependent warp clip of a shear about the corner, per output:
    # common on tiny images, none at 64 x 64 and above)
    assert len(left) <= max(1, n // 4) and len(launches) == 1, left
    forks = [st for st in launches[0].stages if isinstance(st, batch_arena.ForkStage)]
    # (a stage before the fork where a member flips: the fork reads it; else the arena)
    assert len(forks) == 1
    # branches by number of geometric entries drawn (0 .. depth); with two ops a chain's
    # positions are stages of their branch's gather (``record_policy``'s cut_positions)
    assert 2 <= len(forks[0].pieces) <= depth + 1
    assert any(P.stages for P in forks[0].pieces) == (depth > 1)
    assert sorted(np.concatenate([P.pos for P in forks[0].pieces]).tolist()) == \
        list(range(2 * (n - len(left))))  # every member's two chains, once each


def _launch_counts(a: mp.AugMix, seeds: range, hw=(64, 64)) -> tuple[set, list[int]]:
    """The distinct kernels and the launches per batch of 64 of ``a`` over ``seeds`` (record
    only: nothing runs)."""
    imgs = [mp.gpuimage(np.zeros((*hw, 3), dtype=np.uint8)) for _ in range(2)]
    kernels, counts = set(), []
    for seed in seeds:
        launches, left = _recorded(mp.Generator(imgs, [a], seed=seed), 64)
        assert not left
        got = batch_arena.kernel_launches(launches)
        assert got.count(("mix",)) == 1  # the weighted sum: one launch over the batch
        kernels |= set(got)
        counts.append(len(got))
    return kernels, counts


def test_kernel_count_is_bounded_whatever_is_drawn():
    """A batch's AugMix records at most four branch gathers (one per number of geometric
    entries drawn, whatever mixture_width is), their statistics' reductions and one mix: the
    same kernels after 10 seeds as after 20, and no more launches with 6 chains than with 1."""
    a = mp.AugMix()  # severity 3, width 3, depth 1-3, all ops
    kernels, counts = _launch_counts(a, range(10))
    more, counts2 = _launch_counts(a, range(10, 20))
    assert more <= kernels
    # measured: 8 distinct kernels, 40 launches a batch (48 reductions: three statistic ops
    # at each of three positions of each of four structures, a position's three in one launch
    # (at most one of them runs per member), and each position a stage of its own); a GPU
    # batch has no more (no statistic cut there)
    assert len(kernels) <= 8 and max(counts + counts2) <= 40, (len(kernels), counts)
    _, wide = _launch_counts(mp.AugMix(mixture_width=6), range(3))
    _, narrow = _launch_counts(mp.AugMix(mixture_width=1), range(3))
    assert max(wide) <= 40 and max(narrow) <= 40


def test_bad_arguments_and_targets_are_refused_in_batches():
    # a bad argument raises at construction, naming it, before any Generator; an input with
    # boxes leaves the arena and the per-output path refuses it, naming AugMix
    with pytest.raises(ValueError, match="mixture_width"):
        mp.Generator([mp.gpuimage(np.zeros((8, 8, 3), dtype=np.uint8))],
                     [mp.AugMix(mixture_width=0)])
    g = mp.gpuimage(np.zeros((16, 16, 3), dtype=np.uint8))
    g.set_targets(boxes=[[1, 1, 5, 5]], labels=[1])
    gen = mp.Generator([g], [mp.AugMix(mixture_width=1, chain_depth=1, all_ops=False)],
                       outputs=2, seed=0)
    assert batches.arena_recorder(gen._state) is None
    with pytest.raises(Exception, match="AugMix does not move boxes"):
        with gen.batches(2) as bs:
            next(iter(bs))


def test_transforms_augmix_is_augmix_and_pickles_by_its_arguments():
    import millipyde.distributed  # noqa: F401  (registers Operation pickling)

    assert T.AugMix is mp.AugMix
    a = T.AugMix(severity=5, mixture_width=2, chain_depth=2, alpha=0.5, all_ops=False)
    back = pickle.loads(pickle.dumps(a))
    assert repr(back) == repr(a)
    assert back.sample_draws(1, 2, 3, (9, 9))[1] == a.sample_draws(1, 2, 3, (9, 9))[1]


BAD = [(dict(severity=0), "severity"), (dict(severity=11), "severity"),
       (dict(mixture_width=0), "mixture_width"), (dict(chain_depth=4), "chain_depth"),
       (dict(alpha=0.0), "alpha"), (dict(alpha=float("nan")), "alpha"),
       (dict(all_ops="yes"), "all_ops"), (dict(fill=128), "fill")]


@pytest.mark.parametrize(("kwargs", "name"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_bad_arguments_raise_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        mp.AugMix(**kwargs)


def test_run_on_an_image_uses_the_global_seed():
    img = np.random.default_rng(1).integers(0, 256, (5, 6, 3), dtype=np.uint8)
    a = mp.AugMix(mixture_width=1, chain_depth=1, all_ops=False)
    mp.seed(3)
    g = a(mp.gpuimage(img))
    assert np.array_equal(np.asarray(g), _reference(img, a, mprandom.global_seed(), 0,
                                                    a._serial))


def test_the_chains_take_no_serial_of_their_own() -> None:
    # direct calls draw from (seed, call, serial): an AugMix takes one serial, as any
    # Operation, so the Operations made after it draw as they did before it had chains
    before = mp.Operation("fliplr")
    augmix = mp.AugMix()
    after = mp.Operation("fliplr")
    assert (augmix._serial, after._serial) == (before._serial + 1, before._serial + 2)
    assert augmix.chain._serial == augmix._serial
