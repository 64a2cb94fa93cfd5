"""The Python heap a kernel compile leaves behind, collected where the caller already waits.

Compiling a kernel in this process (or loading one from Numba's disk cache) adds hundreds of
thousands of objects to the interpreter's heap: Numba's type and IR caches that stay, and
garbage in reference cycles that only a collection frees (with colorama installed, most of it
is colorama's stream wrappers, made by Numba for every typing error it raises and catches while
resolving overloads: about 10,000 a kernel). Those objects are promoted to the oldest generation,
and once they outnumber a quarter of it the interpreter runs a full collection, which holds the
GIL for a time proportional to every object in the process (0.25-0.45 s in a training process
with torch and numba-cuda on a GPU machine). It then lands wherever the counts happen to cross
the threshold: in the first seconds of training, inside a batch that compiled nothing.

This module keeps that pause in the compile instead:

- :func:`settle` runs one full collection when kernels were compiled or loaded for at least
  :data:`OWED_AFTER` seconds since the last one, and for at least :data:`RATIO` times as long
  as that one took: the collections cost at most a tenth of the compiling they follow (loading
  cached kernels one by one would otherwise pay a collection every half second of loads).
  The Generator's ``next()`` and its batch
  streams call it after taking an output, so the collection falls on the output whose making
  compiled (the consumer was already waiting seconds for it) and the heap that training starts
  with has nothing owed. ``MILLIPYDE_SETTLE_HEAP=0`` turns it off.
- Numba's error-message highlighting is replaced by plain text when colorama is installed
  (:func:`plain_numba_errors`): it made the wrappers above for every error, raised or not
  shown. Numba's messages keep their text, without terminal colours.
"""

from __future__ import annotations

import gc
import threading
import time

from numba.core import event

from ... import config

#: Seconds of compiling (the wall time any thread holds or waits for the compiler lock) after
#: which one full collection is owed: a collection costs 0.05-0.45 s, a kernel compile 0.3-4 s.
OWED_AFTER = 0.5
#: Seconds of compiling owed a collection per second the last collection took.
RATIO = 10.0

_last = 0.0  # seconds the last collection took

_compiling = 0.0  # seconds some thread compiled (or waited to) since the last collection
_inside = 0  # threads inside the compiler lock or waiting for it
_began = 0.0  # when the first of them came
_count_lock = threading.Lock()
_lock = threading.Lock()
#: Full collections :func:`settle` ran in this process, and their seconds (for benchmarks).
stats = {"collections": 0, "seconds": 0.0}


class _CompileClock(event.Listener):
    """Sums the wall time during which any thread holds the compiler lock or waits for it: a
    span counts once however many threads share it, and one compile, which takes the
    re-entrant lock hundreds of times, counts from its first take to its last release."""

    def on_start(self, ev: event.Event) -> None:
        global _inside, _began
        with _count_lock:
            if _inside == 0:
                _began = time.perf_counter()
            _inside += 1

    def on_end(self, ev: event.Event) -> None:
        global _inside, _compiling
        with _count_lock:
            if _inside == 0:  # (the end of a compile that began before this module's import)
                return
            _inside -= 1
            if _inside == 0:
                _compiling += time.perf_counter() - _began


_clock = _CompileClock()
event.register("numba:compiler_lock", _clock)


def owed() -> bool:
    """Whether enough compiling happened since the last collection for one to be owed."""
    return _compiling >= OWED_AFTER and _compiling >= RATIO * _last


def settle() -> float:
    """Run one full collection if one is owed (and ``MILLIPYDE_SETTLE_HEAP`` is on).

    Returns
    -------
    float
        Seconds spent collecting, 0.0 when nothing was owed.
    """
    global _compiling, _last
    if not owed() or not config.settle_heap():
        return 0.0
    with _lock:
        if not owed():  # another thread collected first
            return 0.0
        _compiling = 0.0
        t0 = time.perf_counter()
        gc.collect()
        spent = _last = time.perf_counter() - t0
        stats["collections"] += 1
        stats["seconds"] += spent
    return spent


def plain_numba_errors() -> bool:
    """Make Numba format its error messages without colorama; True if it used colorama.

    Numba picks its colour scheme once, at the first error, and caches it in
    ``numba.core.errors._termcolor_inst``; a scheme set there first is the one it keeps. Numba
    itself skips colorama when ``NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING`` is set before it is
    imported, which a library imported after Numba cannot do.
    """
    from numba.core import errors

    if not hasattr(errors, "ColorShell"):  # colorama not installed or already disabled
        return False

    class _Plain(errors._DummyColorScheme):
        def _same(self, msg: str) -> str:
            return msg

        code = errmsg = filename = indicate = highlight = reset = _same

    errors._termcolor_inst = _Plain()
    return True


plain_numba_errors()
