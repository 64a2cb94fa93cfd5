"""The compiled replay launch (``backend/cuda_jit.py``, ``jit_launch.py``) against a fake driver
library built with gcc: the block, configuration and stream it hands ``cuLaunchKernelEx`` are
the ones the ctypes path hands it (and ``Template.unpack`` packs), what it does not cover goes
through the general launch, and a failing launch raises ``CudaAPIError`` naming the CUresult."""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from numba.core import types

from millipyde.backend import cuda_jit, rawlaunch
from millipyde.backend.cuda_bound import RawBound2D, RawCopy

ARR3 = types.Array(types.uint8, 3, "C")

_FAKE = r"""
#include <stdint.h>
#include <string.h>
uint64_t ctx = 0xC7, fn = 0, cfg[7], block[64], copies[4];
int nslots = 0, rc = 0, launches = 0, plain = 0;
int cuCtxGetCurrent(uint64_t *out) { *out = ctx; return 0; }
int cuLaunchKernelEx(const uint64_t *c, uint64_t f, void **params, void **extra) {
    memcpy(cfg, c, 56); fn = f; launches++;
    for (int i = 0; i < nslots; i++) memcpy(&block[i], params[i], 8);
    return rc;
}
int cuLaunchKernel(uint64_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned shared, uint64_t stream, void **params,
                   void **extra) {
    uint32_t *c = (uint32_t *)cfg;
    c[0] = gx; c[1] = gy; c[2] = gz; c[3] = bx; c[4] = by; c[5] = bz; c[6] = shared;
    cfg[4] = stream; fn = f; launches++; plain++;
    for (int i = 0; i < nslots; i++) memcpy(&block[i], params[i], 8);
    return rc;
}
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, uint64_t stream) {
    copies[0] = d; copies[1] = s; copies[2] = n; copies[3] = stream; return rc;
}
"""


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("no gcc to build the fake driver")
    d = tmp_path_factory.mktemp("fakecuda")
    (d / "fake.c").write_text(_FAKE)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(d / "libfake.so"),
                    str(d / "fake.c")], check=True)
    lib = rawlaunch.typed(ctypes.CDLL(str(d / "libfake.so")))
    if cuda_jit.functions() is None:
        pytest.skip("no compiled host functions here")
    return lib


class _Fake:
    """Reads and sets the fake library's globals."""

    def __init__(self, lib) -> None:
        self.lib = lib

    @staticmethod
    def _type(name):
        return ctypes.c_uint64 if name in ("ctx", "fn") else ctypes.c_int

    def get(self, name) -> int:
        return self._type(name).in_dll(self.lib, name).value

    def set(self, name, value) -> None:
        self._type(name).in_dll(self.lib, name).value = value

    def words(self, name, n) -> list[int]:
        return list((ctypes.c_uint64 * n).in_dll(self.lib, name))


class _Backend:
    def __init__(self) -> None:
        self._tls = threading.local()
        self.stream = SimpleNamespace(handle=SimpleNamespace(value=0x77))

    def stream_on(self, device: int):
        return self.stream


def _arr(shape, ptr, strides=None) -> SimpleNamespace:
    ref = np.empty(shape, np.uint8)
    return SimpleNamespace(size=ref.size, dtype=ref.dtype, shape=ref.shape,
                           strides=ref.strides if strides is None else strides, ndim=ref.ndim,
                           gpu_data=SimpleNamespace(device_pointer=ptr))


@pytest.fixture
def bound(fake_lib, monkeypatch):
    monkeypatch.setattr(rawlaunch, "_libcuda", fake_lib)
    monkeypatch.setattr(cuda_jit, "AFTER", 0)
    fake = _Fake(fake_lib)
    fake.set("rc", 0)
    fake.set("ctx", 0xC7)
    template = rawlaunch.build(0x1234, (ARR3, ARR3, ARR3, types.float64, types.float32,
                                        types.int32))
    fake.set("nslots", len(template.codes))
    ptrs = iter(range(1 << 30, 1 << 31, 1 << 20))
    generic: list = []
    src, dst, table = _arr((4, 5, 3), 4096), _arr((4, 5, 3), 8192), _arr((2, 3, 256), 512)

    def make():
        return RawBound2D(_Backend(), lambda s, p, t=None: generic.append(p) or "generic",
                          template, lambda handle: _arr((4, 5, 3), next(ptrs)), 0, 0xC7,
                          (3, 2, 1), (32, 8, 1), (src, dst, table, 0.5, 1.0, 2), src, 3, 96)

    return SimpleNamespace(make=make, template=template, fake=fake, generic=generic,
                           table=table)


