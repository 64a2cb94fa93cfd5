"""``millipyde.torch``: batches as tensors with their labels (torch itself where installed)."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde.torch import BatchStream


def _gen(outputs=10):
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(3)]
    return mp.Generator(imgs, [mp.Operation("fliplr", probability=0.5)], outputs=outputs,
                        seed=2)


def test_batch_stream_labels_follow_samples() -> None:
    if mp.backend() != "cpu":
        pytest.skip("host DLPack: the cpu backend")
    got = list(BatchStream(_gen(), 4, labels=[10, 11, 12], convert=np.from_dlpack))
    assert [x.shape for x, _ in got] == [(4, 3, 8, 8), (4, 3, 8, 8), (2, 3, 8, 8)]
    assert np.concatenate([y for _, y in got]).tolist() == [10 + k % 3 for k in range(10)]
    with _gen().batches(4) as bs:
        assert all(np.array_equal(x, np.asarray(b)) for (x, _), b in zip(got, bs, strict=True))


def test_batch_stream_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="labels"):
        BatchStream(_gen(), 4, labels=[1, 2])
    with pytest.raises(ValueError, match="layout"):
        BatchStream(_gen(), 4, layout="CHW")


def test_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    from millipyde.torch import iterable_dataset

    ds = iterable_dataset(_gen(), 5, labels=[0, 1, 2])
    assert isinstance(ds, torch.utils.data.IterableDataset)
    xs = [(x, y) for x, y in torch.utils.data.DataLoader(ds, batch_size=None)]
    assert [tuple(x.shape) for x, _ in xs] == [(5, 3, 8, 8), (5, 3, 8, 8)]
    assert xs[0][1].tolist() == [0, 1, 2, 0, 1]


@pytest.mark.gpu
def test_torch_takes_batches_without_a_copy() -> None:
    torch = pytest.importorskip("torch")
    from millipyde.torch import to_tensor

    with _gen(8).batches(4, dtype="float16", layout="NHWC") as bs:
        b = next(bs)
        t = to_tensor(b)
        assert t.data_ptr() == b.__cuda_array_interface__["data"][0]
        assert t.dtype == torch.float16 and tuple(t.shape) == (4, 8, 8, 3)
        assert np.array_equal(t.cpu().numpy(), np.asarray(b))
