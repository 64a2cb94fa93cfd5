"""mp.RandAugment / mp.TrivialAugmentWide / mp.AutoAugment: torchvision v2's policies drawn from
the counter-based streams, the same per image and for a whole batch (where every op of the
policy is a gated entry of one fused gather per structure)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from generator_reference import batch_spec
from scipy import stats
from tiers import cpu_backend, exhaustive_on_cpu

import millipyde as mp
import millipyde.transforms as T
from millipyde.graph.codegen.gather_sig import extras_offset, gather_ngates, gather_nparams
from millipyde.policies import entry_call
from millipyde.training import batch_arena, batch_ops, batches
from millipyde.training.batches import convert_reference

# torchvision v2's tables (torchvision/transforms/v2/_auto_augment.py), written out: the op
# lists in their dict order, the magnitude of a few bins, which ops draw a sign
TV_RAND_AUGMENT_OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
                       "Brightness", "Color", "Contrast", "Sharpness", "Posterize", "Solarize",
                       "AutoContrast", "Equalize"]
TV_SIGNED = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
             "Contrast", "Sharpness"}
# RandAugment(magnitude=9, num_magnitude_bins=31) on a 224 x 224 image: linspace(0, end, 31)[9]
TV_RA_9_OF_31 = {"ShearX": 0.09, "ShearY": 0.09, "TranslateX": 150 / 331 * 224 * 9 / 30,
                 "TranslateY": 150 / 331 * 224 * 9 / 30, "Rotate": 9.0, "Brightness": 0.27,
                 "Color": 0.27, "Contrast": 0.27, "Sharpness": 0.27,
                 "Posterize": 7.0,  # round(8 - 9 / 7.5)
                 "Solarize": 0.7, "Identity": 0.0, "AutoContrast": 0.0, "Equalize": 0.0}
# TrivialAugmentWide's 31 posterize bins: (8 - arange(31) / 5).round() (half to even)
TV_TA_POSTERIZE = [8, 8, 8, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 3, 3,
                   3, 3, 3, 2, 2, 2]
TV_AA_IMAGENET_FIRST = (("Posterize", 0.4, 8), ("Rotate", 0.6, 9))


def _ctx(n, seed=11, index=2):
    return batch_ops.Ctx(seed, np.arange(n, dtype=np.int64), index)


def _img(seed=0, shape=(12, 14, 3)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


# --------------------------------------------------------------------------- the draws

def test_op_lists_and_magnitude_tables_are_torchvisions():
    ra = mp.RandAugment()
    assert list(ra.names) == TV_RAND_AUGMENT_OPS
    assert list(mp.TrivialAugmentWide().names) == TV_RAND_AUGMENT_OPS
    assert list(mp.AutoAugment().names) == TV_RAND_AUGMENT_OPS[1:] + ["Invert"]
    for name, (fn, signed) in ra.space.items():
        assert signed == (name in TV_SIGNED), name
        table = fn(31, 224, 224)
        got = 0.0 if table is None else table[9]
        assert got == pytest.approx(TV_RA_9_OF_31[name], rel=1e-6, abs=1e-7), name
    fn, _ = mp.TrivialAugmentWide().space["Posterize"]
    assert fn(31, 8, 8).astype(int).tolist() == TV_TA_POSTERIZE
    assert mp.TrivialAugmentWide().space["Rotate"][0](31, 8, 8)[-1] == 135.0


def test_one_sample_draws_equal_the_batch_draws():
    for pol in (mp.RandAugment(3, 5), mp.TrivialAugmentWide(), mp.AutoAugment()):
        c = _ctx(20)
        plan = pol.plan(c.u, c.n)
        hw = np.full((20, 2), 16)
        for k in range(20):
            want = [(pol.names[int(d.op[k])], float(pol.magnitudes(d, hw)[k]))
                    for d in plan if d.runs[k]]
            assert pol.entries(11, k, 2, (16, 16)) == want


def _chi2_ok(counts, expected):
    counts, expected = np.asarray(counts, float), np.asarray(expected, float)
    return stats.chisquare(counts, expected * counts.sum() / expected.sum()).pvalue > 1e-3


def test_rand_augment_op_and_sign_frequencies_over_10k_draws():
    n = 10_000
    c = _ctx(n)
    pol = mp.RandAugment(num_ops=2, magnitude=9)
    for d in pol.plan(c.u, n):
        assert _chi2_ok(np.bincount(d.op, minlength=14), np.ones(14))  # uniform over 14
        signed = np.isin(np.array(pol.names)[d.op], list(TV_SIGNED))
        mags = pol.magnitudes(d, np.full((n, 2), 224))
        neg = (mags < 0)[signed]
        assert _chi2_ok([neg.sum(), (~neg).sum()], [1, 1])  # torch.rand() <= 0.5
        assert (mags[~signed] >= 0).all()
        for k, name in enumerate(pol.names):  # the one magnitude of bin 9, signed
            got = np.unique(np.abs(mags[d.op == k]))
            assert got == pytest.approx([TV_RA_9_OF_31[name]], rel=1e-6, abs=1e-7), name


def test_trivial_augment_op_bin_and_sign_frequencies_over_10k_draws():
    n = 10_000
    c = _ctx(n, seed=5)
    (d,) = mp.TrivialAugmentWide().plan(c.u, n)
    assert _chi2_ok(np.bincount(d.op, minlength=14), np.ones(14))
    assert _chi2_ok(np.bincount(d.bin, minlength=31), np.ones(31))  # torch.randint(31)
    assert _chi2_ok([d.negative.sum(), (~d.negative).sum()], [1, 1])
    # the op and the bin are drawn independently: the (op, bin) table is uniform too
    assert _chi2_ok(np.bincount(d.op * 31 + d.bin, minlength=14 * 31), np.ones(14 * 31))


def test_auto_augment_sub_policy_and_coin_frequencies_over_10k_draws():
    n = 10_000
    c = _ctx(n, seed=9)
    pol = mp.AutoAugment("imagenet")
    first, second = pol.plan(c.u, n)
    sub = np.minimum((c.u(0) * 25).astype(int), 24)
    assert _chi2_ok(np.bincount(sub, minlength=25), np.ones(25))
    names = np.array(pol.names)
    assert (names[first.op[sub == 0]] == TV_AA_IMAGENET_FIRST[0][0]).all()
    assert (names[second.op[sub == 0]] == TV_AA_IMAGENET_FIRST[1][0]).all()
    from millipyde.policies import IMAGENET_POLICY
    for i, d in enumerate((first, second)):
        # each entry runs with its sub-policy's probability: expected count per sub-policy
        p = np.array([s[i][1] for s in IMAGENET_POLICY])
        ran = np.bincount(sub[d.runs], minlength=25)
        total = np.bincount(sub, minlength=25)
        for s in range(25):
            if p[s] in (0.0, 1.0):
                assert ran[s] == total[s] * p[s], s
        mid = (p > 0) & (p < 1)
        r, t, q = ran[mid], total[mid], p[mid]
        chi = (((r - t * q) ** 2) / (t * q * (1 - q))).sum()
        assert stats.chi2.sf(chi, mid.sum()) > 1e-3
    # Posterize at bin 8 of the 10-long table: round(8 - 8 / 2.25) = 4
    mags = pol.magnitudes(first, np.full((n, 2), 32))
    assert set(np.unique(mags[sub == 0]).tolist()) == {4.0}


# --------------------------------------------------------------------------- on images

def _by_methods(pol, img, seed, sample, index):
    """The policy's drawn entries applied one by one as method calls."""
    x = mp.gpuimage(img)
    h, w = img.shape[:2]
    for name, m in pol.entries(seed, sample, index, (h, w)):
        call = entry_call(name, m, h, w, 255.0)
        if call is not None:
            getattr(x, call[0])(*call[1])
    return np.asarray(x)