def _slots(fake, template) -> tuple:
    raw = struct.pack(f"<{len(template.codes)}Q", *fake.words("block", len(template.codes)))
    return template.layout.unpack(raw)


def test_the_compiled_launch_passes_what_the_ctypes_one_passes(bound, monkeypatch):
    b = bound.make()
    assert b.jit is not None
    src, table = _arr((4, 5, 3), 1 << 16), _arr((2, 3, 256), 1 << 12)
    calls = (([0.25, -3.5, 7], None), ([1e300, 1.5, -2], table), ([0.0, 0.1, 3], None))
    in_block = (bound.table, table, table)  # a call without a table leaves the last one
    got = []
    for (params, t), kept in zip(calls, in_block, strict=True):
        dst = b(src, params, t)
        got.append((_slots(bound.fake, bound.template), bound.fake.words("cfg", 7),
                    bound.fake.get("fn")))
        assert got[-1][0] == bound.template.unpack((src, dst, kept, *params))
    assert bound.fake.get("plain") == 0
    monkeypatch.setattr(cuda_jit, "ENABLED", False)
    c = bound.make()
    assert c.jit is None
    out = bound.template.slots()[1] + 4  # the output's address: a new one per call
    for (params, t), (slots, cfg, fn) in zip(calls, got, strict=True):
        c(src, params, t)
        now = _slots(bound.fake, bound.template)
        assert now[:out] + now[out + 1:] == slots[:out] + slots[out + 1:]
        assert bound.fake.words("cfg", 7)[:5] == cfg[:5] and bound.fake.get("fn") == fn
    conf = np.array(got[0][1], np.uint64)
    assert tuple(conf[:4].view(np.uint32)[:7]) == (3, 2, 1, 32, 8, 1, 96)
    assert conf[4] == 0x77 and got[0][2] == 0x1234 and bound.generic == []


def test_the_compiled_launch_falls_back_and_fails_as_the_ctypes_one(bound):
    b = bound.make()
    src = _arr((4, 5, 3), 1 << 16)
    bound.fake.set("ctx", 0xD8)  # another context current
    assert b(src, [1.0, 2.0, 3]) == "generic"
    bound.fake.set("ctx", 0xC7)
    assert b(_arr((4, 5, 3), 1 << 16, strides=(30, 6, 2)), [1.0, 2.0, 3]) == "generic"

    def oom(handle):
        raise MemoryError

    alloc, b.alloc = b.alloc, oom
    assert b(src, [1.0, 2.0, 3]) == "generic"
    b.alloc = alloc
    with pytest.raises(struct.error):  # struct's checks, as before
        b(src, [1.0, 2.0, 3.5])
    bound.fake.set("rc", 700)
    from numba.cuda.cudadrv.driver import CudaAPIError

    with pytest.raises(CudaAPIError, match="CUresult 700"):
        b(src, [1.0, 2.0, 3])
    assert len(bound.generic) == 3


def test_threads_launch_through_one_bound_launch(bound):
    b = bound.make()
    errors = []

    def work(k):
        try:
            for i in range(200):
                b(_arr((4, 5, 3), 1 << 16), [float(k), float(i), k])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and bound.generic == []


def test_the_compiled_copy(fake_lib, monkeypatch):
    monkeypatch.setattr(rawlaunch, "_libcuda", fake_lib)
    fake = _Fake(fake_lib)
    fake.set("rc", 0)
    fake.set("ctx", 0xC7)
    c = RawCopy(_Backend(), lambda handle: _arr((4, 5, 3), 1 << 30), 0, 0xC7,
                _arr((4, 5, 3), 4096))
    dst = c(_arr((4, 5, 3), 1 << 16))
    assert c.jit is not None  # (the compiled functions were loaded by the fixture)
    assert fake.words("copies", 4) == [1 << 30, 1 << 16, 60, 0x77]
    assert int(dst.gpu_data.device_pointer) == 1 << 30
    fake.set("ctx", 0xD8)
    assert c(_arr((4, 5, 3), 1 << 16)) is None
    fake.set("ctx", 0xC7)
    fake.set("rc", 1)
    from numba.cuda.cudadrv.driver import CudaAPIError

    with pytest.raises(CudaAPIError, match="CUresult 1"):
        c(_arr((4, 5, 3), 1 << 16))


