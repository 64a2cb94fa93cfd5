"""``millipyde.data`` sources, read-ahead and decoders (no Generator; cpu backend)."""

from __future__ import annotations

import io
import json
import os
import tarfile
import threading
import time
import warnings

import numpy as np
import pytest
from PIL import Image

from millipyde import io as mio
from millipyde.data import Coco, Folder, Paths, Shards, as_source
from millipyde.data.decode import NvImageCodecDecoder, PillowDecoder
from millipyde.data.readahead import ReadAhead


def _jpeg(arr: np.ndarray, **kw) -> bytes:
    b = io.BytesIO()
    Image.fromarray(arr).save(b, "JPEG", quality=90, **kw)
    return b.getvalue()


def _rgb(h: int = 6, w: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


# --------------------------------------------------------------------------- folders, paths


def test_folder_classes_as_image_folder(tmp_path) -> None:
    for cls, names in {"dog": ["b.png", "a.png"], "cat": ["x.png"], "empty": []}.items():
        (tmp_path / cls).mkdir()
        for name in names:
            Image.fromarray(_rgb()).save(tmp_path / cls / name)
    (tmp_path / "dog" / "deep").mkdir()
    Image.fromarray(_rgb()).save(tmp_path / "dog" / "deep" / "c.png")
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    os.symlink("/etc", tmp_path / "dog" / "outside")  # a link leaving the root: not followed
    src = Folder(tmp_path)
    assert src.classes == ["cat", "dog"]  # sorted; a folder without images is no class
    names = [os.path.relpath(src.name(i), tmp_path) for i in range(len(src))]
    assert names == ["cat/x.png", "dog/a.png", "dog/b.png", "dog/deep/c.png"]
    assert src.labels.tolist() == [0, 1, 1, 1]
    assert src.read(0) == (tmp_path / "cat" / "x.png").read_bytes()


def test_flat_folder_has_no_labels_and_root_files_beside_classes_warn(tmp_path) -> None:
    Image.fromarray(_rgb()).save(tmp_path / "a.png")
    src = Folder(tmp_path)
    assert len(src) == 1 and src.labels is None and src.classes is None
    (tmp_path / "c").mkdir()
    Image.fromarray(_rgb()).save(tmp_path / "c" / "b.png")
    with pytest.warns(UserWarning, match="no class folder"):
        src = Folder(tmp_path)
    assert len(src) == 1 and src.classes == ["c"]


def test_folder_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        Folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="no image files"):
        Folder(tmp_path)


def test_paths_labels_and_a_fifo_never_blocks(tmp_path) -> None:
    p = tmp_path / "a.jpg"
    p.write_bytes(_jpeg(_rgb()))
    fifo = tmp_path / "f.jpg"
    os.mkfifo(fifo)
    src = Paths([p, fifo], labels=[3, 4])
    assert src.labels.tolist() == [3, 4]
    with pytest.raises(ValueError, match="FIFO"):
        src.read(1)  # refused on the descriptor, never a blocking read
    with pytest.raises(ValueError, match="labels"):
        Paths([p], labels=[1, 2])
    big = Paths([p], max_bytes=10)
    with pytest.raises(ValueError, match="over the limit"):
        big.read(0)


def test_as_source(tmp_path) -> None:
    (tmp_path / "a.png").write_bytes(b"x")
    assert isinstance(as_source(str(tmp_path)), Folder)
    assert isinstance(as_source([tmp_path / "a.png"], labels=[1]), Paths)
    assert as_source([np.zeros(3)]) is None
    with pytest.raises(ValueError, match="labels"):
        as_source(str(tmp_path), labels=[1])


# --------------------------------------------------------------------------- tar shards


def _add(tf: tarfile.TarFile, name: str, data: bytes = b"", **kw) -> None:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    for k, v in kw.items():
        setattr(ti, k, v)
    tf.addfile(ti, io.BytesIO(data) if data else None)