@pytest.mark.parametrize("make, crop", [(lambda: mp.RandAugment(2, 9), True),
                                        (mp.TrivialAugmentWide, False)])
def test_batches_equal_the_drawn_ops_as_method_calls(make, crop):
    """A batch (arena gathers, with stages after the crop's sampler) equals each output's
    drawn entries applied one by one as method calls."""
    pol = make()
    imgs = [_img(1, (28, 30, 3)), _img(2, (31, 26, 3))]
    # (8 outputs, one batch: each output's reference is a chain of its own, compiled once)
    outputs, seed = 8, 7
    spec = batch_spec(8)
    pre = [mp.Operation("random_resized_crop", 24, 24), mp.Operation("fliplr", p=0.5)] \
        if crop else [mp.Operation("resize", 24, 24)]
    gen = mp.Generator([mp.gpuimage(i) for i in imgs], pre + [pol], outputs=outputs, seed=seed)
    with gen.batches(8) as bs:
        got = np.concatenate([np.asarray(b) for b in bs])
    rec = batches.arena_recorder(gen._state)
    assert rec is not None  # recorded as arena gathers, not per output
    launches, left = rec.record(list(range(outputs)))
    # (left: scikit-image's data-dependent warp clip, where no output pixel is wholly
    # outside: rare at 24 x 24, common on tinier images)
    assert len(left) <= outputs // 4 and len(launches) >= 2, left
    if crop:
        assert any(L.stages for L in launches)  # the policy's slot after the crop's sampler
    # (on the cpu backend outputs 0, 1, 4, 5 against their reference chains, both images: each
    # chain is a kernel of its own, a compile of seconds there)
    for k in [k for k in range(outputs) if not cpu_backend() or k % 4 < 2]:
        x = mp.gpuimage(imgs[k % 2])
        for j, op in enumerate(pre):
            op.apply(x, seed, k, j)
        h, w = x.shape[:2]
        for name, m in pol.entries(seed, k, len(pre), (h, w)):
            call = entry_call(name, m, h, w, 255.0)
            if call is not None:
                getattr(x, call[0])(*call[1])
        want = convert_reference(np.asarray(x), spec)
        if mp.backend() in ("cuda", "hip"):
            assert np.abs(got[k] - want).max() <= 1 / 255 + 1e-6, k
        else:
            assert np.array_equal(got[k], want), k


