"""The batched ``tile2d`` kernel's staged zero-padded taps and uint8 store (``tile2d_batch``):
every tap count's remainder, bottom and right tiles, a gated member, bit for bit."""

from __future__ import annotations

import types

import numpy as np
import pytest

from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import tile2d_batch, tile2d_geometry
from millipyde.graph.exec import batch_stencil
from millipyde.graph.exec import variants as exec_variants

cudasim_ok = pytest.mark.cudasim_ok
# windows of 8 outputs as on GPUs (the simulator's own geometry has windows of 2, which never
# pad): 8 x 16 tiles, 16 threads per block
GEOMETRY = (8, 2, 8, 8, 1)


def _reference(img: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """Rows then columns, zero padding, each sum in tap order, then rint and clip to uint8."""
    r = len(taps) // 2
    x = img.astype(np.float64)
    h, w = x.shape[:2]
    pad = np.zeros((h, w + 2 * r, x.shape[2]))
    pad[:, r:r + w] = x
    rows = np.zeros_like(x)
    for k, t in enumerate(taps):
        rows = rows + t * pad[:, k:k + w]
    pad = np.zeros((h + 2 * r, w, x.shape[2]))
    pad[r:r + h] = rows
    cols = np.zeros_like(x)
    for k, t in enumerate(taps):
        cols = cols + t * pad[k:k + h]
    return np.clip(np.rint(cols), 0, 255).astype(np.uint8)


def test_whole_taps_pad_remainders_of_three_or_more() -> None:
    def ends(n: int, ntaps: int) -> int:
        return eval(tile2d_batch.whole_taps(n), {"_i32": int, "ntaps": ntaps})

    assert [ends(8, n) for n in (1, 3, 5, 7, 9, 11, 17, 23, 33)] == [0, 8, 8, 8, 8, 16, 16,
                                                                     24, 32]
    assert [ends(2, n) for n in (1, 3, 5)] == [0, 2, 4]
    geometry = (32, 4, 8, 8, 4)
    assert tile2d_batch.batch_shared_bytes(16, geometry, 33) == \
        (48 + 8) * 8 + tile2d_geometry.tile_shared_bytes(16, geometry)


@cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU kernels: cuda, hip or cudasim")
@pytest.mark.parametrize(("w", "c", "words"), [(21, 3, False), (24, 3, True), (40, 1, True),
                                                 (48, 3, True)])
def test_padded_taps_and_uint8_store_bit_for_bit(monkeypatch: pytest.MonkeyPatch, w: int,
                                                 c: int, words: bool) -> None:
    """``words``: the stack is a whole number of uint64 words, so the interior windows load
    words (``tile2d_batch.word_loads``); 4 x 19 x 21 x 3 bytes are not (byte loads). RGB 48
    wide: interior windows of up to three whole blocks of words."""
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    if runtime.simulated:
        monkeypatch.setattr(tile2d_geometry, "TILE_GEOMETRY_SIM", GEOMETRY)
    batch_stencil._plan_2d.cache_clear()
    took = []
    view = runtime.words
    monkeypatch.setattr(runtime, "words", lambda f: took.append(view(f)) or took[-1])
    rng = np.random.default_rng(7)
    h = 19  # a bottom tile and a right tile cut by the image
    # radii 0..9: tap counts 1..19, remainders 1, 3, 5, 7 of 8; the last member gated off
    rads = list(range(10)) + [-1]
    rmax = max(rads)
    imgs = rng.integers(0, 256, (4, h, w, c), dtype=np.uint8)
    sidx = np.array([i % 4 for i in range(len(rads))], np.int64)
    taps = np.full((len(rads), 2 * rmax + 1), np.nan)  # past each member's taps: never read
    for b, r in enumerate(rads):
        if r >= 0:
            t = rng.random(2 * r + 1) - 0.1  # a negative tap now and then
            taps[b, :2 * r + 1] = t / t.sum()
    dev = 0
    dst = runtime.empty((len(rads), h, w, c), np.uint8, dev)
    node = types.SimpleNamespace(dtype=np.dtype(np.uint8))
    batch_stencil.stencil_gpu(node, runtime.from_host(imgs, dev), runtime.from_host(sidx, dev),
                              dst, runtime.from_host(taps, dev),
                              runtime.from_host(np.array(rads, np.int64), dev), rmax, dev)
    got = runtime.to_host(dst)
    for b, r in enumerate(rads):
        want = imgs[sidx[b]] if r < 0 else _reference(imgs[sidx[b]], taps[b, :2 * r + 1])
        np.testing.assert_array_equal(got[b], want, err_msg=f"member {b}, radius {r}")
    assert [t is not None for t in took] == [words]


def test_rint_u8_is_rint_then_clip_on_every_kind_of_value() -> None:
    """``tile2d_batch._rint_u8`` (the simulator's text: the GPU's is the same arithmetic on
    the same words) against ``clip(rint(v), 0, 255)``, NaN to 0, as ``_rint_clip`` does."""
    ns: dict = {"_config": types.SimpleNamespace(ENABLE_CUDASIM=True)}
    exec(tile2d_batch.RINT_U8, ns)
    rint_u8 = ns["_rint_u8"]
    rng = np.random.default_rng(3)
    special = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -0.49, -1.5, 254.5, 255.49, 255.5, 256.0,
               2.0**31 - 0.5, 2.0**31, 2.0**32 - 0.5, 2.0**32, 2.0**51 - 1, 2.0**51, 2.0**52,
               -(2.0**31), -(2.0**32), -(2.0**51), -(2.0**52), 1e300, -1e300, 5e-324,
               np.inf, -np.inf, np.nan, -np.nan]
    values = special + list(rng.uniform(-300.0, 600.0, 2000)) + \
        list(np.arange(-4.0, 260.0, 0.25))
    for v in values:
        want = 0 if np.isnan(v) else int(np.clip(np.rint(v), 0, 255))
        assert rint_u8(float(v)) == want, v
