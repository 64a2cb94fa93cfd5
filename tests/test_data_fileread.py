"""A folder's files read a run at a time without the GIL (``millipyde.data.fileread``): the
same bytes and the same bad-sample reports as Python's reads (cpu backend)."""

from __future__ import annotations

import io
import os
import sys
import threading

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
    n = len(paths)

    def run() -> tuple[dict, list]:
        bad = BadSamples()
        plan = lambda b: np.arange(n) if b == 0 else None  # noqa: E731
        loader = Loader(src, EpochSampler(n), plan, PillowDecoder(0, threads=1), 0, bad,
                        threads=2, window=1 << 20)
        try:
            got = loader.get(0)
            assert loader.get(1) is None
            assert loader.reader.nogil_reads == fileread.ENABLED
        finally:
            loader.close()
        return bad.names, [(int(s), np.asarray(a).tobytes())
                           for s, a in zip(got.samples, got.arrays, strict=True)]

    names, rows = run()
    monkeypatch.setattr(fileread, "ENABLED", False)
    old_names, old_rows = run()
    assert names == old_names and rows == old_rows
    assert set(names) == {str(p) for p in kinds.values()}  # each bad file named once
