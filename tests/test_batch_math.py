"""``batch_math``'s compiled host math gives what the NumPy / scalar code it replaces gives, bit
for bit: draws, parameter rows, pattern grouping, warp-clip decisions, Gaussian taps."""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.graph.plan.schedule import affine3, needs_warp_clip
from millipyde.kernels import REGISTRY
from millipyde.ops.filters.gaussian import gaussian_taps as gaussian
from millipyde.training import batch_math
from millipyde.training.batch_ops import BLOCK_WORDS, Ctx, sample_round


def test_op_uniforms_are_each_ops_block() -> None:
    ks = np.arange(3, 700, 7, dtype=np.int64)
    z1 = sample_round(12345, ks)
    words = np.array([0, 1, 5], dtype=np.uint64)
    got = batch_math.op_uniforms(z1, words, BLOCK_WORDS)
    for q, j in enumerate(words.tolist()):
        assert got[q].tolist() == Ctx(12345, ks, j, _z1=z1).block().tolist()


def test_ranged_draws_are_numpys() -> None:
    rng = np.random.default_rng(11)
    block = rng.random((2000, 10))
    ranges = ((-0.2, 1.0), (0.5, 0.5), (-3e5, 7e-3))
    got = batch_math.ranged(block, ranges)
    for t, (lo, hi) in enumerate(ranges):
        want = np.full(len(block), lo) if lo == hi else lo + (hi - lo) * block[:, t + 1]
        assert got[:, t].tolist() == want.tolist()


@pytest.mark.parametrize("n, k", [(0, 1), (1, 1), (256, 3), (256, 40), (5000, 28)])
def test_group_ints_is_numpys_unique(n: int, k: int) -> None:
    keys = np.random.default_rng(n + k).integers(0, k, n).astype(np.int64) * 977 - 5
    uniq, first, inverse, order, bounds = batch_math.group_ints(keys)
    want_u, want_f, want_i = np.unique(keys, return_index=True, return_inverse=True)
    want_i = want_i.reshape(-1)
    want_o = np.argsort(want_i, kind="stable")
    assert uniq.tolist() == want_u.tolist() and first.tolist() == want_f.tolist()
    assert inverse.tolist() == want_i.tolist() and order.tolist() == want_o.tolist()
    assert bounds.tolist() == np.searchsorted(want_i[want_o],
                                              np.arange(len(want_f) + 1)).tolist()


def test_fill_rows_copies_each_templates_pieces() -> None:
    rng = np.random.default_rng(4)
    base, flags = rng.random((3, 8)), rng.random((3, 2))
    src = rng.random((50, 7))
    tid = rng.integers(0, 3, 20).astype(np.int64)
    rows = rng.permutation(50)[:20].astype(np.int64)
    src[rows[:5], 6] = 1.0  # clip column: members 0-4 clip, the others do not
    src[rows[5:], 6] = 0.0
    sel = np.array([[True, False, True], [True, True, True]])
    pieces = (np.array([2, 1]), np.array([2, 6]), np.array([0, 0]), sel, np.array([-1, 6]),
              np.array([0.0, 1.0]))
    ok = np.ones(20, dtype=bool)
    got = batch_math.fill_rows(base, flags, tid, rows, src, pieces, ok)
    want = np.concatenate([base[tid], flags[tid]], axis=1)
    m = sel[0][tid]
    want[m, 2:4] = src[rows[m], 0:2]
    want[:, 1:7] = src[rows, 0:6]
    assert got.tolist() == want.tolist()
    assert ok.tolist() == [True] * 5 + [False] * 15


def test_warp_clips_are_the_scalar_rule() -> None:
    rng = np.random.default_rng(7)
    spec = REGISTRY["rotate"]
    angles = np.concatenate([rng.uniform(-400, 400, 600), np.arange(-360, 361, 15.0),
                             [0.05, 1e-9, 89.999999, 90.0000001]])
    for h, w in ((512, 512), (16, 24), (5, 3)):
        maps = batch_math.sampler_maps(spec, h, w, angles[:, None])
        for mid, out in (((h, w), (h, w)), ((h + 3, w + 1), (w, h))):
            got = batch_math.warp_clips(maps, mid, out)
            for m, a in enumerate(angles.tolist()):
                assert got[m] == needs_warp_clip(affine3(spec, h, w, (a,)), mid, out), a


def test_gaussian_taps_of_sigmas_not_blurred() -> None:
    sig = np.array([0.0, 0.5, -1.0, np.nan, 1.7])
    taps, radius = batch_math.gaussian_taps(sig, 511)
    assert radius.tolist() == [-1, 4, -1, -1, 14]
    for i in (1, 4):
        want = gaussian(sig[i], 511)
        assert taps[i, :len(want)].tolist() == want.tolist() and not taps[i, len(want):].any()
    assert not taps[[0, 2, 3]].any()
    taps, radius = batch_math.gaussian_taps(np.zeros(3))
    assert taps.shape == (3, 1) and radius.tolist() == [-1, -1, -1] and not taps.any()


def test_compose_of_identities_is_each_rows_product() -> None:
    # identities times maps (a batch's first map): each row's own ``I @ m`` bit for bit, with
    # +0.0 and negative entries, and maps with a -0.0 or an infinity (their product is not
    # the map: +0.0, NaN)
    rng = np.random.default_rng(3)
    m = rng.normal(size=(48, 3, 3)) * 100.0
    m[:, 2] = (0.0, 0.0, 1.0)
    m[::3, 0, 1] = 0.0
    on = rng.random(48) < 0.7
    eye = np.broadcast_to(np.eye(3), (48, 3, 3)).copy()
    for bad in (None, -0.0, np.inf):
        mm = m.copy()
        if bad is not None:
            mm[5, 1, 0] = bad
        with np.errstate(invalid="ignore"):  # (0.0 * inf)
            got = batch_math.compose(eye, mm, on)
            want = np.stack([eye[i] @ mm[i] if on[i] else eye[i] for i in range(48)])
        assert got.tobytes() == want.tobytes(), bad
