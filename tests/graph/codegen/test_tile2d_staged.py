"""The batched one-pass 2-D tile with its uint8 source staged in shared memory
(``tile2d.stencil_2d_source(staged=True)``): the same values as the unstaged kernel."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import batch as codegen_batch
from millipyde.graph.codegen import tile2d
from millipyde.graph.exec import batch_stencil
from millipyde.graph.exec import variants as exec_variants
from millipyde.kernels import REGISTRY


def _taps(radii: list[int], reach: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian taps of radius ``r`` per member (-1: the stencil gated off), packed (B, T)."""
    rows = [REGISTRY["gaussian"].fn(r / 8.0, reach) if r > 0 else np.ones(1) for r in radii]
    packed = np.zeros((len(radii), max(len(t) for t in rows)), dtype=np.float64)
    for j, t in enumerate(rows):
        packed[j, :len(t)] = t
    return packed, np.array(radii, dtype=np.int64)


def _run(host: np.ndarray, sidx: np.ndarray, radii: list[int], stage: bool,
         monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    monkeypatch.setattr(batch_stencil, "STAGE_UINT8", stage)
    kernel, took = batch_stencil._stencil_2d_fn, []
    monkeypatch.setattr(batch_stencil, "_stencil_2d_fn",
                        lambda *key: took.append(key[-1]) or kernel(*key))
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    taps, rad = _taps(radii, max(host.shape[1:3]) - 1)
    src = runtime.from_host(host, 0)
    dst = runtime.empty((len(sidx), *host.shape[1:]), host.dtype, 0)
    node = types.SimpleNamespace(dtype=host.dtype)
    batch_stencil.stencil_gpu(node, src, runtime.from_host(sidx, 0), dst,
                              runtime.from_host(taps, 0), runtime.from_host(rad, 0),
                              int(rad.max()), 0)
    assert took == [stage]  # the one-pass tile ran, staged as asked
    return runtime.to_host(dst)


@pytest.mark.cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU kernels: cuda, hip or cudasim")
@pytest.mark.parametrize("c,h,w", [(3, 13, 11), (4, 9, 14), (1, 10, 7)])
def test_staged_equals_unstaged(c: int, h: int, w: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(c * 100 + h)
    host = rng.integers(0, 256, (3, h, w, c), dtype=np.uint8)
    # members reading other images, gated off (-1), one tap (0), radii past the tile and the
    # image (the simulator's tile is 8 x 4)
    sidx = np.array([2, 0, 1, 1, 0, 2], dtype=np.int64)
    radii = [3, -1, 0, 9, 1, 5]
    staged = _run(host, sidx, radii, True, monkeypatch)
    plain = _run(host, sidx, radii, False, monkeypatch)
    np.testing.assert_array_equal(staged, plain)
    np.testing.assert_array_equal(staged[1], host[0])  # gated off: a copy
    assert not np.array_equal(staged[3], host[1])  # filtered


def test_staged_geometry_and_shared_bytes() -> None:
    # the batch's largest radius (16 for sigma 2) fits the base tile's staging within 48 KB;
    # the taller tile does not, so the staged kernel keeps the base tile
    base = tile2d.TILE_GEOMETRY
    assert tile2d.staged_shared_bytes(16, base, 3) <= 48 * 1024
    assert tile2d.tile_geometry(False, 16, False, 48 * 1024, 3) == base
    row = tile2d.staged_row_bytes(16, 32, 3)
    assert row >= (32 + 33) * 3 and (row // 4) % 2 == 1
    with pytest.raises(ValueError):
        tile2d.stencil_2d_source(4, 3, packed=True, staged=True)


@pytest.mark.ptx
@pytest.mark.parametrize("c", [3, 4])
def test_staged_2d_stencil_kernel_compiles_to_ptx(c: int) -> None:
    pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
    from numba import types as nt
    from numba.np.numpy_support import from_dtype

    def arr(dtype: type, ndim: int) -> nt.Array:
        return nt.Array(from_dtype(np.dtype(dtype)), ndim, "C")

    kernel = codegen_batch.stencil_2d_batch_kernel(c, 3, unsigned=True, staged=True)
    # tile2d(src, sidx, dst, h_, w_, taps, rad, is_int, full, lut, span) over flat buffers
    idx = arr(np.int64, 1)
    argtys = (arr(np.uint8, 1), idx, arr(np.uint8, 1), nt.int64, nt.int64,
              arr(np.float64, 2), idx, nt.boolean, nt.float64, arr(np.uint8, 3),
              arr(np.int32, 2))
    ptx = ptx_of(kernel.py_func, argtys)
    assert ".entry" in ptx and "%ctaid.z" in ptx and ".local" not in ptx
    # every load names its space; the byte rows pass reads shared memory, not global
    assert not re.search(r"\bld\.(?!global|shared|param|local|const)[a-z0-9]+\b", ptx)
    assert "ld.shared.u8" in ptx
    # 64-bit integer multiplies only for the member's base offsets and the gated copy
    assert len(re.findall(r"\b(?:mul|mad)\.lo\.[su]64\b", ptx)) <= 48
    assert not re.search(r"cvt\.rn\.f64\.[su]", ptx)  # bytes to float64 through _b2f
