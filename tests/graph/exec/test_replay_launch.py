"""Replay launches (``replay.learn``, ``gather._Replayed``, ``Backend.bind_2d``): a replayed
one-gather plan stores what the general path stores, honours fault points and launch
recording, and counts as a hit."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
from tiers import tiered

import millipyde as mp
from millipyde import faults
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.exec import execute, replay
from millipyde.graph.exec import gather as exec_gather
from millipyde.graph.exec import variants as exec_variants

cudasim_ok = pytest.mark.cudasim_ok

CHAINS = {
    "gamma": lambda im, s: im.adjust_gamma(0.5 + s),
    "gamma gain": lambda im, s: im.adjust_gamma(2 - s, 0.5 + s),
    "fliplr": lambda im, s: im.fliplr(),
    "grey": lambda im, s: im.rgb2grey(),
    "brightness, fliplr, gamma": lambda im, s: (im.brightness(s / 3), im.fliplr(),
                                                im.adjust_gamma(1 + s)),
    "gamma, grey, brightness": lambda im, s: (im.adjust_gamma(2 - s), im.rgb2grey(),
                                              im.brightness(-s / 3)),
    "transpose, colorize": lambda im, s: (im.transpose(), im.colorize(s, 1 - s, 0.5)),
    "rotate": lambda im, s: im.rotate(30),
    "gaussian": lambda im, s: im.gaussian(1.5),  # (a stencil: its sigma is in the key)
    "fliplr twice, gaussian": lambda im, s: (im.fliplr(), im.fliplr(), im.gaussian(0.8)),
}
STEPS = (0.1, 0.2, 0.35, 0.6, 0.8, 0.9)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    # uint8 chains computed in the kernel on every backend (device backends do so for images
    # this small): host-built tables are made per call and never take a replay launch
    monkeypatch.setattr(exec_gather, "tables_inline",
                        lambda k: bool((k.pre or k.post) and k.lut_mode))
    replay.clear()
    yield
    replay.clear()


def _host(shape=(9, 13, 3), seed=4) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _equal_on_the_general_path(monkeypatch: pytest.MonkeyPatch, fast: list[np.ndarray],
                               again: Callable[[], list[np.ndarray]]) -> None:
    """``again()``, with plans cleared and no replay launch learnt, gives ``fast``."""
    replay.clear()
    monkeypatch.setattr(replay, "_FAST_TRIES", 0)  # the general path only
    general = again()
    assert not _fast_entries()
    for a, b in zip(fast, general, strict=True):
        np.testing.assert_array_equal(a, b)


def _replays(name: str, host: np.ndarray) -> list[np.ndarray]:
    src = mp.gpuimage(host)
    src._materialize()
    out = []
    for s in STEPS:
        img = src.clone()
        img._materialize()  # a stored source: the chain replays from it
        CHAINS[name](img, s)
        out.append(img.get())
    return out


def _fast_entries() -> list:
    """The learnt replay launches of the chains under test: not the clones' (``_replays``
    materializes a clone per call; on the GPU those replay too, ``execute.CopyLaunch``)."""
    return [e for e in replay._cache.values()
            if e.fast is not None and not isinstance(e.fast, execute.CopyLaunch)]


def _copy_entries() -> list:
    return [e for e in replay._cache.values() if isinstance(e.fast, execute.CopyLaunch)]


@cudasim_ok
# RGBA grey: the packed kernel (uint32 reads). The CI tier takes every chain packed and the
# three-channel chains without a stencil (a simulated Gaussian costs 6-9 CPU-s a case)
@pytest.mark.parametrize("channels, name", tiered(
    [(c, name) for c in (3, 4) for name in sorted(CHAINS)],
    lambda case: case[0] == 4 or "gaussian" not in case[1], several=True))
def test_a_replay_launch_stores_what_the_general_path_stores(name, channels, monkeypatch):
    host = _host((9, 13, channels))
    ran = []
    fast = _replays(name, host)
    for e in _fast_entries():  # every later call of a learnt launch is counted
        real = e.fast
        e.fast = lambda seq, real=real: ran.append(1) or real(seq)
    fast += _replays(name, host)
    _equal_on_the_general_path(monkeypatch, fast, lambda: _replays(name, host) * 2)
    if name not in ("rotate", "fliplr twice, gaussian") and (
            name != "gaussian" or _one_launch_stencil(12)):
        # (a sampler's parameters include the data's warp clip: no memo; two kernels: none)
        assert len(ran) == len(STEPS)


def _one_launch_stencil(radius: int) -> bool:
    """Whether a stencil of ``radius`` runs as one launch here (the cpu's fused loop or the
    one-pass tiled GPU kernel), the stencils that keep a replay launch."""
    return not runtime.caps.shared_memory or exec_variants.stencil_2d_fits(radius)


@cudasim_ok
def test_a_replay_launch_runs_on_the_second_replay():
    host = _host()
    for i, s in enumerate(STEPS[:4]):
        img = mp.gpuimage(host)
        img.adjust_gamma(0.5 + s)
        img._materialize()
        # sightings 1-2: planned (cached on the second); 3: replayed, its launch learnt
        assert bool(_fast_entries()) == (i >= 2)
    assert replay.stats["hits"] == 2


@cudasim_ok
def test_an_armed_fault_point_still_fires():
    img = mp.gpuimage(_host())
    img._materialize()
    for _ in STEPS[:4]:
        img.fliplr()
        img._materialize()
    assert _fast_entries()
    faults.inject("op:fliplr")
    try:
        img.fliplr()
        with pytest.raises(faults.InjectedFault):
            img._materialize()
    finally:
        faults.clear()
    want = np.fliplr(np.asarray(img))
    img.fliplr()
    np.testing.assert_array_equal(np.asarray(img), want)


@cudasim_ok
def test_a_recording_thread_records_the_launch_instead():
    img = mp.gpuimage(_host())
    img._materialize()
    for s in STEPS[:4]:
        img.adjust_gamma(1 + s)
        img._materialize()
    assert _fast_entries()
    seen = []
    img.adjust_gamma(1.5)
    with runtime.recording(lambda kernel, device, args: seen.append(kernel)):
        img._materialize()
    assert len(seen) == 1


def test_threads_replaying_one_plan_store_their_own_values():
    # (not under CUDASIM: its simulated kernels cannot be launched from two threads at once)
    host = _host((17, 23, 3), seed=9)

    def run(gammas: list[float], out: list) -> None:
        img = mp.gpuimage(host)
        img._materialize()
        for g in gammas:
            img.adjust_gamma(g)
            img._materialize()
        out.append(img.get())

    gammas = [[0.9 + 0.01 * (t + i) for i in range(6)] for t in range(4)]
    alone = []
    for g in gammas:
        run(g, alone)
    got: list[list] = [[] for _ in gammas]
    threads = [threading.Thread(target=run, args=(g, o)) for g, o in zip(gammas, got,
                                                                        strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, alone, strict=True):
        np.testing.assert_array_equal(a[0], b)
    assert _fast_entries()


@pytest.mark.gpu
@pytest.mark.parametrize("name, channels", [("gamma", 3), ("gamma", 4), ("fliplr", 3),
                                            ("fliplr", 4),
                                            ("grey", 3), ("grey", 4), ("gaussian", 4),
                                            ("gamma gain", 3)])
def test_on_the_gpu_the_replay_launch_goes_through_the_driver(name, channels):
    from millipyde.backend.cuda_bound import RawBound2D

    host = _host((64, 80, channels), seed=11)
    got = _replays(name, host)
    (entry,) = _fast_entries()
    assert isinstance(entry.fast.bound, RawBound2D)
    replay.clear()
    for a, b in zip(got, _replays(name, host), strict=True):  # fresh plans, then replays
        np.testing.assert_array_equal(a, b)


@cudasim_ok
def test_a_source_of_another_layout_takes_the_general_path():
    from millipyde.graph.ir.node import leaf

    host = _host()
    img = mp.gpuimage(host)
    for _ in range(4):
        img.fliplr()
        img._materialize()
    (entry,) = _fast_entries()
    wide = np.zeros((9, 26, 3), np.uint8)
    wide[:, ::2] = host
    strided = runtime.from_host(wide, 0)[:, ::2]  # same shape and dtype, other strides
    assert strided.strides != runtime.from_host(host, 0).strides
    img._bind(leaf(strided, host.shape, host.dtype, 0))
    ran = []
    real = entry.fast
    entry.fast = lambda seq: ran.append(real(seq)) or ran[-1]
    img.fliplr()
    np.testing.assert_array_equal(img.get(), np.fliplr(host))
    assert ran == [False]  # refused: the general path ran


@cudasim_ok
def test_a_float_greyscale_gaussian_replays_its_launch(monkeypatch):
    if runtime.caps.shared_memory and not runtime.caps.tuned_kernels:
        # CUDASIM: the one-pass tiled stencil, which keeps its launch (``bind_grid``)
        monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    host = np.random.default_rng(5).random((11, 14))
    ran, outs = [], []
    for i in range(5):
        img = mp.gpuimage(host)
        img.gaussian(2)
        outs.append(img.get())
        if i == 2:
            (entry,) = _fast_entries()
            real = entry.fast
            entry.fast = lambda seq, real=real: ran.append(1) or real(seq)
    assert len(ran) == 2
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


@cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="the RGBA word kernels are GPU ones")
@pytest.mark.parametrize("op", ["fliplr", "transpose"])
def test_the_rgba_word_kernel_replays_its_launch(op, monkeypatch):
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    host = _host((9, 13, 4), seed=6)
    want = np.fliplr(host) if op == "fliplr" else host.transpose(1, 0, 2)
    ran = []
    for i in range(5):
        img = mp.gpuimage(host)
        getattr(img, op)()
        np.testing.assert_array_equal(img.get(), want)
        if i == 2:
            (entry,) = _fast_entries()
            real = entry.fast
            entry.fast = lambda seq, real=real: ran.append(real(seq)) or ran[-1]
    assert ran == [True, True]


TABLE_CHAINS = {
    "gamma": lambda im, s: im.adjust_gamma(0.5 + s),
    "brightness, gamma gain": lambda im, s: (im.brightness(s / 3),
                                             im.adjust_gamma(2 - s, 0.5 + s)),
}


def _table_replays(name: str, host: np.ndarray) -> list[np.ndarray]:
    src = mp.gpuimage(host)
    src._materialize()
    out = []
    for s in STEPS:  # a new parameter each call: a new table each call
        img = src.clone()
        img._materialize()
        TABLE_CHAINS[name](img, s)
        out.append(img.get())
    return out


@cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="the RGBA word kernels are GPU ones")
@pytest.mark.parametrize("name", sorted(TABLE_CHAINS))
def test_the_rgba_table_kernel_replays_its_launch_with_a_table_per_call(name, monkeypatch):
    """Host-built tables (device backends do so above ``INLINE_TABLE_MAX_PIXELS``): the
    ``flat`` RGBA kernel keeps its launch and gets the call's table (``TableLaunch``); what
    it stores equals the general path's, call by call."""
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    monkeypatch.setattr(exec_gather, "tables_inline", lambda k: False)
    host = _host((9, 13, 4), seed=8)
    fast = _table_replays(name, host)
    (entry,) = _fast_entries()
    assert isinstance(entry.fast, exec_gather.TableLaunch)
    ran = []
    real = entry.fast
    entry.fast = lambda seq: ran.append(real(seq)) or ran[-1]
    fast += _table_replays(name, host)
    assert ran == [True] * len(STEPS)
    _equal_on_the_general_path(monkeypatch, fast, lambda: _table_replays(name, host) * 2)


