"""Worker processes of millipyde: started, stopped, reaped, and their deaths told.

Shared by the decode worker (``data.process``) and the Pipeline's device workers
(``pipeline.processes``). A worker is a fresh interpreter (``python -c "from MODULE import
ENTRY; ENTRY(FD)"``): started with ``subprocess``, never forked, so a CUDA context of this
process is never copied and the user's script is not imported again as multiprocessing's
spawn would. One socket pair carries pickled messages both ways (its descriptor ``FD`` in the
worker); a worker whose parent goes away sees its end of the socket close and exits.

Buffers of host memory travel as anonymous ``memfd`` descriptors over the socket
(``SCM_RIGHTS``: :func:`host_arena`, :func:`send_fd`, :func:`receive_fd`), so nothing is left in
``/dev/shm`` whatever way either process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path

from . import config

#: seconds :func:`stop` waits for a worker to exit before it is killed
STOP_SECONDS = 20.0


def can_share_host() -> bool:
    """Whether this platform passes host memory to a worker (memfd and ``SCM_RIGHTS``)."""
    return hasattr(os, "memfd_create") and hasattr(socket, "send_fds")


def spawn(module: str, entry: str, backend: str, who: str,
          error: type[Exception]) -> tuple[subprocess.Popen, socket.socket, Connection]:
    """Start ``module.entry(fd)`` in a fresh interpreter on the ``backend``; the process, this
    end's socket and its connection.

    Raises
    ------
    error
        "``who`` could not start: ...": the interpreter could not be started.
    """
    reap()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = config.environment_for_backend(backend)
    top = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([top] + ([env["PYTHONPATH"]]
                                                 if env.get("PYTHONPATH") else []))
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", f"from {module} import {entry}; {entry}({theirs.fileno()})"],
            pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, close_fds=True)
    except OSError as err:
        ours.close()
        raise error(f"{who} could not start: {err}") from err
    finally:
        theirs.close()
    return proc, ours, Connection(os.dup(ours.fileno()))


def how_it_ended(proc: subprocess.Popen, wait: float = 5.0) -> str:
    """"exited with status N" or "was killed by SIGNAME" (waiting up to ``wait`` s)."""
    try:
        code = proc.wait(wait)
    except subprocess.TimeoutExpired:
        code = None
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


#: workers told to stop and not waited for: reaped when the next one starts, and waited for
#: at the interpreter's exit
_STOPPING: list[subprocess.Popen] = []
_stopping_lock = threading.Lock()


def reap(wait: bool = False) -> None:
    """Forget workers told to stop that have exited (``wait``: wait for each, killed after
    :data:`STOP_SECONDS`)."""
    with _stopping_lock:
        procs = list(_STOPPING)
    for proc in procs:
        if wait:
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.poll() is not None:
            with _stopping_lock:
                if proc in _STOPPING:
                    _STOPPING.remove(proc)


atexit.register(reap, True)


def stop(proc: subprocess.Popen, conn: Connection, sock: socket.socket, wait: bool) -> None:
    """Tell the worker to stop (message ``("stop",)``) and close the socket; ``wait``: wait for
    it to exit (killed after :data:`STOP_SECONDS`), else it is reaped later."""
    with contextlib.suppress(Exception):
        conn.send(("stop",))
    with contextlib.suppress(Exception):
        conn.close()
    with contextlib.suppress(Exception):
        sock.close()
    if not wait:
        if proc.poll() is None:
            with _stopping_lock:
                _STOPPING.append(proc)
        return
    try:
        proc.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def host_arena(nbytes: int, name: str) -> tuple[int, mmap.mmap]:
    """A new anonymous shared mapping of at least ``nbytes``: its descriptor and mapping (the
    caller closes the descriptor once sent)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    size = max(1, int(nbytes))
    os.ftruncate(fd, size)
    return fd, mmap.mmap(fd, size)


def send_fd(conn: Connection, fd: int, pid: int) -> None:
    """Pass descriptor ``fd`` to process ``pid`` over ``conn``."""
    reduction.send_handle(conn, fd, pid)


def receive_fd(conn: Connection) -> int:
    """A descriptor passed by :func:`send_fd` (the caller closes it)."""
    return reduction.recv_handle(conn)


class Receiver:
    """One thread at a time reads a worker's socket (``pump``); other threads that wait for a
    reply wait on ``cond`` meanwhile, and see what it received when it is done."""

    def __init__(self, cond: threading.Condition) -> None:
        self.cond = cond
        self.busy = False

    def turn(self, pump: Callable[[float], None], timeout: float = 0.05) -> bool:
        """Called holding ``cond``: ``pump(timeout)`` without it, unless another thread is
        pumping (then wait on ``cond`` up to ``timeout``); whether this thread pumped."""
        if self.busy:
            self.cond.wait(timeout)
            return False
        self.busy = True
        self.cond.release()
        try:
            pump(timeout)
        finally:
            self.cond.acquire()
            self.busy = False
            self.cond.notify_all()
        return True