def test_policy_on_an_image_is_seeded_and_torchvision_named():
    img = _img(3)
    pol = T.RandAugment()
    outs = []
    for _ in range(2):
        mp.seed(4)  # restarts the policy's call count: the same draws
        outs.append([np.asarray(pol(mp.gpuimage(img))) for _ in range(3)])
    assert all(np.array_equal(a, b) for a, b in zip(*outs, strict=True))
    assert len({o.tobytes() for o in outs[0]}) > 1  # successive calls draw anew
    assert T.RandAugment is mp.RandAugment and T.TrivialAugmentWide is mp.TrivialAugmentWide
    assert T.AutoAugment(T.AutoAugmentPolicy.IMAGENET).policy is mp.AutoAugmentPolicy.IMAGENET


def test_same_seed_bit_identical_batches():
    imgs = [mp.gpuimage(_img(s, (10, 13, 3))) for s in (5, 6)]

    def run(seed):
        gen = mp.Generator(imgs, [mp.TrivialAugmentWide(), mp.Operation("resize", 8, 8)],
                           outputs=8, seed=seed)
        with gen.batches(8) as bs:
            return np.concatenate([np.asarray(b) for b in bs])

    a, b, c = run(3), run(3), run(4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_kernel_count_is_bounded_whatever_is_drawn():
    """Over many seeds, a policy's batches record a fixed set of gathers and reductions: one
    structure per count of geometric entries drawn (at most ``positions + 1``; a second
    slot runs as a stage), and in a policy of two positions or more with sharpness each
    count but ``positions`` once more for the members that draw a neighbourhood entry
    (``PolicyStep.apart``); the same set after 20 seeds as after 40."""
    imgs = [mp.gpuimage(_img(s, (16, 16, 3))) for s in (1, 2)]
    for pol in (mp.RandAugment(2, 9), mp.TrivialAugmentWide(), mp.AutoAugment()):
        split = pol.positions >= 2 and "Sharpness" in pol.names
        bound = pol.positions + 1 + (pol.positions if split else 0)
        structures, kernels, seen_at_20 = set(), set(), None
        for seed in range(40):
            gen = mp.Generator(imgs, [pol], outputs=32, seed=seed)
            rec = batch_arena.make(gen._state)
            assert rec is not None
            launches, _ = rec.record(list(range(32)))
            for L in launches:
                structures.add((tuple(st.sig for st in L.stages), L.sig))
                kernels |= {L.sig, *(st.sig for st in L.stages)}
                kernels |= {(p.sig, p.stat) for st in [L, *L.stages] for p in st.prefixes}
            if seed == 19:
                seen_at_20 = set(kernels)
        assert len(structures) <= bound, (pol, len(structures))
        assert kernels == seen_at_20, pol
        assert len(kernels) <= bound * (1 + 3 * 2 * pol.positions), len(kernels)


def _launch_arrays(launches: list) -> list:
    """Every array and signature of a batch's launches (stages and prefixes included)."""
    out = []
    for L in launches:
        out += [L.sig, L.gates, L.hw, L.pos, L.p, L.rows]
        for st in [L, *L.stages]:
            out += [st.sig, st.p] + [(pr.stat, pr.sig, pr.hw, pr.p) for pr in st.prefixes]
            out += [tuple(st.reads)]
    return out


def _same(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, tuple) and isinstance(y, tuple):
            if not _same(list(x), list(y)):
                return False
        elif isinstance(x, np.ndarray):  # bit for bit (signed zeros too)
            if not (isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape
                    and x.tobytes() == y.tobytes()):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("make", [lambda: mp.RandAugment(2, 9), mp.TrivialAugmentWide,
                                  mp.AutoAugment, lambda: mp.RandAugment(3, 20)])
def test_policy_record_by_tables_equals_the_per_magnitude_record(make, monkeypatch):
    """Where every member has one size a policy's entries are recorded by table lookups per
    code of the draw (``batch_ops.ValueTable``); elsewhere per op and magnitude. Both give
    the same launch arrays, bit for bit (no kernel runs: the record alone)."""
    imgs = [mp.gpuimage(_img(s, (30 + s, 26 + 2 * s, 3))) for s in (1, 2)]
    ops = [mp.Operation("random_resized_crop", 20, 20), mp.Operation("fliplr", p=0.5), make()]

    def record(seed: int) -> list:
        gen = mp.Generator(imgs, ops, seed=seed)
        rec = batches.arena_recorder(gen._state)
        assert rec is not None
        return [(_launch_arrays(launches), left)
                for launches, left in (rec.record(list(range(b * 256, b * 256 + 256)))
                                       for b in range(2))]

    made = []
    real = batch_ops.ValueTable.make

    def counted(*args: object) -> object:
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(batch_ops.ValueTable, "make", counted)
    by_tables = [record(seed) for seed in (0, 1)]
    assert made and all(t is not None for t in made)  # (the tables' path)
    monkeypatch.setattr(batch_ops.PolicyStep, "value_table", lambda *a: None)
    per_magnitude = [record(seed) for seed in (0, 1)]
    for a, b in zip(by_tables, per_magnitude, strict=True):
        for (la, lefta), (lb, leftb) in zip(a, b, strict=True):
            assert lefta == leftb and _same(la, lb)


def _prefix_rows_at(p: np.ndarray, sig: object, reads: tuple, gates: bool) -> np.ndarray:
    """A prefix's own rows (``Prefix.p``) as its reduction reads them from its gather's rows
    ``p`` at the columns ``reads`` (``codegen.stat.ARENA_STAT_COLS``), written out in NumPy."""
    end, n = extras_offset(sig), gather_nparams(sig)
    t = gather_ngates(sig) - 1
    cx, cf, cs, co, ch, h, w = reads
    m = len(p)
    parts = [p[:, :end], p[:, cx:cx + n - end]]
    if gates:
        parts += [p[:, cf:cf + t], p[:, cs:cs + 1]]
    parts.append(p[:, ch:ch + 2] if ch >= 0 else np.tile(np.array([h, w], float), (m, 1)))
    parts.append(p[:, co:co + 1] if co >= 0 else np.zeros((m, 1)))
    return np.concatenate(parts, axis=1)


def test_reductions_read_their_gathers_rows_where_those_hold_their_prefixes():
    """A statistic's reduction reads its parameters from the rows of the gather its prefix
    begins (no rows of its own in the batch's upload) wherever that gather kept its maps,
    extras and size after the op: the columns it reads there are the prefix's own rows, bit
    for bit. Where the gather changed after the op (a sampler after it), the prefix's own
    rows are packed. The reductions of one position's statistic entries share a launch (at
    most one of them runs per member). No kernel runs: the record alone."""
    imgs = [mp.gpuimage(_img(s, (30 + s, 26 + 2 * s, 3))) for s in (1, 2)]
    crop = [mp.Operation("random_resized_crop", 20, 20), mp.Operation("fliplr", p=0.5)]
    seen = {True: 0, False: 0, "shared": 0}
    for ops, cut in ((crop + [mp.RandAugment(2, 9)], False), (crop + [mp.AutoAugment()], True),
                     ([mp.Operation("autocontrast")] + crop + [mp.TrivialAugmentWide()], False)):
        rec = batches.arena_recorder(mp.Generator(imgs, ops, seed=3)._state)
        rec.stat_cut = cut  # (the cpu backend's record and a GPU's)
        launches, _ = rec.record(list(range(64)))
        for L in launches:
            for st in [L, *L.stages]:
                assert len(st.reads) == len(st.prefixes)
                for pr, r in zip(st.prefixes, st.reads, strict=True):
                    seen[r is not None] += 1
                    if r is not None:
                        got = _prefix_rows_at(st.p, pr.sig, r, L.gates)
                        assert got.shape == pr.p.shape and got.tobytes() == pr.p.tobytes()
                # reductions that share a launch: of ops of which at most one runs per member
                for grp in batch_arena.reduction_groups(st.prefixes, st.reads):
                    runs = np.stack([st.prefixes[i].p[:, -1] == 0 for i in grp])
                    assert (runs.sum(axis=0) <= 1).all()
                    seen["shared"] += len(grp) > 1
    assert seen[True] and seen[False] and seen["shared"], seen


def test_pickle_repr_and_bad_arguments():
    for pol in (mp.RandAugment(3, 4, 11), mp.TrivialAugmentWide(21), mp.AutoAugment()):
        back = pickle.loads(pickle.dumps(pol))
        assert repr(back) == repr(pol)
        assert [back.entries(1, k, 0, (9, 9)) for k in range(5)] == \
            [pol.entries(1, k, 0, (9, 9)) for k in range(5)]
    with pytest.raises(ValueError, match="num_ops"):
        mp.RandAugment(num_ops=-1)
    with pytest.raises(ValueError, match="magnitude"):
        mp.RandAugment(magnitude=31)
    with pytest.raises(ValueError, match="fill"):
        mp.RandAugment(fill=128)
    with pytest.raises(NotImplementedError, match="cifar10"):
        mp.AutoAugment("cifar10")


@pytest.mark.parametrize("policy", [T.TrivialAugmentWide, T.RandAugment])
def test_a_torchvision_recipe_runs_with_only_the_import_changed(policy):
    with pytest.warns(UserWarning, match="antialias"):  # torchvision's default, not ours
        recipe = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), policy(),
                            T.Normalize(mean=[0.485, 0.456, 0.406],
                                        std=[0.229, 0.224, 0.225])])
    gen = mp.Generator([mp.gpuimage(_img(s, (28, 30, 3))) for s in (1, 2)], recipe,
                       outputs=8, seed=0)
    with gen.batches(4) as bs:
        got = [np.asarray(b) for b in bs]
    # (inputs of one size: the batches take the arena gathers, not the callables' recorder,
    # whose per-output fallback a policy's stand-in would take)
    assert batches.recorder(gen._state) is None
    assert batches.arena_recorder(gen._state) is not None
    assert [b.shape for b in got] == [(4, 3, 24, 24)] * 2 and np.isfinite(got[0]).all()


