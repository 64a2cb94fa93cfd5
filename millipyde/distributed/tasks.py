"""Worker side of :mod:`millipyde.distributed`: read, compute, encode and write a chunk of files.

Everything here runs inside a Dask worker (or, for tests, in any process). It imports no Dask.
A chunk is computed as the single-process executors compute it: every output goes through
``workers.record_operations`` / ``apply_operations`` with the random stream of ``(seed,
sample)``, and same-shape chunks through the Generator's batched path (``graph.exec.batch``, whose
values are bit-identical to the per-output path), so a file does not depend on which worker,
chunk or batch made it.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

FORMATS = ("png", "jpg", "tiff", "npy")
_PIL_FORMAT = {"png": "PNG", "jpg": "JPEG", "tiff": "TIFF"}
#: Suffix of temporary files in ``out_dir``; finished files only ever appear by ``os.replace``.
TEMP_SUFFIX = ".millipyde-part"


def rebuild_operation(function: Any, args: tuple, kwargs: dict, probability: Any) -> Any:
    """An Operation from its parts (the other side of :func:`reduce_operation`)."""
    from ..operation import Operation

    return Operation.rebuild(function, args, kwargs, probability)


def reduce_operation(op: Any) -> tuple:
    """Pickle an Operation by its parts: it holds a lock, and its call counter is per process.

    Registered with :mod:`copyreg` by :mod:`millipyde.distributed`, so Operations travel to
    Dask workers; a callable goes by reference (importable) or by value (cloudpickle).
    """
    function = op.method if op.method is not None else op.function
    return rebuild_operation, (function, op.args, op.kwargs, op.probability)


class FormatError(ValueError):
    """An output that ``fmt`` cannot hold exactly (float data for PNG, RGBA for JPEG, ...)."""


def encode(arr: np.ndarray, fmt: str, fh: Any) -> None:
    """Write ``arr`` to the binary file ``fh`` as ``fmt``, exactly, else raise FormatError."""
    if fmt == "npy":
        np.save(fh, arr, allow_pickle=False)
        return
    image_like = arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] in (3, 4))
    if arr.dtype == np.uint8 and image_like:
        if fmt == "jpg" and arr.ndim == 3 and arr.shape[2] == 4:
            raise FormatError("fmt='jpg' cannot hold an RGBA output: use fmt='png', 'tiff' or "
                              "'npy'")
        if fmt == "png":
            # zlib level 1 (half the encode time of level 6 for ~10% larger PNGs, 512x512 RGB
            # photographs; docs/DISTRIBUTED.md), outside the GIL: encoding bounds the rate
            from ..encode import encode_png

            fh.write(encode_png(arr))
            return
        from PIL import Image

        Image.fromarray(arr).save(fh, format=_PIL_FORMAT[fmt])
        return
    if fmt == "tiff" and arr.ndim == 2 and arr.dtype.kind in "iuf":
        try:
            import tifffile
        except ImportError as err:
            raise FormatError("fmt='tiff' needs the tifffile package for non-uint8 greyscale "
                              "outputs (Pillow cannot hold float64); use fmt='npy'") from err
        tifffile.imwrite(fh, arr)  # exact: float64 stays float64
        return
    what = f"{arr.dtype} {'greyscale' if arr.ndim == 2 else 'array'} of shape {arr.shape}"
    raise FormatError(f"fmt={fmt!r} cannot hold this output exactly ({what}): png and jpg hold "
                      "uint8 images; use fmt='npy' or fmt='tiff' for float greyscale")


def _commit(tmp: str, final: str) -> None:
    """Publish a finished file (atomic on one filesystem; tests count the calls)."""
    os.replace(tmp, final)


def write_atomic(arr: np.ndarray, fmt: str, final: Path) -> None:
    """Encode ``arr`` to a temporary file next to ``final``, then rename it into place."""
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
    try:
        with open(tmp, "wb") as fh:
            encode(arr, fmt, fh)
        _commit(str(tmp), str(final))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_backend(expected: str) -> None:
    """Refuse to compute on a worker whose millipyde backend differs from the client's."""
    import millipyde as mp

    if mp.backend() != expected:
        raise RuntimeError(f"millipyde worker backend is {mp.backend()!r} but the client's is "
                           f"{expected!r}: results would differ (set MILLIPYDE_BACKEND on the "
                           "workers)")


def _as_image(value: Any, is_image: bool) -> Any:
    import millipyde as mp

    x = mp.gpuimage(value) if is_image else mp.gpuarray(value)
    x._materialize()
    return x


