"""nvImageCodec's decoder made ahead, while the process does other work.

A process's first batch pays nvImageCodec's start twice over before a single image is decoded
(one H200, bench/RESULTS.md, "The main job's loop"): ``from nvidia import nvimgcodec`` takes
about 1.0 s and holds the GIL all along, and a decoder's first decode about 1.0 s more (0.16 s
for a second decoder of the same process), while the other threads wait for the batch. For a
long training run that is noise; for a short job (``millipyde augment`` over a folder) it is
most of the run. :func:`prepare_decoder` starts both in a thread of their own as soon as the
job knows it will decode on a GPU, so they overlap its imports, its CUDA context and its
Generator; the loader's :class:`~millipyde.data.decode.NvImageCodecDecoder` then takes the
decoder made ahead (:func:`take_decoder`) instead of making its own.

Nothing here is needed for correctness: a decoder that could not be made ahead (no
nvImageCodec, no GPU, any error) is simply not there, and the loader makes its own as before,
raising or warning as it always did.
"""

from __future__ import annotations

import io
import threading
from concurrent.futures import Future
from typing import Any

#: decoders being made ahead, by (device, CPU threads): a future of the decoder (or None)
_AHEAD: dict[tuple[int, int], Future] = {}
_LOCK = threading.Lock()


def _small_jpeg() -> bytes:
    """A 48 x 32 colour JPEG: the first decode that starts the decoder's machinery."""
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((32, 48, 3), 128, np.uint8)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _make(device: int, threads: int) -> Any:
    from ..backend import ACTIVE as runtime

    if not runtime.caps.nvidia_codecs:
        return None
    try:
        from nvidia import nvimgcodec as nv
    except Exception:  # not installed, or it cannot load: the loader says so
        return None
    dec = nv.Decoder(device_id=device, max_num_cpu_threads=threads)
    dec.decode(nv.CodeStream(_small_jpeg()))
    return dec


def _run(fut: Future, device: int, threads: int) -> None:
    try:
        fut.set_result(_make(device, threads))
    except BaseException as err:  # the loader makes its own (and says why, if it fails too)
        fut.set_exception(err)


def prepare_decoder(device: int, threads: int) -> None:
    """Start making nvImageCodec's decoder for ``device`` in a background thread.

    Returns at once. The thread imports nvImageCodec, makes a decoder with ``threads`` CPU
    threads (the loader's: :func:`~millipyde.data.decode.decode_threads` unless it was given
    others) and decodes one small JPEG, then ends; the next loader on ``device`` takes that decoder.
    Calling it again for the same device and threads while one waits to be taken does
    nothing. Where the backend has no NVIDIA codecs or nvImageCodec is not installed, the
    thread finds so and nothing is made.

    Parameters
    ----------
    device : int
        The GPU the decoder decodes on.
    threads : int
        Its CPU threads.
    """
    key = (int(device), int(threads))
    with _LOCK:
        if key in _AHEAD:
            return
        fut: Future = Future()
        _AHEAD[key] = fut
    threading.Thread(target=_run, args=(fut, *key), daemon=True,
                     name="millipyde-decoder-ahead").start()


def take_decoder(device: int, threads: int) -> Any:
    """The decoder made ahead for (``device``, ``threads``), waiting for it if it is still
    being made; None where none was started or it could not be made."""
    with _LOCK:
        fut = _AHEAD.pop((int(device), int(threads)), None)
    if fut is None:
        return None
    try:
        return fut.result()
    except Exception:  # the caller makes its own
        return None
