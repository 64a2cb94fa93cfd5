"""The worker processes of ``millipyde.training.precompile``: a pool fed by one thread per worker.

The worker side is ``millipyde.graph.codegen.compile_worker`` (it imports only what compiling
needs, not the whole framework).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..backend import ACTIVE as runtime
from ..graph.codegen import compile_worker


class CompileWorkers:
    """Compile jobs run by worker processes, one thread feeding each.

    Plain subprocesses (``python -c``), not ``multiprocessing``: its spawned children import
    the parent's ``__main__`` module again, which would rerun a user's script that has no
    ``if __name__ == "__main__"`` guard. Each gets the parent's ``sys.path`` and environment.
    With ``warm`` (a codegen target) every worker starts at once and pays its imports, the
    CUDA context and Numba's first compile (``compile_worker.prepare``) while the recording
    goes on; else a worker starts with its first job, so a warm cache starts none. A worker
    takes a job only once it has said it is ready, so each job goes to the first free worker;
    queued jobs go out largest generated module first: the longest compiles start first and
    bound the wait alone.
    """

    def __init__(self, n: int, warm: str | None = None) -> None:
        self.n = n
        self.warm = warm
        self.jobs: queue.PriorityQueue = queue.PriorityQueue()
        self.results: list[tuple] = []
        #: per job run: seconds in its worker, module path, function, and the seconds since
        #: ``t0`` when it was queued, sent to a worker and answered
        self.timed: list[tuple[float, str, str, float, float, float]] = []
        #: per worker that said hello: its start-up steps (``compile_worker.serve``) and
        #: ``spawned``, in seconds since ``t0``
        self.starts: list[dict[str, float]] = []
        self.procs: list[subprocess.Popen] = []
        self.t0 = time.perf_counter()
        self.t0_wall = time.time()
        self._seq = 0
        self._lock = threading.Lock()
        self._env = {**os.environ,
                     "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        #: set when every job is queued (``recorded``): this process's own compiler starts
        #: then, with the largest job left, and never slows the recording down
        self.all_queued = threading.Event()
        first = [self._start() if warm else None for _ in range(n)]
        self.threads = [threading.Thread(target=self._feed, args=(proc,), daemon=True,
                                         name=f"millipyde-precompile-{i}")
                        for i, proc in enumerate(first)]
        #: jobs compiled in this process (``here``), in the order taken
        self.here: list[tuple] = []
        for t in self.threads:
            t.start()

    def compile_here(self) -> None:
        """Compile jobs in this process too (``_feed_here``), from when all are queued."""
        t = threading.Thread(target=self._feed_here, daemon=True,
                             name="millipyde-precompile-here")
        self.threads.append(t)
        t.start()

    def recorded(self) -> None:
        """Every job is queued: this process's compiler may take the largest one left."""
        self.all_queued.set()

    def _put(self, priority: float, got: tuple | None) -> None:
        with self._lock:
            self._seq += 1
            self.jobs.put((priority, self._seq, time.perf_counter() - self.t0, got))

    def submit(self, got: tuple) -> None:
        """Queue one job (``precompile.job``)."""
        try:
            size = os.path.getsize(got[0])
        except OSError:
            size = 0
        self._put(-size, got)

    def close(self, timeout: float = 600.0) -> None:
        """Wait for every queued job; stop the workers and their threads (a worker still
        compiling after ``timeout`` seconds is killed, its job left undone)."""
        self.all_queued.set()
        for _ in self.threads:
            self._put(float("inf"), None)
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in self.threads):
            with self._lock:
                for proc in self.procs:
                    if proc.poll() is None:
                        proc.kill()
            for t in self.threads:
                t.join(60)

    def stop(self) -> None:
        """Leave the queued jobs undone: kill the workers at once (started or not) and end
        their threads (a pool started ahead that no compiling ahead took)."""
        self.all_queued.set()
        for _ in self.threads:
            self._put(float("-inf"), None)  # before any job still queued
        with self._lock:
            procs = list(self.procs)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for t in self.threads:
            t.join(60)
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)
            _closed(proc)

    def _feed_here(self) -> None:
        """Compile jobs in this process as well: the worker processes take seconds to start
        (imports, a CUDA context each, a first compile), a recipe's jobs need not all wait
        for them. It starts once every job is queued (``recorded``), so it takes the largest
        one no worker has taken (a long compile started early rather than a short one first)
        and its compiles (Python, under the GIL) never slow the recording down. One thread:
        numba compiles one function at a time in a process. What it compiles is in memory
        here and in the disk cache."""
        self.all_queued.wait()
        while True:
            _, _, queued, got = self.jobs.get()
            if got is None:
                return
            sent = time.perf_counter() - self.t0
            try:
                # (numba-cuda loads what it compiles into this thread's context: one load at a
                # time with the consuming threads' first launches)
                with runtime.first_launch_lock:
                    result: tuple[bool, Any] = (True, compile_worker.compile_job(*got))
            except Exception as err:  # left to the consuming process, as a worker's failure
                result = (False, repr(err))
            done = time.perf_counter() - self.t0
            with self._lock:
                self.results.append(result)
                self.here.append(got)
                if result[0]:
                    self.timed.append((float(result[1]), got[0], got[2], queued, sent, done))

    def _start(self) -> subprocess.Popen:
        spawned = time.time()
        proc = subprocess.Popen([sys.executable, "-c", compile_worker.command(self.warm)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self._env)
        proc.spawned = spawned  # type: ignore[attr-defined]
        with self._lock:
            self.procs.append(proc)
        return proc

    def _hello(self, proc: subprocess.Popen) -> bool:
        """Wait for a new worker's hello (it has prepared); keep its start-up steps, relative
        to ``t0``. False when it died first."""
        try:
            times = _read(proc)
        except Exception:  # a broken pipe or a garbled message: as if it died
            times = None
        if not isinstance(times, dict):
            return False
        steps = {"spawned": getattr(proc, "spawned", self.t0_wall), **times}
        with self._lock:
            self.starts.append({k: round(v - self.t0_wall, 3) for k, v in steps.items()})
        return True

    def _feed(self, proc: subprocess.Popen | None) -> None:
        used = False
        try:
            # a job is taken from the queue only once this worker can start it at once
            if proc is not None and not self._hello(proc):
                proc = _closed(proc)
            while True:
                _, _, queued, got = self.jobs.get()
                if got is None:
                    return
                if proc is None:
                    proc = self._start()
                    if not self._hello(proc):
                        proc = _closed(proc)
                        with self._lock:
                            self.results.append((False, "worker exited"))
                        continue
                used = True
                sent = time.perf_counter() - self.t0
                result = _ask(proc, got)
                done = time.perf_counter() - self.t0
                with self._lock:
                    self.results.append(result)
                    if result[0]:
                        self.timed.append((float(result[1]), got[0], got[2], queued, sent,
                                           done))
                if not result[0] and proc.poll() is not None:
                    proc, used = _closed(proc), False  # it died: the next job starts another
        finally:
            if proc is not None:
                if not used:
                    proc.kill()  # no job came (a warm cache): not worth finishing its start
                else:
                    proc.stdin.close()  # it leaves at once (compile_worker.serve)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                _closed(proc)


def _closed(proc: subprocess.Popen) -> None:
    """Close a worker's pipes (it exited or is being left); None, for ``proc = _closed(proc)``."""
    for pipe in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            pipe.close()
    return None


def module_line(path: str) -> str:
    """A generated module's first line (what it holds), for reports."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip()[:120]
    except OSError:
        return Path(path).name


def _read(proc: subprocess.Popen) -> Any:
    """One message from a worker, None if it exited first."""
    head = proc.stdout.read(8)
    if len(head) < 8:
        return None
    return pickle.loads(proc.stdout.read(struct.unpack("<Q", head)[0]))


def _ask(proc: subprocess.Popen, got: tuple) -> tuple[bool, Any]:
    """Send one job to a worker and read its answer: (True, seconds) or (False, error)."""
    try:
        data = pickle.dumps(got)
        proc.stdin.write(struct.pack("<Q", len(data)) + data)
        proc.stdin.flush()
        answer = _read(proc)
        return (False, "worker exited") if answer is None else answer
    except Exception as err:  # any failure leaves the job to the consuming process
        return False, repr(err)


def startup_summary(starts: list[dict[str, float]]) -> dict[str, list[float]]:
    """Per start-up step (``spawned``, ``started``: the interpreter ran the worker's command;
    ``imported``, ``context``, ``prepared``), the first and the last time a worker finished
    it, in seconds since the workers were started."""
    steps: dict[str, list[float]] = {}
    for s in starts:
        for k, v in s.items():
            lo, hi = steps.get(k, [v, v])
            steps[k] = [min(lo, v), max(hi, v)]
    return steps