def compute(sources: dict[Any, Any], items: Sequence[tuple[int, Any]], operations: list,
            seed: int, batch_size: int) -> list[tuple[np.ndarray | None, str | None]]:
    """``(host array, None)`` or ``(None, error text)`` for each ``(sample, source key)``.

    ``sources`` maps a key to an ``(ndarray, is_image)`` pair. ``batch_size`` 1 runs each
    output alone, as a Pipeline does; above 1, the outputs whose samples share ``sample //
    batch_size`` are made together, as the Generator makes that batch (the caller passes whole
    batches). Runs on device 0 (a worker pinned to one GPU sees it first) with a stream of
    its own, as a Pipeline or Generator worker does.
    """
    from .. import devices
    from ..backend import ACTIVE as runtime
    from ..graph.exec import batch
    from ..workers import STREAMS

    device = 0
    stream, generation = STREAMS.acquire(device)
    try:
        with runtime.on_device(device), runtime.using_stream(stream), \
                devices.targeting(device):
            xs = {key: _as_image(arr, is_image) for key, (arr, is_image) in sources.items()}
            if batch_size <= 1:
                return [_one(xs[key], operations, seed, k, device, stream) for k, key in items]
            stacks = batch.stack_inputs([x._node for x in xs.values()], device)
            out: list[tuple[np.ndarray | None, str | None]] = []
            for group in batches(items, batch_size):
                out += _batched(xs, group, operations, seed, device, stream, stacks)
            return out
    finally:
        STREAMS.release(device, stream, generation)


def batches(items: Sequence[Any], batch_size: int) -> list[list[Any]]:
    """``items`` (sample first) split where ``sample // batch_size`` changes."""
    groups: list[list[Any]] = []
    for it in items:
        if groups and groups[-1][0][0] // batch_size == it[0] // batch_size:
            groups[-1].append(it)
        else:
            groups.append([it])
    return groups


def probe(paths: Sequence[str]) -> list[tuple[tuple[int, ...], str] | None]:
    """The gpuimage shape and dtype each file gives (None: unreadable), from headers if simple.

    The client needs them to batch a Generator's outputs as ``Generator`` does.
    """
    from PIL import Image

    simple = {"L": (), "1": (), "RGB": (3,), "RGBA": (4,)}
    out: list[tuple[tuple[int, ...], str] | None] = []
    for p in paths:
        try:
            with Image.open(p) as im:
                mode, (w, h) = im.mode, im.size
            if mode in simple:
                out.append(((h, w, *simple[mode]), "uint8"))
                continue
            import millipyde as mp

            from ..io import load_array

            x = mp.gpuimage(load_array(p))
            out.append((tuple(x.shape), str(x.dtype)))
        except Exception:
            out.append(None)
    return out


def _never() -> bool:
    return False


def _describe(err: BaseException) -> str:
    from ..workers import StepError

    if isinstance(err, StepError):
        return f"{err.what} failed: {type(err.cause).__name__}: {err.cause}"
    return f"{type(err).__name__}: {err}"


def _one(x: Any, operations: list, seed: int, k: int, device: int,
         stream: Any) -> tuple[np.ndarray | None, str | None]:
    from ..workers import apply_operations

    y = x.clone()
    try:
        apply_operations(y, operations, seed, k, device, stream, _never)
        return np.asarray(y), None
    except Exception as err:
        return None, _describe(err)


def _batched(xs: dict, items: Sequence[tuple[int, Any]], operations: list, seed: int,
             device: int, stream: Any, stacks: dict) -> list[tuple[np.ndarray | None, str | None]]:
    """As ``Generator._make_batch``: record each output, then one launch per kernel."""
    from ..graph.exec import batch
    from ..workers import StepError, kernels_failed, record_operations, sync

    sync(stream)  # the stack was filled on this stream
    ys: list[Any] = []
    errors: list[str | None] = []
    for k, key in items:
        y = xs[key].clone()
        try:
            record_operations(y, operations, seed, k, device, _never, batch.LIFT_GATES)
            ys.append(y)
            errors.append(None)
        except StepError as err:
            ys.append(None)
            errors.append(_describe(err))
    live = [y for y in ys if y is not None]
    try:
        failed = batch.materialize_batch(live, stacks)
        sync(stream)
    except Exception as err:
        failed = [err] * len(live)
    late = iter(failed)
    out: list[tuple[np.ndarray | None, str | None]] = []
    for y, err in zip(ys, errors, strict=True):
        if y is None:
            out.append((None, err))
            continue
        bad = next(late)
        if bad is not None:
            out.append((None, _describe(kernels_failed(operations, bad))))
            continue
        try:
            out.append((np.asarray(y), None))
        except Exception as e:
            out.append((None, _describe(e)))
    return out


