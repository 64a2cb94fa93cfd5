"""A Pipeline run's per-chunk host work (``pipeline.run``, ``array.values_of`` /
``still_holds`` / ``bind_members``): inputs grouped by runs, a chunk's regroup check in one
pass, its commit in one loop, the input checks once a list. Each against what the per-input
path gives, and the errors as before."""

from __future__ import annotations

import threading
import time
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
from multidevice import assert_same, crops, reference

import millipyde as mp
from millipyde import devices, pipeline
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.ir import member
from millipyde.graph.ir.member import Member
from millipyde.locks import commit_lock
from millipyde.pipeline import chunks as pipeline_chunks
from millipyde.pipeline import run as pipeline_run

SIM = runtime.simulated
OPS = [mp.Operation("random_rotate", -20, 20), mp.Operation("adjust_gamma", 2),
       mp.Operation("fliplr", probability=0.5)]


def _members(hosts: list[np.ndarray]) -> list[mp.gpuimage]:
    """Images bound to unread members of one batch (a one-op run's outputs: fliplr)."""
    xs = [mp.gpuimage(np.fliplr(h)) for h in hosts]
    mp.Pipeline(xs, [mp.Operation("fliplr")], device=0).run()
    assert all(type(x.__dict__.get("_member")) is Member for x in xs)
    return xs


@pytest.mark.cudasim_ok
def test_interleaved_groups_and_singles_equal_the_per_input_path():
    """Runs of members of two batches, fresh images of another shape, and inputs with pending
    work (per input) interleaved: each output is its position's per-input one."""
    a, b = crops(4, 6, 8), crops(4, 6, 8)[::-1]
    c = crops(3, 5, 7)
    ma, mb = _members(a), _members(b)
    pend = [mp.gpuimage(np.fliplr(h)) for h in c[:2]]
    for x in pend:
        x.fliplr()  # (recorded, not run: pending work goes per input)
    fresh = [mp.gpuimage(h) for h in c]
    xs = [ma[0], ma[1], mb[0], fresh[0], ma[2], pend[0], mb[1], mb[2], fresh[1], ma[3],
          fresh[2], pend[1], mb[3]]
    hosts = [a[0], a[1], b[0], c[0], a[2], c[0], b[1], b[2], c[1], a[3], c[2], c[1], b[3]]
    mp.Pipeline(xs, OPS, seed=3, device=0).run()
    for i, (x, h) in enumerate(zip(xs, hosts, strict=True)):
        assert_same(np.asarray(x), reference(h, OPS, 3, i), f"input {i}")


@pytest.mark.cudasim_ok
def test_values_changed_or_read_between_grouping_and_launch(monkeypatch):
    """An input read since it was grouped (its member made a node) stays in its chunk; one
    changed since is processed again from its new value, per input."""
    hosts = crops(4, 6, 8)
    xs = _members(hosts)
    units = pipeline_run.Run.units

    def meddle(self, *args, **kwargs):
        got = units(self, *args, **kwargs)
        np.asarray(xs[1])  # the member read: a node now, the same value
        xs[2].fliplr()  # a new value
        return got

    monkeypatch.setattr(pipeline_run.Run, "units", meddle)
    mp.Pipeline(xs, OPS, seed=5, device=0).run()
    for i, h in enumerate(hosts):
        start = np.fliplr(h) if i == 2 else h
        assert_same(np.asarray(xs[i]), reference(start, OPS, 5, i), f"input {i}")


