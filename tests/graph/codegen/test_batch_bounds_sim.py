"""The batched warp-clip bounds on the simulator or a GPU: the split form (``partial`` then
``finish``) writes the one-block kernel's bounds, which are the host's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import batch_bounds
from millipyde.kernels.clip import warp_clip_bounds

cudasim_ok = pytest.mark.cudasim_ok


def _sources(dtype: str, rng: np.random.Generator, n: int, last: int) -> np.ndarray:
    """Five images: mixed signs, all positive, all negative, a NaN (floats) or a zero
    minimum, and an extreme value at the end; the deciding values of images 1-3 at element
    ``last`` (a share of the last of a member's blocks)."""
    if dtype == "uint8":
        src = rng.integers(1, 255, (5, n)).astype(np.uint8)
        src[3, last] = 0
        src[4, n - 1] = 255
        return src
    src = rng.uniform(-5, 5, (5, n))
    src[1] = np.abs(src[1]) + 0.5
    src[1, last] = 0.25
    src[2] = -np.abs(src[2]) - 0.5
    src[2, last] = -0.25
    src[4, n - 1] = -9.0
    src[4, 7] = -0.0
    if np.dtype(dtype).kind == "i":
        src[3, last] = 0.0
        return (src * 1000).astype(dtype)
    src[3, last] = np.nan
    return src.astype(dtype)


@cudasim_ok
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", "int16"])
@pytest.mark.parametrize("parts", [3, 8])
def test_split_bounds_equal_the_one_block_bounds(dtype: str, parts: int) -> None:
    if runtime.codegen_target != "cuda":
        pytest.skip("CUDA kernels (cuda or cudasim)")
    from numba import cuda

    sim = runtime.simulated
    threads = 32 if sim else 256
    rng = np.random.default_rng(parts)
    n = 2000 + parts  # not a multiple of a block's step
    src = _sources(dtype, rng, n, (parts - 1) * threads + 1)
    sidx = np.array([4, 0, 3, 1, 2, 2], dtype=np.int64)
    nb, off = len(sidx), 1
    want = np.full((nb, 4), 7.0)
    for b, s in enumerate(sidx):
        lo = math.nan if np.isnan(src[s]).any() else float(np.nanmin(src[s]))
        want[b, off:off + 2] = warp_clip_bounds(lo, float(np.nanmax(src[s])))
    d_src, d_sidx = cuda.to_device(src), cuda.to_device(sidx)
    one = cuda.to_device(np.full((nb, 4), 7.0))
    batch_bounds.bounds_kernel("cuda", sim, threads)[nb, threads](d_src, d_sidx, one, off)
    split = cuda.to_device(np.full((nb, 4), 7.0))
    part = cuda.to_device(np.full(nb * parts * 3, np.nan))
    partial, finish = batch_bounds.split_kernels("cuda", sim, threads)
    partial[nb * parts, threads](d_src, d_sidx, part, parts)
    finish[nb, batch_bounds.parts_max(sim)](part, split, off, parts)
    got = split.copy_to_host()
    assert np.array_equal(got, one.copy_to_host())
    assert np.array_equal(got, want)
    # the bounds bind where they should: a positive minimum, a negative maximum
    if dtype != "uint8":
        assert got[3, off] == want[3, off] > 0 and got[5, off + 1] == want[5, off + 1] < 0
