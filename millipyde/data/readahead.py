"""Encoded bytes read ahead of the decoder by a bounded pool of threads, in a bounded window.

A :class:`ReadAhead` reads the samples a plan names, in the plan's order, with ``threads``
reader threads (file reads release the GIL), and hands them out in that order (:meth:`take`).
What it holds is bounded: samples read but not taken stay under ``window`` bytes (one sample
at least, so a large one still goes through) and ``max_items`` samples; a reader reserves a
sample's size before it reads it (the source's size where it knows it, else the mean so far),
so the bytes in flight exceed the window by at most one sample per reader. Memory therefore
does not grow with the dataset, however large.

A sample that cannot be read is handed out as its error (the caller skips and refills it); the
readers never retry. :meth:`close` stops the readers and joins them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

#: default bound on the bytes read ahead
WINDOW_BYTES = 256 << 20
#: default reader threads
READ_THREADS = 8


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
    """

    def __init__(self, source: Any, plan: Iterator[int], *, threads: int = READ_THREADS,
                 window: int = WINDOW_BYTES, max_items: int = 4096) -> None:
        self.source = source
        self._plan = plan
        self.window = int(window)
        self.max_items = max(1, int(max_items))
        self._cond = threading.Condition()
        self._claimed = 0  # next plan position a reader takes
        self._taken = 0  # next plan position take() hands out
        self._results: dict[int, tuple[int, Any, int]] = {}
        self._held = 0  # bytes reserved or read, not yet taken
        self._done = False  # the plan is exhausted
        self._stopped = False
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

    def _reader(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and not self._done and (
                        self._claimed - self._taken >= self.max_items or
                        (self._held >= self.window and self._claimed > self._taken)):
                    self._cond.wait()
                if self._stopped or self._done:
                    return
                try:
                    i = next(self._plan)
                except StopIteration:
                    self._done = True
                    self._cond.notify_all()
                    return
                except BaseException as err:  # a plan that fails: handed out, then the end
                    self._results[self._claimed] = (-1, err, 0)
                    self._claimed += 1
                    self._done = True
                    self._cond.notify_all()
                    return
                q = self._claimed
                self._claimed += 1
                est = self._estimate(i)
                self._held += est
            try:
                value: Any = self.source.read(i)
                got = len(value)
            except Exception as err:  # a bad sample: the caller names it and refills it
                value, got = err, 0
            with self._cond:
                self._held += got - est
                self.peak = max(self.peak, self._held)
                self._read_bytes += got
                self._read_count += 1
                if self._stopped:
                    self._held -= got
                    return
                self._results[q] = (i, value, got)
                self._cond.notify_all()

    def take(self) -> tuple[int, Any]:
        """The next sample of the plan: ``(index, bytes)``, or ``(index, error)`` where it
        could not be read.

        Raises
        ------
        StopIteration
            The plan is exhausted, or the reader was closed.
        """
        with self._cond:
            q = self._taken
            while q not in self._results:
                if self._stopped or (self._done and q >= self._claimed):
                    raise StopIteration
                if not any(t.is_alive() for t in self._threads) and q >= self._claimed:
                    raise StopIteration
                self._cond.wait(0.5)
            i, value, got = self._results.pop(q)
            self._taken += 1
            self._held -= got
            self._cond.notify_all()
        if i < 0:
            raise value
        return i, value

    @property
    def held(self) -> int:
        """Bytes read (or reserved) and not yet taken."""
        return self._held

    def close(self, join: bool = True) -> None:
        """Stop the readers and drop what they read; ``join``: wait for them to exit."""
        with self._cond:
            self._stopped = True
            self._results.clear()
            self._cond.notify_all()
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