def _read(paths: Sequence[Any], source: Any = None) -> tuple[dict, dict[Any, str]]:
    """Decoded inputs by key: file paths, or a data source's sample indices (read and decoded
    as the Generator does: ``io.decode_array`` with the EXIF orientation)."""
    from ..io import decode_array, load_array

    sources, bad = {}, {}
    for p in dict.fromkeys(paths):
        try:
            if source is None:
                sources[p] = (load_array(p), True)
            else:
                sources[p] = (decode_array(source.read(p), source.name(p), exif=True), True)
        except Exception as err:  # named in the client's error; other files go on
            bad[p] = f"{type(err).__name__}: {err}"
    return sources, bad


def process_chunk(items: list[tuple[int, int, str, str]], operations: list, seed: int,
                  out_dir: str, fmt: str, backend: str, to_uint8: bool = False,
                  batch_size: int = 1, source: Any = None) -> dict[str, Any]:
    """Make the files of one chunk; ``items`` are ``(position, sample, source, name)``
    (``source`` a file path, or the index of a sample of the data source `source`).

    Files that already exist are not written again (a re-run, or a task retried after its
    worker died); with ``batch_size`` > 1 (see :func:`compute`) the other outputs of their
    batch are still computed, so every batch is made exactly as the Generator makes it.
    ``to_uint8``: save non-uint8 outputs as ``millipyde augment`` does (scaled to 0..255).

    Returns counts, per-item errors ``(position, source, kind, message)`` with kind ``read``,
    ``compute`` or ``format``, and for the bench the wall-clock span of each stage
    (``time.time()``) and this thread's CPU seconds in it: ``read`` (read + decode),
    ``compute`` (operations, device to host) and ``write`` (encode + write).
    """
    check_backend(backend)
    out = Path(out_dir)
    todo = {it[0] for it in items if not (out / it[3]).exists()}
    if batch_size > 1:
        work = [it for g in batches([(it[1], it) for it in items], batch_size)
                if any(x[1][0] in todo for x in g) for _, it in g]
    else:
        work = [it for it in items if it[0] in todo]
    t0, c0 = time.time(), time.thread_time()
    sources, bad = _read([it[2] for it in work], source)
    t1, c1 = time.time(), time.thread_time()
    ready = [it for it in work if it[2] in sources]
    made = compute(sources, [(it[1], it[2]) for it in ready], operations, seed,
                   batch_size) if ready else []
    t2, c2 = time.time(), time.thread_time()
    errors = [(pos, src if source is None else source.name(src), "read", bad[src])
              for pos, _, src, _ in work if src in bad and pos in todo]
    written = 0
    for (pos, _, src, name), (arr, err) in zip(ready, made, strict=True):
        if pos not in todo:
            continue
        if err is not None:
            errors.append((pos, src if source is None else source.name(src), "compute", err))
            continue
        if to_uint8 and arr.dtype != np.uint8:
            from ..io import to_uint8

            arr = to_uint8(arr)
        try:
            write_atomic(arr, fmt, out / name)
            written += 1
        except FormatError as e:
            errors.append((pos, src, "format", str(e)))
    t3, c3 = time.time(), time.thread_time()
    return {"items": len(items), "todo": len(todo), "computed": len(ready), "written": written,
            "errors": sorted(errors), "stages": {"read": (t0, t1), "compute": (t1, t2),
                                                 "write": (t2, t3)},
            "cpu": {"read": c1 - c0, "compute": c2 - c1, "write": c3 - c2},
            "worker": f"{socket.gethostname()}:{os.getpid()}"}


def generate_chunk(sources: list[tuple[Any, bool]], items: list[tuple[int, int]],
                   operations: list, seed: int, backend: str, batch_size: int) -> list:
    """Outputs ``(array, None)`` / ``(None, error)`` for ``items`` = ``(sample, source index)``.

    A source is ``(path, True)`` (read here) or ``(ndarray, is_image)`` (scattered inputs).
    """
    check_backend(backend)
    from ..io import load_array

    loaded = {}
    for i, (value, is_image) in enumerate(sources):
        if isinstance(value, str):
            try:
                value = load_array(value)
            except Exception as err:
                return [(None, f"{type(err).__name__}: {err}")] * len(items)
        loaded[i] = (value, is_image)
    return compute(loaded, items, operations, seed, batch_size)
