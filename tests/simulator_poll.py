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
"""

from __future__ import annotations

import hashlib
import inspect
import time

import numpy as np

# sha1 of the source of numba-cuda 0.30.4's BlockManager.run: another version may run blocks
# otherwise, and is left as it is
POLLING_RUN_SHA1 = "e26b08dfe071fd85b8908e37b7b895064869cdf6"


def run(self: object, grid_point: tuple, *args: object) -> None:
    """numba-cuda's ``BlockManager.run``, yielding the GIL after each pass of its poll."""
    from numba.cuda.simulator.kernel import BlockThread

    threads = set()
    livethreads = set()
    blockedthreads = set()
    for block_point in np.ndindex(*self._block_dim):

        def target():
            self._f(*args)

        t = BlockThread(target, self, grid_point, block_point, self._debug)
        t.start()
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
        livethreads = set([t for t in livethreads if t.is_alive()])
        time.sleep(0)  # the one change: the simulated threads run while the poller waits
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def install() -> bool:
    """Replace the simulator's ``BlockManager.run`` by :func:`run` when it is the polling loop
    of numba-cuda 0.30.4 (the version the test extra pins); True when replaced."""
    from numba.cuda.simulator import kernel

    original = kernel.BlockManager.run
    if original is run:
        return True
    source = inspect.getsource(original)
    if hashlib.sha1(source.encode()).hexdigest() != POLLING_RUN_SHA1:
        return False
    kernel.BlockManager.run = run
    return True
