"""mp.Generator (shared/API.md "Execution constructs"; thesis 9.6)."""

import gc
import re
import threading

import numpy as np
import pytest
from multidevice import crops, reference, standard_ops, wait_for_workers
from PIL import Image

import millipyde as mp
from millipyde import faults
from millipyde.pipeline import PipelineError


@pytest.fixture(autouse=True)
def _clean():
    faults.clear()
    yield
    faults.clear()
    mp.seed(0)
    wait_for_workers()


def images(n):
    return [mp.gpuimage(c) for c in crops(n)]


def _workers():
    return [t for t in threading.enumerate() if t.name.startswith("millipyde-generator")]


# ------------------------------------------------------------------ constructor errors
@pytest.mark.parametrize("inputs", [None, 3, np.zeros((2, 4, 4)), [], [np.zeros((4, 4))],
                                    (1, 2), [None]])
def test_bad_inputs(inputs):
    with pytest.raises(ValueError, match="input"):
        mp.Generator(inputs, [])


def test_missing_or_empty_directory(tmp_path):
    with pytest.raises(ValueError):
        mp.Generator(str(tmp_path / "nope"), [])
    with pytest.raises(ValueError):
        mp.Generator(str(tmp_path), [])


@pytest.mark.parametrize("operations", [None, "fliplr", [lambda x: x], 5])
def test_bad_operations(operations):
    with pytest.raises(ValueError, match="operations"):
        mp.Generator(images(1), operations)


@pytest.mark.parametrize("kwargs,what", [
    ({"device": "0"}, "device"), ({"device": -1}, "device"), ({"device": 99}, "device"),
    ({"outputs": -1}, "outputs"), ({"outputs": 1.5}, "outputs"), ({"outputs": "3"}, "outputs"),
    ({"outputs": True}, "outputs"), ({"return_to_host": "yes"}, "return_to_host"),
    ({"return_to_host": 1}, "return_to_host"), ({"seed": 2.5}, "seed"),
    ({"batch": 4}, "unknown keyword"),
])
def test_bad_arguments(kwargs, what):
    with pytest.raises(ValueError, match=what):
        mp.Generator(images(1), [], **kwargs)


def test_method_missing_on_gpuarray_input():
    with pytest.raises(ValueError, match="'fliplr' is not a method"):
        mp.Generator([mp.gpuarray(np.zeros((3, 3)))], [mp.Operation("fliplr")])


# ------------------------------------------------------------------ iteration
def test_cycles_through_inputs_in_order_and_stops():
    hosts = crops(3)
    gen = mp.Generator([mp.gpuimage(h) for h in hosts], [], outputs=7)
    assert iter(gen) is gen
    outs = list(gen)
    assert len(outs) == 7
    for k, out in enumerate(outs):
        assert isinstance(out, mp.gpuimage)
        np.testing.assert_array_equal(np.asarray(out), hosts[k % 3])
    with pytest.raises(StopIteration):
        next(gen)
    with pytest.raises(StopIteration):
        next(gen)


def test_zero_outputs():
    assert list(mp.Generator(images(2), [], outputs=0)) == []


def test_outputs_match_reference_and_inputs_unchanged():
    hosts, ops = crops(4), standard_ops()
    inputs = [mp.gpuimage(h) for h in hosts]
    with mp.Generator(inputs, ops, outputs=10, seed=21) as gen:
        outs = [np.asarray(o) for o in gen]
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out, reference(hosts[k % 4], ops, 21, k))
    for x, h in zip(inputs, hosts, strict=True):
        np.testing.assert_array_equal(np.asarray(x), h)
    assert any(not np.array_equal(outs[k], hosts[k % 4]) for k in range(10))


def test_outputs_are_fresh_copies():
    inputs = images(1)
    gen = mp.Generator(inputs, [], outputs=2)
    a, b = next(gen), next(gen)
    assert a is not b and a is not inputs[0]
    a.fliplr()
    np.testing.assert_array_equal(np.asarray(b), np.asarray(inputs[0]))


