"""mp.Operation (shared/API.md "Execution constructs"; thesis 9.4)."""

import math

import numpy as np
import pytest
from multidevice import crops

import millipyde as mp
from millipyde.array import ArgumentError


def add(x, y):
    return x + y


# ------------------------------------------------------------------ construction errors
def test_missing_function_is_value_error():
    with pytest.raises(ValueError, match="needs a function"):
        mp.Operation()
    with pytest.raises(ValueError):
        mp.Operation(None)


@pytest.mark.parametrize("function", [42, 1.5, b"rotate", ["rotate"], np.zeros(3)])
def test_function_neither_callable_nor_name(function):
    with pytest.raises(ValueError, match="callable or a method name"):
        mp.Operation(function)


@pytest.mark.parametrize("name", ["nope", "rotat", "_bind", "__init__", "shape", "dtype", ""])
def test_unknown_or_private_method_name(name):
    with pytest.raises(ValueError, match="not a gpuimage/gpuarray method"):
        mp.Operation(name)


@pytest.mark.parametrize("args,kwargs", [((), {}), ((1, False, 0, None, 2), {}),
                                         ((30,), {"spin": 1})])
def test_method_arguments_checked_against_signature(args, kwargs):
    with pytest.raises(ValueError, match="rotate"):
        mp.Operation("rotate", *args, **kwargs)


@pytest.mark.parametrize("p", [0, 1, 0.0, 1.0, -0.1, 1.5, True, False, "0.5", math.nan,
                               math.inf, np.int64(0), [0.5]])
def test_invalid_probability(p):
    with pytest.raises(ValueError, match="probability"):
        mp.Operation("fliplr", probability=p)


def test_errors_are_also_type_errors():
    with pytest.raises(TypeError):
        mp.Operation("fliplr", probability=2.0)
    assert issubclass(ArgumentError, ValueError) and issubclass(ArgumentError, TypeError)


@pytest.mark.parametrize("p", [0.5, 1e-9, 0.999999, np.float32(0.25), np.float64(0.75)])
def test_valid_probability(p):
    op = mp.Operation("fliplr", probability=p)
    assert op.probability == pytest.approx(float(p))
    assert isinstance(op.probability, float)


def test_aliases_and_gpuarray_methods_accepted():
    for name in ("rgb2grey", "rgb2gray", "rgba2gray", "clone", "get", "random_rotate"):
        assert mp.Operation(name, *((0, 1) if name == "random_rotate" else ())).name == name


def test_repr_and_name():
    op = mp.Operation("gaussian", 2, probability=0.5)
    assert op.name == "gaussian"
    assert repr(op) == "Operation('gaussian', 2, probability=0.5)"
    assert mp.Operation(add, 1, 2).name == "add"


# ------------------------------------------------------------------ run / run_on
def test_run_calls_function_with_args_and_kwargs():
    assert mp.Operation(add, 4, 6).run() == 10
    assert mp.Operation(sorted, [3, 1, 2], reverse=True).run() == [3, 2, 1]
    calls = []
    mp.Operation(calls.append, "x").run()
    assert calls == ["x"]


def test_run_on_method_name_is_refused():
    with pytest.raises(ValueError, match="run_on"):
        mp.Operation("fliplr").run()


def test_run_with_probability_is_a_deterministic_coin():
    op = mp.Operation(lambda: 1, probability=0.3)
    mp.seed(11)
    first = [op.run() for _ in range(400)]
    assert set(first) == {1, None}
    assert 0.2 < first.count(1) / 400 < 0.4
    mp.seed(11)
    assert [op.run() for _ in range(400)] == first  # mp.seed restarts the sequence
    mp.seed(12)
    assert [op.run() for _ in range(400)] != first
    mp.seed(0)


def test_run_on_applies_the_method_in_place():
    host = crops(1)[0]
    img = mp.gpuimage(host)
    assert mp.Operation("fliplr").run_on(img) is None
    np.testing.assert_array_equal(np.asarray(img), np.fliplr(host))
    mp.Operation("rgb2grey").run_on(img)
    assert img.shape == host.shape[:2]


def test_run_on_callable_gets_instance_first():
    seen = []
    op = mp.Operation(lambda inst, a, b=0: seen.append((inst, a, b)) or "ok", 1, b=2)
    assert op.run_on("instance") == "ok"
    assert seen == [("instance", 1, 2)]


@pytest.mark.parametrize("instance", [object(), 3, "text"])
def test_run_on_unknown_method_is_value_error(instance):
    with pytest.raises(ValueError, match="no method 'fliplr'"):
        mp.Operation("fliplr").run_on(instance)


def test_run_on_gpuarray_without_image_method():
    arr = mp.gpuarray(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="gpuarray has no method 'rotate'"):
        mp.Operation("rotate", 30).run_on(arr)


def test_run_on_with_probability_skips_without_touching():
    host = crops(1)[0]
    op = mp.Operation("fliplr", probability=0.5)
    mp.seed(3)
    ran = 0
    for _ in range(40):
        img = mp.gpuimage(host)
        r = op.run_on(img)
        assert r is None
        flipped = np.array_equal(np.asarray(img), np.fliplr(host))
        assert flipped or np.array_equal(np.asarray(img), host)
        ran += flipped
    assert 0 < ran < 40
    mp.seed(0)


# ------------------------------------------------------------------ apply (executor entry)
def test_apply_is_a_pure_function_of_seed_sample_index():
    host = crops(1)[0]
    ops = [mp.Operation("random_rotate", -40, 40), mp.Operation("fliplr", probability=0.5)]

    def run(seed, sample):
        img = mp.gpuimage(host)
        applied = [op.apply(img, seed, sample, j) for j, op in enumerate(ops)]
        return applied, np.asarray(img)

    a1, r1 = run(5, 3)
    a2, r2 = run(5, 3)
    assert a1 == a2 and np.array_equal(r1, r2)
    results = [run(5, s)[1] for s in range(6)]
    assert any(not np.array_equal(results[0], r) for r in results[1:])
    # the coin is exactly random.gate
    from millipyde import random as mprandom

    for s in range(20):
        img = mp.gpuimage(host)
        assert ops[1].apply(img, 9, s, 1) == mprandom.gate(9, s, 1, 0.5)


def test_apply_callable_result_replaces_value():
    host = crops(1)[0]
    img = mp.gpuimage(host)
    other = mp.gpuimage(np.fliplr(host))
    mp.Operation(lambda x: other).apply(img, 0, 0, 0)
    np.testing.assert_array_equal(np.asarray(img), np.fliplr(host))
    np.testing.assert_array_equal(np.asarray(other), np.fliplr(host))


def test_apply_callable_invalid_image_result_is_refused():
    img = mp.gpuimage(crops(1)[0])
    bad = mp.gpuarray(np.zeros((4, 4, 3), dtype=np.float64))
    with pytest.raises(ValueError, match="not a valid gpuimage"):
        mp.Operation(lambda x: bad).apply(img, 0, 0, 0)
