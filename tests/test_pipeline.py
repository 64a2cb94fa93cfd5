"""mp.Pipeline (shared/API.md "Execution constructs"; RELIABILITY.md faults/load/determinism)."""

import re
import threading
import time
import zlib

import numpy as np
import pytest
from multidevice import crops, reference, running_threads, standard_ops, wait_for_workers

import millipyde as mp
from millipyde import faults
from millipyde import random as mprandom
from millipyde.pipeline import PipelineError
from millipyde.workers import WorkerGroup


@pytest.fixture(autouse=True)
def _clean():
    faults.clear()
    yield
    faults.clear()
    mp.seed(0)


def images(n, h=24, w=32):
    return [mp.gpuimage(c) for c in crops(n, h, w)]


# ------------------------------------------------------------------ constructor errors
@pytest.mark.parametrize("inputs", [None, 3, "imgs", np.zeros((2, 4, 4)), (1, 2),
                                    [np.zeros((4, 4))], [None], {"a": 1}])
def test_bad_inputs(inputs):
    with pytest.raises(ValueError, match="inputs"):
        mp.Pipeline(inputs, [mp.Operation("fliplr")])


def test_single_image_is_not_a_list():
    with pytest.raises(ValueError, match="list"):
        mp.Pipeline(images(1)[0], [])


def test_duplicate_input_objects_refused():
    img = images(1)[0]
    with pytest.raises(ValueError, match="same object"):
        mp.Pipeline([img, img], [])


@pytest.mark.parametrize("operations", [None, "fliplr", mp.Operation("fliplr"), ["fliplr"],
                                        [mp.Operation("fliplr"), len], np.zeros(2), 7])
def test_bad_operations(operations):
    with pytest.raises(ValueError, match="operations"):
        mp.Pipeline(images(1), operations)


@pytest.mark.parametrize("device", ["0", 1.0, True, -1, 10_000, [0]])
def test_bad_device(device):
    with pytest.raises(ValueError, match="device"):
        mp.Pipeline(images(1), [], device=device)


@pytest.mark.parametrize("seed", ["1", 1.5, True])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        mp.Pipeline(images(1), [], seed=seed)


def test_unknown_keyword():
    with pytest.raises(ValueError, match="unknown keyword.*outputs"):
        mp.Pipeline(images(1), [], outputs=3)


def test_method_missing_on_input_type():
    with pytest.raises(ValueError, match="'rotate' is not a method of inputs\\[1\\]"):
        mp.Pipeline([images(1)[0], mp.gpuarray(np.zeros((3, 3)))], [mp.Operation("rotate", 3)])


def test_tuple_of_gpuarrays_accepted():
    p = mp.Pipeline(tuple(images(2)), (mp.Operation("fliplr"),))
    p.run()


@pytest.mark.parametrize("timeout", [0, -1, "1", True])
def test_bad_timeout(timeout):
    with pytest.raises(ValueError, match="timeout"):
        mp.Pipeline(images(1), []).run(timeout=timeout)


def test_connect_to_errors():
    p1, p2, p3 = (mp.Pipeline([], []) for _ in range(3))
    with pytest.raises(ValueError):
        p1.connect_to("p2")
    with pytest.raises(ValueError, match="cycle"):
        p1.connect_to(p1)
    p1.connect_to(p2)
    p2.connect_to(p3)
    with pytest.raises(ValueError, match="cycle"):
        p3.connect_to(p1)
    with pytest.raises(ValueError, match="already fed"):
        mp.Pipeline([], []).connect_to(p2)


# ------------------------------------------------------------------ results
def test_run_applies_operations_in_place():
    hosts = crops(6)
    imgs = [mp.gpuimage(h) for h in hosts]
    assert mp.Pipeline(imgs, [mp.Operation("fliplr"), mp.Operation("transpose")]).run() is None
    for img, h in zip(imgs, hosts, strict=True):
        np.testing.assert_array_equal(np.asarray(img), np.transpose(np.fliplr(h), (1, 0, 2)))


def test_random_ops_match_reference_per_input_index():
    hosts, ops = crops(10), standard_ops()
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, ops, seed=42).run()
    for i, (img, h) in enumerate(zip(imgs, hosts, strict=True)):
        np.testing.assert_array_equal(np.asarray(img), reference(h, ops, 42, i))


