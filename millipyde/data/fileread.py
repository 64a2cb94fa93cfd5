"""Runs of files read by native calls that hold no GIL (Linux).

A folder's sample read by Python (:func:`millipyde.io.read_regular`) is five system calls
(open, fstat, read, a read that finds the end, close), and each hands the GIL over and takes it
back: 33-49 us of CPU per sample on the host, and the read-ahead's threads take the GIL from the
decode call at every hand-over (bench/RESULTS.md, "the read path without Python per file" and
"decoding in a worker process": tar shards, a few large reads, 15.3k img/s through the decode
worker on one H200, the folder 10.8k). Here a reader thread reads a whole run of files in two
calls of Numba functions compiled with ``nogil=True``: the first calls libc's ``open``
(non-blocking, so a FIFO never blocks) and ``statx`` on the descriptor (the checks of
``io.open_regular_fd``: a regular file, not empty, at most ``max_bytes``) for every file of the
run; Python allocates one buffer for the run's bytes; the second ``pread``s each file into it and
``close``s it. Python then hands out each file's bytes as a NumPy view of that buffer (no copy).

A file this path does not read whole -- it cannot be opened, is not a regular file, is empty,
is over ``max_bytes``, or shrank while read -- is left to the caller, which reads it the
usual way (``Source.read``): that raises the same error, naming the file, as without this path,
and a file that became readable meanwhile is read. Bad files are rare, so this second opening
costs little, and the errors stay written once, in ``io.py``.

Members of tar shards (``shards.Shards``) are read alike by :func:`read_spans`: the shards are
indexed and opened once, so a run of members is one native call of ``pread`` at their offsets
into one buffer that Python allocated (their sizes are known from the index).

Used by ``readahead.ReadAhead`` for sources that offer ``read_run`` (``sources.FileSource``:
folders, path lists, COCO images; ``shards.Shards``; not a subclass with a ``read`` of its
own) while
:data:`ENABLED`; elsewhere (not Linux, no ``statx`` in
libc, the function fails its first check) :func:`available` is False and the readers read as
before.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit, types

#: read runs of files without the GIL where :func:`available`; False: Python reads each file
#: (the path before this module). Read when a read-ahead starts (the bench compares the two
#: in one process; a decode worker process is sent the value its training process has)
ENABLED = True
#: samples a reader claims at once on this path (``readahead.RUN`` otherwise): one call and one
#: GIL hand-over per run, so a longer run hands the GIL over less per sample
RUN = 32

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_lock = threading.Lock()
_state: dict[str, Any] = {"ok": False, "why_not": None, "spans": None}


# pointer arguments are passed as 64-bit integers (addresses of NumPy buffers); the symbols
# are resolved by name in the process (libc) when the function is compiled or loaded from the
# cache, so the compiled code holds no address and can be cached
_c_open = types.ExternalFunction("open", types.int32(types.intp, types.int32, types.int32))
_c_close = types.ExternalFunction("close", types.int32(types.int32))
_c_pread = types.ExternalFunction(
    "pread", types.int64(types.int32, types.intp, types.int64, types.int64))
_c_statx = types.ExternalFunction(
    "statx", types.int32(types.int32, types.intp, types.int32, types.uint32, types.intp))


# Neither function allocates: Numba's allocations go through PyMem_RawMalloc, and with
# tracemalloc started or stopped while a thread allocates without the GIL, CPython 3.11 can
# crash (a segmentation fault seen in tests/test_data_generator.py's memory test). Python
# allocates the arrays, holding the GIL, between the two calls.

@njit(nogil=True, cache=True)
def _open_files(names, starts, which, flags, max_bytes, meta, scratch):  # pragma: no cover
    # meta rows: 0 descriptor (-1 none), 1 size, 2 offset in the run's buffer, 3 status:
    # 0 opened and checked; 1 open failed; 2 statx failed; 3 not a regular file, empty or
    # over max_bytes; 4 a short read (it shrank). Returns the run's bytes.
    n = len(which)
    stx = scratch[:256]  # struct statx: the same layout on every architecture
    empty = scratch[256:]  # "" with AT_EMPTY_PATH: the descriptor itself
    empty[0] = 0
    base = names.ctypes.data
    total = 0
    for k in range(n):
        meta[0, k] = -1
        meta[1, k] = 0
        meta[2, k] = total
        start = starts[which[k]]
        if start < 0:  # a path Python must open (a NUL in it)
            meta[3, k] = 1
            continue
        fd = _c_open(base + start, flags, 0)
        if fd < 0:
            meta[3, k] = 1
            continue
        # AT_EMPTY_PATH 0x1000; STATX_TYPE | STATX_SIZE
        if _c_statx(fd, empty.ctypes.data, 0x1000, 0x201, stx.ctypes.data) != 0 or \
                (stx.view(np.uint32)[0] & 0x201) != 0x201:
            meta[3, k] = 2
            _c_close(fd)
            continue
        mode = stx.view(np.uint16)[14]  # stx_mode at byte 28
        size = np.int64(stx.view(np.uint64)[5])  # stx_size at byte 40
        if (mode & 0o170000) != 0o100000 or size <= 0 or size > max_bytes:
            meta[3, k] = 3
            _c_close(fd)
            continue
        meta[0, k] = fd
        meta[1, k] = size
        meta[3, k] = 0
        total += size
    return total


@njit(nogil=True, cache=True)
def _read_files(meta, out):  # pragma: no cover - jitted
    # every file _open_files opened read into out at its offset, then closed
    base = out.ctypes.data
    for k in range(meta.shape[1]):
        fd = meta[0, k]
        if fd < 0:
            continue
        size, pos = meta[1, k], meta[2, k]
        got = 0
        while got < size:
            r = _c_pread(fd, base + pos + got, size - got, got)
            if r <= 0:
                break
            got += r
        _c_close(fd)
        meta[0, k] = -1
        if got != size:
            meta[3, k] = 4


@njit(nogil=True, cache=True)
def _read_spans(fds, offsets, sizes, out, status):  # pragma: no cover - jitted
    # span k (bytes offsets[k] .. + sizes[k] of descriptor fds[k]) read into out, one after
    # the other; status[k] 0: read whole, 4: a short read (the file ends early)
    base = out.ctypes.data
    pos = 0
    for k in range(len(fds)):
        size = sizes[k]
        got = 0
        while got < size:
            r = _c_pread(fds[k], base + pos + got, size - got, offsets[k] + got)
            if r <= 0:
                break
            got += r
        status[k] = 0 if got == size else 4
        pos += size


def _read(table: PathTable, indices: Sequence[int], max_bytes: int) -> tuple[Any, Any]:
    """The run's buffer and its meta rows (:func:`_open_files`)."""
    which = np.asarray(indices, dtype=np.int64)
    if which.size and (which.min() < 0 or which.max() >= len(table.starts)):
        # the native code does not check bounds: an index past the listing is Python's error
        raise IndexError(f"sample index out of range 0..{len(table.starts) - 1}")
    meta = np.empty((4, len(which)), np.int64)
    scratch = np.empty(264, np.uint8)
    total = _open_files(table.names, table.starts, which, _FLAGS, int(max_bytes), meta,
                        scratch)
    try:
        out = np.empty(total, np.uint8)
    except BaseException:
        for fd in meta[0].tolist():  # nothing left open
            if fd >= 0:
                os.close(fd)
        raise
    _read_files(meta, out)
    return out, meta


