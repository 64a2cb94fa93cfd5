"""The batched warp-clip bounds (``batch_group.clip_bounds``): the per-output path's values."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import gather_sig
from millipyde.graph.codegen.batch_bounds import bounds_source
from millipyde.graph.exec import batch_group
from millipyde.kernels.clip import warp_clip_bounds

cudasim_ok = pytest.mark.cudasim_ok


def _host(img: np.ndarray) -> tuple[float, float]:
    """``gather.warp_clip``'s arithmetic on the host (NaN wins, as ``np.min``)."""
    if img.size == 0:
        return -np.inf, np.inf
    lo = float(np.min(img))
    return warp_clip_bounds(lo, float(np.max(img)) if lo < 0 else lo)


def _device(stack: np.ndarray, sidx: list[int]) -> np.ndarray:
    dev = 0
    n = len(sidx)
    p = np.full((n, gather_sig.OPS_OFF + 3), 7.0)
    src = runtime.from_host(stack, dev)
    s = runtime.from_host(np.asarray(sidx, dtype=np.int64), dev)
    pd = runtime.from_host(p, dev)
    batch_group.clip_bounds(src, s, pd, n, dev)
    runtime.synchronize(dev)
    return runtime.to_host(pd)


@cudasim_ok
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64, np.int16])
def test_bounds_equal_the_per_output_reductions(dtype) -> None:
    rng = np.random.default_rng(1)
    small = mp.backend() == "cudasim"
    shape = (5, 4, 3) if small else (37, 29, 3)
    imgs = [rng.integers(0, 200, shape), rng.integers(30, 200, shape),  # min 0, min > 0
            -rng.integers(1, 90, shape),  # all negative (signed types)
            rng.integers(-50, 90, shape), np.full(shape, 17)]
    stack = np.stack(imgs).astype(dtype)
    if dtype in (np.float32, np.float64):
        stack[3, 1, 2, 0] = np.nan  # NaN wins: no bound
    sidx = [4, 0, 1, 2, 3, 1]
    got = _device(stack, sidx)
    for b, s in enumerate(sidx):
        want = _host(stack[s])
        lo, hi = gather_sig.CLIP_OFF, gather_sig.CLIP_HI_OFF
        assert (got[b, lo], got[b, hi]) == want, (dtype, s)
        # the rest of the row is left alone
        assert (np.delete(got[b], [lo, hi]) == 7.0).all()


@cudasim_ok
def test_bounds_of_an_empty_source_bind_nothing() -> None:
    got = _device(np.zeros((2, 0, 3, 3), dtype=np.uint8), [1, 0])
    assert got[:, gather_sig.CLIP_OFF].tolist() == [-np.inf] * 2
    assert got[:, gather_sig.CLIP_HI_OFF].tolist() == [np.inf] * 2


def test_bounds_source_compiles_the_scalar_function_once() -> None:
    # the kernel math lives in kernels.clip: the generated text carries its body, not a copy
    import inspect

    body = inspect.getsource(warp_clip_bounds).split("\n", 1)[1]
    for target in ("cpu", "cuda"):
        text = bounds_source(target)
        assert text.count(body) == 1 and "_bounds = _dev(warp_clip_bounds)" in text
    with pytest.raises(ValueError, match="threads"):
        bounds_source("cuda", threads=100)


@cudasim_ok
@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_split_bounds_of_large_members(dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Members large enough to spread over several blocks (``batch_bounds``' split form):
    the host's bounds, as with one block per member."""
    if runtime.codegen_target == "cpu":
        pytest.skip("the split form is the GPUs'")
    from millipyde.graph.codegen import batch_bounds

    rng = np.random.default_rng(2)
    shape = (24, 24, 3) if mp.backend() == "cudasim" else (100, 90, 3)
    n = int(np.prod(shape))
    assert batch_bounds.parts_of(n, batch_group._split_threads(), runtime.simulated) > 1
    imgs = [rng.integers(1, 200, shape), rng.integers(0, 200, shape),
            rng.integers(30, 200, shape)]
    stack = np.stack(imgs).astype(dtype)
    stack[2].reshape(-1)[n - 5] = 3  # the minimum in the last block's share
    if dtype == np.float64:
        stack[1].reshape(-1)[n // 2] = np.nan
    sidx = [2, 0, 1, 2]
    calls = []
    fns = batch_group._split_fns
    monkeypatch.setattr(batch_group, "_split_fns", lambda: calls.append(1) or fns())
    got = _device(stack, sidx)
    assert calls, "the split bounds did not run"
    monkeypatch.setattr(batch_group, "SPLIT_BOUNDS", False)
    one = _device(stack, sidx)
    assert np.array_equal(got, one)
    for b, s in enumerate(sidx):
        lo, hi = gather_sig.CLIP_OFF, gather_sig.CLIP_HI_OFF
        assert (got[b, lo], got[b, hi]) == _host(stack[s]), (dtype, s)
    assert got[0, gather_sig.CLIP_OFF] == 3