def test_global_seed_used_when_no_seed():
    hosts, ops = crops(5), standard_ops()
    a, b, c = ([mp.gpuimage(h) for h in hosts] for _ in range(3))
    mp.seed(7)
    mp.Pipeline(a, ops).run()
    mp.Pipeline(b, ops, seed=7).run()
    mp.Pipeline(c, ops, seed=8).run()
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, c, strict=True))


def test_empty_inputs_and_empty_operations():
    mp.Pipeline([], [mp.Operation("fliplr")]).run()
    hosts = crops(2)
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, []).run()
    assert all(np.array_equal(np.asarray(x), h) for x, h in zip(imgs, hosts, strict=True))


def test_pinned_by_device_argument_and_with_device():
    hosts = crops(3)
    a = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(a, [mp.Operation("fliplr")], device=0).run()
    assert all(x.device == 0 for x in a)
    with mp.Device(0):
        p = mp.Pipeline([mp.gpuimage(h) for h in hosts], [mp.Operation("fliplr")])
    assert p._target == 0
    p.run()
    assert all(np.array_equal(np.asarray(x), np.fliplr(h)) for x, h in zip(p.inputs, hosts,
                                                                            strict=True))


def test_callable_operation_sees_worker_device():
    seen = []
    mp.Pipeline(images(4), [mp.Operation(lambda x: seen.append(mp.get_current_device()))],
                device=0).run()
    assert seen == [0, 0, 0, 0]


def _chain(n_items, seed=None):
    hosts = crops(n_items)
    p1 = mp.Pipeline([mp.gpuimage(h) for h in hosts], [mp.Operation("random_rotate", -10, 10)],
                     seed=seed)
    p2 = mp.Pipeline([], [mp.Operation("fliplr", probability=0.5)], seed=seed)
    p3 = mp.Pipeline([], [mp.Operation("random_brightness", -0.2, 0.2)], seed=seed)
    p1.connect_to(p2)
    p2.connect_to(p3)
    return hosts, p1, p2, p3


def test_chain_of_three_nothing_lost_order_kept():
    hosts, p1, p2, p3 = _chain(20, seed=4)
    originals = list(p1.inputs)
    p1.run()
    assert [id(x) for x in p2.inputs] == [id(x) for x in originals]
    assert [id(x) for x in p3.inputs] == [id(x) for x in originals]
    sums = []
    for i, (x, h) in enumerate(zip(p1.inputs, hosts, strict=True)):
        # each stage keys its draws on (seed, position, op index within that stage)
        ref = reference(h, p1.operations, 4, i)
        ref = reference(ref, p2.operations, 4, i)
        ref = reference(ref, p3.operations, 4, i)
        got = np.asarray(x)
        np.testing.assert_array_equal(got, ref)
        sums.append(zlib.crc32(got.tobytes()))
    assert len(set(sums)) == 20  # distinct crops stay distinct: nothing duplicated
    p1.run()  # a second run does not duplicate the downstream inputs lists
    assert len(p2.inputs) == 20 and len(p3.inputs) == 20


def test_downstream_own_inputs_come_first():
    hosts = crops(4)
    own = mp.gpuimage(hosts[3])
    p1 = mp.Pipeline([mp.gpuimage(h) for h in hosts[:3]], [mp.Operation("fliplr")])
    p2 = mp.Pipeline([own], [mp.Operation("transpose")])
    p1.connect_to(p2)
    p1.run()
    assert p2.inputs[0] is own and p2.inputs[1:] == p1.inputs
    np.testing.assert_array_equal(np.asarray(own), np.transpose(hosts[3], (1, 0, 2)))
    np.testing.assert_array_equal(np.asarray(p1.inputs[0]),
                                  np.transpose(np.fliplr(hosts[0]), (1, 0, 2)))


# ------------------------------------------------------------------ failures
def _assert_untouched_or_done(imgs, hosts, ops, seed):
    done = 0
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        got = np.asarray(x)
        if np.array_equal(got, reference(h, ops, seed, i)):
            done += 1
        else:
            np.testing.assert_array_equal(got, h, err_msg=f"input {i} half-written")
    return done