def test_shards_group_members_and_labels(tmp_path) -> None:
    jpg = _jpeg(_rgb())
    with tarfile.open(tmp_path / "s0.tar", "w") as tf:
        _add(tf, "dir/", type=tarfile.DIRTYPE)
        _add(tf, "dir/k0.jpg", jpg)
        _add(tf, "dir/k0.cls", b"7\n")
        _add(tf, "dir/k1.png", b"png-bytes")
        _add(tf, "dir/k1.json", json.dumps({"label": 2}).encode())
    with tarfile.open(tmp_path / "s1.tar", "w") as tf:
        _add(tf, "k2.jpg", jpg)  # no label
    src = Shards(str(tmp_path / "s*.tar"))
    assert len(src) == 3 and src.labels.tolist() == [7, 2, -1]
    assert src.read(0) == jpg and src.read(1) == b"png-bytes"
    assert src.name(1).endswith("s0.tar:dir/k1.png")
    assert src.groups() == [[0, 1], [2]]
    src.close()


def test_hostile_tar_members_refused_with_warnings(tmp_path) -> None:
    jpg = _jpeg(_rgb())
    shard = tmp_path / "evil.tar"
    with tarfile.open(shard, "w") as tf:
        _add(tf, "ok.jpg", jpg)
        _add(tf, "link.jpg", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        _add(tf, "hard.jpg", type=tarfile.LNKTYPE, linkname="ok.jpg")
        _add(tf, "dev.jpg", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        _add(tf, "fifo.jpg", type=tarfile.FIFOTYPE)
        _add(tf, "/abs.jpg", jpg)
        _add(tf, "../up.jpg", jpg)
        _add(tf, "a/../../b.jpg", jpg)
        _add(tf, "huge.jpg", b"x" * 5000)
        _add(tf, "ok2.jpg", jpg)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        src = Shards(shard, max_bytes=4000)
    msgs = [str(w.message) for w in got]
    for member, why in [("link.jpg", "symbolic link"), ("hard.jpg", "hard link"),
                        ("dev.jpg", "device"), ("fifo.jpg", "FIFO"), ("/abs.jpg", "absolute"),
                        ("../up.jpg", ".."), ("a/../../b.jpg", ".."), ("huge.jpg", "limit")]:
        hits = [m for m in msgs if repr(member) in m]
        assert len(hits) == 1 and str(shard) in hits[0] and why in hits[0], (member, msgs)
    assert [src.name(i).rsplit(":", 1)[1] for i in range(len(src))] == ["ok.jpg", "ok2.jpg"]
    assert src.read(1) == jpg
    assert not (tmp_path / "etc").exists() and not (tmp_path.parent / "up.jpg").exists()


def test_truncated_and_not_a_tar(tmp_path) -> None:
    jpg = _jpeg(_rgb())
    shard = tmp_path / "cut.tar"
    with tarfile.open(shard, "w") as tf:
        _add(tf, "a.jpg", jpg)
        _add(tf, "b.jpg", b"y" * 3000)
    data = shard.read_bytes()
    shard.write_bytes(data[:512 + 1024 + 512 + 1000])  # b.jpg's data cut
    with pytest.warns(UserWarning, match="b.jpg"):
        src = Shards(shard)
    assert len(src) == 1
    (tmp_path / "junk.tar").write_bytes(b"not a tar" * 100)
    with pytest.raises(ValueError, match="tar"):
        Shards(tmp_path / "junk.tar")


# --------------------------------------------------------------------------- COCO


def test_coco_boxes_labels_and_masks(tmp_path) -> None:
    (tmp_path / "img").mkdir()
    Image.fromarray(_rgb(10, 12)).save(tmp_path / "img" / "a.png")
    Image.fromarray(_rgb(8, 8)).save(tmp_path / "img" / "b.png")
    doc = {"images": [{"id": 5, "file_name": "a.png", "height": 10, "width": 12},
                      {"id": 6, "file_name": "b.png", "height": 8, "width": 8}],
           "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
           "annotations": [
               {"image_id": 5, "bbox": [1, 2, 4, 3], "category_id": 2,
                "segmentation": [[1, 2, 5, 2, 5, 5, 1, 5]]},
               {"image_id": 5, "bbox": [0, 0, 2, 2], "category_id": 1,
                "segmentation": {"size": [10, 12], "counts": [0, 2, 8, 2, 108]}}]}
    (tmp_path / "ann.json").write_text(json.dumps(doc))
    src = Coco(tmp_path / "img", tmp_path / "ann.json")
    assert len(src) == 2 and src.categories == {1: "cat", 2: "dog"}
    t = src.targets(0)
    assert t["boxes"].tolist() == [[1, 2, 5, 5], [0, 0, 2, 2]]
    assert t["labels"].tolist() == [2, 1]
    assert t["mask"].shape == (10, 12)
    assert (t["mask"][2:6, 1:6] == 1).all() and (t["mask"][:2, :2] == 2).all()
    assert src.targets(1)["boxes"].shape == (0, 4)
    bad = dict(doc, images=[{"id": 1, "file_name": "../x.png"}])
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="leaves"):
        Coco(tmp_path / "img", tmp_path / "bad.json")


def test_coco_compressed_rle() -> None:
    from millipyde.data.coco import rle_counts

    # pycocotools' encoding of the runs [3, 5, 100, 2]
    def encode(counts):
        out = bytearray()
        for i, x in enumerate(counts):
            if i > 2:
                x -= counts[i - 2]
            more = True
            while more:
                c = x & 0x1F
                x >>= 5
                more = (x != -1) if (c & 0x10) else (x != 0)
                if more:
                    c |= 0x20
                out.append(c + 48)
        return bytes(out)

    runs = [3, 5, 100, 2, 1, 40]
    assert rle_counts(encode(runs)) == runs


# --------------------------------------------------------------------------- read-ahead


class _Fake:
    """A source of ``n`` samples of ``size`` bytes that counts reads."""

    labels = None

    def __init__(self, n: int, size: int, bad: set | None = None) -> None:
        self.n, self.sz, self.bad = n, size, bad or set()
        self.reads = 0
        self.lock = threading.Lock()

    def size(self, i: int) -> int:
        return self.sz

    def name(self, i: int) -> str:
        return f"s{i}"

    def read(self, i: int) -> bytes:
        with self.lock:
            self.reads += 1
        if i in self.bad:
            raise ValueError(f"cannot read s{i}")
        return bytes([i % 256]) * self.sz


def test_read_ahead_in_order_and_bounded() -> None:
    src = _Fake(500, 1000, bad={7})
    window = 8000
    with ReadAhead(src, iter(range(500)), threads=4, window=window) as ra:
        got = []
        for _ in range(500):
            i, data = ra.take()
            got.append(i)
            assert isinstance(data, ValueError) if i == 7 else data[0] == i % 256
            assert ra.held <= window + 4 * 1000
        with pytest.raises(StopIteration):
            ra.take()
    assert got == list(range(500))
    assert ra.peak <= window + 4 * 1000  # 500 samples through a window of 8


def test_read_ahead_close_stops_readers() -> None:
    src = _Fake(10_000, 100)
    ra = ReadAhead(src, iter(range(10_000)), threads=3, window=1000)
    ra.take()
    ra.close()
    assert not any(t.is_alive() for t in ra._threads)
    assert src.reads < 100  # nothing read far beyond the window


def _until(cond, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def test_read_ahead_held_back_reads_nothing_new_and_a_wait_ends_the_hold() -> None:
    src = _Fake(1000, 10)
    with ReadAhead(src, iter(range(1000)), threads=3, window=1 << 20, max_items=64) as ra:
        _until(lambda: src.reads == 64 and len(ra._results) == 64)
        with ra.held_back():
            got = ra.take_many(32)  # read already: the hold stays
            time.sleep(0.05)  # room for 32: readers that were not held would read now
            assert src.reads == 64
            got += ra.take_many(40)  # 8 not read yet: waiting for them ends the hold
        assert [i for i, _ in got] == list(range(72))
        _until(lambda: src.reads == 72 + 64)  # caught up after the block
        assert [i for i, _ in ra.take_many(10)] == list(range(72, 82))


def test_read_ahead_held_back_with_a_stock_reads_up_to_it() -> None:
    """``held_back(stock)``: held readers still read until ``stock`` samples ahead of the
    takes are claimed (the next lane's batch read before its take), not beyond."""
    src = _Fake(1000, 10)
    with ReadAhead(src, iter(range(1000)), threads=2, window=1 << 20, max_items=64) as ra:
        _until(lambda: src.reads == 64 and len(ra._results) == 64)
        with ra.held_back(48):
            got = ra.take_many(32)  # 32 ahead: 16 more read, up to 48
            _until(lambda: src.reads == 80)
            time.sleep(0.05)
            assert src.reads == 80 and ra._claimed - ra._taken == 48
            got += ra.take_many(48)  # read already: no wait, the hold stays
            assert ra._held_back
            _until(lambda: src.reads == 128)
        assert [i for i, _ in got] == list(range(80))


def test_a_take_wakes_the_idle_readers_once_and_not_while_the_hold_has_its_stock() -> None:
    """Each reader woken takes the GIL and the lock from the taker: a take of many samples
    wakes the idle readers once (none where the hold's stock is claimed), not per sample."""
    src = _Fake(1000, 10)
    with ReadAhead(src, iter(range(1000)), threads=2, window=1 << 20, max_items=64) as ra:
        _until(lambda: src.reads == 64 and ra._idle == 2)
        wakes = []  # the calls to wake readers (notify_all's own notify not counted)
        notify, notify_all = ra._space.notify, ra._space.notify_all
        inner = [False]

        def one(n: int = 1) -> None:
            if not inner[0]:
                wakes.append(n)
            notify(n)

        def every() -> None:
            wakes.append("all")
            inner[0] = True
            try:
                notify_all()
            finally:
                inner[0] = False

        ra._space.notify, ra._space.notify_all = one, every
        with ra.held_back(16):
            ra.take_many(32)  # 32 ahead, the stock 16: no reader woken
            assert wakes == []
        wakes.clear()
        ra.take_many(32)  # not held: woken once for the 32 taken
        assert wakes == ["all"]


def test_loader_holds_the_readers_back_during_the_decode_call() -> None:
    from millipyde.data.loader import BadSamples, Loader
    from millipyde.data.sampler import EpochSampler

    src = _Fake(400, 10)
    src.has_targets = False
    made = threading.Event()
    held = []
    box = {}

    class Noting:  # a decoder that notes whether the readers are held while it decodes
        def decode(self, datas, name_of, stream=None):
            made.wait(10)
            held.append(box["loader"].reader._held_back)
            return [np.frombuffer(d, np.uint8) for d in datas]

        def close(self) -> None:
            pass

    plan = lambda b: np.arange(b * 32, b * 32 + 32) if b < 10 else None  # noqa: E731
    box["loader"] = loader = Loader(src, EpochSampler(400), plan, Noting(), 0, BadSamples(),
                                    threads=4, window=1 << 20)
    made.set()
    try:
        got = [loader.get(b) for b in range(10)]
        assert loader.get(10) is None
    finally:
        loader.close()
    assert [list(g.samples) for g in got] == [list(range(b * 32, b * 32 + 32))
                                              for b in range(10)]
    assert held == [True] * 10
    assert not loader.reader._held_back


class _Laned:
    """A decoder that can make another (``Loader`` decode lanes): bytes back as arrays, a
    sample whose bytes are 13 fails; notes the threads it decodes in and whether it closed."""

    made: list = []

    def __init__(self) -> None:
        self.threads: set[int] = set()
        self.closed = False
        _Laned.made.append(self)

    def another(self) -> _Laned:
        return _Laned()

    def decode(self, datas, name_of, stream=None):
        self.threads.add(threading.get_ident())
        time.sleep(0.002)  # lanes overlap inside their calls
        return [ValueError(f"cannot decode {name_of(r)}") if d[0] == 13
                else np.frombuffer(d, np.uint8) for r, d in enumerate(datas)]

    def close(self) -> None:
        self.closed = True


def _laned_batches(lanes, decoder=None, batches=9):
    from millipyde.data.loader import BadSamples, Loader
    from millipyde.data.sampler import EpochSampler

    src = _Fake(300, 10, bad={7})
    src.has_targets = False
    plan = lambda b: np.arange(b * 32, b * 32 + 32) if b < batches else None  # noqa: E731
    bad = BadSamples()
    loader = Loader(src, EpochSampler(300), plan, decoder or _Laned(), 0, bad, threads=3,
                    window=1 << 20, lanes=lanes)
    try:
        got = [loader.get(b) for b in range(batches)]
        assert loader.get(batches) is None
    finally:
        loader.close()
    return loader, [(g.ks.tolist(), g.samples.tolist(), [int(a[0]) for a in g.arrays])
                    for g in got], dict(bad.names)


@pytest.mark.parametrize("lanes", [2, 3])
def test_loader_decode_lanes_give_one_lanes_batches(lanes) -> None:
    _Laned.made = []
    _, one, bad_one = _laned_batches(1)
    assert len(_Laned.made) == 1  # one lane: another() never called
    _Laned.made = []
    loader, got, bad = _laned_batches(lanes)
    assert loader.lanes == lanes and loader.ahead >= lanes
    assert got == one and bad == bad_one  # samples, order, refills: as one lane's
    assert set(bad) == {"s7", "s13", "s269"}  # 269 % 256 == 13
    assert len(_Laned.made) == lanes and all(d.closed for d in _Laned.made)
    # each lane decoded with its own decoder, in its own thread
    used = [d.threads for d in _Laned.made]
    assert all(len(t) == 1 for t in used) and len(set().union(*used)) == lanes
    assert loader.stats["batches"] == 9


def test_loader_segments_time_each_lane_call(monkeypatch) -> None:
    """``loader.SEGMENTS``: each lane call's segments summed into the stats (wall and the
    thread's CPU), the batches, refills and bad files as without; a decoder that does not
    say ``takes_laps`` is called as before (its segments are the loader's)."""
    from millipyde.data import laps as laps_mod
    from millipyde.data import loader as loader_mod

    _Laned.made = []
    _, plain, bad_plain = _laned_batches(2)
    monkeypatch.setattr(loader_mod, "SEGMENTS", True)
    _Laned.made = []
    loader, got, bad = _laned_batches(2)
    assert got == plain and bad == bad_plain
    st = loader.stats
    for name in ("turn", "take", "lists", "refill", "rest"):
        assert st[f"seg_{name}_s"] >= st[f"seg_{name}_cpu_s"] * 0.5 >= 0, name
    # the decoder's call (sleeps 2 ms a batch) falls in the segment after it
    assert st["seg_refill_s"] >= 9 * 0.002
    assert st["seg_regains"] == 0
    text = laps_mod.table(st, st["batches"])
    assert "refill" in text and "all" in text


def test_laps_time_segments_and_regains() -> None:
    from millipyde.data.laps import Laps, table

    laps = Laps()
    time.sleep(0.003)
    laps.lap("a")
    x = 0
    for i in range(20000):  # CPU
        x += i
    laps.lap("b")
    laps.lap("a")
    laps.regain(1_000_000)
    laps.regain(-1)  # not known: not counted
    st: dict = {}
    laps.into(st)
    laps.into(st)
    assert st["seg_a_s"] >= 2 * 0.003 and st["seg_a_cpu_s"] < st["seg_a_s"]
    assert st["seg_b_cpu_s"] > 0
    assert st["seg_regains"] == 2 and abs(st["seg_regain_s"] - 0.002) < 1e-12
    assert "GIL taken back after 1.0 GIL-free passes" in table(st, 2)
    assert table({}, 2) == ""


def test_loader_lanes_need_a_decoder_that_makes_another() -> None:
    class Plain:
        def decode(self, datas, name_of, stream=None):
            return [np.frombuffer(d, np.uint8) for d in datas]

        def close(self) -> None:
            pass

    loader, got, _ = _laned_batches(3, Plain(), batches=2)
    assert loader.lanes == 1 and len(got) == 2
    with pytest.raises(ValueError, match="lanes must be >= 1"):
        _laned_batches(0)


def test_loader_lane_whose_decoder_cannot_be_made_fails_its_batch_loudly() -> None:
    class Failing(_Laned):
        def another(self):
            raise RuntimeError("no second decoder on device 0")

    from millipyde.data.loader import BadSamples, Loader
    from millipyde.data.sampler import EpochSampler

    src = _Fake(100, 10)
    src.has_targets = False
    plan = lambda b: np.arange(b * 10, b * 10 + 10) if b < 10 else None  # noqa: E731
    loader = Loader(src, EpochSampler(100), plan, Failing(), 0, BadSamples(), threads=2,
                    window=1 << 20, lanes=2)
    try:
        assert loader.get(0).samples.tolist() == list(range(10))
        with pytest.raises(RuntimeError, match="no second decoder"):
            loader.get(1)
    finally:
        loader.close()


# --------------------------------------------------------------------------- decoders


def test_pillow_decoder_modes_exif_and_errors() -> None:
    dec = PillowDecoder(0, threads=2)
    rgb = _rgb(6, 4)
    grey = _rgb(5, 5)[..., 0]
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated: 90 degrees clockwise to be upright
    rotated = _jpeg(rgb, exif=exif.tobytes())
    cmyk = io.BytesIO()
    Image.new("CMYK", (3, 2), (0, 255, 0, 0)).save(cmyk, "JPEG")
    png = io.BytesIO()
    Image.fromarray(grey).save(png, "PNG")
    got = dec.decode_host([(rotated, "r.jpg"), (cmyk.getvalue(), "c.jpg"),
                           (png.getvalue(), "g.png"), (b"", "zero.jpg"),
                           (png.getvalue()[:40], "cut.png")])
    plain = mio.decode_array(_jpeg(rgb), "p.jpg", exif=False)
    assert got[0].shape == (4, 6, 3)  # EXIF orientation applied
    assert np.array_equal(got[0], np.rot90(plain, k=-1))
    assert got[1].shape == (2, 3, 3) and got[1].dtype == np.uint8  # CMYK as RGB
    assert np.array_equal(got[2], grey)
    assert isinstance(got[3], ValueError) and "zero.jpg" in str(got[3])
    assert isinstance(got[4], ValueError) and "cut.png" in str(got[4])
    dec.close()


class _FakeNv:
    """nvImageCodec's Python interface as the decoder uses it, decoding with Pillow (the real
    decode runs on the GPU machine, bench/bench_data.py)."""

    class ColorSpec:
        SYCC, SRGB, UNKNOWN, GRAY, CMYK = range(5)

    class CodeStream:
        def __init__(self, data: bytes | str) -> None:
            if isinstance(data, str):  # a path: nvImageCodec maps the file itself
                with open(data, "rb") as fh:
                    data = fh.read()
            img = Image.open(io.BytesIO(data))
            self.data = data
            self.codec_name = img.format.lower()
            self.num_channels = len(img.getbands())
            self.width, self.height = img.size
            cs = _FakeNv.ColorSpec
            self.color_spec = {"L": cs.GRAY, "CMYK": cs.CMYK}.get(img.mode, cs.SYCC)

    class DecodeParams:
        def __init__(self, **kw) -> None:
            self.kw = kw

    class Decoder:
        calls: list = []

        def __init__(self, device_id: int, max_num_cpu_threads: int = 0) -> None:
            pass

        def decode(self, streams, params=None, cuda_stream=0):
            # as nvidia.nvimgcodec's: a list leaves out what failed to decode; one code
            # stream alone gives None
            one = not isinstance(streams, list)
            batch = [streams] if one else streams
            _FakeNv.Decoder.calls.append(len(batch))
            got = [None if cs.data[-1:] == b"!" else
                   np.asarray(Image.open(io.BytesIO(cs.data)).convert("RGB")) for cs in batch]
            return got[0] if one else [g for g in got if g is not None]


def test_nvimgcodec_routing_and_fallback(monkeypatch) -> None:
    from millipyde.data import decode as dmod

    monkeypatch.setattr(dmod, "_wrap", lambda img, dec, st: img)  # the fake's: host arrays
    dec = NvImageCodecDecoder(0, PillowDecoder(0, threads=1), module=_FakeNv)
    rgb = _rgb(7, 9)
    grey = _jpeg(rgb[..., 0])
    png = io.BytesIO()
    Image.fromarray(rgb).save(png, "PNG")
    refused = _jpeg(rgb) + b"!"  # the GPU decoder fails it: Pillow decodes it
    _FakeNv.Decoder.calls.clear()
    names = ["a.jpg", "g.jpg", "p.png", "r.jpg", "j.jpg"]
    got = dec.decode([_jpeg(rgb), grey, png.getvalue(), refused, b"junk"], names.__getitem__)
    # one batched call for the colour JPEGs; the list came back one short, so each alone
    assert _FakeNv.Decoder.calls == [2, 1, 1]
    assert got[0].shape == (7, 9, 3)
    assert got[1].shape == (7, 9)  # grey JPEG by Pillow: 2-D, as io.py maps it
    assert np.array_equal(got[2], rgb)
    assert got[3].shape == (7, 9, 3)
    assert isinstance(got[4], ValueError) and "j.jpg" in str(got[4])
    assert (dec.on_gpu, dec.on_host) == (1, 4)
    _FakeNv.Decoder.calls.clear()
    both = dec.decode([_jpeg(rgb), _jpeg(rgb)], "ab".__getitem__)
    assert _FakeNv.Decoder.calls == [2] and all(g.shape == (7, 9, 3) for g in both)
    monkeypatch.setattr(mio, "pixel_limit", lambda: 10)
    bomb = dec.decode([_jpeg(rgb)], lambda r: "big.jpg")[0]
    assert isinstance(bomb, ValueError) and "decompression bomb" in str(bomb)
    dec.close()


def test_nvimgcodec_readers_parse_samples_off_the_decode_thread(tmp_path, monkeypatch) -> None:
    """The read-ahead's threads open each file (non-blocking, a regular file, within
    ``max_bytes``) and parse it for nvImageCodec; the decode thread gets parsed colour JPEGs
    and the bytes of the rest; bad files raise in the reader, naming the file."""
    from millipyde.data import decode as dmod

    monkeypatch.setattr(dmod, "_wrap", lambda img, dec, st: img)
    dec = NvImageCodecDecoder(0, PillowDecoder(0, threads=1), module=_FakeNv)
    rgb = _rgb(7, 9)
    files = {"c.jpg": _jpeg(rgb), "g.jpg": _jpeg(rgb[..., 0]), "j.jpg": b"junk",
             "r.jpg": _jpeg(rgb) + b"!"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    Image.fromarray(rgb).save(tmp_path / "p.png")
    (tmp_path / "big.jpg").write_bytes(_jpeg(rgb) + bytes(4096))
    os.mkfifo(tmp_path / "f.jpg")
    names = ["c.jpg", "g.jpg", "p.png", "j.jpg", "r.jpg", "f.jpg", "big.jpg", "gone.jpg"]
    src = Paths([tmp_path / n for n in names], max_bytes=len(files["r.jpg"]) + 16)
    read = dec.reader(src)
    got = {}
    for i, n in enumerate(names):
        try:
            got[n] = read(i)
        except (OSError, ValueError) as err:
            got[n] = err
    assert type(got["c.jpg"]) is dmod.Coded and len(got["c.jpg"]) == len(files["c.jpg"])
    assert type(got["r.jpg"]) is dmod.Coded  # parses; the GPU fails it below
    assert got["g.jpg"] == files["g.jpg"] and got["j.jpg"] == b"junk"  # bytes for Pillow
    assert got["p.png"] == (tmp_path / "p.png").read_bytes()
    for n in ("f.jpg", "big.jpg", "gone.jpg"):  # a FIFO never blocks
        assert isinstance(got[n], (OSError, ValueError)) and n in str(got[n]), n
    _FakeNv.Decoder.calls.clear()
    out = dec.decode([got[n] for n in names[:5]], names.__getitem__)
    assert _FakeNv.Decoder.calls[0] == 2  # one batched call for the two parsed JPEGs
    assert out[0].shape == (7, 9, 3) and out[1].shape == (7, 9) and out[4].shape == (7, 9, 3)
    assert np.array_equal(out[2], rgb)
    assert isinstance(out[3], ValueError) and "j.jpg" in str(out[3])
    monkeypatch.setattr(mio, "pixel_limit", lambda: 10)
    with pytest.raises(ValueError, match="decompression bomb") as info:
        dec.reader(src)(0)
    assert "c.jpg" in str(info.value)
    # shards (no paths): their bytes are parsed in the reader too
    tar = tmp_path / "s.tar"
    with tarfile.open(tar, "w") as tf:
        for key, data in (("a", files["c.jpg"]), ("b", files["g.jpg"])):
            ti = tarfile.TarInfo(f"{key}.jpg")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    monkeypatch.setattr(mio, "pixel_limit", lambda: 1 << 30)
    sh = Shards(tar)
    r = dec.reader(sh)
    assert type(r(0)) is dmod.Coded and r(1) == files["g.jpg"]
    dec.close()


def test_decoded_image_keeps_its_stream_and_is_released_first() -> None:
    """nvImageCodec frees an image's memory on the stream it was decoded on: the image keeps
    that stream (and its decoder) alive and goes before them."""
    import gc
    import weakref

    from millipyde.data import decode as dmod

    gone = []

    class _Obj:
        def __init__(self, name: str) -> None:
            self.name = name

        def __del__(self) -> None:
            gone.append(self.name)

    class _Img(_Obj):
        __cuda_array_interface__ = {"shape": (2, 3, 3), "typestr": "|u1", "data": (64, False),
                                    "strides": None, "version": 3}

    img, dec, stream = _Img("image"), _Obj("decoder"), _Obj("stream")
    wrapped = dmod._wrap(img, dec, stream)
    ref = weakref.ref(stream)
    del img, dec, stream
    gc.collect()
    assert ref() is not None and gone == []  # the stream lives while its image does
    assert wrapped.shape == (2, 3, 3) and wrapped.device_ptr == 64
    del wrapped
    gc.collect()
    assert gone == ["image", "decoder", "stream"]
