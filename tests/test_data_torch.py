"""``millipyde.torch`` over streamed sources: len, epochs, labels, targets, DataLoader, ranks."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import millipyde as mp
from millipyde.torch import BatchStream

OPS = [mp.Operation("random_resized_crop", 8, 8), mp.Operation("fliplr", probability=0.5)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("torch") / "train"
    rng = np.random.default_rng(0)
    for c in range(2):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(5):
            Image.fromarray(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)).save(
                root / f"c{c}" / f"{i}.jpg")
    return root


def _cpu() -> None:
    if mp.backend() != "cpu":
        pytest.skip("host DLPack: the cpu backend")


def test_stream_len_epochs_and_labels(tree) -> None:
    _cpu()
    gen = mp.Generator(tree, OPS, shuffle=True, seed=0, rank=1, world_size=3)
    stream = BatchStream(gen, 2, convert=np.from_dlpack)
    assert len(stream) == 2  # 10 samples over 3 ranks: 4 each, 2 batches
    epochs = []
    for _ in range(2):
        got = list(stream)
        assert len(got) == len(stream)
        xs = np.concatenate([x for x, _ in got])
        ys = np.concatenate([y for _, y in got])
        assert xs.shape == (4, 3, 8, 8) and ys.dtype == np.int64
        epochs.append((xs, ys))
    assert stream.epoch == 2
    assert not np.array_equal(epochs[0][0], epochs[1][0])  # the next epoch, not a repeat
    stream.set_epoch(1)
    again = list(stream)
    assert np.array_equal(np.concatenate([x for x, _ in again]), epochs[1][0])


def test_stream_resumes_mid_epoch(tree) -> None:
    _cpu()

    def stream():
        return BatchStream(mp.Generator(tree, OPS, shuffle=True, seed=5), 3,
                           convert=np.from_dlpack)

    a = stream()
    a.set_epoch(2)
    whole = [x for x, _ in a]
    b = stream()
    b.set_epoch(2)
    it = iter(b)
    next(it)
    saved = b.state_dict()
    it.close()
    c = stream()
    c.load_state_dict(saved)
    rest = [x for x, _ in c]
    assert len(rest) == len(whole) - 1
    for x, y in zip(whole[1:], rest, strict=True):
        assert np.array_equal(x, y)
    assert c.epoch == 3


def test_stream_in_a_dataloader() -> None:
    torch = pytest.importorskip("torch")
    from millipyde.torch import iterable_dataset

    rng = np.random.default_rng(1)
    imgs = [mp.gpuimage(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(6)]
    gen = mp.Generator(imgs, OPS, seed=2, labels=[0, 1, 2, 3, 4, 5], shuffle=True)
    ds = iterable_dataset(gen, 4)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    assert len(loader) == 2
    got = list(loader)
    assert [tuple(x.shape) for x, _ in got] == [(4, 3, 8, 8), (2, 3, 8, 8)]
    # (each batch and its labels on the device that made it: on several GPUs, not one)
    assert sorted(torch.cat([y.cpu() for _, y in got]).tolist()) == list(range(6))
    workers = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(workers)


def test_stream_targets_and_ranks_equal(tree) -> None:
    _cpu()
    lens = []
    for rank in range(2):
        gen = mp.Generator(tree, OPS, seed=0, rank=rank, world_size=2)
        stream = BatchStream(gen, 2, with_targets=True, convert=np.from_dlpack)
        items = list(stream)
        assert all(len(item) == 3 and item[2] == [None] * len(item[0]) for item in items)
        lens.append(len(items))
    assert lens[0] == lens[1] == 3
