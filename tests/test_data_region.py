"""Region decoding (``millipyde.data.region``): a streamed Generator whose first op is a window
keeps only the region that window reads, and makes the same outputs as from whole samples.

cpu backend: Pillow decodes every sample whole and the loader cuts the region (the C-API region
decode of a GPU is checked against its whole decode in tests/test_data_nvimgcodec_capi.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import millipyde as mp
from millipyde import random as mprandom
from millipyde.data import process, region
from millipyde.data.region import aligned
from millipyde.image import _OneImage
from millipyde.ops.base import first_window
from millipyde.training import region_plan
from millipyde.training.batch_ops import kind_for
from millipyde.training.region_plan import plan_of


def _folder(root, seed=0):
    """Colour JPEGs of mixed sizes, a grey JPEG, a CMYK JPEG, an EXIF-rotated JPEG (its
    decoded size swapped) and a grey PNG, in two class folders."""
    rng = np.random.default_rng(seed)
    for c in range(2):
        d = root / f"c{c}"
        d.mkdir(parents=True)
        for i in range(5):
            h, w = (int(v) for v in rng.integers(33, 70, 2))
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(
                d / f"{i}.jpg", quality=90)
    d = root / "c0"
    Image.fromarray(rng.integers(0, 256, (41, 52), dtype=np.uint8)).save(d / "grey.jpg")
    Image.fromarray(rng.integers(0, 256, (38, 47, 4), dtype=np.uint8), "CMYK").save(
        d / "cmyk.jpg")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90 degrees: decoded 57 x 36
    Image.fromarray(rng.integers(0, 256, (36, 57, 3), dtype=np.uint8)).save(
        d / "turned.jpg", exif=exif)
    Image.fromarray(rng.integers(0, 256, (35, 44), dtype=np.uint8)).save(d / "grey.png")
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return _folder(tmp_path_factory.mktemp("region") / "train")


@pytest.fixture
def switch(monkeypatch):
    """Sets ``region_plan.ENABLED`` (and ``region.ALIGN``) for the Generators made after;
    Pillow's whole decodes are cut to their regions (``region.CUT_WHOLE``), so the region's
    recording runs on the cpu backend."""
    def set_(on, align=region.ALIGN):
        monkeypatch.setattr(region_plan, "ENABLED", on)
        monkeypatch.setattr(region, "ALIGN", align)
        monkeypatch.setattr(region, "CUT_WHOLE", on)
    return set_


def _batches(folder, ops, epoch=1, size=5, **kwargs):
    """The float batches of an epoch, and the loader's pixel counts."""
    gen = mp.Generator(folder, ops, shuffle=True, seed=7, **kwargs)
    gen.set_epoch(epoch)
    with gen.batches(size, epochs=1, shape=(16, 16)) as bs:
        got = [np.asarray(x) for x in bs]
        stats = dict(bs._loader.stats)
    gen.close()
    return got, stats


FLIP = mp.Operation("fliplr", probability=0.5)
FIRST = {
    "rrc": mp.Operation("random_resized_crop", 16, 16),
    "rrc_large": mp.Operation("random_resized_crop", 16, 16, scale=(0.9, 1.0)),
    "center": mp.Operation("center_crop", 30, 30),
    # larger than some samples (zeros there): a batch of windows inside some images and
    # beyond others is not one window op (``crop`` and ``crop_fill`` with skips): whole
    "center_mixed": mp.Operation("center_crop", 40, 40),
    "crop": mp.Operation("crop", 5, 17, 16, 16),
    "random_crop": mp.Operation("random_crop", 16, 16),
    "random_crop_pad": mp.Operation("random_crop", 30, 30, padding=4, padding_mode="edge"),
}


@pytest.mark.parametrize("align", [1, 16])
@pytest.mark.parametrize("first", sorted(FIRST))
def test_regions_make_the_whole_samples_outputs(folder, switch, first, align) -> None:
    ops = [FIRST[first], FLIP, mp.Operation("random_contrast", 0.6, 1.4, probability=0.8)]
    if first.startswith("center") or first == "random_crop_pad":
        ops.insert(1, mp.Operation("resize", 16, 16))
    switch(False)
    whole, st0 = _batches(folder, ops)
    switch(True, align)
    part, st1 = _batches(folder, ops)
    assert len(whole) == len(part) == 3
    for a, b in zip(whole, part, strict=True):
        assert np.array_equal(a, b)
    assert st0["px_whole"] == 0  # off: no regions
    if first == "center_mixed":
        assert 0 < st1["px_regions"] == st1["px_whole"]
    else:
        assert 0 < st1["px_regions"] < st1["px_whole"]