def test_same_seed_same_sequence_global_seed_default():
    hosts, ops = crops(3), standard_ops()
    mp.seed(5)
    g1 = mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=9, return_to_host=True)
    g2 = mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=9, return_to_host=True,
                      seed=5)
    g3 = mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=9, return_to_host=True,
                      seed=6)
    s1, s2, s3 = list(g1), list(g2), list(g3)
    assert all(np.array_equal(a, b) for a, b in zip(s1, s2, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(s1, s3, strict=True))


def test_return_to_host():
    hosts = crops(2)
    gen = mp.Generator([mp.gpuimage(h) for h in hosts], [mp.Operation("fliplr")], outputs=2,
                       return_to_host=True)
    outs = list(gen)
    assert all(type(o) is np.ndarray for o in outs)
    np.testing.assert_array_equal(outs[1], np.fliplr(hosts[1]))


def test_gpuarray_inputs_keep_their_type():
    arr = mp.gpuarray(np.arange(12.0).reshape(3, 4))
    out = next(mp.Generator([arr], [], outputs=1))
    assert type(out) is mp.gpuarray
    np.testing.assert_array_equal(np.asarray(out), np.arange(12.0).reshape(3, 4))


def test_directory_input_in_sorted_order(tmp_path):
    hosts = crops(3)
    for name, h in zip(["b.png", "a.png", "c.png"], hosts, strict=True):
        Image.fromarray(h).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    outs = list(mp.Generator(str(tmp_path), [], outputs=3, return_to_host=True))
    for out, h in zip(outs, [hosts[1], hosts[0], hosts[2]], strict=True):
        np.testing.assert_array_equal(out, h)
    assert len(list(mp.Generator(tmp_path, [], outputs=4))) == 4  # PathLike works too


def test_infinite_then_close():
    gen = mp.Generator(images(2), [mp.Operation("fliplr")])
    for _ in range(25):
        next(gen)
    assert _workers()
    assert len(gen._state.results) <= gen._state.depth  # prefetch is bounded
    gen.close()
    assert not _workers()
    with pytest.raises(StopIteration):
        next(gen)
    gen.close()  # idempotent


def test_context_manager_and_del_stop_workers():
    with mp.Generator(images(1), []) as gen:
        next(gen)
    assert not _workers()
    gen = mp.Generator(images(1), [])
    next(gen)
    del gen
    gc.collect()
    wait_for_workers()
    assert not _workers()


def test_device_argument_and_with_device():
    out = next(mp.Generator(images(1), [], device=0))
    assert out.device == 0
    with mp.Device(0):
        gen = mp.Generator(images(1), [])
    assert gen.device == 0


def test_operation_error_reaches_next_chained():
    def boom(x):
        raise OSError("disk on fire")

    inputs = images(2)
    before = [np.asarray(x) for x in inputs]
    gen = mp.Generator(inputs, [mp.Operation("fliplr"), mp.Operation(boom)], outputs=5)
    with pytest.raises(PipelineError, match="'boom'.*output 0 \\(input 0\\) on device 0") as info:
        next(gen)
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(StopIteration):  # a failed Generator is closed
        next(gen)
    assert not _workers()
    for x, b in zip(inputs, before, strict=True):
        np.testing.assert_array_equal(np.asarray(x), b)


def test_kernel_fault_in_generator():
    faults.inject("op:fliplr", "raise", at_call=3)
    gen = mp.Generator(images(2), [mp.Operation("fliplr")], outputs=6)
    got = []
    with pytest.raises(PipelineError, match="fused kernels of operations 'fliplr'") as info:
        for out in gen:
            got.append(out)
    # the third kernel launch may belong to any prefetched output; earlier ones are delivered
    failed = int(re.search(r"output (\d+)", str(info.value)).group(1))
    assert len(got) == failed
    faults.clear()
    assert len(list(mp.Generator(images(2), [mp.Operation("fliplr")], outputs=6))) == 6
