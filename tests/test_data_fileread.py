"""A folder's files read a run at a time without the GIL (``millipyde.data.fileread``): the
same bytes and the same bad-sample reports as Python's reads (cpu backend)."""

from __future__ import annotations

import io
import os
import sys
import threading
import warnings

import numpy as np
import pytest
from PIL import Image

from millipyde import io as mio
from millipyde.data import Folder, Paths, fileread
from millipyde.data.decode import PillowDecoder
from millipyde.data.loader import BadSamples, Loader
from millipyde.data.readahead import ReadAhead
from millipyde.data.sampler import EpochSampler

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="runs of files are read natively on Linux only")


def _jpeg(seed: int, h: int = 6, w: int = 5) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    b = io.BytesIO()
    Image.fromarray(arr).save(b, "JPEG", quality=90)
    return b.getvalue()


def _read_all(src, plan: list[int], threads: int = 2) -> tuple[ReadAhead, list]:
    with ReadAhead(src, iter(plan), threads=threads, window=1 << 20) as ra:
        got = ra.take_many(len(plan))
    assert not any(t.is_alive() for t in ra._threads)  # close() joined them
    return ra, got


def _bad_files(tmp_path) -> tuple[list, dict]:
    """Good JPEGs around every kind of bad file; what each is."""
    good = [tmp_path / f"g{k}.jpg" for k in range(3)]
    for k, p in enumerate(good):
        p.write_bytes(_jpeg(k))
    (tmp_path / "dir.jpg").mkdir()
    os.mkfifo(tmp_path / "fifo.jpg")
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "big.jpg").write_bytes(b"\xff" * 5000)
    os.symlink(tmp_path / "gone.jpg", tmp_path / "dangling.jpg")
    (tmp_path / "junk.jpg").write_bytes(b"not an image")
    kinds = {"missing": tmp_path / "missing.jpg", "dir": tmp_path / "dir.jpg",
             "fifo": tmp_path / "fifo.jpg", "empty": tmp_path / "empty.jpg",
             "big": tmp_path / "big.jpg", "dangling": tmp_path / "dangling.jpg",
             "junk": tmp_path / "junk.jpg", "nul": str(tmp_path / "a\0b.jpg")}
    paths = [good[0]]
    for p in kinds.values():  # each bad kind followed by a good file
        paths += [p, good[len(paths) % 3]]
    return paths, kinds


def _load(src) -> tuple[dict, list]:
    """One epoch of ``src`` in one batch through the loader (Pillow): the bad samples' names,
    and per row its sample, label (-1: none) and pixels."""
    bad = BadSamples()
    n = len(src)
    plan = lambda b: np.arange(n) if b == 0 else None  # noqa: E731
    loader = Loader(src, EpochSampler(n), plan, PillowDecoder(0, threads=1), 0, bad,
                    threads=2, window=1 << 20)
    try:
        got = loader.get(0)
        assert loader.get(1) is None
        assert loader.reader.nogil_reads == fileread.ENABLED
    finally:
        loader.close()
    labels = got.labels if got.labels is not None else [-1] * len(got.samples)
    return bad.names, [(int(s), int(y), np.asarray(a).tobytes())
                       for s, y, a in zip(got.samples, labels, got.arrays, strict=True)]


def test_runs_read_the_same_bytes_as_python_and_the_flag_off_is_the_old_path(
        tmp_path, monkeypatch) -> None:
    assert fileread.available(), fileread.why_not()
    rng = np.random.default_rng(0)
    for c in range(2):
        (tmp_path / f"c{c}").mkdir()
        for k in range(40):  # sizes from 1 byte to ~200 KB
            n = int(rng.integers(1, 200_000)) if k % 5 else int(rng.integers(1, 10))
            (tmp_path / f"c{c}" / f"{k:02d}.jpg").write_bytes(rng.bytes(n))
    src = Folder(tmp_path)
    plan = rng.integers(0, len(src), 300).tolist()  # repeats, out of order, runs of 32
    ra, got = _read_all(src, plan)
    assert ra._read_run is not None and ra.run == fileread.RUN
    assert [i for i, _ in got] == plan
    for i, data in got:
        assert isinstance(data, np.ndarray) and not data.flags.writeable
        assert data.tobytes() == src.read(i)
    # the source goes to a decode worker process without its packed paths
    import pickle

    assert src._table is not None and pickle.loads(pickle.dumps(src))._table is None
    monkeypatch.setattr(fileread, "ENABLED", False)
    ra, old = _read_all(src, plan)
    assert ra._read_run is None and ra.run == 8
    assert all(type(d) is bytes for _, d in old)
    assert [(i, bytes(d)) for i, d in got] == [(i, d) for i, d in old]
    monkeypatch.setattr(fileread, "ENABLED", True)

    class Upper(Folder):  # a subclass that reads its own way is read by its read()
        def read(self, i: int) -> bytes:
            return super().read(i).upper()

    mine = Upper(tmp_path)
    ra, up = _read_all(mine, plan[:20])
    assert ra._read_run is None and [d for _, d in up] == [src.read(i).upper()
                                                          for i in plan[:20]]