def test_operation_raising_at_input_17():
    hosts, ops = crops(64), standard_ops()
    imgs = [mp.gpuimage(h) for h in hosts]

    armed = [True]

    def boom(x):
        # callables get a private handle on the input: find input 17 by its random stream key
        if armed[0] and mprandom.current_key().sample == 17:
            raise KeyError("boom at 17")

    baseline = running_threads()
    bad = ops[:2] + [mp.Operation(boom)] + ops[2:]
    with pytest.raises(PipelineError) as info:
        mp.Pipeline(imgs, bad, seed=1).run()
    msg = str(info.value)
    # on one device it must be device 0; with several, whichever device took input 17
    assert "boom" in msg and "input 17" in msg and "KeyError" in msg
    assert re.search(r"on device \d", msg) and (mp.get_device_count() > 1 or "device 0" in msg)
    assert isinstance(info.value.__cause__, KeyError)
    assert running_threads() == baseline
    np.testing.assert_array_equal(np.asarray(imgs[17]), hosts[17])
    armed[0] = False
    _assert_untouched_or_done(imgs, hosts, bad, 1)
    fresh = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(fresh, ops, seed=1).run()  # the library is still usable
    assert _assert_untouched_or_done(fresh, hosts, ops, 1) == 64


def test_kernel_fault_names_fused_operations():
    hosts = crops(8)
    imgs = [mp.gpuimage(h) for h in hosts]
    ops = [mp.Operation("rotate", 10), mp.Operation("fliplr")]
    faults.inject("op:rotate", "raise", at_call=3)
    with pytest.raises(PipelineError, match=r"'rotate', 'fliplr'.*on device \d.*InjectedFault") \
            as info:
        mp.Pipeline(imgs, ops, device=0).run()
    assert "on device 0" in str(info.value)
    assert isinstance(info.value.__cause__, faults.InjectedFault)
    _assert_untouched_or_done(imgs, hosts, ops, 0)


def test_operation_fault_point_on_method_operations():
    imgs = images(6)
    faults.inject("operation:fliplr", "raise", at_call=2)
    with pytest.raises(PipelineError, match="operation 0 \\('fliplr'\\) failed on input"):
        mp.Pipeline(imgs, [mp.Operation("fliplr")]).run()


def test_timeout_on_injected_hang():
    hosts = crops(6)
    imgs = [mp.gpuimage(h) for h in hosts]
    ops = [mp.Operation("fliplr")]
    # compiled first: a cold compile holds the GIL for seconds, and the deadline is what is
    # tested here, not the compiler
    mp.Pipeline([mp.gpuimage(h) for h in hosts], ops).run(timeout=60)
    faults.inject("operation:fliplr", "hang", at_call=2, seconds=1.0)
    p = mp.Pipeline(imgs, ops)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="Pipeline #\\d+.*did not finish within 0.3 s"):
        p.run(timeout=0.3)
    assert time.monotonic() - t0 < 1.0
    faults.clear()
    wait_for_workers()
    _assert_untouched_or_done(imgs, hosts, ops, 0)
    fresh = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(fresh, ops).run(timeout=60)
    assert all(np.array_equal(np.asarray(x), np.fliplr(h)) for x, h in zip(fresh, hosts,
                                                                            strict=True))


# ------------------------------------------------------------------ load
def test_eight_pipelines_from_eight_threads_match_serial():
    hosts, ops = crops(64), standard_ops()
    serial = []
    for t in range(8):
        imgs = [mp.gpuimage(h) for h in hosts]
        mp.Pipeline(imgs, ops, seed=t).run()
        serial.append([np.asarray(x) for x in imgs])
    batches = [[mp.gpuimage(h) for h in hosts] for _ in range(8)]
    errors = []

    def go(t):
        try:
            mp.Pipeline(batches[t], ops, seed=t).run(timeout=120)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=go, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(180)
    assert not errors and not any(th.is_alive() for th in threads)
    for t in range(8):
        for got, want in zip(batches[t], serial[t], strict=True):
            np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.cudasim_ok
def test_worker_group_starts_every_thread_before_any_works(monkeypatch):
    """``WorkerGroup.start`` starts all its threads before any runs its target (a thread that
    worked at once kept the GIL from the caller starting the next); one that fails to start
    leaves those started before it running."""
    seen: list = []
    g = WorkerGroup("gate", lambda d, s: seen.append(len(g.threads)),
                    lambda err, d: seen.append(err))
    g.start([0], 3)
    assert g.join(time.monotonic() + 30) and seen == [3, 3, 3]
    seen.clear()
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def start_one(self):
        if started:
            raise RuntimeError("can't start new thread")
        started.append(self)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", start_one)
    g = WorkerGroup("gate", lambda d, s: seen.append(len(g.threads)),
                    lambda err, d: seen.append(err))
    with pytest.raises(RuntimeError, match="can't start new thread"):
        g.start([0], 2)
    started[0].join(30)
    assert not started[0].is_alive() and seen == [2]
