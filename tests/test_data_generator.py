"""Generators over streamed sources: epochs, shuffle, rank shares, labels, resuming, bad files.

Tiny images (at most 16 x 16) on the cpu backend; the GPU decode runs in bench/bench_data.py.
"""

from __future__ import annotations

import gc
import tarfile
import tracemalloc
import warnings

import numpy as np
import pytest
from PIL import Image

import millipyde as mp
from millipyde.data import BadSampleError, Paths, Shards

OPS = [mp.Operation("random_resized_crop", 8, 8), mp.Operation("fliplr", probability=0.5),
       mp.Operation("random_contrast", 0.6, 1.4, probability=0.8)]


def _tree(root, classes=3, per=4, seed=0):
    """Class folders of JPEGs of mixed sizes (and one grey PNG)."""
    rng = np.random.default_rng(seed)
    for c in range(classes):
        d = root / f"c{c}"
        d.mkdir(parents=True)
        for i in range(per):
            h, w = (int(v) for v in rng.integers(9, 16, 2))
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
                d / f"{i}.jpg", quality=90)
    Image.fromarray(rng.integers(0, 256, (12, 11), dtype=np.uint8)).save(root / "c0" / "g.png")
    return root


def _epoch(gen, epoch, size=4, **kw):
    gen.set_epoch(epoch)
    with gen.batches(size, epochs=1, with_indices=True, with_labels=True, **kw) as bs:
        got = [(np.asarray(x), s.copy(), np.asarray(y)) for x, _, s, y in bs]
    return got


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return _tree(tmp_path_factory.mktemp("data") / "train")


def test_epochs_differ_and_repeat_bit_identical(tree) -> None:
    gen = mp.Generator(tree, OPS, shuffle=True, seed=4)
    e0, e1 = _epoch(gen, 0), _epoch(gen, 1)
    assert len(gen.source) == 13 and gen.classes == ["c0", "c1", "c2"]
    s0 = np.concatenate([s for _, s, _ in e0])
    s1 = np.concatenate([s for _, s, _ in e1])
    assert sorted(s0.tolist()) == sorted(s1.tolist()) == list(range(13))
    assert s0.tolist() != s1.tolist()  # another order
    again = _epoch(mp.Generator(tree, OPS, shuffle=True, seed=4), 1)
    for (x, s, y), (x2, s2, y2) in zip(e1, again, strict=True):
        assert np.array_equal(x, x2) and np.array_equal(s, s2) and np.array_equal(y, y2)
    # labels follow their samples
    for _, s, y in e0:
        assert np.array_equal(y, gen.labels[s])
    gen.close()


@pytest.mark.parametrize("world", [1, 2, 4])
def test_rank_shares_per_epoch(tree, world) -> None:
    for epoch in (0, 3):
        shares = []
        for rank in range(world):
            gen = mp.Generator(tree, OPS, shuffle=True, seed=1, rank=rank, world_size=world)
            got = _epoch(gen, epoch, size=3)
            shares.append(np.concatenate([s for _, s, _ in got]).tolist())
            assert sum(len(x) for x, _, _ in got) == gen.epoch_length
            gen.close()
        assert len({len(sh) for sh in shares}) == 1  # equal lengths
        own = [sh[:len(range(r, 13, world))] for r, sh in enumerate(shares)]
        flat = [x for sh in own for x in sh]
        assert sorted(flat) == list(range(13))  # disjoint before padding, complete together


def test_in_order_folder_is_todays_generator(tree) -> None:
    # shuffle=False: a folder gives what the same images in memory give (epoch 0 and on)
    src = mp.data.Folder(tree)
    imgs = [mp.gpuimage(mp.io.load_array(src.paths[i])) for i in range(len(src))]
    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation("random_brightness", -.2, .2)]
    streamed = list(mp.Generator(tree, ops, outputs=20, seed=3, return_to_host=True))
    memory = list(mp.Generator(imgs, ops, outputs=20, seed=3, return_to_host=True))
    for a, b in zip(streamed, memory, strict=True):
        assert np.array_equal(a, b)


