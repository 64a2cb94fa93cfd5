"""The CUDA Array Interface dict of a gpuarray: built once per value, equal to numba-cuda's,
rebuilt whenever the array's value changes (no GPU: numba-cuda's device arrays over made-up
addresses, which its property reads without a context; and the cpu backend with a stand-in
interface, to follow the array's rebinds)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE

pytestmark = pytest.mark.skipif(mp.backend() != "cpu",
                                reason="numba-cuda's arrays without a GPU; the cpu backend")


def _device_array(shape, dtype, strides=None, address=0x7F00_0000_1000, stream=0):
    from numba.cuda.cudadrv import devicearray, driver

    dtype = np.dtype(dtype)
    if strides is None:
        strides = tuple(np.empty(shape, dtype).strides)
    nbytes = max(int(np.prod(shape)), 1) * dtype.itemsize * 4
    mem = driver.MemoryPointer(None, driver.binding.CUdeviceptr(address), size=nbytes)
    return devicearray.DeviceNDArray(shape=shape, strides=strides, dtype=dtype, gpu_data=mem,
                                     stream=stream)


class _Stream:
    """A stand-in for a numba-cuda stream: what its ``__cuda_array_interface__`` reads."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __int__(self) -> int:
        return self.handle


def _cuda_interface():
    from millipyde.backend.cuda import CudaBackend

    return CudaBackend.__new__(CudaBackend).interface  # (reads no device)


@pytest.mark.parametrize(("shape", "dtype", "strides"), [
    ((512, 512, 3), np.uint8, None), ((7, 5), np.float64, None), ((4,), np.float32, None),
    ((3, 4, 4), np.uint8, (32, 8, 2)),  # a strided view's layout
    ((2, 3), np.int16, (2, 4)),  # Fortran order
    ((1, 6, 1), np.float32, (999, 4, 77)),  # 1-sized axes: contiguous whatever their strides
])
def test_the_built_dict_equals_numba_cudas(shape, dtype, strides) -> None:
    interface = _cuda_interface()
    for address, stream in ((0x7F00_0000_1000, 0), (0x7F00_0020_0000, _Stream(0x55AA)),
                            (0x7F00_0040_0100, 0)):
        a = _device_array(shape, dtype, strides, address, stream)
        got = interface(a)  # the first of a layout: numba-cuda's own; then the template's
        assert got == a.__cuda_array_interface__
        assert got["data"] == (address, False)
    assert interface(a) is not interface(a)  # a dict per array: the gpuarray keeps it


def test_pool_members_get_numba_cudas_dict() -> None:
    from millipyde.backend.pool import LAYOUTS

    stamp = LAYOUTS.member_stamp(768, np.dtype(np.uint8), (16, 16, 3), 0x7F00_1000_0000,
                                 None, None)
    members = [stamp(m) for m in range(4)]
    interface = _cuda_interface()
    faces = [interface(m) for m in members]
    assert faces == [m.__cuda_array_interface__ for m in members]
    assert [f["data"][0] for f in faces] == [0x7F00_1000_0000 + 768 * i for i in range(4)]


def test_a_gpuarray_returns_numba_cudas_dict_kept(monkeypatch) -> None:
    a = _device_array((9, 11, 3), np.uint8)
    x = mp.gpuimage.from_buffer(a, 0)
    monkeypatch.setattr(ACTIVE, "caps", dataclasses.replace(ACTIVE.caps, external_memory=True))
    monkeypatch.setattr(ACTIVE, "interface", _cuda_interface())
    face = x.__cuda_array_interface__
    assert face == a.__cuda_array_interface__
    assert x.__cuda_array_interface__ is face


class _Counted:
    """A stand-in interface of the cpu backend's host buffers (their address and layout),
    counting the dicts it builds."""

    def __init__(self) -> None:
        self.built = 0

    def __call__(self, buf: np.ndarray) -> dict:
        self.built += 1
        face = buf.__array_interface__
        return {"shape": face["shape"], "strides": face["strides"], "data": face["data"],
                "typestr": face["typestr"], "stream": None, "version": 3}


@pytest.fixture
def counted(monkeypatch) -> _Counted:
    built = _Counted()
    monkeypatch.setattr(ACTIVE, "caps", dataclasses.replace(ACTIVE.caps, external_memory=True))
    monkeypatch.setattr(ACTIVE, "interface", built)
    return built


def _image(seed: int = 0, shape=(6, 8, 3)) -> mp.gpuimage:
    return mp.gpuimage(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


def _describes(x: mp.gpuarray, face: dict) -> bool:
    """Whether ``face`` is the dict of ``x``'s present buffer."""
    buf = x._node.buffer
    return (buf is not None and face["data"][0] == buf.__array_interface__["data"][0]
            and face["shape"] == buf.shape and face["typestr"] == buf.dtype.str)


def test_built_once_per_value(counted) -> None:
    x = _image()
    face = x.__cuda_array_interface__
    assert x.__cuda_array_interface__ is face and counted.built == 1
    assert _describes(x, face)


def test_pending_work_runs_first_and_each_new_value_gets_its_own(counted) -> None:
    x = _image(1)
    before = x.__cuda_array_interface__
    x.fliplr()  # recorded, pending
    assert x._node.buffer is None
    face = x.__cuda_array_interface__
    assert face is not before and _describes(x, face) and counted.built == 2
    x.rgb2grey()  # dtype and shape change
    grey = x.__cuda_array_interface__
    assert grey["typestr"] == np.dtype(np.float64).str and grey["shape"] == (6, 8)
    assert _describes(x, grey)
    x.transpose()
    assert x.__cuda_array_interface__["shape"] == (8, 6)
    assert x.__cuda_array_interface__ is x.__cuda_array_interface__


def test_rebuilt_after_out_and_pipelines_and_operations(counted) -> None:
    a = mp.gpuarray(np.arange(12.0).reshape(3, 4))
    first = a.__cuda_array_interface__
    np.multiply(a, 2.0, out=a)  # the array rebound to a new leaf
    assert a.__cuda_array_interface__ is not first and _describes(a, a.__cuda_array_interface__)
    xs = [_image(s) for s in range(3)]
    faces = [x.__cuda_array_interface__ for x in xs]
    mp.Pipeline(xs, [mp.Operation("fliplr")]).run()  # each output written back to its input
    for x, f in zip(xs, faces, strict=True):
        assert x.__cuda_array_interface__ is not f and _describes(x, x.__cuda_array_interface__)
    y = xs[0]
    kept = y.__cuda_array_interface__
    mp.Operation(lambda im: np.asarray(im)[::-1].copy()).apply(y, 0, 0, 0)  # result bound
    assert y.__cuda_array_interface__ is not kept and _describes(y, y.__cuda_array_interface__)


def test_clones_and_generator_outputs_have_their_own(counted) -> None:
    x = _image(4)
    face = x.__cuda_array_interface__
    c = x.clone()
    assert c.__cuda_array_interface__ is not face and _describes(c, c.__cuda_array_interface__)
    assert x.__cuda_array_interface__ is face
    with mp.Generator([_image(5), _image(6)], [mp.Operation("fliplr")], outputs=6,
                      seed=1) as g:
        outs = list(g)
    faces = [o.__cuda_array_interface__ for o in outs]
    assert all(_describes(o, f) for o, f in zip(outs, faces, strict=True))
    assert len({f["data"][0] for f in faces}) == len(outs)
    assert [o.__cuda_array_interface__ for o in outs] == faces


def test_still_absent_on_host_backends() -> None:
    x = _image(7)
    assert not hasattr(x, "__cuda_array_interface__")
    assert x._face is None
