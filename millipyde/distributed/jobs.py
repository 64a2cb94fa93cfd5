"""``process`` and ``run_files``: every output of a chain of Operations over a source, made
in chunks by the workers of a Dask cluster and written atomically, with a manifest that lets a
run resume; and the chunk sizes and sources the distributed Generator shares."""


from __future__ import annotations

import copyreg
import hashlib
import json
import math
import os
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import __version__
from .. import random as mprandom
from ..array import ArgumentError
from ..io import check_outputs_apart
from ..operation import Operation
from ..pipeline import PipelineError, check_operations, check_seed
from .cluster import (
    check_client,
    client_or_local,
    worker_slots,
)
from .tasks import FORMATS, TEMP_SUFFIX, process_chunk, reduce_operation

copyreg.pickle(Operation, reduce_operation)  # Operations hold a lock: send them by their parts

#: The manifest :func:`process` keeps in ``out_dir``.
MANIFEST = "millipyde-manifest.json"
_MAX_CHUNK = 64  # the Generator's batch: one batched launch per kernel per chunk on a GPU


def chunk_size(items: int, slots: int, batch: int = 1) -> int:
    """Outputs per task: about 4 tasks per worker thread, at most 64 (``MILLIPYDE_DASK_CHUNK``
    decides when set), rounded to whole batches of ``batch`` outputs."""
    from .. import config

    size = config.dask_chunk()
    if size is None:
        size = max(1, min(_MAX_CHUNK, math.ceil(items / (4 * slots))))
    return batch * max(1, size // batch)


# -- arguments ------------------------------------------------------------------------------
def source_list(src: Any) -> list[Any]:
    """File paths of ``src``; a ``millipyde.data`` source gives its sample indices, and a tar
    glob or list of ``.tar`` paths its shards' samples (:func:`_as_data_source`)."""
    from ..io import iter_image_files

    data_src = _as_data_source(src)
    if data_src is not None:
        return list(range(len(data_src)))
    if isinstance(src, (str, os.PathLike)):
        try:
            return [str(p) for p in iter_image_files(src)]
        except (FileNotFoundError, NotADirectoryError) as err:
            raise ArgumentError(f"process src: {err}") from err
    if not isinstance(src, (list, tuple)) or not src:
        raise ArgumentError(f"process src must be a directory or a non-empty list of image file "
                            f"paths, got {src!r:.80}")
    for i, p in enumerate(src):
        if not isinstance(p, (str, os.PathLike)):
            raise ArgumentError(f"process src[{i}] must be a path, got {type(p).__name__}")
    return [str(p) for p in src]


def _as_data_source(src: Any) -> Any:
    """``src`` as a streamed ``millipyde.data`` source where it is one (a Source, tar shards),
    else None (a folder or list of files: read by path as before)."""
    from ..data import Source
    from ..data.sources import is_pathlike, is_tar

    if isinstance(src, Source):
        if src.resident:
            raise ArgumentError("process src: in-memory inputs (data.Arrays) are not files; "
                                "use Generator(..., client=)")
        return src
    if (is_pathlike(src) and is_tar(src)) or (isinstance(src, (list, tuple)) and src and
                                             all(is_pathlike(x) and is_tar(x) for x in src)):
        from ..data import Shards

        try:
            return Shards(src)
        except (OSError, ValueError) as err:
            raise ArgumentError(f"process src: {err}") from err
    return None


def _items(sources: list[Any], outputs: int | None, fmt: str) -> list[tuple[int, int, Any, str]]:
    """``(position, sample, source, file name)`` of every output, in order; a data source's
    samples (ints) are written ``{i:06d}.<fmt>`` (their names need not have distinct stems)."""
    if outputs is None and sources and isinstance(sources[0], int):
        return [(i, i, i, f"{i:06d}.{fmt}") for i in sources]
    if outputs is None:
        seen: dict[str, str] = {}
        items = []
        for pos, s in enumerate(sources):
            name = f"{Path(s).stem}.{fmt}"
            if name in seen:
                raise ArgumentError(f"process: inputs {seen[name]!r} and {s!r} would both be "
                                    f"written as {name!r} (one stem)")
            seen[name] = s
            items.append((pos, pos, s, name))
        return items
    n = len(sources)
    return [(k, k, sources[k % n], f"{k:06d}.{fmt}") for k in range(outputs)]


def _op_record(op: Any) -> dict[str, Any]:
    fn = op.method if op.method is not None else \
        f"{getattr(op.function, '__module__', '?')}.{op.name}"
    return {"function": fn, "args": repr(op.args), "kwargs": repr(sorted(op.kwargs.items())),
            "probability": op.probability}


def _manifest(sources: list[str], ops: list, seed: int, outputs: int | None, fmt: str,
              backend: str) -> dict[str, Any]:
    digest = hashlib.sha256("\0".join(sources).encode()).hexdigest()
    return {"millipyde": __version__, "backend": backend, "fmt": fmt, "seed": seed,
            "outputs": outputs, "operations": [_op_record(op) for op in ops],
            "inputs": {"count": len(sources), "sha256": digest}}


def _settle_manifest(out: Path, record: dict[str, Any], names: list[str],
                     overwrite: bool) -> None:
    """Refuse a run that differs from the one recorded in ``out`` unless ``overwrite``.

    With ``overwrite`` the manifest goes first, then this run's files (a crash in between
    leaves files without a manifest, which the next run refuses too), then the new manifest.
    """
    path = out / MANIFEST
    old = None
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {"unreadable": str(path)}
    if not overwrite:
        if old is not None and old != record:
            keys = sorted(k for k in set(old) | set(record) if old.get(k) != record.get(k))
            diff = "; ".join(f"{k}: was {old.get(k)!r:.120}, now {record.get(k)!r:.120}"
                             for k in keys)
            raise ArgumentError(f"process: {path} records a different run ({diff}); pass "
                                "overwrite=True to replace its outputs, or use another out_dir")
        if old is None and any((out / n).exists() for n in names):
            raise ArgumentError(f"process: {out} holds output files but no {MANIFEST}: they "
                                "may come from another run; pass overwrite=True to replace them")
    else:
        path.unlink(missing_ok=True)
        for n in names:
            (out / n).unlink(missing_ok=True)
    if old != record or overwrite:
        tmp = out / f".{MANIFEST}.{uuid.uuid4().hex}{TEMP_SUFFIX}"
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        os.replace(tmp, path)


# -- process --------------------------------------------------------------------------------
def process(src: Any, operations: Any, out_dir: Any, *, outputs: int | None = None,
            seed: int | None = None, client: Any = None, fmt: str = "png",
            overwrite: bool = False) -> list[Path]:
    """Run `operations` over image files on a Dask cluster and write every result to a file.

    Parameters
    ----------
    src : str, os.PathLike, list of paths, or millipyde.data.Source
        A directory (its image files in sorted order, as ``images_from_path``) or files;
        or a streamed source of :mod:`millipyde.data` (``Folder``, ``Paths``, ``Shards``,
        ``Coco``; a ``.tar`` path, glob or list of them is made ``Shards``), whose sample
        ``i`` is read by the workers as the Generator reads it (EXIF orientation applied)
        and written ``{i:06d}.<fmt>`` with ``outputs=None``. A source's tasks follow its
        groups (a tar shard per task, read in order), so shards spread over the workers.
    operations : list of Operation
        Applied in order (callables must be importable or picklable on the workers).
    out_dir : str or os.PathLike
        Created if missing. Holds the outputs and the manifest ``millipyde-manifest.json``.
    outputs : int, optional
        None: Pipeline semantics, input ``i`` with sample ``i``, written ``<stem>.<fmt>``.
        N: Generator semantics, output ``k`` is input ``k % n`` with sample ``k``, written
        ``{k:06d}.<fmt>``.
    seed : int, optional
        Seed of the random streams; the global seed (``mp.seed``) if None.
    client : distributed.Client or str, optional
        The cluster; None (or ``"local"``, ``"local:WORKERS"``) starts an embedded
        LocalCluster (LocalCUDACluster on CUDA GPUs with dask-cuda) for this call and closes
        it; ``"tcp://HOST:PORT"`` connects to a scheduler for the call.
    fmt : {"png", "jpg", "tiff", "npy"}
        png/jpg/tiff for uint8 images, npy (and tiff, through tifffile) for float greyscale.
        jpg is lossy: the array before encoding is the single-process one.
    overwrite : bool
        Recompute every output even if `out_dir` holds a finished file or a manifest of a
        different run. Without it, finished files are skipped and a different run refuses.

    Returns
    -------
    list of pathlib.Path
        The output files, in input (or output-index) order.

    Raises
    ------
    ValueError
        An invalid argument, an output that could overwrite an input (`out_dir` the input
        folder or inside it, or an output file name that is an input file: refused before
        anything is written or deleted), two inputs with one stem, a manifest of another run,
        a format
        that cannot hold an output exactly (before the rest is cancelled), or input files
        that cannot be read (named; every other output is written first).
    PipelineError
        An Operation failed on some outputs (named; every other output is written first), or
        a task failed on the cluster.
    """
    return run_files(src, operations, out_dir, outputs=outputs, seed=seed, client=client,
                     fmt=fmt, overwrite=overwrite)[0]


def run_files(src: Any, operations: Any, out_dir: Any, *, outputs: int | None = None,
              seed: int | None = None, client: Any = None, fmt: str = "png",
              overwrite: bool = False, to_uint8: bool = False) -> tuple[list[Path], list[dict]]:
    """:func:`process`, and the reports of its tasks (stage spans: bench/bench_distributed.py).

    ``to_uint8`` saves non-uint8 outputs scaled to uint8, as ``millipyde augment`` does (the
    manifest records it).
    """
    from .. import backend

    ops = check_operations(operations, "process")
    if fmt not in FORMATS:
        raise ArgumentError(f"process fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if outputs is not None and (isinstance(outputs, (bool, np.bool_))
                                or not isinstance(outputs, (int, np.integer)) or outputs < 0):
        raise ArgumentError(f"process outputs must be an int >= 0 or None, got {outputs!r}")
    outputs = None if outputs is None else int(outputs)  # (NumPy integers too, as Generator)
    check_client(client, "process")
    if not isinstance(overwrite, bool):
        raise ArgumentError(f"process overwrite must be a bool, got {type(overwrite).__name__}")
    seed = check_seed(seed, "process")
    seed = mprandom.global_seed() if seed is None else seed
    data_src = _as_data_source(src)
    sources = source_list(data_src if data_src is not None else src)
    items = _items(sources, outputs, fmt)
    out = Path(out_dir)
    # before anything is written or deleted (overwrite=True deletes this run's names first)
    # (a data source's samples are indices: its files are what outputs must not overwrite)
    check_outputs_apart(sources if data_src is None else data_src.files(), out,
                        [it[3] for it in items] + [MANIFEST], "process",
                        folder=src if isinstance(src, (str, os.PathLike)) else None)
    out.mkdir(parents=True, exist_ok=True)
    record = _manifest([str(x) for x in sources] if data_src is None else
                       [data_src.name(i) for i in sources], ops, seed, outputs, fmt, backend())
    if to_uint8:
        record["to_uint8"] = True
    _settle_manifest(out, record, [it[3] for it in items], overwrite)
    pending = {it[0] for it in items if not (out / it[3]).exists()}
    reports: list[dict] = []
    if pending:
        with client_or_local(client) as c:
            # Pipeline semantics: one output at a time, as Pipeline; Generator semantics:
            # the Generator's batches (its batched path where it would take it)
            if data_src is not None:
                size = 1
                blocks = _source_blocks(data_src, items, worker_slots(c))
            else:
                size = 1 if outputs is None else generator_batch(c, sources)
                step = chunk_size(len(pending), worker_slots(c), size)
                blocks = [items[i:i + step] for i in range(0, len(items), step)]
            if size == 1:
                blocks = [[it for it in b if it[0] in pending] for b in blocks]
            blocks = [b for b in blocks if any(it[0] in pending for it in b)]
            shared = None if data_src is None else c.scatter(data_src, broadcast=True)
            reports = _run_chunks(c, blocks, len(items) - len(pending), len(items), ops, seed,
                                  out, fmt, backend(), to_uint8, size, shared)
    return [out / it[3] for it in items], reports


def generator_batch(client: Any, sources: list[str]) -> int:
    """The batch size ``Generator(sources)`` would use (1: per output), from the files' shapes.

    The workers read the shapes (headers where the pixel mode is plain).
    """
    from .tasks import probe

    parts = [sources[i:i + 256] for i in range(0, len(sources), 256)]
    shapes = [s for part in client.gather(client.map(probe, parts, pure=False)) for s in part]
    return batch_for(shapes)


def batch_for(shapes: list) -> int:
    import numpy as np

    from ..graph.exec import batch

    if any(s is None for s in shapes):
        return 1  # an unreadable input: the run reports it
    nodes = [SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype)) for shape, dtype in
             shapes]
    return batch.batch_size(nodes)  # the Generator's own rule, on the inputs' shapes


