"""``backend/cuda_pack.py``: views stamped from a layout's prototype are numba-cuda's own
``reshape`` (no device needed: the arrays are only described, never read), and the base
``Backend.upload_pack`` hands back the packed arrays."""

from __future__ import annotations

import numpy as np
import pytest
from numba.cuda.cudadrv import devicearray, driver

from millipyde.backend.base import Backend
from millipyde.backend.cpu import CpuBackend
from millipyde.backend.cuda_pack import CudaPacks

if not hasattr(devicearray, "DeviceNDArray"):  # the CUDA simulator's module
    pytest.skip("numba-cuda's DeviceNDArray", allow_module_level=True)


def _array(shape: tuple[int, ...], dtype: np.dtype, ptr: int = 4096) -> object:
    ref = np.empty(shape, dtype)
    data = driver.MemoryPointer(None, driver.binding.CUdeviceptr(ptr), size=ref.nbytes)
    return devicearray.DeviceNDArray(shape=ref.shape, strides=ref.strides, dtype=ref.dtype,
                                     gpu_data=data, stream=0)


@pytest.mark.parametrize("shape, new, dtype", [
    ((256, 512, 512, 3), (256 * 512 * 512 * 3,), np.uint8),
    ((177, 17), (177 * 17,), np.float64),
    ((6, 512, 512, 3), (6, 512, 512 * 3), np.uint8),
    ((4, 5), (5, 4), np.int64),
])
def test_a_stamped_reshape_is_numbas(shape, new, dtype):
    backend = CudaPacks()
    for _ in range(2):  # the second from the cached prototype
        a = _array(shape, np.dtype(dtype))
        got, want = backend.reshape(a, new), a.reshape(*new)
        assert sorted(vars(got)) == sorted(vars(want))
        for name, value in vars(want).items():
            if name != "_dummy":
                assert vars(got)[name] == value or (name == "gpu_data" and
                                                    vars(got)[name] is a.gpu_data), name
        assert got._dummy.shape == want._dummy.shape
        assert got._dummy.strides == want._dummy.strides
        assert got.is_c_contiguous()
    assert backend.flat(a).shape == (a.size,) and backend.flat(backend.flat(a)).ndim == 1
    assert backend.reshape(a, tuple(a.shape)) is a


def test_a_flat_view_is_made_once_per_array():
    """A batch flattens its stack and each kernel output more than once: the 1-D view is kept
    on the array, over the same memory; another array gets its own."""
    backend = CudaPacks()
    a, b = _array((6, 8, 3), np.dtype(np.uint8)), _array((6, 8, 3), np.dtype(np.uint8), 8192)
    fa = backend.flat(a)
    assert backend.flat(a) is fa and fa.gpu_data is a.gpu_data and fa.shape == (144,)
    fb = backend.flat(b)
    assert fb is not fa and int(fb.gpu_data.device_pointer) == 8192
    assert backend.flat(fa) is fa


def test_stamped_words_are_numbas_view():
    """``words``: a 1-D uint8 array as uint64 words, stamped, equals numba-cuda's ``view``
    (every attribute), over the same memory, kept on the array; misaligned or ragged: None."""
    backend = CudaPacks()
    for ptr in (4096, 8192):  # the second from the cached prototype
        a = _array((6 * 8 * 8,), np.dtype(np.uint8), ptr)
        got, want = backend.words(a), a.view(np.uint64)
        assert sorted(vars(got)) == sorted(vars(want)) and got.gpu_data is a.gpu_data
        for name, value in vars(want).items():
            if name not in ("_dummy", "gpu_data"):
                assert vars(got)[name] == value, name
        assert got._dummy.shape == want._dummy.shape == (48,)
        assert got._dummy.strides == want._dummy.strides
        assert got.is_c_contiguous() and backend.words(a) is got
    assert backend.words(_array((44,), np.dtype(np.uint8))) is None
    assert backend.words(_array((48,), np.dtype(np.uint8), 4100)) is None


