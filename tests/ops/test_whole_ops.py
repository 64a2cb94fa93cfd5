"""``OpSpec.whole``: an op so marked returns, on integer images, whole numbers within the type's
range, so a fused kernel does not round and clip its values again. Checked on the compiled
scalar functions (the cpu target's arithmetic, NumPy's error model as the kernels use) over
every integer type's extremes and random pixels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numba import njit

import millipyde.ops  # noqa: F401  (registers the kernels)
from millipyde.kernels import REGISTRY

INT_TYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]
FACTORS = [0.0, 0.4, 1.0, 1.6, 7.5, 1e300, 1.7e308]


def _pixels(dtype: type) -> list[tuple[float, float, float]]:
    info = np.iinfo(dtype)
    corners = sorted({float(info.min), float(info.min) + 1.0, 0.0, 1.0, float(info.max) - 1.0,
                      float(info.max)})
    out = list(itertools.product(corners, repeat=3))
    rng = np.random.default_rng(int(info.max) % 1000)
    vals = rng.integers(info.min, info.max, size=(64, 3), dtype=dtype, endpoint=True)
    return out + [tuple(float(v) for v in row) for row in vals]


def _whole(values: list[float], dtype: type) -> bool:
    info = np.iinfo(dtype)
    return all(v == np.floor(v) and float(info.min) <= v <= float(info.max) for v in values)


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_marked_ops_return_whole_values_in_range(dtype: type) -> None:
    marked = sorted(n for n, s in REGISTRY.items() if s.whole)
    assert {"adjust_contrast", "adjust_saturation", "adjust_hue"} <= set(marked)
    full = float(np.iinfo(dtype).max)
    pixels = _pixels(dtype)
    for name in marked:
        spec = REGISTRY[name]
        fn = njit(error_model="numpy")(spec.fn)
        args = [(f,) for f in FACTORS] if name != "adjust_hue" else [(-0.5,), (0.1,), (0.5,)]
        for (a,), px in itertools.product(args, pixels):
            if spec.kind == "pixelwise":
                out = fn(px[0], px[1], px[2], full, a, 0.0, 0.0)
            else:  # per channel; a statistic's mean of the pixel's own values
                st = np.array([sum(px), 3.0])
                out = [fn(v, c, full, a, 0.0, st, 0) for c, v in enumerate(px)]
            assert _whole(list(out), dtype), (name, dtype, a, px, out)