def _source_blocks(source: Any, items: list, slots: int) -> list[list]:
    """Tasks of a data source's outputs: its groups (a tar shard each, read in order) cut to
    at most ``_MAX_CHUNK`` outputs, at least about 4 tasks per worker thread."""
    group_of = {}
    for g, members in enumerate(source.groups()):
        for i in members:
            group_of[i] = g
    step = chunk_size(len(items), slots)
    by_group: dict[int, list] = {}
    for it in items:
        by_group.setdefault(group_of[it[2]], []).append(it)
    return [part[i:i + step] for part in by_group.values()
            for i in range(0, len(part), step)]


def _run_chunks(client: Any, blocks: list, done: int, total: int, ops: list, seed: int,
                out: Path, fmt: str, backend: str, to_uint8: bool, size: int,
                source: Any = None) -> list[dict]:
    """Submit one task per block, follow them, then raise for the items that failed."""
    from distributed import as_completed
    from tqdm import tqdm

    token = uuid.uuid4().hex[:12]
    futures = [client.submit(process_chunk, b, ops, seed, str(out), fmt, backend, to_uint8,
                             size, source, key=f"millipyde-process-{token}-{i}", pure=False)
               for i, b in enumerate(blocks)]
    results, errors = [], []
    try:
        with tqdm(total=total, initial=done, desc="millipyde.process", unit="img",
                  disable=None) as bar:
            for fut in as_completed(futures):
                try:
                    r = fut.result()
                except Exception as err:
                    raise PipelineError(f"process: a task failed on the cluster: "
                                        f"{type(err).__name__}: {err}") from err
                fmt_errors = [e for e in r["errors"] if e[2] == "format"]
                if fmt_errors:
                    pos, source, _, msg = fmt_errors[0]
                    raise ArgumentError(f"process: output {pos} (from {source!r}): {msg}")
                errors += r["errors"]
                results.append(r)
                bar.update(r["todo"])
    except BaseException:
        client.cancel(futures)
        raise
    _sweep(out)
    if errors:
        _raise_item_errors(sorted(errors))
    return results


def _sweep(out: Path) -> None:
    """Remove temporaries a killed worker left (every task of this run has finished)."""
    for p in out.glob(f".*{TEMP_SUFFIX}"):
        p.unlink(missing_ok=True)


def _raise_item_errors(errors: list[tuple[int, str, str, str]]) -> None:
    unread = list(dict.fromkeys(src for _, src, kind, _ in errors if kind == "read"))
    failed = [e for e in errors if e[2] != "read"]
    if unread and not failed:
        first = next(msg for _, _, kind, msg in errors if kind == "read")
        raise ArgumentError(f"process: {len(unread)} input file(s) could not be read and have "
                            f"no output (every other output was written): "
                            f"{', '.join(map(repr, unread))}; first error: {first}")
    pos, source, _, msg = failed[0]
    more = f"; {len(failed) - 1} more failed output(s)" if len(failed) > 1 else ""
    if unread:
        more += f"; unreadable input file(s): {', '.join(map(repr, unread))}"
    raise PipelineError(f"process: output {pos} (from {source!r}): {msg}{more} (every other "
                        "output was written)")
