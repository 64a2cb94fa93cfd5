"""GPU-only kernel variants (codegen_gpu) against the references.

On ``cuda``/``hip`` ``execute`` picks these variants itself (tests/kernels covers them there);
this file also runs them under CUDASIM, with small blocks, so CI checks their indexing.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.exec import gather as exec_gather
from millipyde.graph.exec import stencil as exec_stencil
from millipyde.graph.exec import variants as exec_variants
from millipyde.kernels import REGISTRY

pytestmark = [
    pytest.mark.cudasim_ok,
    pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU kernels: cuda, hip or cudasim"),
]

SIZES = [(1, 1), (5, 9), (13, 21)]


@pytest.mark.parametrize("hw", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind", ["grey", "rgb", "rgba"])
@pytest.mark.parametrize("sigma", [0.5, 1.3])
def test_tiled_stencil_matches_reference(kind: str, hw: tuple[int, int], sigma: float) -> None:
    img = ref.photo(kind, *hw)
    src3 = runtime.as_3d(runtime.from_host(img, 0))
    h, w, c = src3.shape
    taps = REGISTRY["gaussian"].fn(sigma)
    tmp = runtime.empty((h, w, min(c, 3)), np.float64, 0)
    dst = runtime.empty(img.shape, img.dtype, 0)
    is_int = img.dtype.kind in "ui"
    small = {"rows_block": (2, 2), "cols_block": (4, 2)} if runtime.simulated else {}
    exec_stencil.run_stencil_tiled(src3, tmp, runtime.as_3d(dst), runtime.upload_small(taps, 0),
                                   len(taps) // 2, is_int, 255.0 if is_int else 1.0, 0, **small)
    ref.assert_matches(runtime.to_host(dst), ref.gaussian(img, sigma), ulp_uint8=1,
                       atol=ref.SKIMAGE_ATOL, what=f"tiled gaussian({sigma}) {kind}")


@pytest.mark.parametrize("ops", [
    [("adjust_gamma", 2)], [("fliplr",)], [("transpose",)],
    [("adjust_gamma", 2), ("fliplr",)], [("fliplr",), ("transpose",)],
], ids=lambda o: "+".join(x[0] for x in o))
# 37x29 spans several chunks per thread and rows per block, and loops over the capped grid
@pytest.mark.parametrize("hw", [(9, 13), (37, 29)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_rgba_lut_fast_path_matches_generic(ops, hw, monkeypatch) -> None:
    img = ref.photo("rgba", *hw)
    # tables, as large images have them: small ones compute their chain in the kernel
    monkeypatch.setattr(exec_gather, "INLINE_TABLE_MAX_PIXELS", -1)

    def run(variants: bool) -> np.ndarray:
        monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: variants)
        x = mp.gpuimage(img)
        for name, *args in ops:
            getattr(x, name)(*args)
        return np.asarray(x)

    ref.assert_matches(run(True), run(False), what="uint32 RGBA LUT path vs generic gather")


# 9x48: windows away from the borders take the unchecked loads (sim tiles are 4 wide)
@pytest.mark.parametrize("hw", [(1, 1), (5, 9), (19, 11), (9, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind,packed", [("grey", False), ("rgb", False), ("rgba", False),
                                         ("rgba", True)])
@pytest.mark.parametrize("sigma", [0.5, 1.3])
def test_2d_stencil_equals_generic_passes(kind: str, packed: bool, hw: tuple[int, int],
                                          sigma: float) -> None:
    """The one-pass tile kernel (bytes or staged words) equals the generic two-pass kernels."""
    img = ref.photo(kind, *hw)
    src3 = runtime.as_3d(runtime.from_host(img, 0))
    h, w, c = src3.shape
    nc = min(c, 3)
    taps = REGISTRY["gaussian"].fn(sigma)
    taps_d = runtime.upload_small(taps, 0)
    is_int = img.dtype.kind in "ui"
    full = 255.0 if is_int else 1.0
    tiled = runtime.empty(img.shape, img.dtype, 0)
    # uint8 RGBA takes the staged-words kernel unless told otherwise
    packs = exec_variants.stencil_2d_packs(src3, runtime.as_3d(tiled), len(taps) // 2)
    assert packs == (kind == "rgba")
    exec_stencil.run_stencil_2d(src3, runtime.as_3d(tiled), taps_d, len(taps) // 2, is_int, full,
                                0, packed=packed)
    generic = runtime.empty(img.shape, img.dtype, 0)
    rows, cols = exec_stencil._stencil_fns()
    tmp = runtime.empty((h, w, nc), np.float64, 0)
    runtime.launch_2d(rows, h, w * nc, 0, src3, tmp, taps_d, nc)
    runtime.launch_2d(cols, h, w * c, 0, src3, tmp, runtime.as_3d(generic), taps_d, nc,
                      is_int, full)
    np.testing.assert_array_equal(runtime.to_host(tiled), runtime.to_host(generic))
    ref.assert_matches(runtime.to_host(tiled), ref.gaussian(img, sigma), ulp_uint8=1,
                       atol=ref.SKIMAGE_ATOL, what=f"2-D tiled gaussian({sigma}) {kind}")


@pytest.mark.parametrize("kind,packed", [("grey8", False), ("rgba", False), ("rgba", True)])
@pytest.mark.parametrize("pre,post", [(True, False), (False, True), (True, True)])
def test_2d_stencil_tables_equal_generic_passes(kind: str, packed: bool, pre: bool,
                                                post: bool) -> None:
    """Prologue/epilogue tables: the one-pass tile kernel vs the generic passes, bit for bit."""
    img = (ref.photo("grey", 9, 40) * 255).astype(np.uint8) if kind == "grey8" \
        else ref.photo(kind, 9, 40)
    src3 = runtime.as_3d(runtime.from_host(img, 0))
    h, w, c = src3.shape
    nc = min(c, 3)
    rng = np.random.default_rng(1)
    lut = rng.integers(0, 256, (2, c, 256), dtype=np.uint8)
    lut_d = runtime.upload_small(lut, 0)
    taps = REGISTRY["gaussian"].fn(0.9)
    taps_d = runtime.upload_small(taps, 0)
    tiled = runtime.empty(img.shape, img.dtype, 0)
    exec_stencil.run_stencil_2d(src3, runtime.as_3d(tiled), taps_d, len(taps) // 2, True, 255.0, 0,
                                lut, pre, post, packed)
    generic = runtime.empty(img.shape, img.dtype, 0)
    rows, cols = exec_stencil._stencil_fns(pre, post)
    tmp = runtime.empty((h, w, nc), np.float64, 0)
    runtime.launch_2d(rows, h, w * nc, 0, src3, tmp, taps_d, nc, lut_d)
    runtime.launch_2d(cols, h, w * c, 0, src3, tmp, runtime.as_3d(generic), taps_d, nc,
                      True, 255.0, lut_d)
    np.testing.assert_array_equal(runtime.to_host(tiled), runtime.to_host(generic))
    plain = runtime.empty(img.shape, img.dtype, 0)
    exec_stencil.run_stencil_2d(src3, runtime.as_3d(plain), taps_d, len(taps) // 2, True, 255.0, 0)
    assert not np.array_equal(runtime.to_host(tiled), runtime.to_host(plain))