# (on the cpu backend a copy of the arena policy batches the CI tier checks above, with mixed
# sizes and one size: compiled there for 15-27 s of a worker; the simulator's run stays)
@exhaustive_on_cpu
@pytest.mark.cudasim_ok
def test_policy_batch_under_the_simulator_equals_method_calls():
    pol = mp.RandAugment(1, 9)
    imgs = [_img(4, (8, 8, 3))]
    gen = mp.Generator([mp.gpuimage(imgs[0])], [pol], outputs=4, seed=2)
    spec = batch_spec(4)
    with gen.batches(4) as bs:
        got = np.asarray(next(iter(bs)))
    assert batches.arena_recorder(gen._state) is not None
    for k in range(4):
        want = convert_reference(_by_methods(pol, imgs[0], 2, k, 0), spec)
        if mp.backend() in ("cuda", "hip"):
            assert np.abs(got[k] - want).max() <= 1 / 255 + 1e-6, k
        else:
            assert np.array_equal(got[k], want), k


def test_warmup_finds_one_output_per_policy_structure():
    from millipyde.training import warmup

    pol = mp.RandAugment(2, 9)
    ops = [mp.Operation("random_resized_crop", 24, 24), pol]
    ks = warmup.representatives(ops)
    counts = {int(pol.geometric_count(lambda t, k=k: np.array(
        [mp.random.uniform01(0, k, 1, t)]), 1)[0]) for k in ks}
    assert counts == {0, 1, 2}  # every structure a batch may record, precompiled
    step = batch_ops.PolicyStep(pol)
    found = {(int(pol.geometric_count(lambda t, k=k: np.array(
        [mp.random.uniform01(0, k, 1, t)]), 1)[0]),
              int(step.apart(batch_ops.Ctx(0, np.array([k], dtype=np.int64), 1))[0]))
             for k in ks}
    # (and those of the members that draw sharpness: two geometric entries leave no room)
    assert found == {(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)}, found


