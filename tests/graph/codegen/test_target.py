"""The scalar helpers every generated kernel shares compute what NumPy computes.

``_rint_clip`` rounds with the 2**52 trick and ``_b2f`` builds a float64 from its bit pattern on
GPUs; both must equal the plain NumPy operations for every input they can meet.
"""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.graph.codegen import target
from millipyde.graph.codegen.loader import load


@pytest.fixture(scope="module")
def rint_clip():
    return load(target.HEADER["cpu"] + target.RINT_CLIP, "cpu")._rint_clip


def _values() -> np.ndarray:
    k = np.arange(-300, 70000, dtype=np.float64)
    big = np.array([2.0**51, 2.0**52, 2.0**53, 2.0**63, 2.0**64])
    near_big = np.concatenate([big - 0.5, big - 1.0, big + 1.0, big, np.nextafter(big, 0)])
    rng = np.random.default_rng(3)
    return np.concatenate([
        k, k + 0.5, k - 0.5, k + 0.25, np.nextafter(k + 0.5, np.inf),
        np.nextafter(k + 0.5, -np.inf), near_big, rng.uniform(-10, 300, 20000),
        rng.uniform(0, 2.0**53, 2000), [np.inf, -np.inf, -0.0],
    ])


# the maxima of signed types (int8..int64, as float64) clip below at -full - 1, others at 0
SIGNED_FULLS = (127.0, 32767.0, 2.0**31 - 1, 2.0**63)


@pytest.mark.parametrize("full", [1.0, 255.0, 65535.0, 2.0**32 - 1, 2.0**64, *SIGNED_FULLS])
def test_rint_clip_is_numpy_rint_then_clip(rint_clip, full: float) -> None:
    v = _values()
    v = np.concatenate([v, -v, -full - np.array([0.5, 1.0, 1.5, 2.0])])
    want = np.clip(np.rint(v), -full - 1.0 if full in SIGNED_FULLS else 0.0, full)
    got = np.array([rint_clip(x, full) for x in v])
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"full={full}: v={v[bad[:5]]} gave {got[bad[:5]]}, not {want[bad[:5]]}"


def test_rint_clip_maps_nan_to_zero(rint_clip) -> None:
    # defined on every backend (a NaN cast to an integer type is not)
    assert rint_clip(np.nan, 255.0) == 0.0
    assert rint_clip(-np.nan, 2.0**64) == 0.0


def test_b2f_bit_pattern_is_the_integer() -> None:
    # the GPU _b2f, with the constants its source is generated from: the high word, b in the
    # low word, minus 2**52
    assert f"{target.B2F_HIGH_WORD:#x}" in target._B2F_CUDA and repr(target.TWO52) in \
        target._B2F_CUDA
    rng = np.random.default_rng(5)
    b = np.concatenate([np.arange(1 << 16), rng.integers(0, 1 << 32, 100000),
                        [(1 << 32) - 1, (1 << 31), (1 << 31) - 1]]).astype(np.uint64)
    bits = (np.uint64(target.B2F_HIGH_WORD) << np.uint64(32)) | b
    assert np.array_equal(bits.view(np.float64) - target.TWO52, b.astype(np.float64))


def test_b2f_on_the_cpu_is_the_conversion() -> None:
    mod = load(target.HEADER["cpu"], "cpu")
    assert [mod._b2f(np.uint8(v)) for v in (0, 1, 128, 255)] == [0.0, 1.0, 128.0, 255.0]
