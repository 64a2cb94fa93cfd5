"""Things made ahead in a thread of their own, taken once by whoever asks for them.

A process's first streamed batch paid nvImageCodec's start before a single image was decoded
(one H200, bench/RESULTS.md, "The main job's loop"): with its Python binding, ``from nvidia
import nvimgcodec`` about 1.0 s with the GIL held and a decoder's first decode about 1.0 s
more; through its C API the first decode about 0.2 s. For a long training run that is noise;
for a short job (``millipyde augment`` over a folder) it is much of the run.
:func:`millipyde.data.decode.prepare_decoder` starts making the decoder here as soon as the
job knows it will decode, so the start overlaps the job's imports, its CUDA context and its
Generator; :func:`millipyde.data.decode.make_decoder` takes it (:func:`take`).

The registry knows nothing of decoders: a key, and a function that makes the thing. A thing
that could not be made is simply not there (:func:`take` gives None): the caller makes its
own, raising or warning as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

#: things being made ahead, by key: a future of the thing (or None)
_AHEAD: dict[Hashable, Future] = {}
_LOCK = threading.Lock()


def _run(fut: Future, make: Callable[[], Any]) -> None:
    try:
        fut.set_result(make())
    except BaseException as err:  # the caller makes its own (and says why, if it fails too)
        fut.set_exception(err)


def start(key: Hashable, make: Callable[[], Any]) -> bool:
    """Start ``make()`` in a daemon thread, its result kept under ``key``; False (nothing
    started) where something is already kept or being made under ``key``."""
    with _LOCK:
        if key in _AHEAD:
            return False
        fut: Future = Future()
        _AHEAD[key] = fut
    threading.Thread(target=_run, args=(fut, make), daemon=True,
                     name="millipyde-made-ahead").start()
    return True


def take(key: Hashable) -> Any:
    """What was made ahead under ``key``, waiting for it if it is still being made; None
    where nothing was started under ``key`` or making it failed. Taken once: the next call
    gives None."""
    with _LOCK:
        fut = _AHEAD.pop(key, None)
    if fut is None:
        return None
    try:
        return fut.result()
    except Exception:  # the caller makes its own
        return None
