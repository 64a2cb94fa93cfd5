"""Issue 17, class 6: Pipelines, Generators and image methods from many threads over shared and
separate inputs. Every result must equal some serial order of the updates: none lost, none
applied twice, no deadlock whatever order overlapping inputs are claimed in.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import reference as ref

import millipyde as mp

STEP = 10 / 255  # brightness by 10 levels of a uint8 image
TIMEOUT = 120.0


def _run_threads(fns: list) -> None:
    """Start every fn in its own thread at once; re-raise the first error; fail on a hang."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(fns))

    def wrap(fn):
        def target():
            try:
                barrier.wait()
                fn()
            except BaseException as err:  # noqa: BLE001 - handed back to the test
                errors.append(err)
        return target

    threads = [threading.Thread(target=wrap(f), daemon=True) for f in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]


def _flat(n: int, value: int = 40, shape=(6, 5, 3)) -> list[mp.gpuimage]:
    return [mp.gpuimage(np.full(shape, value, np.uint8)) for _ in range(n)]


@pytest.mark.parametrize("threads, pipelines", [(2, 1), (4, 2)])
def test_pipelines_from_threads_over_shared_inputs_lose_no_update(threads, pipelines):
    """The issue's reproduction: brightness +10 from N threads x M Pipelines each."""
    inputs = _flat(24)
    ops = [mp.Operation("brightness", STEP)]

    def work():
        for _ in range(pipelines):
            mp.Pipeline(inputs, ops).run()

    _run_threads([work] * threads)
    want = 40 + 10 * threads * pipelines
    got = sorted({int(np.asarray(x)[0, 0, 0]) for x in inputs})
    assert got == [want], f"expected every input at {want}, found levels {got}"


def test_non_commuting_pipelines_give_one_of_the_serial_orders():
    hosts = [ref.photo_rgb(7, 9) for _ in range(16)]
    inputs = [mp.gpuimage(h) for h in hosts]
    a = [mp.Operation("brightness", 0.2)]
    b = [mp.Operation("adjust_gamma", 2.0)]
    _run_threads([lambda: mp.Pipeline(inputs, a).run(), lambda: mp.Pipeline(inputs, b).run()])
    for i, (x, h) in enumerate(zip(inputs, hosts, strict=True)):
        out = np.asarray(x)
        orders = (ref.adjust_gamma(ref.brightness(h, 0.2), 2.0),
                  ref.brightness(ref.adjust_gamma(h, 2.0), 0.2))
        assert any(np.array_equal(out, o) for o in orders), f"input {i}: no serial order"


def test_overlapping_inputs_claimed_in_opposite_orders_do_not_deadlock():
    inputs = _flat(32)
    ops = [mp.Operation("brightness", STEP)]
    forward, backward = list(inputs), list(reversed(inputs))
    middle = inputs[8:24]
    _run_threads([lambda: mp.Pipeline(forward, ops).run(timeout=TIMEOUT),
                  lambda: mp.Pipeline(backward, ops).run(timeout=TIMEOUT),
                  lambda: mp.Pipeline(middle, ops).run(timeout=TIMEOUT)])
    for i, x in enumerate(inputs):
        want = 40 + 10 * (3 if 8 <= i < 24 else 2)
        assert int(np.asarray(x)[0, 0, 0]) == want, f"input {i}"


def test_methods_and_pipelines_from_threads_on_one_image():
    img = mp.gpuimage(np.full((5, 4, 3), 20, np.uint8))
    calls = 25

    def methods():
        for _ in range(calls):
            img.brightness(1 / 255)

    def pipelines():
        for _ in range(3):
            mp.Pipeline([img], [mp.Operation("brightness", STEP)]).run()

    _run_threads([methods, methods, pipelines])
    assert int(np.asarray(img)[0, 0, 0]) == 20 + 2 * calls + 3 * 10


def test_generators_read_only_committed_values_while_pipelines_write():
    """A Generator over inputs that Pipelines are changing sees, for each output, one of the
    values the input held between updates (never a partial one), and never changes it."""
    inputs = _flat(4, 40, (4, 4, 3))
    rounds = 6
    seen: list[np.ndarray] = []

    def generate():
        gen = mp.Generator(inputs, [mp.Operation("fliplr")], outputs=60, return_to_host=True)
        seen.extend(gen)

    def write():
        for _ in range(rounds):
            mp.Pipeline(inputs, [mp.Operation("brightness", STEP)]).run()

    _run_threads([generate, generate, write])
    states = {40 + 10 * k for k in range(rounds + 1)}
    for out in seen:
        levels = set(np.unique(out).tolist())
        assert len(levels) == 1 and levels <= states, levels
    assert {int(np.asarray(x)[0, 0, 0]) for x in inputs} == {40 + 10 * rounds}


def test_separate_inputs_from_threads_equal_a_serial_run():
    """Random operations with a seed: threads over their own inputs give the serial result."""
    ops = [mp.Operation("random_rotate", -30, 30), mp.Operation("random_brightness", -0.2, 0.2),
           mp.Operation("gaussian", 1.0, probability=0.5)]
    hosts = [[ref.photo_rgba(9, 8) for _ in range(6)] for _ in range(4)]
    serial = []
    for hs in hosts:
        xs = [mp.gpuimage(h) for h in hs]
        mp.Pipeline(xs, ops, seed=7).run()
        serial.append([np.asarray(x) for x in xs])
    parallel = [[mp.gpuimage(h) for h in hs] for hs in hosts]
    _run_threads([lambda xs=xs: mp.Pipeline(xs, ops, seed=7).run() for xs in parallel])
    for xs, want in zip(parallel, serial, strict=True):
        for x, w in zip(xs, want, strict=True):
            np.testing.assert_array_equal(np.asarray(x), w)
