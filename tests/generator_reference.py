"""What a Generator's outputs and batches are compared with in the batch tests."""

from __future__ import annotations

import numpy as np

import millipyde as mp
from millipyde.training.batches import BatchSpec


def eager_outputs(imgs, ops, outputs, seed):
    """Output k of a Generator computed eagerly, image by image (no batch of any kind)."""
    out = []
    for k in range(outputs):
        x = mp.gpuimage(np.asarray(imgs[k % len(imgs)]))
        for j, op in enumerate(ops):
            op.apply(x, seed, k, j)
        out.append(np.asarray(x))
    return out


def batch_spec(size, **kw):
    """The checked ``BatchSpec`` of ``Generator.batches(size, **kw)``."""
    args = dict(shape=None, layout="NCHW", dtype="float32", mean=None, std=None, channels=3,
                drop_last=False, with_indices=False)
    args.update(kw)
    return BatchSpec.check(size, *args.values())


def on_real_gpu() -> bool:
    """Whether kernels run on a real GPU (not the cpu backend, not CUDASIM)."""
    return mp.backend() in ("cuda", "hip")


def assert_device_same(got, want, what: str = "", levels: int = 1, eps: int = 4) -> None:
    """``got`` equals ``want`` bit for bit on the cpu backend and under CUDASIM.

    On a real GPU the same kernel text fused differently (a Generator's output against the
    chain applied image by image) may contract multiply-adds differently (README): integer
    results within ``levels`` (1: a rounding tie lands one level off; more where an op
    quantises inside, as snow's uint8 HLS round trip does), float results within ``eps``
    epsilon of the data's magnitude (an absolute bound: near zero, after cancellation, ulps
    of the result say nothing; a chain of long sums raised to a power needs more than 4)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape)
    if not on_real_gpu():
        assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), what
    elif want.dtype.kind == "f":
        scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=0,
                                   atol=eps * np.finfo(want.dtype).eps * scale, err_msg=what)
    else:
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert diff.max(initial=0) <= levels, (what, int(diff.max()))