def _sharpness_apart(gen: object) -> tuple[list, list]:
    """A recorded batch's launches: per launch whether its gathers chain ``adjust_sharpness``,
    and whether each of its members draws Sharpness."""
    rec = batches.arena_recorder(gen._state)
    rec.stat_cut = False  # (recorded as a GPU records it)
    # (members left per output, scikit-image's warp clip, are in no launch)
    launches, _ = rec.record(list(range(gen._state.outputs)))
    step = next(s for s in rec.steps if isinstance(s, batch_ops.PolicyStep))
    ctx = batch_ops.Ctx(gen._state.seed, np.arange(gen._state.outputs), len(rec.steps) - 1)
    drawn = step.draws_neighbourhood(step.draws(ctx).value)
    chains = [any("adjust_sharpness" in sig.pre + sig.post
                  for sig in [L.sig, *(st.sig for st in L.stages)]) for L in launches]
    return chains, [drawn[L.pos] for L in launches]


def test_members_that_draw_sharpness_are_launched_apart():
    """RandAugment(2, 9): the members that draw Sharpness (at either position) have
    launches of their own, whose gathers chain it; the others' gathers chain no
    neighbourhood op (``PolicyStep.apart``: their registers under 128 on sm_90). One
    position (TrivialAugmentWide) keeps one structure per slot count. No kernel runs."""
    imgs = [mp.gpuimage(_img(s, (30 + s, 26 + 2 * s, 3))) for s in (1, 2)]
    ops = [mp.Operation("random_resized_crop", 20, 20), mp.Operation("fliplr", p=0.5)]
    gen = mp.Generator(imgs, ops + [mp.RandAugment(2, 9)], outputs=256, seed=3)
    chains, drawn = _sharpness_apart(gen)
    assert True in chains and False in chains
    for chained, d in zip(chains, drawn, strict=True):
        assert d.all() if chained else not d.any()
    gen = mp.Generator(imgs, ops + [mp.TrivialAugmentWide()], outputs=256, seed=3)
    chains, drawn = _sharpness_apart(gen)
    assert all(chains) and any(d.any() for d in drawn)


