"""Encoded bytes read ahead of the decoder by a bounded pool of threads, in a bounded window.

A :class:`ReadAhead` reads the samples a plan names, in the plan's order, with ``threads``
reader threads (file reads release the GIL; a folder's files and tar shards' members are read a
run at a time without it, ``fileread``), and hands them out in that order (:meth:`take`,
:meth:`take_many`, :meth:`take_batch`). What it holds is bounded: samples read but not taken
stay under ``window`` bytes (one run of samples at least, so a large one still goes through)
and ``max_items`` samples; a reader reserves a sample's size before it reads it (the source's
size where it knows it, else the mean so far), so the bytes in flight exceed the window by at
most one sample per reader. Memory therefore does not grow with the dataset, however large.

Readers claim runs of up to ``RUN`` consecutive samples (``fileread.RUN`` where a run of the
source's files or members is read in one call that holds no GIL), and a thread is woken only
when there is something for it (a reader when the window has room, the consumer when the
sample it waits for has arrived): at tens of thousands of samples a second, waking every
thread on every sample would spend the GIL on wake-ups.

While :meth:`held_back` is entered (the decode thread's decode call), readers finish the run
they are reading and claim no new one once its ``stock`` of samples ahead of the takes is
claimed: a thread that runs Python during nvImageCodec's decode call makes that call wait for
the GIL at each of its hand-overs (bench/RESULTS.md, "the decode call inside the pipeline").
The window is thousands of samples deep, so the readers catch up after the call; but two
decode lanes hold them back nearly all the time, so without a stock the next take would wait
for its own samples to be read.

A sample that cannot be read is handed out as its error (the caller skips and refills it); the
readers never retry. :meth:`close` stops the readers and joins them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from . import fileread

#: default bound on the bytes read ahead
WINDOW_BYTES = 256 << 20
#: default reader threads: enough for files in the page cache or on local disks; every
#: further thread takes the GIL from the decode call and the batch worker between reads
#: (bench/RESULTS.md, "read-ahead threads": fewer readers, a faster folder); slower storage
#: may want more (``read_threads`` of ``training.batch_stream.BatchStream``)
READ_THREADS = 2
#: samples a reader claims at once
RUN = 8
#: default bound on the samples read ahead and not yet taken
MAX_ITEMS = 4096


class ReadAhead:
    """Bytes of ``plan``'s samples, read ahead (see the module doc).

    Parameters
    ----------
    source : Source
        Where samples are read from (``read``, ``size``).
    plan : iterator of int
        Sample indices to read, in the order :meth:`take` hands them out.
    threads : int
        Reader threads.
    window : int
        Bound on the bytes read and not yet taken.
    max_items : int
        Bound on the samples read and not yet taken.
    read : callable, optional
        ``read(i)``: what is handed out for sample ``i`` (default ``source.read``): bytes, or
        a decoder's prepared sample (``decode.NvImageCodecDecoder.reader``); ``len()`` of it
        is the bytes it holds. It raises for a bad sample.
    """

    def __init__(self, source: Any, plan: Iterator[int], *, threads: int = READ_THREADS,
                 window: int = WINDOW_BYTES, max_items: int = MAX_ITEMS,
                 read: Callable[[int], Any] | None = None) -> None:
        self.source = source
        self._read = read if read is not None else source.read
        # a source of files or tar members reads a run in one call that holds no GIL
        # (fileread): every sample read by Python hands the GIL over at least once, taking it
        # from the decode call; a sample the run did not read whole goes through ``read``
        # (its usual error)
        run_read = getattr(source, "read_run", None) \
            if read is None and getattr(source, "reads_runs", False) else None
        self._read_run = run_read if run_read is not None and fileread.ENABLED and \
            fileread.available() else None
        #: runs of the source's files are read in one call without the GIL (``fileread``)
        self.nogil_reads = self._read_run is not None
        #: samples a reader claims at once
        self.run = fileread.RUN if self.nogil_reads else RUN
        self._plan = plan
        self.window = int(window)
        self.max_items = max(1, int(max_items))
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)  # readers wait for room
        self._arrived = threading.Condition(self._lock)  # the consumer waits for a sample
        self._claimed = 0  # next plan position a reader takes
        self._taken = 0  # next plan position take() hands out
        self._results: dict[int, tuple[int, Any, int]] = {}
        self._held = 0  # bytes reserved or read, not yet taken
        self._done = False  # the plan is exhausted
        self._stopped = False
        self._waiting_for = -1  # the position the consumer waits for (-1: none)
        self._idle = 0  # readers waiting for room (or for the hold to end)
        self._held_back = False  # readers claim no new run (held_back())
        self._holds = 0  # held_back() blocks entered and not left (one per decode lane)
        self._stock = 0  # samples claimed ahead of the takes that a hold still lets be read
        self._read_bytes = 0
        self._read_count = 0
        #: the most bytes held at once (reports and tests)
        self.peak = 0
        self._threads = [threading.Thread(target=self._reader, name=f"millipyde-read-{t}",
                                          daemon=True) for t in range(max(1, int(threads)))]
        for t in self._threads:
            t.start()

    def _estimate(self, i: int) -> int:
        size = self.source.size(i)
        if size is not None:
            return int(size)
        return self._read_bytes // self._read_count if self._read_count else 1 << 20

    def _full(self) -> bool:
        return self._claimed - self._taken >= self.max_items or \
            (self._held >= self.window and self._claimed > self._taken)

    def _claim(self) -> list[tuple[int, int, int]] | None:
        """Under the lock: a run of ``(position, sample, reserved bytes)``, None at the end."""
        while not self._stopped and not self._done and (self._full() or (
                self._held_back and self._claimed - self._taken >= self._stock)):
            self._idle += 1
            self._space.wait()
            self._idle -= 1
        if self._stopped or self._done:
            return None
        run = []
        # (a held reader claims only up to the stock)
        most = self.run if not self._held_back else \
            max(1, min(self.run, self._stock - (self._claimed - self._taken)))
        while len(run) < most and not self._full():
            try:
                i = next(self._plan)
            except StopIteration:
                self._done = True
                self._arrived.notify_all()
                break
            except BaseException as err:  # a plan that fails: handed out, then the end
                self._results[self._claimed] = (-1, err, 0)
                self._claimed += 1
                self._done = True
                self._arrived.notify_all()
                break
            est = self._estimate(i)
            run.append((self._claimed, i, est))
            self._claimed += 1
            self._held += est
        return run or None

    def _reader(self) -> None:
        while True:
            with self._lock:
                run = self._claim()
            if run is None:
                return
            whole: list[Any] = [None] * len(run)
            if self._read_run is not None:
                try:
                    whole = self._read_run([i for _, i, _ in run])
                except Exception:  # out of memory for the run, say: each read below instead
                    whole = [None] * len(run)
            got_all = []
            for (q, i, est), value in zip(run, whole, strict=True):
                try:
                    if value is None:
                        value = self._read(i)
                    got = len(value)
                except Exception as err:  # a bad sample: the caller names it and refills it
                    value, got = err, 0
                got_all.append((q, i, value, got, est))
            with self._lock:
                for q, i, value, got, est in got_all:
                    self._held += got - est
                    self._read_bytes += got
                    self._read_count += 1
                    if not self._stopped:
                        self._results[q] = (i, value, got)
                    else:
                        self._held -= got
                self.peak = max(self.peak, self._held)
                if self._stopped:
                    return
                if any(q == self._waiting_for for q, *_ in got_all):
                    self._arrived.notify()

    def take(self) -> tuple[int, Any]:
        """The next sample of the plan: ``(index, bytes)``, or ``(index, error)`` where it
        could not be read.

        Raises
        ------
        StopIteration
            The plan is exhausted, or the reader was closed.
        """
        return self.take_many(1)[0]

    def take_many(self, n: int) -> list[tuple[int, Any]]:
        """The next ``n`` samples of the plan (as :meth:`take`), under one lock.

        Raises
        ------
        StopIteration
            The plan ends before them, or the reader was closed.
        """
        samples, datas, _ = self.take_batch(n)
        return list(zip(samples, datas, strict=True))

    def take_batch(self, n: int) -> tuple[list[int], list[Any], list[int]]:
        """:meth:`take_many` as columns: the samples, their bytes (or errors), and the
        positions (in the ``n``) of those that could not be read, in one pass.

        Raises
        ------
        StopIteration
            The plan ends before them, or the reader was closed.
        """
        samples: list[int] = []
        datas: list[Any] = []
        failed: list[int] = []
        with self._lock:
            for _ in range(n):
                q = self._taken
                while q not in self._results:
                    if self._stopped or (self._done and q >= self._claimed):
                        raise StopIteration
                    if self._held_back:  # a sample is needed now: the hold ends
                        self._held_back = False
                    if self._idle and not self._full():
                        self._space.notify_all()
                    if not any(t.is_alive() for t in self._threads) and q >= self._claimed:
                        raise StopIteration
                    self._waiting_for = q
                    self._arrived.wait(0.5)
                self._waiting_for = -1
                i, value, got = self._results.pop(q)
                self._taken += 1
                self._held -= got
                if i < 0:
                    self._wake()
                    raise value
                if not got and isinstance(value, BaseException):
                    failed.append(len(datas))
                samples.append(i)
                datas.append(value)
            self._wake()
        return samples, datas, failed

    def _wake(self) -> None:
        """Under the lock, after takes: wake the idle readers where one would claim a run
        (once, at the end: a reader woken in the middle of a take takes the GIL from the
        taker only to block on the lock the taker holds, and then to find the hold on)."""
        if self._idle and not self._full() and not (
                self._held_back and self._claimed - self._taken >= self._stock):
            self._space.notify_all()

    @contextlib.contextmanager
    def held_back(self, stock: int = 0) -> Iterator[None]:
        """Inside the block the readers start no new read (each finishes the run it is
        reading) once ``stock`` samples ahead of the takes are claimed; a :meth:`take_many`
        that has to wait for a sample ends the hold."""
        with self._lock:
            self._holds += 1
            self._held_back = True
            self._stock = max(0, int(stock))
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1
                if not self._holds:  # the last of the decode lanes' holds
                    self._held_back = False
                    if self._idle:
                        self._space.notify_all()

    @property
    def held(self) -> int:
        """Bytes read (or reserved) and not yet taken."""
        return self._held

    def close(self, join: bool = True) -> None:
        """Stop the readers and drop what they read; ``join``: wait for them to exit."""
        with self._lock:
            self._stopped = True
            self._results.clear()
            self._space.notify_all()
            self._arrived.notify_all()
        if not join:
            return
        deadline = time.monotonic() + 30.0
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
