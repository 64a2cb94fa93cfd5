"""``millipyde.data.EpochSampler``: epochs, shuffle and shares as torch's DistributedSampler."""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.data import EpochSampler


def _share(s: EpochSampler, epoch: int) -> list[int]:
    """This rank's samples of one epoch, in order."""
    ks = s.output(epoch, np.arange(s.length))
    return np.atleast_1d(s.sample_of(ks)).tolist()


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("n", [8, 9, 13])
@pytest.mark.parametrize("shuffle", [False, True])
def test_shares_disjoint_complete_and_equal(world, n, shuffle) -> None:
    for epoch in (0, 1, 5):
        shares = [_share(EpochSampler(n, world, r, shuffle, seed=3), epoch)
                  for r in range(world)]
        lengths = {len(sh) for sh in shares}
        assert lengths == {-(-n // world)}  # equal, padded
        order = EpochSampler(n, 1, 0, shuffle, seed=3).order(epoch)
        # before padding: rank r holds order[r::world]; together complete and disjoint
        unpadded = [sh[:len(range(r, n, world))] for r, sh in enumerate(shares)]
        for r, sh in enumerate(unpadded):
            assert sh == order[r::world].tolist()
        flat = sorted(x for sh in unpadded for x in sh)
        assert flat == list(range(n))
        # the padding repeats the rank's own samples
        for r, sh in enumerate(shares):
            assert set(sh) <= set(unpadded[r])


@pytest.mark.parametrize("world", [2, 4])
def test_drop_last_cuts_equal_disjoint_shares(world) -> None:
    n = 10
    shares = [_share(EpochSampler(n, world, r, True, seed=1, drop_last=True), 2)
              for r in range(world)]
    assert {len(sh) for sh in shares} == {n // world}
    flat = [x for sh in shares for x in sh]
    assert len(set(flat)) == len(flat)


def test_epochs_differ_and_repeat_per_seed() -> None:
    a = EpochSampler(50, 1, 0, True, seed=7)
    assert a.order(0).tolist() != a.order(1).tolist()
    b = EpochSampler(50, 1, 0, True, seed=7)
    assert np.array_equal(a.order(3), b.order(3))
    assert not np.array_equal(a.order(3), EpochSampler(50, 1, 0, True, seed=8).order(3))
    assert sorted(a.order(4).tolist()) == list(range(50))


def test_in_order_epochs_are_the_thesis_cycle() -> None:
    # shuffle=False with world dividing n: output k shows sample k % n, every epoch
    s = EpochSampler(6, 2, 1)
    ks = np.arange(1, 40, 2)
    assert np.array_equal(s.sample_of(ks), ks % 6)
    # and a cycle Generator keeps it where world does not divide n (no epochs there)
    c = EpochSampler(5, 2, 1, cycle=True)
    assert np.array_equal(c.sample_of(np.arange(1, 30, 2)), np.arange(1, 30, 2) % 5)
    with pytest.raises(ValueError, match="epochs"):
        c.start(1)


def test_refills_stay_in_the_rank_and_epoch() -> None:
    s = EpochSampler(11, 3, 2, True, seed=5)
    k = s.output(4, 1)
    got = list(s.refills(k))
    assert len(got) == s.length - 1
    assert all(x % 3 == 2 and s.epoch_of(x) == 4 for x in got)
    assert k not in got


def test_epoch_batches_cover_one_epoch() -> None:
    s = EpochSampler(10, 2, 0, True, seed=0)
    per = s.batches_per_epoch(2)
    assert per == 3  # 5 outputs per rank: 2, 2, 1
    got = np.concatenate([s.epoch_batch(1, b, 2) for b in range(per)])
    assert np.array_equal(got, s.output(1, np.arange(5)))
    assert s.batches_per_epoch(2, drop_last=True) == 2
    assert len(s.epoch_batch(0, 3, 2)) == 2  # batch 3 is the first of epoch 1


def test_fewer_samples_than_ranks() -> None:
    shares = [_share(EpochSampler(2, 4, r), 0) for r in range(4)]
    assert [len(sh) for sh in shares] == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="empty share"):
        EpochSampler(2, 4, 0, drop_last=True)
