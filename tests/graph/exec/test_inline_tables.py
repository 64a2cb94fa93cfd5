"""uint8 elementwise chains computed in the kernel from their scalars (``gather.tables_inline``)
store what the host-built 256-entry tables store, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.exec import gather as exec_gather
from millipyde.graph.exec import replay
from millipyde.graph.exec import tables as exec_tables

pytestmark = pytest.mark.cudasim_ok

CHAINS = {
    "gamma": lambda im: im.adjust_gamma(0.6180339887),
    "gamma gain": lambda im: im.adjust_gamma(2.2, 0.9),
    "brightness+gamma": lambda im: (im.brightness(0.13), im.adjust_gamma(1.7)),
    "colorize": lambda im: im.colorize(0.7, 1.3, 1.1),
    "gamma, rotate, brightness": lambda im: (im.adjust_gamma(0.8), im.rotate(33),
                                             im.brightness(-0.21)),
    "brightness, fliplr, gamma": lambda im: (im.brightness(0.3), im.fliplr(),
                                             im.adjust_gamma(0.45)),
}


def _run(host: np.ndarray, name: str) -> np.ndarray:
    img = mp.gpuimage(host)
    CHAINS[name](img)
    return img.get()


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("channels", [3, 4])
def test_inline_chain_stores_what_the_tables_store(name, channels, monkeypatch):
    host = np.random.default_rng(7).integers(0, 256, (9, 11, channels), dtype=np.uint8)
    host[0, :6, 0] = [0, 1, 127, 128, 254, 255]  # the ends and the middle of the range
    replay.clear()
    monkeypatch.setattr(exec_gather, "INLINE_TABLE_MAX_PIXELS", -1)  # tables everywhere
    tables = _run(host, name)
    monkeypatch.setattr(exec_gather, "INLINE_TABLE_MAX_PIXELS", 1 << 20)
    inline = _run(host, name)
    np.testing.assert_array_equal(inline, tables)
    if channels == 4:
        np.testing.assert_array_equal(inline[..., 3], _alpha_after(host, name))


def _alpha_after(host: np.ndarray, name: str) -> np.ndarray:
    """The alpha channel after the chain's geometry only (elementwise ops leave alpha alone)."""
    img = mp.gpuimage(host)
    if "rotate" in name:
        img.rotate(33)
    if "fliplr" in name:
        img.fliplr()
    return img.get()[..., 3]


def _gather_of(img: mp.gpuimage):
    (k,) = replay.plan(img._node)
    return k


def test_device_backends_inline_small_images_only(monkeypatch):
    img = mp.gpuimage(np.zeros((8, 8, 3), np.uint8))
    img.adjust_gamma(2.0)
    k = _gather_of(img)
    assert exec_gather.tables_inline(k) == runtime.caps.device_memory
    monkeypatch.setattr(exec_gather, "INLINE_TABLE_MAX_PIXELS", 63)
    assert not exec_gather.tables_inline(k)


def test_a_chain_without_elementwise_ops_has_no_table_to_inline():
    flip = mp.gpuimage(np.zeros((8, 8, 3), np.uint8))
    flip.fliplr()
    assert not exec_gather.tables_inline(_gather_of(flip))


@pytest.mark.skipif(not runtime.caps.device_memory, reason="device backends only")
def test_an_inline_chain_uploads_nothing(monkeypatch):
    img = mp.gpuimage(np.random.default_rng(3).integers(0, 256, (6, 5, 3), dtype=np.uint8))
    img._materialize()
    exec_tables.identity_table(3, 0)  # made once per process
    calls = []
    real = runtime.upload_small
    monkeypatch.setattr(runtime, "upload_small", lambda *a: calls.append(a) or real(*a))
    for g in (0.5, 0.7, 1.9):
        img.adjust_gamma(g)
        img._materialize()
    assert calls == []


@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("channels", [3, 4])
def test_a_tabled_chain_stores_what_the_inline_one_stores(name, channels, monkeypatch):
    """Each block's table (``GatherSig.tabled``) holds what the chain gives every value, so
    the outputs equal the per-pixel chain's, on the first run and on replays (a new
    parameter each time), with several pixels of a row per thread."""
    host = np.random.default_rng(11).integers(0, 256, (7, 41, channels), dtype=np.uint8)
    host[0, :6, 0] = [0, 1, 127, 128, 254, 255]
    replay.clear()
    monkeypatch.setattr(exec_gather, "TABLED", False)
    per_pixel = _run(host, name)
    monkeypatch.setattr(exec_gather, "TABLED", True)
    sigs = []
    real = exec_gather._gather_fn
    monkeypatch.setattr(exec_gather, "_gather_fn", lambda sig: sigs.append(sig) or real(sig))
    for _ in range(3):  # planned, cached, replayed
        np.testing.assert_array_equal(_run(host, name), per_pixel)
    # (an integer index map, fliplr, reads through the table too; a sampler does not fit)
    tabled = runtime.caps.device_memory and "rotate" not in name
    assert any(s.tabled for s in sigs) == tabled
    replay.clear()
    monkeypatch.setattr(exec_gather, "INLINE_TABLE_MAX_PIXELS", -1)  # tables everywhere
    np.testing.assert_array_equal(_run(host, name), per_pixel)


def test_a_tabled_replay_takes_each_new_parameter():
    """Replays of one tabled plan with a new gamma each call equal fresh per-value results."""
    host = np.random.default_rng(5).integers(0, 256, (6, 19, 3), dtype=np.uint8)
    replay.clear()
    outs = []
    for g in (0.5, 0.9, 1.7, 2.2):
        img = mp.gpuimage(host)
        img.adjust_gamma(g)
        outs.append(img.get())
    for g, out in zip((0.5, 0.9, 1.7, 2.2), outs, strict=True):
        want = np.clip(np.rint(255.0 * (host / 255.0) ** g), 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(out, want)


def test_a_tabled_grey_image_stores_what_the_per_pixel_chain_stores(monkeypatch):
    """A 2-D uint8 image (one channel, read through its 3-D view) through a tabled gather."""
    host = np.random.default_rng(2).integers(0, 256, (5, 23), dtype=np.uint8)
    replay.clear()
    outs = {}
    sigs = []
    real = exec_gather._gather_fn
    monkeypatch.setattr(exec_gather, "_gather_fn", lambda sig: sigs.append(sig) or real(sig))
    for tabled in (False, True):
        monkeypatch.setattr(exec_gather, "TABLED", tabled)
        img = mp.gpuimage(host)
        img.brightness(0.1)
        img.adjust_gamma(1.3)
        outs[tabled] = img.get()
    assert outs[True].shape == host.shape
    assert sigs[-1].tabled == runtime.caps.device_memory and sigs[-1].cin == 1
    np.testing.assert_array_equal(outs[True], outs[False])
