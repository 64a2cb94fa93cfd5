"""``CudaMemory.copy_addresses``: the batch of copies a streamed batch packs into its arena is
one driver call, its arguments marshalled as the driver's ``cuMemcpyBatchAsync`` reads them
(checked here against a stand-in that copies host memory; the GPU run checks the driver)."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np

from millipyde.backend import cuda_memory as cm

_PROTO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                          ctypes.c_void_p)


def _host(buffers: list[np.ndarray]) -> np.ndarray:
    return np.array([b.ctypes.data for b in buffers], dtype=np.uint64)


def test_one_batched_call_copies_every_buffer(monkeypatch) -> None:
    calls = []

    def fake(dsts, srcs, sizes, n, attrs, idxs, nattrs, stream):
        d = (ctypes.c_uint64 * n).from_address(dsts)
        s = (ctypes.c_uint64 * n).from_address(srcs)
        z = (ctypes.c_uint64 * n).from_address(sizes)
        for k in range(n):
            ctypes.memmove(d[k], s[k], z[k])
        a = cm._CopyAttributes.from_address(attrs)
        calls.append((n, a.srcAccessOrder, a.srcLocHint.type, a.dstLocHint.id,
                      ctypes.c_size_t.from_address(idxs).value, nattrs, stream))
        return 0

    fn = _PROTO(fake)
    monkeypatch.setattr(cm, "_BATCH", [(fn, False)])
    rng = np.random.default_rng(0)
    srcs = [rng.integers(0, 256, n, dtype=np.uint8) for n in (7, 300, 1, 64)]
    arena = np.zeros(sum(len(s) for s in srcs), np.uint8)
    offs = np.cumsum([0] + [len(s) for s in srcs[:-1]])
    me = SimpleNamespace(current_stream=lambda: SimpleNamespace(handle=7))
    cm.CudaMemory.copy_addresses(me, arena.ctypes.data + offs.astype(np.uint64), _host(srcs),
                                 np.array([len(s) for s in srcs], np.uint64), 3)
    assert calls == [(4, 1, 1, 3, 0, 1, 7)]  # one call: stream order, device 3's hints
    assert np.array_equal(arena, np.concatenate(srcs))


def test_refused_batch_falls_back_to_one_call_each(monkeypatch) -> None:
    each = []
    monkeypatch.setattr(cm, "_BATCH", [(_PROTO(lambda *a: 1), False)])  # refused

    def one(dst, src, n, stream):
        ctypes.memmove(dst, src, n)
        each.append(n)
        return 0

    monkeypatch.setattr(cm, "_MEMCPY", [one])
    srcs = [np.arange(5, dtype=np.uint8), np.arange(9, dtype=np.uint8)]
    arena = np.zeros(14, np.uint8)
    me = SimpleNamespace(current_stream=lambda: SimpleNamespace(handle=7))
    cm.CudaMemory.copy_addresses(me, np.array([arena.ctypes.data, arena.ctypes.data + 5],
                                              np.uint64), _host(srcs),
                                 np.array([5, 9], np.uint64), 0)
    assert each == [5, 9] and np.array_equal(arena, np.concatenate(srcs))
    assert cm._BATCH == [None]  # not tried again