# (the kernels of both records compiled: on the cpu backend 10-20 s of a worker, in the
# exhaustive tier; the simulator's run stays)
@exhaustive_on_cpu
@pytest.mark.cudasim_ok
def test_sharpness_apart_changes_no_pixel(monkeypatch):
    """A RandAugment(2, 9) batch whose members that draw Sharpness are launched apart equals,
    bit for bit, the same batch recorded in one structure per slot count (every gather
    chaining both positions' sharpness, gated)."""
    imgs = [_img(s, (9 + s, 8 + s, 3)) for s in (1, 2)]
    ops = [mp.Operation("random_crop", 8, 8), mp.RandAugment(2, 9)]

    def batch() -> np.ndarray:
        gen = mp.Generator([mp.gpuimage(i) for i in imgs], ops, outputs=16, seed=5)
        with gen.batches(16) as bs:
            got = np.asarray(next(iter(bs)))
        assert batches.arena_recorder(gen._state) is not None
        return got, gen

    apart, gen = batch()
    chains, drawn = _sharpness_apart(gen)
    assert True in chains and False in chains  # (both kinds of launch in this batch)
    monkeypatch.setattr(batch_ops.PolicyStep, "apart",
                        lambda self, c: np.zeros(c.n, dtype=np.int64))
    monkeypatch.setattr(batch_ops.PolicyStep, "plain", lambda self, value: False)
    together, gen = batch()
    chains, _ = _sharpness_apart(gen)
    assert all(chains)
    assert apart.dtype == together.dtype and np.array_equal(apart, together)


