"""Generator(rank=, world_size=) shares, and the first output's latency."""

from __future__ import annotations

import time

import numpy as np
import pytest

import millipyde as mp

OPS = [mp.Operation("fliplr", probability=0.5), mp.Operation("random_brightness", -0.2, 0.2)]


def _images(n=3):
    rng = np.random.default_rng(0)
    return [mp.gpuimage(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(n)]


@pytest.mark.parametrize("world, outputs", [(1, 7), (2, 9), (3, 10), (4, 3)])
def test_rank_shares_disjoint_complete_and_equal(world: int, outputs: int) -> None:
    imgs = _images()
    whole = [np.asarray(o) for o in mp.Generator(imgs, OPS, outputs=outputs, seed=9)]
    seen: list[int] = []
    for rank in range(world):
        gen = mp.Generator(imgs, OPS, outputs=outputs, seed=9, rank=rank, world_size=world)
        got = [np.asarray(o) for o in gen]
        ks = list(range(rank, outputs, world))
        assert len(got) == len(ks)
        for k, v in zip(ks, got, strict=True):
            assert np.array_equal(v, whole[k])
        with gen.batches(2, with_indices=True) as bs:
            bks = [k for _, outs, _ in bs for k in outs.tolist()]
        assert bks == ks
        seen += ks
    assert sorted(seen) == list(range(outputs))  # disjoint and complete


@pytest.mark.parametrize("kw", [dict(rank=0), dict(world_size=2), dict(rank=2, world_size=2),
                                dict(rank=-1, world_size=2), dict(rank=0, world_size=0),
                                dict(rank=0.0, world_size=2)])
def test_rank_errors(kw) -> None:
    with pytest.raises(ValueError, match="rank|world_size"):
        mp.Generator(_images(), OPS, **kw)


def _slow(img):
    time.sleep(0.05)


def test_first_output_does_not_wait_for_a_batch() -> None:
    gen = mp.Generator(_images(), [mp.Operation(_slow), *OPS], seed=1)
    try:
        next(gen)  # compiles (cached afterwards), and primes the worker
        gen2 = mp.Generator(_images(), [mp.Operation(_slow), *OPS], seed=2)
        t0 = time.perf_counter()
        next(gen2)
        assert time.perf_counter() - t0 < 0.5
        gen2.close()
    finally:
        gen.close()


def test_batches_on_every_device_delivered_where_made(tmp_path) -> None:
    from multidevice import run_with_devices

    got = run_with_devices("""
        import json
        import numpy as np
        import millipyde as mp
        rng = np.random.default_rng(0)
        imgs = [mp.gpuimage(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(3)]
        ops = [mp.Operation("fliplr", probability=0.5),
               mp.Operation("random_brightness", -0.2, 0.2)]
        with mp.Generator(imgs, ops, outputs=24, seed=4).batches(4) as bs:
            every = [(b.device, np.asarray(b)) for b in bs]
        with mp.Generator(imgs, ops, outputs=24, seed=4, device=1).batches(4) as bs:
            pinned = [(b.device, np.asarray(b)) for b in bs]
        print(json.dumps({"devices": [d for d, _ in every],
                          "pinned": sorted({d for d, _ in pinned}),
                          "equal": all(np.array_equal(a, b) for (_, a), (_, b)
                                       in zip(every, pinned, strict=True))}))
    """, 2, tmp_path)
    assert set(got["devices"]) == {0, 1} and got["pinned"] == [1] and got["equal"]
