"""The per-op host path: a one-op chain on a stored source found from its op's last hit
(``replay._last``, ``replay.SINGLE``), thread-local state read without AttributeError, and
plain methods that take the commit lock themselves. Values, counts and errors are those of
the path without them; the memo misses whenever a field of the key changes."""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest
from test_replay_launch import CHAINS

import millipyde as mp
from millipyde import config, devices
from millipyde import random as mprandom
from millipyde.backend import ACTIVE
from millipyde.graph.exec import replay
from millipyde.graph.ir.node import Node, apply, leaf
from millipyde.graph.plan import schedule
from millipyde.kernels import REGISTRY
from millipyde.ops import FORMS
from millipyde.ops.base import kind_for

cudasim_ok = pytest.mark.cudasim_ok

#: one op each on a stored source: elementwise (parameters not in the key), a remap without
#: parameters, a colour conversion, and an op whose parameters are in the key
OPS = {**{k: CHAINS[k] for k in ("gamma", "gamma gain", "fliplr", "grey")},
       "resize": lambda im, s: im.resize(5 + int(s > 0.7), 7)}
STEPS = (0.1, 0.2, 0.35, 0.6, 0.8, 0.9)


@pytest.fixture(autouse=True)
def _fresh():
    replay.clear()
    yield
    replay.clear()


def _run(name: str, host: np.ndarray) -> tuple[list[np.ndarray], dict[str, int]]:
    """Each step's op on one image whose value is stored (the loop a bench repeats), the
    values and the replay counts."""
    replay.clear()
    img = mp.gpuimage(host)
    img._materialize()
    source = img._node
    out = []
    for s in STEPS:
        img._bind(source)
        OPS[name](img, s)
        out.append(img.get())
    return out, dict(replay.stats)


@cudasim_ok
@pytest.mark.parametrize("name", sorted(OPS))
def test_the_memo_gives_the_values_and_counts_of_the_key(name, monkeypatch):
    host = np.random.default_rng(3).integers(0, 256, (9, 13, 3), dtype=np.uint8)
    keys = []
    key = replay._key
    monkeypatch.setattr(replay, "_key", lambda seq: keys.append(1) or key(seq))
    fast, fast_stats = _run(name, host)
    fast_keys = len(keys)
    monkeypatch.setattr(replay, "SINGLE", False)
    slow, slow_stats = _run(name, host)
    assert fast_keys < len(keys) - fast_keys  # (hits found without their key)
    # (remembered all the same, never consulted): each a plan the cache holds
    assert all(any(v[-1] is e for e in replay._cache.values()) for v in replay._last.values())
    assert fast_stats == slow_stats and fast_stats["hits"] >= 2
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)


def _stored(shape=(9, 13, 3), dtype=np.uint8, device=0) -> Node:
    return leaf(object(), shape, np.dtype(dtype), device)


def _gamma(src: Node, g: float = 0.7, label: str | None = None) -> Node:
    return apply(REGISTRY["adjust_gamma"], src, (g, 1.0), src.shape, src.dtype, label=label)


def _remembered(src: Node, node: Node) -> replay._Plan:
    """A cached plan for ``[src, node]`` found through its key (so remembered); the plan is
    a stand-in: only the lookup is under test."""
    seq = [src, node]
    key = replay._key(seq)
    entry = replay._Plan((node.op,), ())
    replay._cache[key] = entry
    assert replay.resolve(node) == (None, seq, entry)
    return entry


@cudasim_ok
def test_the_memo_misses_when_shape_dtype_device_label_or_fusion_change():
    src = _stored()
    entry = _remembered(src, _gamma(src))
    assert replay._single(_gamma(src, 1.3), src) is entry  # a new gamma: the same plan
    assert replay._single(_gamma(s := _stored((9, 14, 3))), s) is None
    assert replay._single(_gamma(s := _stored((9, 13, 4))), s) is None
    assert replay._single(_gamma(s := _stored(dtype=np.uint16)), s) is None
    assert replay._single(_gamma(s := _stored(device=1)), s) is None
    assert replay._single(_gamma(src, label="mine"), src) is None
    with schedule.fusion(False):
        assert replay._single(_gamma(src), src) is None
    gated = _gamma(src)
    gated.gated_off = True
    assert replay._single(gated, src) is None
    flip = apply(REGISTRY["fliplr"], src, (), src.shape, src.dtype)
    assert replay._single(flip, src) is None  # (another op: its own memo)
    # an equal source of new objects (a tuple and dtype equal, not the same) still finds it
    twin = leaf(object(), (9, 13, 3), np.dtype("uint8"), 0)
    assert replay._single(_gamma(twin), twin) is entry


