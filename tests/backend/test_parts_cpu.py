"""``CpuBackend._run_cpu``: a large launch of a kernel that runs in parts, while the part
threads are busy with another launch, runs its parts in the calling thread instead of waiting
for them; every part runs once either way."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

from millipyde.backend import cpu
from millipyde.backend.cpu import CpuBackend


def _parts(out: np.ndarray, ran: list, part_: int, parts_: int) -> None:
    out[part_] += 1
    ran.append((part_, threading.get_ident()))


class _Kernel:
    """Stands in for a generated kernel: ``split_kernel`` reads its ``py_func``."""

    py_func = staticmethod(_parts)

    def __call__(self, *args: object) -> None:
        _parts(*args)


def test_parts_run_in_the_caller_while_the_part_threads_are_busy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    backend = CpuBackend()
    busy, release = threading.Event(), threading.Event()
    pool = backend._parts_pool(2)
    held = pool.submit(lambda: (busy.set(), release.wait(10)))
    assert busy.wait(10), "the part thread never started"
    out, ran = np.zeros(2, np.int64), []
    launch = threading.Thread(target=backend._run_cpu,
                              args=(_Kernel(), (out, ran), cpu.PARALLEL_MIN_ITEMS))
    launch.start()
    launch.join(10)
    release.set()
    held.result(10)
    assert not launch.is_alive(), "the launch waited for the busy part thread"
    assert out.tolist() == [1, 1], "a part ran more or less than once"
    assert {t for _, t in ran} == {launch.ident}, "a part ran outside the calling thread"

    # with the part thread free, each part still runs exactly once
    out[:] = 0
    backend._run_cpu(_Kernel(), (out, []), cpu.PARALLEL_MIN_ITEMS)
    assert out.tolist() == [1, 1], "a part ran more or less than once"
