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

A block whose kernel never waits in ``syncthreads`` (no function it can reach names it: see
:func:`may_sync`) runs on one pooled thread, its simulated threads one after another in the
order above, that thread taking each one's indices in turn: the same calls in the same order,
without two thread switches per simulated thread (~90% of a small kernel's simulated time on
the 2-core dev machine: bench/RESULTS.md, "CI: what its time goes to, and the cuts",
2026-11-28). As before, every thread of the block runs even where one raises, and the launch
then raises the first one's exception, naming its thread. A kernel that the scan missed and
that waits in ``syncthreads`` on that path fails loudly, saying so.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import threading
import time
from typing import Any

import numpy as np
from numba.cuda.simulator.kernel import BlockThread, Dim3, FakeCUDAKernel

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
        self.serial = False  # running a whole block's threads one after another

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
        self.serial = False
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
        if self.serial:
            raise RuntimeError(
                "simulator_poll: a kernel waited in syncthreads on the serial path (its threads "
                "run one after another); may_sync found no syncthreads in the functions it "
                "reaches: extend may_sync")
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


#: the simulator's calls that wait for the other threads of the block (``cg.this_grid().sync``
#: too); a function naming any of them may wait
SYNC_NAMES = frozenset({"syncthreads", "syncthreads_count", "syncthreads_and",
                        "syncthreads_or", "this_grid", "sync", "cg"})
_may_sync: dict[Any, bool] = {}


def _codes(code: Any) -> Any:
    yield code
    for c in code.co_consts:
        if inspect.iscode(c):
            yield from _codes(c)


def may_sync(fn: Any, _seen: set | None = None) -> bool:
    """Whether ``fn`` (a kernel's Python function) or a function it can reach (through its
    globals, the attributes of modules among them, its closure: device functions, helpers)
    names a call that waits for the block's other threads."""
    if isinstance(fn, FakeCUDAKernel):
        fn = fn.fn
    if not inspect.isfunction(fn) or _library(fn):
        return False
    known = _may_sync.get(fn)
    if known is not None:
        return known
    seen = set() if _seen is None else _seen
    if fn in seen:
        return False
    seen.add(fn)
    names = {n for c in _codes(fn.__code__) for n in c.co_names}
    found = bool(names & SYNC_NAMES)
    if not found:
        g = fn.__globals__
        reached = [g[n] for n in names if n in g]
        reached += [getattr(m, n) for m in list(reached) if inspect.ismodule(m)
                    for n in names if hasattr(m, n)]
        reached += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        found = any(may_sync(r, seen) for r in reached if not inspect.ismodule(r))
    if _seen is None or found:
        _may_sync[fn] = found
    return found


def _library(fn: Any) -> bool:
    """``fn`` is NumPy's, Numba's or the standard library's (none waits in ``syncthreads``)."""
    top = (getattr(fn, "__module__", None) or "").partition(".")[0]
    return top in ("numpy", "numba", "scipy") or top in sys.stdlib_module_names


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


def _serial_block(f: Any, args: tuple, points: list, dim: tuple) -> None:
    """Run ``f(*args)`` as each thread of the block in turn, in this one pooled thread; every
    thread runs, then the first exception is raised as that thread's."""
    t = threading.current_thread()
    t.serial = True
    failed = None
    try:
        for p in points:
            t.threadIdx = Dim3(*p)
            t.thread_id = p[0] + dim[0] * (p[1] + dim[1] * p[2])
            try:
                f(*args)
            except Exception as e:
                if failed is None:
                    failed = (e, p)
    finally:
        t.serial = False
    if failed is not None:
        t.threadIdx = Dim3(*failed[1])  # (PooledThread._call names this thread)
        raise failed[0]


def run(self: object, grid_point: tuple, *args: object) -> None:
    """numba-cuda's ``BlockManager.run`` on pooled threads, yielding the GIL after each pass
    of its poll; a block that never waits in ``syncthreads`` on one thread."""
    points = list(np.ndindex(*self._block_dim))
    if not may_sync(self._f):
        t = _threads(1)[0]
        t.assign(_serial_block, (self._f, args, points, tuple(self._block_dim)), self,
                 grid_point, points[0])
        t._paused.wait()
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])
        return
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