def test_the_recorder_kinds_decline_policies_and_augmix_themselves():
    # ``batches.recorders`` names no op type: each kind says whether it takes a state. A
    # policy or AugMix alone or beside a recording method, on inputs of one size, is taken by
    # none (the arena records it); a plain callable beside the same method is the callables'
    from millipyde.training import batch_record, generator_callables

    imgs = [mp.gpuimage(_img(s, (10, 12, 3))) for s in (1, 2)]
    flip = mp.Operation("fliplr", probability=0.5)
    for op in (mp.RandAugment(2, 9), mp.TrivialAugmentWide(), mp.AutoAugment(), mp.AugMix()):
        for ops in ([op], [flip, op]):
            st = mp.Generator(imgs, ops, outputs=4, seed=0)._state
            assert [kind.take(st) for kind in batches.recorders()] == [None, None]
    st = mp.Generator(imgs, [flip, mp.Operation(lambda x: x.flipud())], outputs=4,
                      seed=0)._state
    assert batch_record.Recorder.take(st) is None
    assert isinstance(generator_callables.CallableRecorder.take(st),
                      generator_callables.CallableRecorder)
    st = mp.Generator(imgs, [flip], outputs=4, seed=0)._state
    assert isinstance(batches.recorders()[0].take(st), batch_record.Recorder)


def _fill_and_record(make, seed: int, batches_: int, size: int) -> tuple[list, list, object]:
    """A policy's batches recorded as a GPU records them (no gather ended before a statistic
    op), through its structures' templates (``batch_policy_fill``) and through the record
    alone (the recorder's ``fill`` off), each batch's launch arrays; and the first recorder."""
    imgs = [mp.gpuimage(_img(s, (30 + s, 26 + 2 * s, 3))) for s in (1, 2, 3)]
    ops = [mp.Operation("random_resized_crop", 20, 20), mp.Operation("fliplr", p=0.5), make()]
    out = []
    recs = []
    for fill in (True, False):
        rec = batches.arena_recorder(mp.Generator(imgs, ops, seed=seed)._state)
        rec.stat_cut = False
        if not fill:
            rec.fill = None
        recs.append(rec)
        out.append([(_launch_arrays(launches), left) for launches, left in (
            rec.record(list(range(b * size, b * size + size))) for b in range(batches_))])
    return out[0], out[1], recs[0]


@pytest.mark.parametrize("make", [lambda: mp.RandAugment(2, 9), mp.TrivialAugmentWide,
                                  mp.AutoAugment, lambda: mp.RandAugment(3, 20)])
def test_policy_structures_filled_from_templates_equal_the_record(make):
    """After a structure's first batch (recorded, its template kept where the fill's rows
    equal the record's) a policy's launches are filled from the draws alone: the same launch
    arrays, prefixes' rows and reads, bit for bit. No kernel runs: the record alone."""
    filled, recorded, rec = _fill_and_record(make, 4, 4, 128)
    assert rec.fill is not None
    kept = [t for t in rec.fill.templates.values() if t is not None]
    assert len(kept) >= 2, rec.fill.templates  # (the structures met: their templates)
    for (a, lefta), (b, leftb) in zip(filled, recorded, strict=True):
        assert lefta == leftb and _same(a, b)


def test_a_template_whose_rows_differ_from_the_record_is_not_kept(monkeypatch):
    """The fill's rows are checked against the record's on a structure's first batch: rows
    that differ keep the structure on the record's path (its launches unchanged)."""
    from millipyde.training import batch_policy_fill

    real = batch_policy_fill.policy_rows

    def off_by_one(*args: object) -> tuple:
        status, slots, buf = real(*args)
        return status, slots, buf + 1.0

    monkeypatch.setattr(batch_policy_fill, "policy_rows", off_by_one)
    filled, recorded, rec = _fill_and_record(lambda: mp.RandAugment(2, 9), 4, 2, 64)
    assert rec.fill.templates and all(t is None for t in rec.fill.templates.values())
    for (a, lefta), (b, leftb) in zip(filled, recorded, strict=True):
        assert lefta == leftb and _same(a, b)