@pytest.mark.skipif(mp.backend() != "cpu", reason="Pillow's whole decodes are host arrays only on "
                    "the cpu backend; elsewhere they are uploaded, and the loader cuts no device "
                    "buffer (Loader._cut), so there is no cut to count")
def test_whole_decodes_are_handed_on_whole_by_default(folder, switch, monkeypatch) -> None:
    """Pillow decodes a sample whole whatever its window: unless ``region.CUT_WHOLE`` asks, the
    sample goes on whole (no region counted) and the outputs are the same."""
    ops = [FIRST["rrc"], FLIP]
    switch(True)
    # (Pillow named: on a GPU the default decoder is nvImageCodec, which decodes regions)
    cut, st_cut = _batches(folder, ops, decoder="pillow")
    monkeypatch.setattr(region, "CUT_WHOLE", False)
    kept, st_kept = _batches(folder, ops, decoder="pillow")
    assert 0 < st_cut["px_regions"] < st_cut["px_whole"]
    assert st_kept["px_regions"] == st_kept["px_whole"] == 0
    for a, b in zip(cut, kept, strict=True):
        assert np.array_equal(a, b)


def _same(x):
    """A Python callable (the chain then goes the per-output way)."""
    return x


@pytest.mark.parametrize("path", ["next", "callable"])
def test_outputs_equal_through_the_other_recorders(folder, switch, path) -> None:
    """``next()`` (a decoded chunk as in-memory inputs, ``BatchState``: the regions travel
    with its inputs to its arena recorder) and a chain with a Python callable (the
    per-output path: each gpuimage carries its region through its clone to its first op)."""
    ops = [FIRST["rrc"], FLIP] + ([mp.Operation(_same)] if path == "callable" else [])
    got = {}
    for on in (False, True):
        switch(on, 1)
        gen = mp.Generator(folder, ops, shuffle=True, seed=3, outputs=9)
        if path == "next":
            got[on] = [np.asarray(next(gen)) for _ in range(9)]
        else:
            got[on], _ = _batches(folder, ops)
        gen.close()
    assert len(got[False]) == len(got[True]) > 1
    for a, b in zip(got[False], got[True], strict=True):
        assert a.shape == b.shape and np.array_equal(a, b)


def test_plans_only_where_the_first_op_is_a_window(switch) -> None:
    switch(True)
    rrc = mp.Operation("random_resized_crop", 8, 8)
    for op in FIRST.values():
        assert plan_of([op, FLIP], 0) is not None
    assert plan_of([FLIP, rrc], 0) is None  # not first
    assert plan_of([mp.Operation("random_resized_crop", 8, 8, probability=0.5)], 0) is None
    assert plan_of([mp.Operation("resize", 8, 8)], 0) is None  # reads the whole image
    assert plan_of([rrc], 0, has_targets=True) is None  # boxes in the whole image
    switch(False)
    assert plan_of([rrc], 0) is None


def test_windows_are_the_recorders_and_boxes_hold_them(switch) -> None:
    """The plan's windows are the first op's own (on the whole size), and each box holds its
    window, aligned, inside the image, touching the edges where the window does."""
    switch(True)
    plan = plan_of([mp.Operation("random_resized_crop", 8, 8, scale=(0.5, 1.0))], 11)
    ks = np.arange(200, dtype=np.int64)
    hw = np.stack([ks % 37 + 20, ks % 53 + 17], axis=1)
    win = plan.windows(ks, hw)
    step = plan.step
    args = step.args_for(3, np.dtype(np.uint8))
    for k in (0, 5, 199):  # a method call's draws (one image's stream) give the same window
        d = _OneImage(mprandom.StreamKey(11, int(k), 0))
        e = step.form.emits(args, d, hw[k:k + 1], kind_for(3, np.dtype(np.uint8)))
        assert tuple(win[k]) == tuple(int(v) for v in e[first_window(e)].params[0, :4])
    for a in (1, 16):
        box = aligned(win, hw, a)
        assert (box[:, :2] <= win[:, :2]).all()
        assert (box[:, 2:] >= win[:, :2] + win[:, 2:]).all()
        assert (box[:, 2:] <= hw).all() and (box[:, :2] >= 0).all()
        assert (box[:, :2] % a == 0).all()
        edge = win[:, 0] + win[:, 2] == hw[:, 0]
        assert edge.any() and (box[edge, 2] == hw[edge, 0]).all()
    # a window beyond its image (center_crop larger than it) keeps what the image holds
    big = aligned(np.array([[-3, -2, 20, 20]]), np.array([[10, 12]]), 16)
    assert big.tolist() == [[0, 0, 10, 12]]