@pytest.mark.gpu
def test_on_the_gpu_the_table_launch_goes_through_the_driver(monkeypatch):
    from millipyde.backend.cuda_bound import RawBound2D

    monkeypatch.setattr(exec_gather, "tables_inline", lambda k: False)
    host = _host((64, 80, 4), seed=12)
    got = _table_replays("gamma", host)
    (entry,) = _fast_entries()
    assert isinstance(entry.fast, exec_gather.TableLaunch)
    assert isinstance(entry.fast.bound, RawBound2D)
    replay.clear()
    monkeypatch.setattr(replay, "_FAST_TRIES", 0)
    for a, b in zip(got, _table_replays("gamma", host), strict=True):
        np.testing.assert_array_equal(a, b)


def _clones(host: np.ndarray, n: int) -> list[np.ndarray]:
    src = mp.gpuimage(host)
    src._materialize()
    out = []
    for _ in range(n):
        img = src.clone()
        img._materialize()
        out.append(img.get())
    return out


@cudasim_ok
def test_a_replayed_clone_takes_the_backends_bound_copy(monkeypatch):
    """``execute.CopyLaunch``: a replayed clone stores what the bound copy returns; where it
    returns None (a call it does not cover) the general path copies."""
    calls = []

    def bind_copy(src, device):
        def bound(buf):
            calls.append(buf.shape)
            return None if len(calls) == 2 else runtime.copy(buf, device, device)
        return bound

    monkeypatch.setattr(runtime, "bind_copy", bind_copy)
    host = _host((9, 13, 4), seed=13)
    got = _clones(host, 6)
    (entry,) = _copy_entries()
    assert not _fast_entries()
    assert len(calls) == 3  # (sightings 1-2 planned, 3 learns it on the general path)
    for out in got:
        np.testing.assert_array_equal(out, host)
    faults.inject("op:copy")
    try:
        img = mp.gpuimage(host)
        img._materialize()
        clone = img.clone()
        with pytest.raises(faults.InjectedFault):
            clone._materialize()
    finally:
        faults.clear()


@pytest.mark.gpu
def test_on_the_gpu_a_replayed_clone_copies_through_the_driver():
    from millipyde.backend.cuda_bound import RawCopy

    host = _host((64, 80, 4), seed=14)
    got = _clones(host, 6)
    (entry,) = _copy_entries()
    assert isinstance(entry.fast.bound, RawCopy)
    for out in got:
        np.testing.assert_array_equal(out, host)
