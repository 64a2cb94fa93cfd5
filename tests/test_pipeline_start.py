"""A Pipeline run's start: the grouping of its inputs into units (``Run.units``), whose common
case (every input of one group) is found without the loop an input, gives the loop's units
exactly; the run's values and errors as before; its workers on threads earlier runs left idle
(``workers``), joined, released and abandoned as threads of its own were."""

import gc
import threading
import time
import weakref

import numpy as np
import pytest
from multidevice import crops

import millipyde as mp
from millipyde import pipeline as pipeline_pkg
from millipyde import random as mprandom
from millipyde import targets, workers
from millipyde.backend import ACTIVE as runtime
from millipyde.pipeline import PipelineError
from millipyde.pipeline import run as pipeline_run
from millipyde.workers import WorkerGroup

OPS = [mp.Operation("adjust_gamma", 2), mp.Operation("fliplr")]
N = 4 if runtime.simulated else 12


def _units(xs: list, loop: bool, monkeypatch) -> list[tuple]:
    """The units of a one-stage run over ``xs`` (the loop's where ``loop``), as comparable
    tuples: positions, the inputs and values by identity, key and home."""
    with monkeypatch.context() as m:
        if loop:
            m.setattr(pipeline_run, "_one_group", lambda xs, nodes: None)
        run = pipeline_pkg._run_of([mp.Pipeline(xs, OPS)])
        got = run.units(0, list(range(len(xs))), run.items[0], run.read[0])
    return [(u.positions, [id(x) for x in u.items], u.key, u.home,
             None if u.nodes is None else [id(v) for v in u.nodes]) for u in got]


def _fresh(n: int, size: int = 8) -> list:
    return [mp.gpuimage(h) for h in crops(n, size, size)]


@pytest.mark.cudasim_ok
def test_one_group_gives_the_loops_units(monkeypatch):
    xs = _fresh(N)
    for x in xs:
        x._materialize()
    fast = _units(xs, False, monkeypatch)
    assert fast == _units(xs, True, monkeypatch)
    assert len({u[2] for u in fast}) == 1 and sum(len(u[0]) for u in fast) == N