def test_bad_files_reported_as_python_reads_report_them_and_a_fifo_never_blocks(
        tmp_path, monkeypatch) -> None:
    paths, kinds = _bad_files(tmp_path)
    src = Paths(paths, max_bytes=4096)
    plan = list(range(len(paths)))
    done = threading.Event()
    box: dict = {}

    def fast() -> None:  # a blocking open of the FIFO would hang here
        box["ra"], box["got"] = _read_all(src, plan)
        box["run"] = src.read_run(plan)
        done.set()

    threading.Thread(target=fast, daemon=True).start()
    assert done.wait(60), "a run with a FIFO in it blocked"
    assert box["ra"]._read_run is not None
    monkeypatch.setattr(fileread, "ENABLED", False)
    _, old = _read_all(src, plan)

    def what(d):
        return (type(d), str(d)) if isinstance(d, BaseException) else bytes(d)

    assert [what(d) for _, d in box["got"]] == [what(d) for _, d in old]
    by_name = {src.name(i): d for i, d in old}
    for kind, p in kinds.items():
        d = by_name[str(p)]
        if kind in ("empty", "junk"):  # read: the decoder says what is wrong
            assert d == (b"" if kind == "empty" else b"not an image")
        else:
            assert isinstance(d, (OSError, ValueError)), kind
    assert "FIFO" in str(by_name[str(kinds["fifo"])])
    assert "over the limit" in str(by_name[str(kinds["big"])])
    # the native run read every good file and left every bad one to Python's read
    for p, v in zip(paths, box["run"], strict=True):
        good = os.path.basename(os.fspath(p)).startswith("g")
        assert (v is not None) == (good or p == kinds["junk"]), p
        if v is not None:
            assert v.tobytes() == mio.read_regular(p)


def test_bad_files_named_once_by_the_loader_as_before(tmp_path, monkeypatch) -> None:
    paths, kinds = _bad_files(tmp_path)
    src = Paths(paths, max_bytes=4096)
    src.has_targets = False

    names, rows = _load(src)
    monkeypatch.setattr(fileread, "ENABLED", False)
    old_names, old_rows = _load(src)
    assert names == old_names and rows == old_rows
    assert set(names) == {str(p) for p in kinds.values()}  # each bad file named once


# --------------------------------------------------------------------------- tar shards


