"""The CUDA simulator's block runner, polling without holding the GIL between its polls.

numba-cuda's ``BlockManager.run`` (numba-cuda 0.30.4, ``numba/cuda/simulator/kernel.py``)
starts one Python thread per thread of the block, then loops over them until all have ended,
unblocking them when all wait in ``syncthreads``. That loop never waits: each time it holds the
GIL it keeps it for the whole switch interval (5 ms), while the simulated threads it waits for
cannot run. :func:`run` below is the same loop, with the same checks in the same order, that
hands the GIL on (``time.sleep(0)``) after each pass over the threads. The simulated kernels run
the same code in the same threads; only the poller gives up its time slices. On the 2-core
dev machine it took 23% off the CPU seconds of simulator tests (bench/RESULTS.md, "CI time
(2026-11-28)").

The runner also keeps its threads: numba-cuda starts a new ``BlockThread`` (an OS thread) for
every simulated thread of every block and waits for each to start, about half of a simulated
launch's CPU time and most of its wall time. Here each simulated thread runs on a
:class:`PooledThread`, a ``BlockThread`` that waits for its next kernel call once one returns,
given the same block and thread indices, a fresh ``syncthreads`` state and the same
``tid=... ctaid=...`` wrapping of an exception as ``BlockThread.run``; the simulator's kernel
API finds them as before, through ``threading.current_thread()``. A thread is handed out again
only once its call has returned, so the other threads of a block that an exception aborted
end first, as they would in threads of their own.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import threading
import time
from typing import Any

import numpy as np
from numba.cuda.simulator.kernel import BlockThread, Dim3

# sha1 of the source of numba-cuda 0.30.4's BlockManager.run: another version may run blocks
# otherwise, and is left as it is
POLLING_RUN_SHA1 = "e26b08dfe071fd85b8908e37b7b895064869cdf6"
# and of its BlockThread, whose run, fields and syncthreads PooledThread keeps
BLOCK_THREAD_SHA1 = "4c1378f13e63ef61e9e936138c8add3e53a7ad29"


class PooledThread(BlockThread):
    """A simulated GPU thread that runs one kernel call after another (see the module doc)."""

    def __init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)  # (BlockThread's fields: in assign)
        self._go = threading.Event()
        self._paused = threading.Event()  # set when its call has returned or waits in syncthreads
        self.done = True
        self.syncthreads_event = threading.Event()
        self.syncthreads_blocked = False
        self.exception: tuple | None = None
        self.abort = False
        self.debug = False

    def assign(self, f: Any, args: tuple, manager: Any, block_idx: tuple,
               thread_idx: tuple) -> None:
        """Run ``f(*args)`` as thread ``thread_idx`` of block ``block_idx`` of ``manager``."""
        self._job = (f, args)
        self._manager = manager
        self.blockIdx = Dim3(*block_idx)
        self.threadIdx = Dim3(*thread_idx)
        dim = Dim3(*manager._block_dim)
        self.thread_id = self.threadIdx.x + dim.x * (self.threadIdx.y + dim.y * self.threadIdx.z)
        self.exception = None
        self.abort = False
        self.syncthreads_blocked = False
        self.syncthreads_event.clear()
        self.debug = manager._debug
        self.done = False
        self._paused.clear()
        self._go.set()

    def run(self) -> None:
        while True:
            self._go.wait()
            self._go.clear()
            try:
                self._call()
            finally:  # (a BaseException ends the thread here, out of the pool)
                self._job = self._manager = None
                self.done = True
                self._paused.set()
            with _idle_lock:
                _idle.append(self)

    def syncthreads(self) -> None:
        """``BlockThread.syncthreads``, telling the runner that this thread now waits."""
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        self.syncthreads_blocked = True
        self._paused.set()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def _call(self) -> None:
        f, args = self._job
        try:
            if self.debug:  # as BlockThread's debug wrapper, without keeping the setting
                old = np.seterr(divide="raise")
                try:
                    f(*args)
                finally:
                    np.seterr(**old)
            else:
                f(*args)
        except Exception as e:  # BlockThread.run's message
            where = f"tid={list(self.threadIdx)} ctaid={list(self.blockIdx)}"
            msg = where if str(e) == "" else f"{where}: {e}"
            self.exception = (type(e)(msg), sys.exc_info()[2])


#: pooled threads whose last kernel call has returned, ready for another
_idle: list[PooledThread] = []
_idle_lock = threading.Lock()


def _threads(n: int) -> list[PooledThread]:
    """``n`` idle pooled threads, started anew where the pool has too few."""
    with _idle_lock:
        got = _idle[len(_idle) - min(n, len(_idle)):]
        del _idle[len(_idle) - len(got):]
    while len(got) < n:
        t = PooledThread()
        t.start()
        got.append(t)
    return got


def run(self: object, grid_point: tuple, *args: object) -> None:
    """numba-cuda's ``BlockManager.run`` on pooled threads, yielding the GIL after each pass
    of its poll."""
    points = list(np.ndindex(*self._block_dim))
    threads = set()
    livethreads = set()
    blockedthreads = set()
    for t, block_point in zip(_threads(len(points)), points, strict=True):
        t.assign(self._f, args, self, grid_point, block_point)
        # the next thread starts once this one has returned or waits in syncthreads: the
        # threads of a block run in the order numba-cuda's started them in, as they did there
        # (each started thread held the GIL for its whole call), so a float sum of atomics adds
        # in one order from run to run
        t._paused.wait()
        threads.add(t)
        livethreads.add(t)

    while livethreads:
        for t in livethreads:
            if t.syncthreads_blocked:
                blockedthreads.add(t)
            elif t.exception:
                # abort all other simulator threads on an exception (as numba-cuda)
                for t_other in threads:
                    t_other.abort = True
                    t_other.syncthreads_blocked = False
                    t_other.syncthreads_event.set()
                raise t.exception[0].with_traceback(t.exception[1])
        if livethreads == blockedthreads:
            for t in blockedthreads:
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
            blockedthreads = set()
        livethreads = set([t for t in livethreads if not t.done])
        time.sleep(0)  # the simulated threads run while the poller waits
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def install() -> bool:
    """Replace the simulator's ``BlockManager.run`` by :func:`run` when it and its
    ``BlockThread`` are numba-cuda 0.30.4's (the version the test extra pins); True when
    replaced."""
    from numba.cuda.simulator import kernel

    original = kernel.BlockManager.run
    if original is run:
        return True
    for code, sha1 in ((original, POLLING_RUN_SHA1), (kernel.BlockThread, BLOCK_THREAD_SHA1)):
        if hashlib.sha1(inspect.getsource(code).encode()).hexdigest() != sha1:
            return False
    kernel.BlockManager.run = run
    return True