def test_a_commit_lock_held_elsewhere_is_waited_for_and_the_rest_bound(monkeypatch):
    """A chunk's commit binds every input whose lock it gets, then waits (without the run's
    lock) for the one another thread holds, and binds it after: each output as per input."""
    hosts = crops(4, 6, 8)
    xs = [mp.gpuimage(h) for h in hosts]
    held, go = threading.Event(), threading.Event()

    def hold() -> None:
        with commit_lock(xs[1]):
            held.set()
            go.wait(5)

    holder = threading.Thread(target=hold)
    commit = pipeline_run.Run._commit
    seen = []

    def spy(self, stage, unit, launched, device, stream):
        holder.start()
        held.wait(5)
        # the others bound meanwhile, xs[1] not yet: let the holder go once it is waited for
        threading.Timer(0.1, go.set).start()
        commit(self, stage, unit, launched, device, stream)
        seen.append([type(x.__dict__.get("_member")) is Member for x in xs])

    monkeypatch.setattr(pipeline_run.Run, "_commit", spy)
    mp.Pipeline(xs, OPS, seed=2, device=0).run()
    holder.join()
    assert seen == [[True] * 4]
    for i, h in enumerate(hosts):
        assert_same(np.asarray(xs[i]), reference(h, OPS, 2, i), f"input {i}")


@pytest.mark.cudasim_ok
def test_fresh_inputs_bind_with_no_lock_and_locks_are_made_under_the_member_lock():
    """A chunk binds inputs with no commit lock (fresh ones) without making one: locks are made
    under ``member.LOCK``, which a chunk's commit holds, so none can be made or taken meanwhile
    (``locks.py``). A lock asked for while it is held (``commit_lock``, a method's first call)
    waits for it."""
    hosts = crops(4, 6, 8)
    xs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(xs, OPS, seed=4, device=0).run()
    assert not any("_commit_lock" in x.__dict__ for x in xs)
    made: list = []
    asks = [threading.Thread(target=lambda: made.append(commit_lock(xs[0]))),
            threading.Thread(target=xs[1].fliplr)]
    with member.LOCK:
        for t in asks:
            t.start()
        time.sleep(0.05)
        assert not made and "_commit_lock" not in xs[1].__dict__
    for t in asks:
        t.join(5)
    assert made == [xs[0].__dict__["_commit_lock"]] and "_commit_lock" in xs[1].__dict__
    for i, h in enumerate(hosts):
        want = reference(h, OPS, 4, i)
        assert_same(np.asarray(xs[i]), np.fliplr(want) if i == 1 else want, f"input {i}")


def test_the_input_checks_name_the_first_bad_input():
    imgs = [mp.gpuimage(h) for h in crops(3, 4, 4)]
    with pytest.raises(ValueError, match=r"Pipeline inputs\[2\] must be a gpuarray/gpuimage, "
                                         r"got ndarray"):
        mp.Pipeline([imgs[0], imgs[1], np.zeros(2), imgs[0]], [])
    with pytest.raises(ValueError, match=r"inputs\[3\] is the same object as inputs\[1\]"):
        mp.Pipeline([imgs[0], imgs[1], imgs[2], imgs[1]], [])
    grey = mp.gpuarray(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"operations\[0\] 'fliplr' is not a method of "
                                         r"inputs\[1\] \(gpuarray\)"):
        mp.Pipeline([imgs[0], grey, imgs[1], grey + 1], [mp.Operation("fliplr")])


def test_chunks_disabled_is_the_same_run(monkeypatch):
    """The grouping with chunks off sends every input per input (no key looked up twice)."""
    hosts = crops(3, 6, 8)
    xs = _members(hosts)
    monkeypatch.setattr(pipeline_chunks, "ENABLED", False)
    mp.Pipeline(xs, OPS, seed=4, device=0).run()
    for i, h in enumerate(hosts):
        assert_same(np.asarray(xs[i]), reference(h, OPS, 4, i), f"input {i}")


@pytest.mark.cudasim_ok
def test_inputs_changed_after_construction_are_checked_when_run():
    """``Pipeline.inputs`` is the user's to change between construction and a run: the run
    checks the list as it then is (nothing runs on a bad one), and runs the good one."""
    hosts = crops(3, 4, 4)
    imgs = [mp.gpuimage(h) for h in hosts]
    p = mp.Pipeline(imgs[:2], [mp.Operation("fliplr")], device=0)
    p.inputs.append(np.zeros(2))
    with pytest.raises(ValueError, match=r"Pipeline inputs\[2\] must be a gpuarray/gpuimage, "
                                         r"got ndarray"):
        p.run()
    p.inputs[2] = imgs[0]
    with pytest.raises(ValueError, match=r"inputs\[2\] is the same object as inputs\[0\]"):
        p.run()
    p.inputs[2] = mp.gpuarray(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"operations\[0\] 'fliplr' is not a method of "
                                         r"inputs\[2\] \(gpuarray\)"):
        p.run()
    p.inputs[2] = imgs[2]
    p.run()
    for i, h in enumerate(hosts):  # (flipped once: the refused runs changed nothing)
        assert_same(np.asarray(imgs[i]), np.fliplr(h), f"input {i}")


