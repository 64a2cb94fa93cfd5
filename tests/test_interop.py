"""Interop: NumPy/DLPack everywhere; CUDA Array Interface and DLPack with CuPy/PyTorch on GPUs."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp


def test_dlpack_on_the_host_backends() -> None:
    if mp.backend() in ("cuda", "hip"):
        pytest.skip("host DLPack applies to the cpu and cudasim backends")
    a0 = np.arange(12.0).reshape(3, 4)
    x = mp.gpuarray(a0)
    x2 = x * 2
    assert x2.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(x2), a0 * 2)
    assert not hasattr(x, "__cuda_array_interface__")


def test_objects_exposing_dlpack_are_accepted() -> None:
    class Wrapped:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.a, dtype=dtype)

    a0 = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(mp.gpuarray(Wrapped(a0))), a0)


@pytest.mark.gpu
def test_cupy_reads_without_copy_and_gpuarray_takes_cupy() -> None:
    cupy = pytest.importorskip("cupy")
    a0 = np.random.default_rng(0).random((5, 7))
    x = mp.gpuarray(a0)
    c = cupy.asarray(x)  # __cuda_array_interface__: zero copy
    assert c.data.ptr == x.__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(cupy.asnumpy(c), a0)
    y = mp.gpuarray(c * 3)  # device-to-device, no host round trip
    np.testing.assert_allclose(np.asarray(y), a0 * 3)


@pytest.mark.gpu
def test_torch_dlpack_both_ways() -> None:
    torch = pytest.importorskip("torch")
    a0 = np.random.default_rng(1).random((4, 6))
    x = mp.gpuarray(a0)
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.shape == (4, 6)
    np.testing.assert_array_equal(t.cpu().numpy(), a0)
    img = mp.gpuimage((torch.rand(8, 9, 3, device="cuda") * 255).to(torch.uint8))
    assert img.shape == (8, 9, 3) and img.dtype == np.uint8