@pytest.mark.parametrize("kw", [{}, {"scale": (0.9, 1.0), "ratio": (3.0, 4.0)},
                                {"ratio": (0.2, 5.0)}])
def test_compiled_boxes_are_the_forms(switch, kw) -> None:
    """``random_resized_crop``'s boxes in one compiled call are the ones its form draws and
    ``aligned`` widens in Python, bit for bit: windows that fit, torchvision's central window
    after ten misses (the narrow ratios), empty and one-pixel images; and ``RowBoxes.layout``
    lays the taken rows' boxes out as the decoder's Python does."""
    switch(True)
    plan = plan_of([mp.Operation("random_resized_crop", 8, 8, **kw)], 7)
    assert plan.compiled is not None
    rng = np.random.default_rng(3)
    hw = np.concatenate([rng.integers(1, 700, size=(600, 2)),
                         [[0, 0], [1, 1], [0, 5], [1000, 3], [3, 1000]]]).astype(np.int64)
    ks = rng.integers(0, 1 << 40, size=len(hw)).astype(np.int64)
    fast = plan.boxes(ks, hw)
    compiled, plan.compiled = plan.compiled, None
    try:
        slow = plan.boxes(ks, hw)
    finally:
        plan.compiled = compiled
    assert fast.dtype == slow.dtype and np.array_equal(fast, slow)
    # the layout: taken rows (states 3, 2) without an orientation get their boxes
    n = 40
    state = np.array([3, 2, 0, 4] * (n // 4), np.int32)
    dims = np.zeros((n, 5), np.int64)
    dims[:, :2] = hw[:n]
    dims[5, 2] = 90  # an EXIF rotation: its whole image
    rows = plan.rows(ks[:n])
    box, slots, offsets = (np.full((n, 4), -7), np.full(n, -7), np.zeros(n, np.int64))
    total = rows.layout(state, dims, (3, 2), 256, box, slots, offsets)
    taken = (state == 3) | (state == 2)
    plain = taken & (dims[:, 2:] == 0).all(axis=1)
    want = np.concatenate([np.zeros((n, 2), np.int64), dims[:, :2]], axis=1)
    want[plain] = rows(np.flatnonzero(plain), dims[plain, :2])
    assert np.array_equal(box, want) and box[5].tolist() == [0, 0, *dims[5, :2].tolist()]
    size = np.where(taken, (want[:, 2] - want[:, 0]) * (want[:, 3] - want[:, 1]) * 3, 0)
    assert np.array_equal(slots, size)
    step = -(-size // 256) * 256
    assert np.array_equal(offsets[taken], (np.cumsum(step) - step)[taken])
    assert total == int(step.sum())


@pytest.mark.skipif(not process.supported(), reason="no memfd / fd passing here")
def test_a_decode_worker_process_decodes_regions(folder, switch) -> None:
    """A decode worker process's loader keeps the regions too (its plan sent as the first
    Operation and the seed), its batches equal whole samples' in this process."""
    ops = [FIRST["rrc"], FLIP]
    got, stats = {}, {}
    for on, worker in ((False, False), (True, True)):
        switch(on)
        gen = mp.Generator(folder, ops, shuffle=True, seed=5, decode_process=worker)
        with gen.batches(5, epochs=1, shape=(16, 16)) as bs:
            got[on] = [np.asarray(x) for x in bs]
            stats[on] = dict(bs._loader.stats)
            assert isinstance(bs._loader, process.ProcessLoader) is worker
        gen.close()
    assert len(got[False]) == len(got[True]) == 3
    for a, b in zip(got[False], got[True], strict=True):
        assert np.array_equal(a, b)
    assert 0 < stats[True]["px_regions"] < stats[True]["px_whole"]