@pytest.mark.cudasim_ok
def test_inputs_bound_to_members_give_the_loops_units(monkeypatch):
    xs = _fresh(N)
    # two batches of members, one key (on one device: a run over several GPUs would leave
    # its outputs on each, a key per device)
    mp.Pipeline(xs[: N // 2], OPS, seed=1, device=0).run()
    mp.Pipeline(xs[N // 2:], OPS, seed=2, device=0).run()
    assert all("_member" in x.__dict__ for x in xs)
    fast = _units(xs, False, monkeypatch)
    assert fast == _units(xs, True, monkeypatch) and len({u[2] for u in fast}) == 1


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("mix", ["shape", "pending", "member"])
def test_inputs_of_several_kinds_go_the_loops_way(monkeypatch, mix):
    """A later input unlike the first (another shape, pending work, a member among
    stored values): the shortcut declines and the loop groups, as before."""
    xs = _fresh(N)
    for x in xs:
        x._materialize()
    late = N - 2
    if mix == "shape":
        xs[late] = mp.gpuimage(crops(1, 10, 8)[0])
    elif mix == "pending":
        xs[late].fliplr()  # recorded, not run: per input
    else:
        mp.Pipeline([xs[late]], OPS).run()
    assert pipeline_run._one_group(xs, [x._value() for x in xs]) is None
    assert _units(xs, False, monkeypatch) == _units(xs, True, monkeypatch)


@pytest.mark.cudasim_ok
def test_an_input_with_targets_goes_the_loops_way(monkeypatch):
    monkeypatch.setattr(targets, "ANY", {object(): None})  # (some value has targets)
    xs = _fresh(N)
    assert pipeline_run._one_group(xs, [x._value() for x in xs]) is None


@pytest.mark.cudasim_ok
def test_runs_with_and_without_the_shortcut_give_the_same_values(monkeypatch):
    hosts = crops(N, 8, 8)
    a = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(a, OPS + [mp.Operation("rotate", 30)], seed=5).run()
    monkeypatch.setattr(pipeline_run, "_one_group", lambda xs, nodes: None)
    b = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(b, OPS + [mp.Operation("rotate", 30)], seed=5).run()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.cudasim_ok
def test_a_later_bad_input_is_named_and_every_input_untouched_or_done():
    """A one-group chain whose later input fails in its second stage: the error names that
    input; it and every input the chain did not finish hold their values as before the run
    (the first stage's commits undone), the others the whole chain's outputs."""
    hosts = crops(N, 8, 8)
    want = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(want, OPS, seed=3).run()
    xs = [mp.gpuimage(h) for h in hosts]
    bad = N - 1

    def boom(x):
        if mprandom.current_key().sample == bad:
            raise KeyError("bad input")

    # (a callable goes per input; two stages so the chunked first stage's commits are undone)
    first, second = mp.Pipeline(xs, OPS, seed=3), mp.Pipeline([], [mp.Operation(boom)])
    first.connect_to(second)
    with pytest.raises(PipelineError, match=f"input {bad}.*KeyError"):
        first.run()
    np.testing.assert_array_equal(np.asarray(xs[bad]), hosts[bad])
    for x, h, w in zip(xs, hosts, want, strict=True):
        got = np.asarray(x)
        assert np.array_equal(got, h) or np.array_equal(got, np.asarray(w))


@pytest.mark.cudasim_ok
def test_a_run_takes_idle_threads_and_leaves_them_holding_nothing():
    """A run's workers run on threads an earlier run left idle (none started), which hold
    nothing of the run once it returned: its inputs go when the caller drops them."""
    seen: list = []
    ops = [mp.Operation(lambda x: seen.append(threading.current_thread().name)
                        or seen.append(threading.get_ident()))]
    mp.Pipeline(_fresh(N), ops).run()  # (as many workers idle from here as the run below has)
    idle = workers.idle_workers()
    before = {t.ident for t in threading.enumerate() if t.name == workers.IDLE_NAME}
    assert idle > 0 and len(before) >= idle
    seen.clear()
    xs = _fresh(N)
    mp.Pipeline(xs, ops).run()
    assert seen and set(seen[1::2]) <= before
    assert all(name.startswith("millipyde-pipeline") for name in seen[::2])
    assert workers.idle_workers() == idle  # all idle again, none more
    gone = weakref.ref(xs[0])
    del xs
    gc.collect()
    assert gone() is None


@pytest.mark.cudasim_ok
def test_a_hung_worker_is_not_idle_until_it_returns():
    """A run that times out abandons its hung worker: its thread is not idle (no other run
    gets it) until the worker returns."""
    mp.Pipeline(_fresh(2), OPS).run()
    release = threading.Event()
    stuck = threading.Event()

    def hang(x):
        stuck.set()
        release.wait(30)

    with pytest.raises(TimeoutError):
        mp.Pipeline(_fresh(1), [mp.Operation(hang)]).run(timeout=0.5)
    assert stuck.is_set()
    hung = [t for t in threading.enumerate() if t.name.startswith("millipyde-pipeline")]
    assert len(hung) == 1 and hung[0].name != workers.IDLE_NAME
    ok = _fresh(N)  # another run meanwhile: done on other threads
    mp.Pipeline(ok, OPS, seed=7).run(timeout=60)
    release.set()
    deadline = time.monotonic() + 10
    while hung[0].name != workers.IDLE_NAME and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hung[0].name == workers.IDLE_NAME and hung[0].is_alive()


@pytest.mark.cudasim_ok
def test_a_pooled_group_joins_its_workers_and_starts_every_one_before_any_works():
    seen: list = []
    g = WorkerGroup("gate", lambda d, s: seen.append(len(g.threads)),
                    lambda err, d: seen.append(err), pooled=True)
    g.start([0], 3)
    assert g.join(time.monotonic() + 30) and seen == [3, 3, 3] and g.alive() == []
    assert g.join(time.monotonic())  # (joined for good)
    gate = threading.Event()
    g = WorkerGroup("slow", lambda d, s: gate.wait(30), lambda err, d: seen.append(err),
                    pooled=True)
    g.start([0], 1)
    assert not g.join(time.monotonic() + 0.05) and len(g.alive()) == 1
    gate.set()
    assert g.join(time.monotonic() + 30) and g.alive() == []
    crash = WorkerGroup("crash", lambda d, s: 1 / 0, lambda err, d: seen.append(err),
                        pooled=True)
    crash.start([0], 1)
    assert crash.join(time.monotonic() + 30)
    assert isinstance(seen[-1], ZeroDivisionError)  # (reported, the thread idle again)