def test_resumed_stream_equals_the_uninterrupted_one(tree) -> None:
    def stream():
        return mp.Generator(tree, OPS, shuffle=True, seed=9, rank=1, world_size=2).batches(
            2, with_labels=True, epochs=3)

    with stream() as whole:
        full = [(np.asarray(x), np.asarray(y)) for x, y in whole]
    assert len(full) == 3 * 4  # 7 outputs per rank per epoch: 4 batches
    with stream() as first:
        for _ in range(5):
            next(first)
        saved = first.state_dict()
    with stream() as rest:
        rest.load_state_dict(saved)
        tail = [(np.asarray(x), np.asarray(y)) for x, y in rest]
    assert len(tail) == len(full) - 5
    for (x, y), (x2, y2) in zip(full[5:], tail, strict=True):
        assert np.array_equal(x, x2) and np.array_equal(y, y2)
    other = mp.Generator(tree, OPS, shuffle=True, seed=8, rank=1, world_size=2).batches(
        2, with_labels=True, epochs=3)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(saved)


def _bad_tree(root):
    _tree(root, classes=2, per=4, seed=2)
    (root / "c0" / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00garbage" * 20)
    good = (root / "c1" / "0.jpg").read_bytes()
    png = root / "c1" / "cut.png"
    noise = np.random.default_rng(1).integers(0, 256, (9, 9, 3), dtype=np.uint8)
    Image.fromarray(noise).save(png)
    png.write_bytes(png.read_bytes()[:150])  # cut inside the pixel data
    (root / "c1" / "zero.jpg").write_bytes(b"")
    return root, good


BAD = ("corrupt.jpg", "cut.png", "zero.jpg")


@pytest.mark.parametrize("world", [1, 2])
def test_bad_files_skipped_named_once_ranks_equal(tmp_path, world) -> None:
    root, _ = _bad_tree(tmp_path / "bad")
    lengths = []
    for rank in range(world):
        gen = mp.Generator(root, OPS, shuffle=True, seed=0, rank=rank, world_size=world)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            for epoch in range(2):
                batches = _epoch(gen, epoch, size=3)
                lengths.append(sum(len(x) for x, _, _ in batches))
                for x, s, y in batches:
                    assert np.isfinite(x).all()
                    assert np.array_equal(y, gen.labels[s])  # a refill brings its own label
                    assert not {gen.source.name(i).rsplit("/", 1)[1] for i in s} & set(BAD)
        msgs = [str(w.message) for w in got if issubclass(w.category, UserWarning)]
        mine = {name for name in BAD for m in msgs if name in m}
        for name in mine:  # each bad file this rank met is named once
            assert sum(name in m for m in msgs) == 1
        assert set(gen.bad_samples.names) == {n for n in gen.bad_samples.names}
        assert len(mine) == len(gen.bad_samples)
        gen.close()
    assert len(set(lengths)) == 1  # every rank, every epoch: its whole share


def test_bad_files_all_met_and_strict(tmp_path) -> None:
    root, _ = _bad_tree(tmp_path / "bad")
    gen = mp.Generator(root, OPS, seed=0)
    with pytest.warns(UserWarning) as got:
        _epoch(gen, 0, size=4)
    assert sorted(n.rsplit("/", 1)[1] for n in gen.bad_samples.names) == sorted(BAD)
    assert sum(any(b in str(w.message) for b in BAD) for w in got) == 3
    gen.close()
    strict = mp.Generator(root, OPS, seed=0, strict=True)
    with pytest.raises(BadSampleError, match="corrupt.jpg|cut.png|zero.jpg"):
        _epoch(strict, 0, size=4)
    strict.close()


def test_next_over_paths_and_a_missing_file(tmp_path) -> None:
    root = _tree(tmp_path / "p", classes=1, per=3)
    paths = sorted(root.rglob("*.jpg")) + [root / "missing.jpg"]
    gen = mp.Generator(Paths(paths, labels=[5, 6, 7, 8]), [mp.Operation("fliplr")], outputs=4,
                       return_to_host=True, seed=0)
    with pytest.warns(UserWarning, match="missing.jpg"):
        outs = list(gen)
    assert len(outs) == 4
    # output 3 (the missing file) is refilled by the rank's next sample: output 0's image
    assert np.array_equal(outs[3], outs[0])


def test_shards_train_as_the_folder(tmp_path, tree) -> None:
    src = mp.data.Folder(tree)
    shard = tmp_path / "train-0.tar"
    with tarfile.open(shard, "w") as tf:
        for i in range(len(src)):
            name = f"{i:04d}" + src.paths[i].suffix
            tf.add(src.paths[i], arcname=name)
            info = tarfile.TarInfo(f"{i:04d}.cls")
            data = str(int(src.labels[i])).encode()
            info.size = len(data)
            import io

            tf.addfile(info, io.BytesIO(data))
    a = _epoch(mp.Generator(tree, OPS, shuffle=True, seed=2), 1)
    b = _epoch(mp.Generator(str(shard), OPS, shuffle=True, seed=2), 1)
    assert isinstance(mp.Generator(str(shard), OPS).source, Shards)
    for (x, s, y), (x2, s2, y2) in zip(a, b, strict=True):
        assert np.array_equal(x, x2) and np.array_equal(s, s2) and np.array_equal(y, y2)


def test_coco_batches_carry_targets(tmp_path) -> None:
    import json

    (tmp_path / "img").mkdir()
    for i in range(3):
        Image.fromarray(np.full((12, 14, 3), 40 * i, np.uint8)).save(tmp_path / "img" / f"{i}.png")
    doc = {"images": [{"id": i, "file_name": f"{i}.png", "height": 12, "width": 14}
                      for i in range(3)],
           "annotations": [{"image_id": i, "bbox": [2, 3, 6, 5], "category_id": i + 1,
                            "segmentation": [[2, 3, 8, 3, 8, 8, 2, 8]]} for i in range(3)]}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    src = mp.data.Coco(tmp_path / "img", tmp_path / "a.json")
    gen = mp.Generator(src, [mp.Operation("fliplr")], seed=0)
    with gen.batches(3, with_targets=True, epochs=1) as bs:
        (x, targets), = list(bs)
    assert x.shape == (3, 3, 12, 14)
    for i, t in enumerate(targets):
        assert t.labels.tolist() == [i + 1]
        assert t.boxes.tolist() == [[14 - 8, 3, 14 - 2, 8]]  # flipped with the image
        assert t.mask.shape == (12, 14) and t.mask[5, 14 - 3] == 1


def test_memory_flat_over_many_windows(tmp_path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(240):
        Image.fromarray(rng.integers(0, 256, (10, 10, 3), dtype=np.uint8)).save(
            root / f"{i:03d}.png")
    size = (root / "000.png").stat().st_size
    window = 4 * size  # the dataset is 60 windows
    gen = mp.Generator(root, [mp.Operation("fliplr", probability=0.5)], seed=0,
                       read_ahead=window)
    bs = gen.batches(8)
    for _ in range(31):  # one epoch (and the kernels compiled)
        next(bs)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for _ in range(90):  # three more epochs
        next(bs)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    reader = bs._loader.reader
    assert reader.peak <= window + 8 * 2 * size  # the window, plus a sample per reader
    assert grown < 512 * 1024, grown
    bs.close()
    gen.close()


def test_streaming_shortens_the_switch_interval_while_it_runs(tree) -> None:
    # a C call that releases the GIL (nvImageCodec's decode) must not wait CPython's default
    # 5 ms for each take-back while the readers run; the setting comes back with the last
    # stream
    import sys

    from millipyde.data import loader

    before = sys.getswitchinterval()
    gen = mp.Generator(tree, OPS, seed=0)
    with gen.batches(4, epochs=1, shape=(8, 8)) as bs:
        next(iter(bs))
        now = sys.getswitchinterval()  # (kept in microseconds by CPython)
        assert now == pytest.approx(loader.SWITCH_INTERVAL, abs=1e-6) and now < before
    gc.collect()
    assert sys.getswitchinterval() == pytest.approx(before, abs=1e-6)


def test_streamed_batches_mixed_as_the_mixer_after(tree) -> None:
    # a streamed source's batches(mix=): each batch mixed in its worker at step = its first
    # output index, the decoded batch's labels checked in range per batch
    def gen():
        return mp.Generator(tree, OPS, seed=4)

    with gen().batches(4, epochs=1, with_indices=True, with_labels=True) as bs:
        plain = [(np.asarray(x), ks.copy(), np.asarray(y)) for x, ks, _, y in bs]
    with gen().batches(4, epochs=1, with_labels=True,
                       mix=mp.CutMix(num_classes=3, seed=1)) as bs:
        mixed = [(np.asarray(x), np.asarray(y)) for x, y in bs]
    ref = mp.CutMix(num_classes=3, seed=1)
    assert len(mixed) == len(plain) == 4
    for (x, ks, y), (got, soft) in zip(plain, mixed, strict=True):
        want, want_soft = ref(mp.gpuarray(x), y, step=int(ks[0]))
        np.testing.assert_array_equal(got, np.asarray(want))
        np.testing.assert_array_equal(soft, np.asarray(want_soft))
    with gen().batches(4, epochs=1, with_labels=True, mix=mp.MixUp(num_classes=2)) as bs, \
            pytest.raises(ValueError, match="0..1"):
        list(bs)