def available() -> bool:
    """Whether runs of files can be read without the GIL here: Linux, libc's ``statx``, and
    the compiled function reads a known file correctly (checked once per process).

    The first call compiles the function (or loads it from Numba's cache); :func:`why_not`
    says why it is not available.
    """
    with _lock:
        if _state["ok"]:
            return True
        if _state["why_not"] is not None:
            return False
        if not sys.platform.startswith("linux") or not hasattr(os, "O_NONBLOCK"):
            _state["why_not"] = f"not Linux ({sys.platform})"
            return False
        try:
            me = os.path.abspath(__file__)
            buf, meta = _read(PathTable([me]), [0], 1 << 30)
            with open(me, "rb") as fh:
                want = fh.read()
            if meta[3, 0] != 0 or buf.tobytes() != want:
                raise OSError(f"status {int(meta[3, 0])} reading {me!r}")
        except Exception as err:  # no statx in this libc, a sandbox refusing it, ...
            _state["why_not"] = f"{type(err).__name__}: {err}"
            return False
        _state["ok"] = True
        return True


def why_not() -> str | None:
    """Why :func:`available` is False (None where it is True or was not asked yet)."""
    return _state["why_not"]


class PathTable:
    """Paths as one array of NUL-terminated bytes and each path's start in it: what the
    native reader opens, built once per source listing.

    Parameters
    ----------
    paths : sequence of str or os.PathLike
        The files; a path holding a NUL byte gets start -1 (left to Python, which says why).
    """

    def __init__(self, paths: Sequence[Any]) -> None:
        encoded = [os.fsencode(p) for p in paths]
        lengths = np.fromiter((len(e) + 1 for e in encoded), dtype=np.int64,
                              count=len(encoded))
        starts = np.zeros(len(encoded), np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        for k, e in enumerate(encoded):
            if b"\0" in e:
                starts[k] = -1
        self.names = np.frombuffer(b"\0".join(encoded) + b"\0", dtype=np.uint8)
        self.starts = starts

    @property
    def nbytes(self) -> int:
        """Bytes the table holds."""
        return self.names.nbytes + self.starts.nbytes


def read_run(table: PathTable, indices: Sequence[int], max_bytes: int) -> list[Any]:
    """Files ``indices`` of ``table`` read by two native calls that hold no GIL.

    Parameters
    ----------
    table : PathTable
    indices : sequence of int
        Which paths, in this order.
    max_bytes : int
        Largest file read (bytes).

    Returns
    -------
    list
        Per index the file's bytes as a read-only uint8 NumPy view of the run's buffer, or
        None where the file was not read whole (the caller reads it the usual way, which
        raises the usual error).

    Raises
    ------
    RuntimeError
        :func:`available` is False.
    """
    if not _state["ok"] and not available():
        raise RuntimeError(f"files cannot be read without the GIL here: {why_not()}")
    buf, meta = _read(table, indices, max_bytes)
    buf.flags.writeable = False  # samples are bytes to the decoders: nothing writes them
    return [buf[off:off + size] if st == 0 else None
            for size, off, st in zip(meta[1].tolist(), meta[2].tolist(), meta[3].tolist(),
                                     strict=True)]


def read_spans(fds: Sequence[int], offsets: Sequence[int], sizes: Sequence[int], *,
               check: bool = True) -> list[Any]:
    """Spans of open files (members of tar shards) read by one native call that holds no
    GIL: ``pread`` of ``sizes[k]`` bytes at ``offsets[k]`` of descriptor ``fds[k]``.

    Parameters
    ----------
    fds : sequence of int
        Open descriptors (the caller keeps them open for the call).
    offsets, sizes : sequence of int
        Where each span starts and its bytes.
    check : bool
        Check the arguments' lengths and signs (False: the caller made them, as int32,
        int64 and int64 arrays of one length, from an index that holds no negative).

    Returns
    -------
    list
        Per span its bytes as a read-only uint8 NumPy view of one buffer, or None where it
        was not read whole (the file ends early, or the read fails): the caller reads it the
        usual way, which raises the usual error. Every span None where the compiled reads
        failed their check (made once, at the first call).

    Raises
    ------
    RuntimeError
        :func:`available` is False.
    ValueError
        ``fds``, ``offsets`` and ``sizes`` differ in length, or an offset or size is negative
        (``check``).
    """
    if not _state["ok"] and not available():
        raise RuntimeError(f"files cannot be read without the GIL here: {why_not()}")
    if _state["spans"] is None:
        _check_spans()
    if not _state["spans"]:  # (each span read the usual way by the caller)
        n = len(fds)
        if check and not (n == len(offsets) == len(sizes)):
            raise ValueError(f"fds, offsets and sizes differ in length ({n}, "
                             f"{len(offsets)}, {len(sizes)})")
        return [None] * n
    return _spans(fds, offsets, sizes, check)


def _check_spans() -> None:
    """Check once per process, at the first :func:`read_spans` (not in :func:`available`: a
    folder's reader does not compile it), that the compiled positioned reads read a known
    file's bytes; where not, :func:`read_spans` reads nothing and its caller reads each span
    the usual way."""
    with _lock:
        if _state["spans"] is not None:
            return
        try:
            me = os.path.abspath(__file__)
            with open(me, "rb") as fh:
                want = fh.read()
            fd = os.open(me, os.O_RDONLY)
            try:
                got = _spans([fd, fd], [7, 0], [len(want) - 7, 3])
            finally:
                os.close(fd)
            _state["spans"] = [None if g is None else g.tobytes() for g in got] == \
                [want[7:], want[:3]]
        except Exception:  # (the compiled function fails here: spans read the usual way)
            _state["spans"] = False


def _spans(fds: Sequence[int], offsets: Sequence[int], sizes: Sequence[int],
           check: bool = True) -> list[Any]:
    """:func:`read_spans` without the check of :func:`available`."""
    fd = np.asarray(fds, dtype=np.int32)
    off = np.asarray(offsets, dtype=np.int64)
    size = np.asarray(sizes, dtype=np.int64)
    if check:
        if not (len(fd) == len(off) == len(size)):
            raise ValueError(f"fds, offsets and sizes differ in length ({len(fd)}, "
                             f"{len(off)}, {len(size)})")
        if size.size and (size.min() < 0 or off.min() < 0):
            raise ValueError("offsets and sizes must be >= 0")
    if not len(fd):
        return []
    ends = np.cumsum(size)
    out = np.empty(int(ends[-1]), np.uint8)
    status = np.empty(len(fd), np.int64)
    _read_spans(fd, off, size, out, status)
    out.flags.writeable = False  # samples are bytes to the decoders: nothing writes them
    ends_l = ends.tolist()
    starts = [0, *ends_l[:-1]]
    if not status.any():
        return [out[a:b] for a, b in zip(starts, ends_l, strict=True)]
    return [out[a:b] if st == 0 else None
            for a, b, st in zip(starts, ends_l, status.tolist(), strict=True)]
