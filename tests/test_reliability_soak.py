"""Issue 17: soak. Generator outputs and image method calls by the thousand keep host memory
flat (on the cpu backend the device buffers are host arrays, so they are counted too).

The full soak (10,000 of each) is marked ``slow`` and runs with ``-m slow`` or
``MILLIPYDE_SOAK=1``; a small variant runs in CI. Memory is measured with ``tracemalloc``
(NumPy reports its buffers to it), after a warm-up that compiles every kernel.
"""

from __future__ import annotations

import gc
import os
import tracemalloc

import numpy as np
import pytest
import reference as ref

import millipyde as mp

OPS = [mp.Operation("random_rotate", -20, 20), mp.Operation("random_brightness", -0.1, 0.1),
       mp.Operation("fliplr", probability=0.5), mp.Operation("gaussian", 0.8)]
# Python's own bookkeeping (dict and free-list growth, interned ids) between two measurements
SLACK = 64 * 1024


def _full_soak_requested(config) -> bool:
    return bool(os.environ.get("MILLIPYDE_SOAK")) or "slow" in (config.option.markexpr or "")


def _growth(step, warmup: int, n: int) -> int:
    """Bytes still allocated after ``n`` calls of ``step`` beyond what ``warmup`` calls left."""
    tracemalloc.start()
    try:
        for i in range(warmup):
            step(i)
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        for i in range(warmup, warmup + n):
            step(i)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def _generator_growth(n: int) -> tuple[int, int]:
    image = mp.gpuimage(ref.photo_rgba(48, 48))
    gen = mp.Generator([image], OPS, seed=1)
    out = [None]

    def step(_i: int) -> None:
        out[0] = np.asarray(next(gen))  # one output held at a time, as a training loop does

    growth = _growth(step, 100, n)
    gen_stop = getattr(gen, "close", None)
    if gen_stop is not None:
        gen_stop()
    return growth, image.nbytes


def _method_growth(n: int) -> tuple[int, int]:
    host = ref.photo_rgba(48, 48)
    image = mp.gpuimage(host)
    calls = [lambda: image.fliplr(), lambda: image.transpose(), lambda: image.rotate(7.0),
             lambda: image.brightness(0.01), lambda: image.gaussian(0.7),
             lambda: image.brightness(-0.01), lambda: image.adjust_gamma(1.0),
             lambda: image.rotate(-7.0)]

    def step(i: int) -> None:
        calls[i % len(calls)]()
        if i % 10 == 9:
            np.asarray(image)  # materialize now and then, as users read results

    return _growth(step, 100, n), image.nbytes


@pytest.mark.parametrize("which", ["generator", "methods"])
def test_soak_small(which):
    growth, image = (_generator_growth if which == "generator" else _method_growth)(400)
    assert growth <= image + SLACK, f"{which}: {growth} bytes kept after 400 (image {image})"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["generator", "methods"])
def test_soak_10000(which, request):
    if not _full_soak_requested(request.config):
        pytest.skip("the full soak runs with -m slow or MILLIPYDE_SOAK=1")
    growth, image = (_generator_growth if which == "generator" else _method_growth)(10_000)
    assert growth <= image + SLACK, f"{which}: {growth} bytes kept after 10,000 (image {image})"
