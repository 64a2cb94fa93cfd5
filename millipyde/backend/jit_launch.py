"""The compiled part of a replay launch (``cuda_jit``): Numba host code that calls the CUDA
driver by address, so one call from Python costs a Numba dispatch (~0.2 us) instead of a ctypes
call with ctypes objects, and the writes into the parameter block cost nothing in Python.

Not imported by the package: ``cuda_jit`` writes this file's text to the kernel cache directory
(``MILLIPYDE_CACHE_DIR``, the generated-code loader) and imports it from there at the first
replay launch, so its ``cache=True`` compile lands in that directory and a second process loads
it from disk.

A launch's ``state`` is one uint64 array (``cuda_jit.State`` builds it): the words below, then
the ``kernelParams`` pointer array, then the parameter block it points into. The driver's
functions are called through their addresses (``_current``, ``_call4``: every argument is a
pointer or a 64-bit integer, so one signature serves ``cuLaunchKernelEx`` and
``cuMemcpyDtoDAsync_v2``); a ctypes function object would be compiled in as a constant
address, which ``cache=True`` cannot keep across processes.
"""

from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

GET = 0  # cuCtxGetCurrent's address
CALL = 1  # cuLaunchKernelEx's (a launch) or cuMemcpyDtoDAsync_v2's (a copy) address
CONTEXT = 2  # the context the launch was bound in
SRC = 3  # the word of the block holding the source's data address
DST = 4  # the output's
TABLE = 5  # the table's (0: the launch has none)
FUNCTION = 6  # the kernel's CUfunction
POINTERS = 7  # the word where the kernelParams array starts
CONFIG = 8  # CUlaunchConfig: 7 words (grid, block, shared as uint32; stream; attrs; count)
STREAM = CONFIG + 4  # its hStream
HEAD = CONFIG + 7  # words before the pointer array


@intrinsic
def _current(typingctx, fn):
    """The thread's current context through ``cuCtxGetCurrent`` at address ``fn`` (an
    out-parameter on the stack: no state shared between threads), 0 where it fails."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.IntType(32), [i64.as_pointer()])
        slot = builder.alloca(i64)
        builder.store(i64(0), slot)
        rc = builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [slot])
        ok = builder.icmp_signed("==", rc, ir.IntType(32)(0))
        return builder.select(ok, builder.load(slot), i64(0))

    return sig, codegen


@intrinsic
def _call4(typingctx, fn, a, b, c, d):
    """``fn(a, b, c, d)`` for a driver function at address ``fn`` taking four pointer-sized
    arguments and returning a CUresult."""
    u64 = types.uint64
    sig = types.int32(u64, u64, u64, u64, u64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.IntType(32), [i64] * 4)
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), list(args[1:]))

    return sig, codegen


@njit(cache=True, nogil=True)
def current_is(state):
    """Whether the launch's context is the calling thread's current one."""
    return _current(state[GET]) == state[CONTEXT]


@njit(cache=True, nogil=True)
def launch(state, src, dst, table, stream):
    """Write the source's, the output's (and a nonzero table's) addresses and the stream, and
    queue the launch; the CUresult. The caller holds the launch's lock (the block is shared)
    and has packed the scalars."""
    state[state[SRC]] = src
    state[state[DST]] = dst
    if table != 0:
        state[state[TABLE]] = table
    state[STREAM] = stream
    base = state.ctypes.data
    return _call4(state[CALL], base + 8 * CONFIG, state[FUNCTION],
                  base + 8 * state[POINTERS], 0)


@njit(cache=True, nogil=True)
def copy(state, dst, src, nbytes, stream):
    """``cuMemcpyDtoDAsync_v2(dst, src, nbytes, stream)``; the CUresult."""
    return _call4(state[CALL], dst, src, nbytes, stream)


@njit(cache=True, nogil=True)
def launch_loop(state, n):
    """Queue the launch as bound ``n`` times (no write): the driver's own host cost per
    launch, with no Python between launches (``bench/probes/launch_floor.py``)."""
    base = state.ctypes.data
    rc = 0
    for _ in range(n):
        rc |= _call4(state[CALL], base + 8 * CONFIG, state[FUNCTION],
                     base + 8 * state[POINTERS], 0)
    return rc