def test_launch_state_lays_out_the_block_and_pointers(fake_lib):
    j, state, at = cuda_jit.launch_state(fake_lib, 0xC7, 0x99, (1, 2, 3, 4, 5, 6), 7, 20, 3,
                                         0, 8, None)
    base = state.ctypes.data
    assert at == 8 * (j.HEAD + 3) and state.size == j.HEAD + 3 + 3
    assert list(state[j.HEAD:j.HEAD + 3]) == [base + at + 8 * i for i in range(3)]
    assert tuple(state[j.CONFIG:j.CONFIG + 4].view(np.uint32)[:7]) == (1, 2, 3, 4, 5, 6, 7)
    assert state[j.TABLE] == 0 and state[j.SRC] == j.HEAD + 3 and state[j.DST] == j.HEAD + 4
    assert cuda_jit.launch_state(SimpleNamespace(), 0xC7, 0x99, (1,) * 6, 0, 8, 1, 0, 0,
                                 None) is None


def test_a_bound_launch_takes_the_compiled_call_after_some_calls(bound, monkeypatch):
    monkeypatch.setattr(cuda_jit, "AFTER", 3)
    b = bound.make()
    src = _arr((4, 5, 3), 1 << 16)
    for i in range(5):
        assert (b.jit is not None) == (i >= 3)
        dst = b(src, [float(i), 2.0, 3])
        assert _slots(bound.fake, bound.template) == bound.template.unpack(
            (src, dst, bound.table, float(i), 2.0, 3))


def _replays(host: np.ndarray, op, n: int, switch: bool) -> tuple[list[np.ndarray], set]:
    """``n`` replays of ``op`` (a new parameter each) on a resident ``host``; the outputs and
    whether each replay launch ran compiled."""
    import millipyde as mp
    from millipyde.graph.exec import replay

    replay.clear()
    cuda_jit.AFTER = 0 if switch else 10**9
    img = mp.gpuimage(host)
    img._materialize()
    source, outs, compiled = img._node, [], set()
    for i in range(n):
        img._bind(source)
        op(img, i)
        outs.append(np.asarray(img))
        for e in replay._cache.values():
            bound = getattr(e.fast, "bound", None)
            if bound is not None and hasattr(bound, "jit"):
                compiled.add(bound.jit is not None)
    return outs, compiled


@pytest.mark.gpu
@pytest.mark.parametrize("op", [lambda img, i: img.adjust_gamma(0.5 + 0.1 * i),
                                lambda img, i: img.brightness(0.01 * i)],
                         ids=["gamma", "brightness"])
def test_compiled_replays_give_the_images_of_the_ctypes_ones(op, monkeypatch):
    monkeypatch.setattr(cuda_jit, "AFTER", cuda_jit.AFTER)
    host = np.random.default_rng(5).integers(0, 256, (70, 90, 3), dtype=np.uint8)
    a, compiled_a = _replays(host, op, 8, True)
    b, compiled_b = _replays(host, op, 8, False)
    assert compiled_a == {True} and compiled_b == {False}
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.gpu
def test_compiled_bound_copies_give_the_source(monkeypatch):
    import millipyde as mp

    monkeypatch.setattr(cuda_jit, "AFTER", 0)
    host = np.random.default_rng(6).integers(0, 256, (33, 47, 3), dtype=np.uint8)
    img = mp.gpuimage(host)
    img.adjust_gamma(1.3)
    img._materialize()
    for _ in range(2):
        img.adjust_gamma(0.9)  # (a replay launch loads the compiled functions)
        img._materialize()
    ref = np.asarray(img)
    for _ in range(6):
        c = img.clone()
        c._materialize()
        np.testing.assert_array_equal(np.asarray(c), ref)
    from millipyde.graph.exec import replay

    # (this test's layout: copies that other tests in this process bound and no longer call
    # may still be on the ctypes path)
    copies = [e.fast.bound for e in replay._cache.values()
              if isinstance(getattr(e.fast, "bound", None), RawCopy)
              and e.fast.bound.shape == host.shape]
    assert cuda_jit.loaded() and copies and all(c.jit is not None for c in copies)
