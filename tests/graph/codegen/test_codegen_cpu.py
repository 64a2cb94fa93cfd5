"""The fused CPU stencil gives bit-identical results to the generic two-pass stencil.

Both are plain ``@njit`` functions here (the generic source compiled for the ``cpu`` target), so
this runs on any backend. Odd tile sizes force tiles that split the image at every border.
"""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.graph.codegen import cpu as codegen_cpu
from millipyde.graph.codegen.stencil import stencil_kernels
from millipyde.graph.exec import tables as exec_tables
from millipyde.kernels import REGISTRY

SHAPES = [(1, 1), (5, 7), (7, 5), (40, 3), (3, 40), (97, 131)]
CHANNELS = [(1, np.float64), (2, np.float64), (1, np.uint8), (3, np.uint8), (4, np.uint8)]


def _generic(src: np.ndarray, dtype: np.dtype, taps: np.ndarray) -> np.ndarray:
    rows, cols = stencil_kernels("cpu")
    h, w, c = src.shape
    nc = min(c, 3)
    tmp = np.empty((h, w, nc))
    dst = np.empty((h, w, c), dtype)
    rows(src, tmp, taps, nc)
    cols(src, tmp, dst, taps, nc, dtype.kind in "ui", 255.0 if dtype.kind in "ui" else 1.0)
    return dst


def _fused(src: np.ndarray, dtype: np.dtype, taps: np.ndarray,
           tiles: tuple[int, int] | None = None) -> np.ndarray:
    h, w, c = src.shape
    nc = min(c, 3)
    dst = np.empty((h, w, c), dtype)
    band, strip = tiles or codegen_cpu.stencil_tiles(h, w, nc, len(taps))
    codegen_cpu.stencil_kernel()(src, dst, taps, nc, dtype.kind in "ui",
                                 255.0 if dtype.kind in "ui" else 1.0, band, strip,
                                 exec_tables.IDENTITY_LUT, False, False)
    return dst


@pytest.mark.parametrize("sigma", [0.5, 2.0, 3.3])
@pytest.mark.parametrize("c,dtype", CHANNELS, ids=lambda v: str(v))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fused_stencil_matches_generic_bit_for_bit(shape, c, dtype, sigma):
    rng = np.random.default_rng(sum(shape) + c)
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        src = rng.integers(0, 256, (*shape, c), dtype=np.uint8)
    else:
        src = rng.random((*shape, c))
    taps = REGISTRY["gaussian"].fn(sigma)
    want = _generic(src, dtype, taps)
    for tiles in (None, (3, 7), (1, 1)):
        got = _fused(src, dtype, taps, tiles)
        np.testing.assert_array_equal(got, want, err_msg=f"tiles {tiles}")
    if c == 4:
        np.testing.assert_array_equal(want[..., 3], src[..., 3])


def test_tiles_keep_the_ring_small_and_share_the_work():
    band, strip = codegen_cpu.stencil_tiles(5333, 4000, 3, 33, threads=2)
    assert 33 * 3 * strip * 8 <= codegen_cpu.RING_BYTES
    tiles = -(-5333 // band) * -(-4000 // strip)
    assert tiles >= 2 * 2
    assert codegen_cpu.stencil_tiles(1, 1, 1, 33, threads=2) == (1, 1)
