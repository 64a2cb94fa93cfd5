"""Issue 17, class 7: the same rules everywhere. NumPy integer seeds wherever seeds are taken; a
callable Operation's ndarray result used like a gpuarray one (other values ignored with a
warning); a KeyboardInterrupt inside a worker reaches the caller as a KeyboardInterrupt.
(The decompression-bomb setting is tested in test_io.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

import millipyde as mp

RANDOM_OPS = [mp.Operation("random_rotate", -40, 40), mp.Operation("random_brightness", -0.3, 0.3)]


def _random_image_after_seed(seed) -> np.ndarray:
    mp.seed(seed)
    img = mp.gpuimage(ref.photo_rgb(8, 9))
    img.random_rotate(-40, 40)
    img.random_brightness(-0.3, 0.3)
    return np.asarray(img)


@pytest.mark.parametrize("numpy_int", [np.int64, np.int32, np.uint8, np.uint64])
def test_global_seed_accepts_numpy_integers(numpy_int):
    np.testing.assert_array_equal(_random_image_after_seed(numpy_int(5)),
                                  _random_image_after_seed(5))


@pytest.mark.parametrize("numpy_int", [np.int64, np.uint32])
def test_pipeline_and_generator_seeds_accept_numpy_integers(numpy_int):
    host = ref.photo_rgb(8, 9)
    a, b = mp.gpuimage(host), mp.gpuimage(host)
    mp.Pipeline([a], RANDOM_OPS, seed=numpy_int(3)).run()
    mp.Pipeline([b], RANDOM_OPS, seed=3).run()
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    g1 = mp.Generator([mp.gpuimage(host)], RANDOM_OPS, outputs=3, seed=numpy_int(3),
                      return_to_host=True)
    g2 = mp.Generator([mp.gpuimage(host)], RANDOM_OPS, outputs=3, seed=3, return_to_host=True)
    for x, y in zip(g1, g2, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("bad", [True, np.bool_(True), 1.0, np.float64(2), "3", None])
def test_seed_refuses_non_integers(bad):
    with pytest.raises(ValueError, match="seed"):
        mp.seed(bad)
    if bad is not None:  # None means "the global seed" for Pipeline and Generator
        with pytest.raises(ValueError, match="seed"):
            mp.Pipeline([mp.gpuimage(np.zeros((2, 2)))], [], seed=bad)
        with pytest.raises(ValueError, match="seed"):
            mp.Generator([mp.gpuimage(np.zeros((2, 2)))], [], seed=bad)


def _flip_host(img):
    return np.ascontiguousarray(np.asarray(img)[::-1])


def test_callable_returning_ndarray_replaces_the_input_in_a_pipeline():
    host = ref.photo_rgb(6, 7)
    img = mp.gpuimage(host)
    mp.Pipeline([img], [mp.Operation(_flip_host), mp.Operation("fliplr")]).run()
    np.testing.assert_array_equal(np.asarray(img), np.fliplr(host[::-1]))


def test_callable_returning_ndarray_is_used_by_a_generator():
    host = ref.photo_grey(6, 7)
    gen = mp.Generator([mp.gpuimage(host)], [mp.Operation(_flip_host)], outputs=2,
                       return_to_host=True)
    for out in gen:
        np.testing.assert_array_equal(out, host[::-1])


def test_callable_returning_an_invalid_ndarray_fails_loudly():
    img = mp.gpuimage(ref.photo_rgb(6, 7))
    before = np.asarray(img)
    bad = mp.Operation(lambda x: np.zeros((3, 3, 5)))
    with pytest.raises(mp.pipeline.PipelineError) as info:
        mp.Pipeline([img], [bad]).run()
    assert "not a valid gpuimage" in str(info.value.__cause__)
    np.testing.assert_array_equal(np.asarray(img), before)  # untouched


def test_callable_returning_something_else_warns_that_it_is_ignored():
    host = ref.photo_rgb(6, 7)
    img = mp.gpuimage(host)
    with pytest.warns(RuntimeWarning, match="ignored"):
        mp.Pipeline([img], [mp.Operation(lambda x: 42)], device=0).run()
    np.testing.assert_array_equal(np.asarray(img), host)
    mp.Pipeline([img], [mp.Operation(lambda x: None)]).run()  # None: no warning (errors on)


class _Interrupt:
    """A callable raising KeyboardInterrupt on its ``at``-th call (as Ctrl-C in user code)."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, x):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt("user pressed Ctrl-C")


def test_keyboard_interrupt_in_pipeline_worker_is_reraised():
    hosts = [ref.photo_rgb(5, 6) for _ in range(6)]
    imgs = [mp.gpuimage(h) for h in hosts]
    with pytest.raises(KeyboardInterrupt):
        mp.Pipeline(imgs, [mp.Operation("fliplr"), mp.Operation(_Interrupt(3))],
                    device=0).run()
    for img, h in zip(imgs, hosts, strict=True):  # untouched or fully processed
        out = np.asarray(img)
        assert np.array_equal(out, h) or np.array_equal(out, np.fliplr(h))
    mp.Pipeline(imgs[:1], [mp.Operation("fliplr")]).run()  # usable afterwards


def test_keyboard_interrupt_in_generator_worker_is_reraised():
    gen = mp.Generator([mp.gpuimage(ref.photo_rgb(5, 6))], [mp.Operation(_Interrupt(1))],
                       outputs=4)
    with pytest.raises(KeyboardInterrupt):
        list(gen)


@pytest.mark.parametrize("args", [(float("nan"),), (float("inf"),), ((0.5, float("nan")),)])
def test_method_operation_refuses_non_finite_arguments_when_made(args):
    """Class 4 for executors: refused when the Operation is made, not in a worker later."""
    method = "random_adjust_gamma" if isinstance(args[0], tuple) else "gaussian"
    with pytest.raises(ValueError, match="finite"):
        mp.Operation(method, *args)
    with pytest.raises(ValueError, match="finite"):
        mp.Operation("rotate", angle=float("-inf"))