@cudasim_ok
def test_parameters_in_the_key_are_compared():
    src = _stored()
    spec = REGISTRY["resize"]
    node = apply(spec, src, (5.0, 7.0), (5, 7, 3), src.dtype)
    entry = _remembered(src, node)
    assert replay._single(apply(spec, src, (5.0, 7.0), (5, 7, 3), src.dtype), src) is entry
    assert replay._single(apply(spec, src, (6.0, 7.0), (6, 7, 3), src.dtype), src) is None
    arr = apply(spec, src, (np.arange(2.0), 7.0), (5, 7, 3), src.dtype)
    assert replay._single(arr, src) is None  # (unhashable: never a key, never the memo's)


@cudasim_ok
def test_any_change_of_the_cache_forgets_the_memo(monkeypatch):
    src = _stored()
    _remembered(src, _gamma(src))
    config.refresh()  # (a setting re-read: plans are bound to the variants it chose)
    assert not replay._last and replay._single(_gamma(src), src) is None
    _remembered(src, _gamma(src))
    replay.clear()
    assert not replay._last
    _remembered(src, _gamma(src))
    # a new plan stored (here: one evicting the remembered one) empties it
    monkeypatch.setattr(replay, "_MAX", 1)
    other = _stored((3, 4, 3))
    node = _gamma(other)
    seq = [other, node]
    replay._seen_before(replay._key(seq))  # (cached on its second sighting)
    monkeypatch.setattr(schedule, "plan", lambda target: [])
    replay.resolve(node)
    assert not replay._last and len(replay._cache) == 1


@cudasim_ok
@pytest.mark.parametrize("args, kwargs", [
    ((-1,), {}), (("a",), {}), ((float("nan"),), {}), ((0.5,), {"gain": -2}),
    ((0.5,), {"gain": True}), ((0.5, 1, 2), {}), ((), {"gama": 2})])
def test_argument_errors_are_the_forms_own(args, kwargs):
    """The method raises what the form's parse raises, records nothing and leaves the commit
    lock free."""
    img = mp.gpuimage(np.zeros((4, 5, 3), np.uint8))
    before = img._node
    with pytest.raises(Exception) as want:
        FORMS["adjust_gamma"].parse(kind_for(3, np.uint8), *args, **kwargs)
    with pytest.raises(type(want.value)) as got:
        img.adjust_gamma(*args, **kwargs)
    assert str(got.value) == str(want.value)
    assert img._node is before
    free = []
    t = threading.Thread(target=lambda: free.append(img._commit_lock.acquire(blocking=False)))
    t.start()
    t.join()
    assert free == [True]


@cudasim_ok
def test_a_method_keeps_its_signature_and_name():
    m = mp.gpuimage.adjust_gamma
    assert m.__name__ == "adjust_gamma"
    assert str(inspect.signature(m)) == "(self, gamma: float = 1, gain: float = 1) -> None"
    assert m.__doc__ == FORMS["adjust_gamma"].parse.__doc__


@cudasim_ok
def test_thread_state_reads_none_in_a_new_thread():
    """The device stack, the backend's stream / recording / device and the streams' key are
    None in a thread that never set them, and each thread sees only its own."""
    seen = []

    def read() -> None:
        seen.append((devices.target_device(), ACTIVE.is_recording(),
                     getattr(ACTIVE._tls, "stream", None), getattr(ACTIVE._tls, "device", None),
                     mprandom.current_key()))

    with devices.targeting(0):
        assert devices.target_device() == 0
        t = threading.Thread(target=read)
        t.start()
        t.join()
    assert devices.target_device() is None
    assert seen == [(None, False, None, None, None)]


@cudasim_ok
def test_sources_of_two_shapes_in_turn_each_keep_their_hit():
    a, b = _stored(), _stored((5, 6, 3))
    ea, eb = _remembered(a, _gamma(a)), _remembered(b, _gamma(b))
    assert ea is not eb
    for _ in range(2):
        assert replay._single(_gamma(a), a) is ea
        assert replay._single(_gamma(b), b) is eb


@cudasim_ok
def test_sources_on_two_devices_in_turn_each_keep_their_hit():
    """(A per-output loop over two GPUs: its nodes are only compared here, nothing runs.)"""
    a, b = _stored(device=0), _stored(device=1)
    ea, eb = _remembered(a, _gamma(a)), _remembered(b, _gamma(b))
    for _ in range(2):
        assert replay._single(_gamma(a), a) is ea
        assert replay._single(_gamma(b), b) is eb
