"""The heap after a compile (millipyde/graph/codegen/heap.py): a full collection owed by
compiling, run by the Generator after the output that compiled; Numba's errors without colorama."""

import itertools

import numba
import numpy as np
import pytest
from numba.core import errors

import millipyde as mp
from millipyde.graph.codegen import heap

_names = itertools.count()


def _compile_fresh() -> None:
    # a function Numba has never seen (its own name and constant), compiled in this process
    k = next(_names)
    ns: dict = {}
    exec(f"def fresh_{k}(x):\n    return x * {k + 2} + 1\n", ns)
    assert numba.njit(ns[f"fresh_{k}"])(3) == 3 * (k + 2) + 1


@pytest.fixture
def owed_at_once(monkeypatch):
    monkeypatch.setattr(heap, "OWED_AFTER", 1e-9)
    monkeypatch.setattr(heap, "RATIO", 0.0)
    monkeypatch.setattr(heap, "_compiling", 0.0)
    monkeypatch.setattr(heap, "_last", 0.0)


def test_collections_cost_at_most_a_tenth_of_the_compiling(monkeypatch):
    monkeypatch.setattr(heap, "_last", 0.4)  # the last full collection took 0.4 s
    monkeypatch.setattr(heap, "_compiling", 3.9)
    assert not heap.owed()
    assert heap.settle() == 0.0
    monkeypatch.setattr(heap, "_compiling", 4.0)
    assert heap.owed()
    monkeypatch.setattr(heap, "_last", 0.0)
    monkeypatch.setattr(heap, "_compiling", heap.OWED_AFTER * 0.99)
    assert not heap.owed()  # and never for less than OWED_AFTER


def test_compiling_counts_wall_time_once_across_threads(monkeypatch):
    monkeypatch.setattr(heap, "_compiling", 0.0)
    _compile_fresh()
    first = heap._compiling
    assert first > 0.0
    # the compile took the re-entrant lock many times, and two threads compile at once here:
    # the time counted cannot exceed the wall time around them
    import threading
    import time

    t0 = time.perf_counter()
    threads = [threading.Thread(target=_compile_fresh) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    assert 0.0 < heap._compiling - first <= wall
    assert heap._inside == 0


def test_settle_collects_once_when_owed(owed_at_once):
    assert heap.settle() == 0.0  # nothing compiled since the fixture reset the clock
    _compile_fresh()
    assert heap.owed()
    before = heap.stats["collections"]
    assert heap.settle() > 0.0
    assert heap.stats["collections"] == before + 1
    assert not heap.owed()
    assert heap.settle() == 0.0


def test_settle_off_by_setting(owed_at_once, monkeypatch):
    monkeypatch.setenv("MILLIPYDE_SETTLE_HEAP", "0")
    _compile_fresh()
    before = heap.stats["collections"]
    assert heap.settle() == 0.0
    assert heap.stats["collections"] == before
    monkeypatch.setenv("MILLIPYDE_SETTLE_HEAP", "maybe")
    with pytest.raises(ValueError, match="MILLIPYDE_SETTLE_HEAP"):
        heap.settle()


def test_generator_collects_after_the_output_that_compiled(owed_at_once, monkeypatch):
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(2)]
    seen = []
    real = heap.settle

    def counted() -> float:
        seen.append(heap._compiling)
        return real()

    monkeypatch.setattr(heap, "settle", counted)
    with mp.Generator(imgs, [mp.Operation("fliplr")], outputs=4, seed=1, device=0) as g:
        _compile_fresh()  # owed before the first output is taken
        outs = [np.asarray(x) for x in g]
    assert len(outs) == 4
    assert seen and seen[0] > 0.0  # the first output's take found it owed and collected
    assert not heap.owed()
    with mp.Generator(imgs, [mp.Operation("fliplr")], outputs=4, seed=1, device=0) as g:
        again = [np.asarray(x) for x in g]
    assert all(np.array_equal(a, b) for a, b in zip(outs, again, strict=True))
    seen.clear()
    with mp.Generator(imgs, [mp.Operation("fliplr")], outputs=4, seed=1, device=0) as g, \
            g.batches(2) as it:
        _compile_fresh()
        got = [np.asarray(b) for b in it]
    assert len(got) == 2 and seen and seen[0] > 0.0  # batch streams collect the same way
    assert not heap.owed()


def test_numba_errors_plain_when_colorama_would_colour(monkeypatch):
    monkeypatch.setattr(errors, "ColorShell", object, raising=False)
    monkeypatch.setattr(errors, "_termcolor_inst", None)
    assert heap.plain_numba_errors()
    scheme = errors.termcolor()
    for part in ("code", "errmsg", "filename", "indicate", "highlight", "reset"):
        assert getattr(scheme, part)("a message") == "a message"


def test_numba_errors_left_alone_without_colorama(monkeypatch):
    monkeypatch.delattr(errors, "ColorShell", raising=False)
    kept = errors._termcolor_inst
    assert not heap.plain_numba_errors()
    assert errors._termcolor_inst is kept


def test_an_end_without_its_start_counts_nothing(monkeypatch):
    # a compile under way when the module registered its listener ends without a start
    monkeypatch.setattr(heap, "_compiling", 0.0)
    monkeypatch.setattr(heap, "_inside", 0)
    heap._clock.on_end(None)
    assert heap._compiling == 0.0 and heap._inside == 0