def _shards(tmp_path, n_shards: int = 3, per: int = 12) -> list:
    """``n_shards`` WebDataset shards of ``per`` samples: JPEGs with .cls or .json labels,
    sizes from 1 byte up, a sample without a label; the paths."""
    import json
    import tarfile

    rng = np.random.default_rng(3)
    out = []
    for s in range(n_shards):
        path = tmp_path / f"part-{s}.tar"
        with tarfile.open(path, "w") as tf:
            for k in range(per):
                key = f"d{s}/{k:03d}"
                data = _jpeg(s * per + k) if k % 3 else rng.bytes(int(rng.integers(1, 70_000)))
                members = [(f"{key}.jpg", data)]
                if k % 4 == 1:
                    members.append((f"{key}.json", json.dumps({"label": k}).encode()))
                elif k % 4 != 3:
                    members.append((f"{key}.cls", str(s * 100 + k).encode()))
                for name, blob in members:
                    ti = tarfile.TarInfo(name)
                    ti.size = len(blob)
                    tf.addfile(ti, io.BytesIO(blob))
        out.append(path)
    return out


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_shard_runs_read_the_same_samples_labels_and_order_as_python(
        tmp_path, monkeypatch) -> None:
    from millipyde.data import Shards, shards

    src = Shards(_shards(tmp_path))
    assert src.reads_runs and len(src) == 36
    labels = src.labels.tolist()
    assert labels[:4] == [0, 1, 2, -1] and labels[12:14] == [100, 1]
    rng = np.random.default_rng(1)
    for plan in (list(range(len(src))), rng.integers(0, len(src), 200).tolist()):
        ra, got = _read_all(src, plan)  # in order (shards front to back) and shuffled
        assert ra._read_run is not None and ra.nogil_reads and ra.run == fileread.RUN
        assert [i for i, _ in got] == plan
        for i, data in got:
            assert isinstance(data, np.ndarray) and not data.flags.writeable
            assert data.tobytes() == src.read(i)
        monkeypatch.setattr(fileread, "ENABLED", False)
        ra, old = _read_all(src, plan)
        monkeypatch.setattr(fileread, "ENABLED", True)
        assert ra._read_run is None and all(type(d) is bytes for _, d in old)
        assert [(i, bytes(d)) for i, d in got] == [(i, d) for i, d in old]
    # closed, or sent to a decode worker process (descriptors stay behind), it reopens them
    import pickle

    src.close()
    assert (src._fdv == -1).all()
    for again in (src, pickle.loads(pickle.dumps(src))):
        assert [v.tobytes() for v in again.read_run([35, 0])] == [src.read(35), src.read(0)]
        assert (again._fdv >= 0).sum() == 2
        again.close()
    src.close()  # (its reads above reopened two)
    # past OPEN_SHARDS a run opens the shards it reads and closes them after
    monkeypatch.setattr(shards, "OPEN_SHARDS", 1)
    before = _fds()
    run = src.read_run([0, 13, 30, 1, 25])
    assert [v.tobytes() for v in run] == [src.read(i) for i in (0, 13, 30, 1, 25)]
    assert len(src._fds) == 1 and _fds() == before + 1
    src.close()
    assert _fds() == before
    with pytest.raises(IndexError, match="out of bounds"):
        src.read_run([0, 36])
    with pytest.raises(ValueError, match="differ in length"):
        fileread.read_spans([0], [0, 1], [1])
    assert src.read_run([]) == [] and fileread.read_spans([], [], []) == []
    # compiled positioned reads that failed their check: every member read the usual way
    with monkeypatch.context() as m:
        m.setitem(fileread._state, "spans", False)
        assert src.read_run([0, 13]) == [None, None]
        with pytest.raises(ValueError, match="differ in length"):
            fileread.read_spans([0], [0, 1], [1])

    class Upper(Shards):  # a subclass that reads its own way is read by its read()
        def read(self, i: int) -> bytes:
            return super().read(i).upper()

    mine = Upper(src.shards)
    ra, up = _read_all(mine, list(range(5)))
    assert ra._read_run is None and [d for _, d in up] == [src.read(i).upper()
                                                          for i in range(5)]


def test_a_shard_cut_after_it_was_indexed_and_a_bad_member_reported_as_before(
        tmp_path, monkeypatch) -> None:
    from millipyde.data import Shards

    paths = _shards(tmp_path, n_shards=2, per=8)
    src = Shards(paths)
    cut = paths[1]
    keep = int(src._offset[8 + 5]) + 10  # sample 13's member cut short, 14 and 15 gone
    cut.write_bytes(cut.read_bytes()[:keep])
    plan = list(range(len(src)))
    run = src.read_run(plan)
    assert [v is None for v in run] == [False] * 13 + [True] * 3

    def what(d):
        return (type(d), str(d)) if isinstance(d, BaseException) else bytes(d)

    _, got = _read_all(src, plan)
    monkeypatch.setattr(fileread, "ENABLED", False)
    _, old = _read_all(src, plan)
    monkeypatch.setattr(fileread, "ENABLED", True)
    assert [what(d) for _, d in got] == [what(d) for _, d in old]
    for i, d in got[13:]:
        assert isinstance(d, ValueError) and "ends" in str(d) and src.name(i) in str(d)

    # through the loader: the cut members and a member that fails to decode (sample 0's
    # random bytes) named once, the rest decoded, as Python's reads do
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bad samples' warnings: compared below
        names, rows = _load(src)
        monkeypatch.setattr(fileread, "ENABLED", False)
        old_names, old_rows = _load(src)
    assert names == old_names and rows == old_rows
    assert {src.name(i) for i in (0, 13, 14, 15)} <= set(names)
    assert src.name(1) not in names and len(rows) == len(src)
