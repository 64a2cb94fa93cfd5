"""The simulator's block runner of tests/simulator_poll.py: blocks that wait in syncthreads
still meet there, an exception in one simulated thread still stops the launch and names the
thread, and the runner's pooled threads run the launches after it whole; a block that never
waits in syncthreads runs on one thread, every one of its simulated threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import millipyde as mp

pytestmark = [pytest.mark.cudasim_ok,
              pytest.mark.skipif(mp.backend() != "cudasim", reason="the CUDA simulator's runner")]

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
from numba import int64  # noqa: E402

# (kernels at module level: the simulator swaps the ``cuda`` of the kernel's globals)


@cuda.jit
def _reverse(a):
    tile = cuda.shared.array(8, dtype=int64)
    i = cuda.threadIdx.x
    tile[i] = a[cuda.blockIdx.x * 8 + i]
    cuda.syncthreads()  # every thread's store before any thread's load
    a[cuda.blockIdx.x * 8 + i] = tile[7 - i]


@cuda.jit
def _out_of_bounds(a):
    a[cuda.threadIdx.x + 1] = 1  # the last thread writes past the end


@cuda.jit(device=True)
def _wait():
    cuda.syncthreads()


@cuda.jit
def _waits_in_a_device_function(a):
    a[cuda.threadIdx.x] = 1
    _wait()


_ran_on: list[tuple[int, int]] = []  # (simulated thread, OS thread) of each call below


@cuda.jit
def _first_thread_fails(a):
    i = cuda.threadIdx.x
    _ran_on.append((i, threading.get_ident()))
    a[i + 4 * (i == 0)] = i  # thread 0 writes past the end


def test_the_yielding_runner_is_installed() -> None:
    import simulator_poll
    from numba.cuda.simulator import kernel

    assert simulator_poll.install() and kernel.BlockManager.run is simulator_poll.run


def test_threads_meet_at_syncthreads() -> None:
    d = cuda.to_device(np.arange(16, dtype=np.int64))
    _reverse[2, 8](d)
    assert d.copy_to_host().tolist() == [7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8]


def test_an_error_in_one_thread_stops_the_launch() -> None:
    with pytest.raises(IndexError):
        _out_of_bounds[1, 4](cuda.to_device(np.zeros(4, np.int64)))


def test_an_error_names_its_thread_and_the_next_launches_run_whole() -> None:
    # (numba-cuda's message; the runner's threads are taken again by the launches after it)
    with pytest.raises(IndexError, match=r"^tid=\[3, 0, 0\] ctaid=\[0, 0, 0\]: "):
        _out_of_bounds[1, 4](cuda.to_device(np.zeros(4, np.int64)))
    for _ in range(3):
        test_threads_meet_at_syncthreads()


def test_the_serial_path_is_taken_only_without_syncthreads() -> None:
    import simulator_poll

    assert not simulator_poll.may_sync(_out_of_bounds)
    assert not simulator_poll.may_sync(_first_thread_fails)
    assert simulator_poll.may_sync(_reverse)
    assert simulator_poll.may_sync(_waits_in_a_device_function)  # through its device function
    d = cuda.to_device(np.zeros(8, np.int64))
    _waits_in_a_device_function[1, 8](d)  # (the pooled path: the threads meet)
    assert d.copy_to_host().tolist() == [1] * 8


def test_a_block_without_syncthreads_runs_every_thread_on_one_thread() -> None:
    # thread 0 fails first; threads 1-3 still run (as they do in threads of their own), in
    # order, on one OS thread, and the launch raises thread 0's error
    _ran_on.clear()
    d = cuda.to_device(np.zeros(4, np.int64))
    with pytest.raises(IndexError, match=r"^tid=\[0, 0, 0\] ctaid=\[0, 0, 0\]: "):
        _first_thread_fails[1, 4](d)
    assert [i for i, _ in _ran_on] == [0, 1, 2, 3]
    assert len({t for _, t in _ran_on}) == 1
    assert d.copy_to_host().tolist() == [0, 1, 2, 3]
