"""``gpuarray.__dlpack__``'s own capsules on a GPU (``backend/dlpack.py``): PyTorch and CuPy
read them without a copy, the memory outlives the image, the consumer's stream waits for
work still queued, and Generator outputs go across; the kept CUDA Array Interface dict is
numba-cuda's.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 -m pytest -q tests/test_interop_dlpack_gpu.py
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import millipyde as mp

pytestmark = pytest.mark.gpu


def _host(seed: int, shape=(64, 80, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_torch_reads_the_capsule_without_a_copy() -> None:
    torch = pytest.importorskip("torch")
    x = mp.gpuimage(_host(0))
    x.fliplr()
    t = torch.from_dlpack(x)  # (torch asks with max_version and its stream)
    assert t.is_cuda and t.shape == x.shape and t.dtype == torch.uint8
    assert t.data_ptr() == x.__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(t.cpu().numpy(), np.asarray(x))
    legacy = torch.utils.dlpack.from_dlpack(x.__dlpack__())  # a DLPack 0.8 capsule
    assert legacy.data_ptr() == t.data_ptr()
    g = mp.gpuarray(np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(torch.from_dlpack(g).cpu().numpy(), np.asarray(g))
    s = mp.gpuarray(np.float32(2.5))
    assert torch.from_dlpack(s).shape == () and float(torch.from_dlpack(s)) == 2.5


def _reuse_the_pool(seed: int) -> None:
    """Collect what was dropped, then compute 32 images in the memory the pool hands out."""
    gc.collect()
    others = [mp.gpuimage(_host(seed + i)) for i in range(32)]
    for o in others:
        o.invert()
        np.asarray(o)


def test_the_memory_outlives_the_image() -> None:
    torch = pytest.importorskip("torch")
    want = _host(1)
    x = mp.gpuimage(want)
    t = torch.from_dlpack(x)
    x.fliplr()  # the image moves on to another buffer: the tensor keeps the first
    np.asarray(x)
    del x
    _reuse_the_pool(100)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), want)
    del t
    gc.collect()


def test_the_consumers_stream_waits_for_queued_work() -> None:
    torch = pytest.importorskip("torch")
    h = _host(2, (2048, 2048, 3))
    for _ in range(3):
        x = mp.gpuimage(h)
        x.gaussian(4)  # queued by the export on this thread's stream, not waited for
        side = torch.cuda.Stream()  # a stream that runs beside the default one
        with torch.cuda.stream(side):
            t = torch.from_dlpack(x)
            got = t.clone()  # read on the side stream at once
        side.synchronize()
        np.testing.assert_array_equal(got.cpu().numpy(), np.asarray(x))


def test_a_copy_asked_for() -> None:
    torch = pytest.importorskip("torch")
    x = mp.gpuimage(_host(3))
    t = torch.utils.dlpack.from_dlpack(x.__dlpack__(copy=True))
    assert t.data_ptr() != x.__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(t.cpu().numpy(), np.asarray(x))
    host = np.from_dlpack(_OnHost(x))
    np.testing.assert_array_equal(host, np.asarray(x))


class _OnHost:
    def __init__(self, x) -> None:
        self.x = x

    def __dlpack__(self, **kw):
        return self.x.__dlpack__(dl_device=(1, 0))

    def __dlpack_device__(self):
        return (1, 0)


def test_generator_outputs_go_to_torch() -> None:
    torch = pytest.importorskip("torch")
    inputs = [mp.gpuimage(_host(10 + i)) for i in range(3)]
    with mp.Generator(inputs, [mp.Operation("fliplr", probability=0.5)], outputs=40,
                      seed=5) as g:
        pairs = [(torch.from_dlpack(x), x) for x in g]
    for t, x in pairs:
        np.testing.assert_array_equal(t.cpu().numpy(), np.asarray(x))


def test_cupy_reads_the_capsule() -> None:
    cupy = pytest.importorskip("cupy")
    x = mp.gpuimage(_host(4))
    c = cupy.from_dlpack(x)
    assert c.data.ptr == x.__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(cupy.asnumpy(c), np.asarray(x))


def test_the_kept_interface_is_numba_cudas() -> None:
    x = mp.gpuimage(_host(5))
    x.fliplr()
    face = x.__cuda_array_interface__
    assert face == x._node.buffer.__cuda_array_interface__
    assert x.__cuda_array_interface__ is face
    x.invert()
    again = x.__cuda_array_interface__
    assert again is not face and again == x._node.buffer.__cuda_array_interface__
    inputs = [mp.gpuimage(_host(20 + i)) for i in range(3)]
    with mp.Generator(inputs, [mp.Operation("fliplr", probability=0.5)], outputs=40,
                      seed=6) as g:
        outs = list(g)
    for o in outs:
        assert o.__cuda_array_interface__ == o._node.buffer.__cuda_array_interface__


def test_pipeline_members_go_to_torch_and_outlive_their_batch() -> None:
    """A Pipeline chunk's outputs, held as members of its batch buffer and unread: torch
    reads each through a capsule (and the interface) without a copy; a member's tensor keeps
    the batch's memory after every image and the batch are gone."""
    torch = pytest.importorskip("torch")
    hosts = [_host(200 + i) for i in range(8)]
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, [mp.Operation("fliplr")], device=0).run()
    members = [x.__dict__["_member"] for x in imgs]  # (bound to members, unread)
    at = [m.batch.buffer.__cuda_array_interface__["data"][0]
          + m.index * m.batch.buffer.strides[0] for m in members]  # (its batch buffer's row)
    del members
    t0 = torch.from_dlpack(imgs[0])
    t1 = torch.as_tensor(imgs[1], device="cuda")
    assert t0.data_ptr() == at[0] and t1.data_ptr() == at[1]
    assert imgs[1].__cuda_array_interface__["data"][0] == at[1]
    legacy = torch.utils.dlpack.from_dlpack(imgs[2].__dlpack__(max_version=None))
    want = [np.fliplr(h) for h in hosts]
    np.testing.assert_array_equal(legacy.cpu().numpy(), want[2])
    del imgs, legacy, t1
    _reuse_the_pool(300)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t0.cpu().numpy(), want[0])