def test_what_does_not_fit_goes_to_numbas_reshape():
    backend = CudaPacks()
    a = _array((4, 6), np.dtype(np.float32))
    with pytest.raises(ValueError):
        backend.reshape(a, (5, 5))
    # every other column: not C-contiguous, numba-cuda refuses as it would
    strided = devicearray.DeviceNDArray(shape=(4, 3), strides=(24, 8), dtype=a.dtype,
                                        gpu_data=a.gpu_data, stream=0)
    with pytest.raises(NotImplementedError):
        backend.reshape(strided, (12,))
    host = np.arange(6)
    assert np.array_equal(backend.reshape(host, (2, 3)), host.reshape(2, 3))


def test_base_upload_pack_hands_back_the_parts():
    parts = [np.arange(5, dtype=np.int64), np.linspace(0, 1, 12).reshape(3, 4),
             np.zeros((0, 3)), np.arange(7, dtype=np.uint8)]
    host, layout, at = np.zeros(256, dtype=np.uint8), [], 0
    for a in parts:
        host[at:at + a.nbytes] = a.reshape(-1).view(np.uint8)
        layout.append((at, a.dtype, a.shape))
        at += -(-max(a.nbytes, 1) // 16) * 16
    views = Backend.upload_pack(CpuBackend(), host, layout, 0)
    host[:] = 0  # the views do not read the host array
    for a, v in zip(parts, views, strict=True):
        assert v.shape == a.shape and v.dtype == a.dtype and np.array_equal(v, a)


class _Tls:
    device = 0
    stream = None
    recording = None


class _Stream:
    handle = None


def test_a_batched_launch_passes_what_the_general_path_passes(monkeypatch):
    """``launch_batched`` flattens the arguments as the cached path's template does, and
    leaves to the general path what it does not know or what does not match its first
    launch's kinds."""
    from numba import typeof

    from millipyde.backend import cuda_pack, launcher, rawlaunch

    def kernel():  # stands for a compiled kernel (only its identity is used)
        return None

    args = (_array((6, 8, 8, 3), np.dtype(np.uint8)).reshape(6 * 8 * 8 * 3),
            _array((5,), np.dtype(np.int64), 8192), 5, 8, 8, 192, 8.0,
            _array((5 * 8 * 8 * 3,), np.dtype(np.uint8), 16384), 1.5)
    types = tuple(getattr(a, "_numba_type_", None) or typeof(a) for a in args)
    template = rawlaunch.build(1, types)
    sent = []
    monkeypatch.setattr(rawlaunch.Template, "launch_values",
                        lambda self, vals, grid, block, shared, stream:
                        sent.append((list(vals), grid, block, shared, stream)))
    backend = CudaPacks()
    backend._tls, backend._default_streams = _Tls(), {0: _Stream()}
    monkeypatch.setattr(cuda_pack, "_batched", {})
    assert not backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 0, args)  # not known
    monkeypatch.setitem(launcher._entries, (id(kernel), 0, launcher.kind_key(args)),
                        (lambda: kernel, (None, (), 49152, template)))
    monkeypatch.setattr(launcher, "ENABLED", True)
    monkeypatch.setattr(launcher, "DIRECT", True)
    assert backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 0, args)
    assert sent == [(template.values(args), (1, 2, 5), (32, 8, 1), 0, 0)]
    # dynamic shared memory up to what the general path launches it with (the stencil's)
    assert backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 0, args, 49152)
    assert sent[-1] == (template.values(args), (1, 2, 5), (32, 8, 1), 49152, 0)
    assert not backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 0, args, 49153)
    del sent[1:]
    # an array of another dtype, another device, a recording thread: the general path
    other = (args[0], _array((5,), np.dtype(np.int32)), *args[2:])
    assert not backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 0, other)
    assert not backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 1, args)
    backend._tls.recording = print
    assert not backend.launch_batched(kernel, (1, 2, 5), (32, 8, 1), 0, args)
    assert len(sent) == 1
