"""``millipyde.distributed.process`` over a streamed source: tar shards spread over workers."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("distributed")

from distributed import Client, LocalCluster  # noqa: E402

import millipyde as mp  # noqa: E402
from millipyde import distributed as md  # noqa: E402
from millipyde.data import Shards  # noqa: E402

OPS = [mp.Operation("fliplr", probability=0.5), mp.Operation("random_brightness", -0.2, 0.2)]


def _shards(root, n_shards=2, per=3):
    rng = np.random.default_rng(0)
    imgs = []
    for s in range(n_shards):
        with tarfile.open(root / f"train-{s}.tar", "w") as tf:
            for i in range(per):
                arr = rng.integers(0, 256, (9 + i, 11, 3), dtype=np.uint8)
                imgs.append(arr)
                b = io.BytesIO()
                Image.fromarray(arr).save(b, "PNG")
                ti = tarfile.TarInfo(f"s{s}/{i:03d}.png")
                ti.size = len(b.getvalue())
                tf.addfile(ti, io.BytesIO(b.getvalue()))
    return imgs


def test_shards_pickle_without_descriptors(tmp_path) -> None:
    _shards(tmp_path)
    src = Shards(str(tmp_path / "*.tar"))
    first = src.read(0)
    again = pickle.loads(pickle.dumps(src))
    assert again._fds == {} and again.read(0) == first
    # tasks follow the shards: no task reads two of them
    from millipyde.distributed import jobs

    items = jobs._items(list(range(len(src))), None, "png")
    for slots in (1, 2, 8):
        for block in jobs._source_blocks(src, items, slots):
            assert len({int(src._shard[it[2]]) for it in block}) == 1


def test_process_reads_shards_on_the_workers(tmp_path) -> None:
    imgs = _shards(tmp_path)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        paths, reports = md.run_files(str(tmp_path / "train-*.tar"), OPS, tmp_path / "out",
                                      seed=5, client=client)
    assert [p.name for p in paths] == [f"{i:06d}.png" for i in range(6)]
    assert sum(r["written"] for r in reports) == 6
    ref = [mp.gpuimage(a) for a in imgs]
    mp.Pipeline(ref, OPS, seed=5).run()
    for p, r in zip(paths, ref, strict=True):
        assert np.array_equal(np.asarray(Image.open(p)), np.asarray(r))
