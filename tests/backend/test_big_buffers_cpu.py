"""``cpu.BigBuffers``: a large buffer is handed out again only once nothing refers to it (nor
to any view of it), and the pool keeps at most its bytes."""

from __future__ import annotations

import numpy as np

from millipyde.backend import cpu
from millipyde.backend.cpu import BigBuffers, CpuBackend

MB = 1 << 20


def test_a_buffer_in_use_is_not_handed_out_again() -> None:
    pool = BigBuffers(8 * MB)
    a = pool.take(MB)
    view = a.view(np.float32).reshape(512, 512)
    del a
    b = pool.take(MB)
    assert not np.shares_memory(b, view)  # a view alone keeps its buffer in use
    base = id(view.base)  # (its id: a name for it would keep it in use)
    del view
    c = pool.take(MB)
    assert id(c) == base  # nothing refers to it: handed out again
    assert (pool.made, pool.reused) == (2, 1)
    assert not np.shares_memory(b, c)


def test_free_buffers_of_another_size_make_room_within_keep() -> None:
    pool = BigBuffers(3 * MB)
    held = [pool.take(MB) for _ in range(3)]
    big = pool.take(2 * MB)  # all three in use: allocated, not kept
    assert [x.nbytes for x in pool._bufs] == [MB] * 3
    del held[1:], big
    pool.take(2 * MB)  # two free ones dropped for it
    assert sorted(x.nbytes for x in pool._bufs) == [MB, 2 * MB]
    assert pool._bufs[0] is held[0]


def test_cpu_empty_takes_large_buffers_from_the_pool(monkeypatch) -> None:
    monkeypatch.setattr(cpu, "BIG_BYTES", MB)
    be = CpuBackend()
    small = be.empty((100,), np.float32, 0)
    assert small.base is None  # below BIG_BYTES: NumPy's own
    x = be.empty((512, 512), np.float64, 0)
    assert x.shape == (512, 512) and x.dtype == np.float64 and x.flags.c_contiguous
    first = id(x.base)
    del x
    y = be.empty((2, 256, 512), np.float64, 0)
    assert id(y.base) == first and y.shape == (2, 256, 512)