class _AllEqual(mp.gpuimage):
    """An image type whose instances are all equal (and hash alike)."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


@pytest.mark.cudasim_ok
def test_inputs_of_a_type_equal_by_value_are_told_apart_by_identity():
    """The inputs' distinctness is by identity, whatever their type's ``__eq__``/``__hash__``."""
    hosts = crops(2, 4, 4)
    a, b = (_AllEqual(h) for h in hosts)
    with pytest.raises(ValueError, match=r"inputs\[1\] is the same object as inputs\[0\]"):
        mp.Pipeline([a, a], [])
    mp.Pipeline([a, b], [mp.Operation("fliplr")], device=0).run()
    for x, h in zip((a, b), hosts, strict=True):
        assert_same(np.asarray(x), np.fliplr(h), "input")


@pytest.mark.cudasim_ok
def test_a_one_stage_run_keeps_no_replaced_value_to_its_end(monkeypatch):
    """A one-stage run's rollback restores nothing (an input it binds is done), so it keeps
    no input's value as it found it: once the run returns, every replaced value is released,
    the run object itself still alive (but the first input's: the sample of the chunk
    recording's templates, which ``template_share`` keeps for later runs)."""
    hosts = crops(6, 6, 8)
    xs = [mp.gpuimage(h) for h in hosts]
    for x in xs:
        x._materialize()
    old = [weakref.ref(x._value()) for x in xs]
    runs = []
    made = pipeline._run_of

    def kept(chain):
        runs.append(made(chain))
        return runs[-1]

    monkeypatch.setattr(pipeline, "_run_of", kept)
    mp.Pipeline(xs, [mp.Operation("fliplr")], device=0).run()
    assert runs[0].read == [] and [r() is None for r in old[1:]] == [True] * (len(xs) - 1)
    for i, (x, h) in enumerate(zip(xs, hosts, strict=True)):
        assert_same(np.asarray(x), np.fliplr(h), f"input {i}")


@pytest.mark.cudasim_ok
def test_settle_sources_waits_where_a_value_lives_off_the_run_devices(monkeypatch):
    """A run on streams waits for the devices holding its inputs' values only where another
    device may take them (several devices) or none of its devices holds them: on one device
    holding every value, nothing; values with pending work, never (they go per input)."""
    hosts = crops(3, 4, 4)
    fresh = [mp.gpuimage(h) for h in hosts]
    for x in fresh:
        x._materialize()
    pending = [mp.gpuimage(h) for h in hosts]
    for x in pending:
        x.fliplr()  # (recorded, not run)
    members = _members(hosts)
    runs = {id(xs): pipeline._run_of([mp.Pipeline(xs, [mp.Operation("fliplr")], device=0)])
            for xs in (fresh, pending, members)}
    waited: list[int] = []
    monkeypatch.setattr(pipeline_run, "runtime",
                        SimpleNamespace(caps=SimpleNamespace(launches_on_streams=True)))
    monkeypatch.setattr(devices, "synchronize", waited.append)
    for xs, on, want in [(fresh, [0], []), (fresh, [1], [0]), (fresh, [0, 1], [0]),
                         (members, [0], []), (members, [1], [0]), (pending, [1], [])]:
        run = runs[id(xs)]
        run.devices = [on]  # (as a run over these devices would have it)
        for units in (None, [run.units(0, list(range(len(xs))), xs, run.read[0])]):
            waited.clear()
            run._settle_sources(units)
            assert waited == want, (on, want, units)
