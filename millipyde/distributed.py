"""Pipelines and Generators on a Dask cluster: :func:`process` and ``Generator(client=...)``.

Needs the ``dask`` extra (``dask[distributed]``; dask-cuda where GPUs are); millipyde itself
imports without it. Every output is the one a single-process Pipeline or Generator with the
same seed makes on the same backend and GPU model: a worker runs an output through the same
code (``workers.apply_operations`` / the Generator's batched path) with the random stream of
``(seed, sample)``, so neither the worker, the chunk nor the order changes a value.

``src`` and ``out_dir`` must be visible under the same paths from the client and every worker
(one host, or a shared filesystem). Files are read and written by the workers; only paths,
Operations and timings travel through the scheduler. docs/DISTRIBUTED.md has the scale model.
"""

from __future__ import annotations

import contextlib
import copyreg
import hashlib
import json
import math
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import __version__
from . import random as mprandom
from ._distributed_tasks import (
    FORMATS,
    TEMP_SUFFIX,
    generate_chunk,
    process_chunk,
    reduce_operation,
)
from .array import ArgumentError
from .operation import Operation
from .pipeline import PipelineError, check_operations, check_seed

copyreg.pickle(Operation, reduce_operation)  # Operations hold a lock: send them by their parts

__all__ = ["MANIFEST", "ClusterGenerator", "cluster_client", "local_cluster", "pinned_cluster",
           "process", "run_files"]

#: The manifest :func:`process` keeps in ``out_dir``.
MANIFEST = "millipyde-manifest.json"
_MAX_CHUNK = 64  # the Generator's batch: one batched launch per kernel per chunk on a GPU


def local_cluster(workers: int | None = None, threads: int | None = None,
                  env: dict[str, str] | None = None) -> Any:
    """An embedded cluster of worker processes: one per GPU on GPUs, else a LocalCluster.

    On CUDA with dask-cuda installed, its ``LocalCUDACluster``; on other GPUs (or without
    dask-cuda), :func:`pinned_cluster` with each worker's own device first in
    ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``, as dask-cuda does. ``workers`` defaults
    to every GPU (or Dask's choice on CPUs), ``threads`` per worker to
    ``MILLIPYDE_DASK_THREADS``, else 2 on GPUs (reads and encodes overlap the device work) and
    Dask's choice on CPUs. ``env`` is set in the workers of a CPU cluster.
    """
    import logging

    from . import backend, devices, runtime

    threads = threads or runtime.env_int("MILLIPYDE_DASK_THREADS", None)
    if runtime.GPU and not runtime.SIM:
        var = "CUDA_VISIBLE_DEVICES" if backend() == "cuda" else "HIP_VISIBLE_DEVICES"
        visible = os.environ.get(var)
        ids = visible.split(",") if visible else [str(i) for i in
                                                  range(devices.get_device_count())]
        n = len(ids) if workers is None else workers
        if backend() == "cuda":
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                pass
            else:
                return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(ids), n_workers=n,
                                        threads_per_worker=threads or 2,
                                        dashboard_address=":0", silence_logs=logging.ERROR)
        return pinned_cluster(ids, n, threads or 2, var)
    from distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True,
                        dashboard_address=":0", silence_logs=logging.ERROR, env=env)


def pinned_cluster(ids: list[str], workers: int, threads: int, var: str) -> Any:
    """A cluster of ``workers`` processes; worker ``i`` sees ``ids`` rotated to start at ``i``.

    ``var`` (``CUDA_VISIBLE_DEVICES``, ...) is set before the worker process imports anything,
    so millipyde's device 0 there is the worker's own GPU.
    """
    import logging

    from distributed import Nanny, Scheduler, SpecCluster

    if not 1 <= workers <= len(ids):
        raise ArgumentError(f"cluster workers must be between 1 and {len(ids)} (one per "
                            f"device), got {workers}")
    spec = {f"millipyde-{i}": {"cls": Nanny, "options": {
        "nthreads": threads, "env": {var: ",".join(ids[i:] + ids[:i])}}}
        for i in range(workers)}
    return SpecCluster(workers=spec, scheduler={"cls": Scheduler,
                                                "options": {"dashboard_address": ":0"}},
                       silence_logs=logging.ERROR)


@contextlib.contextmanager
def cluster_client(spec: str | None = None) -> Iterator[Any]:
    """A Dask client for ``local``, ``local:WORKERS`` or ``tcp://HOST:PORT``; closed on exit.

    ``local`` starts (and then closes) an embedded cluster: :class:`distributed.LocalCluster`
    of processes, or dask-cuda's ``LocalCUDACluster`` when the backend is CUDA and dask-cuda is
    installed (one worker per GPU).
    """
    from distributed import Client

    spec = "local" if spec is None else str(spec)
    if "://" in spec:
        with Client(spec) as client:
            yield client
        return
    name, _, count = spec.partition(":")
    if name != "local" or (count and (not count.isdigit() or int(count) < 1)):
        raise ArgumentError(f"cluster must be 'local', 'local:WORKERS' (WORKERS >= 1) or "
                            f"'tcp://HOST:PORT', got {spec!r}")
    cluster = local_cluster(int(count) if count else None)
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()


@contextlib.contextmanager
def _client_or_local(client: Any) -> Iterator[Any]:
    if client is not None:
        yield client
        return
    with cluster_client("local") as c:
        yield c


def _slots(client: Any) -> int:
    """Worker threads of the cluster (at least 1)."""
    return max(1, sum(client.nthreads().values()))


def _chunk_size(items: int, slots: int) -> int:
    """Files per task: about 4 tasks per worker thread, at most one Generator batch."""
    from . import runtime

    forced = runtime.env_int("MILLIPYDE_DASK_CHUNK", None, 1, 65535)
    if forced is not None:
        return forced
    return max(1, min(_MAX_CHUNK, math.ceil(items / (4 * slots))))


# -- arguments ------------------------------------------------------------------------------
def _sources(src: Any) -> list[str]:
    from .io import iter_image_files

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


def _items(sources: list[str], outputs: int | None, fmt: str) -> list[tuple[int, int, str, str]]:
    """``(position, sample, source, file name)`` of every output, in order."""
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
    src : str, os.PathLike or list of paths
        A directory (its image files in sorted order, as ``images_from_path``) or files.
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
    client : distributed.Client, optional
        The cluster; None starts an embedded LocalCluster (LocalCUDACluster on CUDA GPUs with
        dask-cuda) for this call and closes it.
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
        An invalid argument, two inputs with one stem, a manifest of another run, a format
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
    from . import backend

    ops = check_operations(operations, "process")
    if fmt not in FORMATS:
        raise ArgumentError(f"process fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if outputs is not None and (isinstance(outputs, bool) or not isinstance(outputs, int)
                                or outputs < 0):
        raise ArgumentError(f"process outputs must be an int >= 0 or None, got {outputs!r}")
    if not isinstance(overwrite, bool):
        raise ArgumentError(f"process overwrite must be a bool, got {type(overwrite).__name__}")
    seed = check_seed(seed, "process")
    seed = mprandom.global_seed() if seed is None else seed
    sources = _sources(src)
    items = _items(sources, outputs, fmt)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record = _manifest(sources, ops, seed, outputs, fmt, backend())
    if to_uint8:
        record["to_uint8"] = True
    _settle_manifest(out, record, [it[3] for it in items], overwrite)
    pending = [it for it in items if not (out / it[3]).exists()]
    reports: list[dict] = []
    if pending:
        with _client_or_local(client) as c:
            reports = _run_chunks(c, pending, len(items), ops, seed, out, fmt, backend(),
                                  to_uint8)
    return [out / it[3] for it in items], reports


def _run_chunks(client: Any, pending: list, total: int, ops: list, seed: int, out: Path,
                fmt: str, backend: str, to_uint8: bool) -> list[dict]:
    """Submit ``pending`` in chunks, follow them, then raise for the items that failed."""
    from distributed import as_completed
    from tqdm import tqdm

    size = _chunk_size(len(pending), _slots(client))
    token = uuid.uuid4().hex[:12]
    futures = [client.submit(process_chunk, pending[i:i + size], ops, seed, str(out), fmt,
                             backend, to_uint8, key=f"millipyde-process-{token}-{i // size}",
                             pure=False)
               for i in range(0, len(pending), size)]
    results, errors = [], []
    try:
        with tqdm(total=total, initial=total - len(pending), desc="millipyde.process",
                  unit="img", disable=None) as bar:
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
                bar.update(r["items"])
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
    more = f"; {len(errors) - 1} more failed output(s)" if len(errors) > 1 else ""
    raise PipelineError(f"process: output {pos} (from {source!r}): {msg}{more} (every other "
                        "output was written)")


# -- Generator(client=...) ------------------------------------------------------------------
class ClusterGenerator:
    """The state behind ``Generator(..., client=c)``: outputs made on the cluster, in order.

    At most ``window`` chunks of outputs are in flight ahead of ``next()``. Outputs come back
    as host ndarrays. A directory input is listed here and read by the workers; gpuarray
    inputs are copied to the host and scattered to the workers once, when the Generator is
    made.
    """

    def __init__(self, inputs: Any, operations: list, seed: int, outputs: int | None,
                 client: Any) -> None:
        from . import backend
        from .image import gpuimage
        from .pipeline import check_inputs

        self.client = client
        self.operations = operations
        self.seed = seed
        self.outputs = outputs
        self.backend = backend()
        if isinstance(inputs, (str, os.PathLike)):
            self.inputs: list = [Path(p) for p in _sources(inputs)]
            self.sources: list[tuple[Any, bool]] = [(str(p), True) for p in self.inputs]
        else:
            self.inputs = check_inputs(inputs, "Generator")
            if not self.inputs:
                raise ArgumentError("Generator needs at least one input")
            import numpy as np

            hosts = [np.asarray(x) for x in self.inputs]  # settles pending work once
            futures = client.scatter(hosts, hash=False)
            self.sources = [(f, isinstance(x, gpuimage)) for f, x in
                            zip(futures, self.inputs, strict=True)]
        slots = _slots(client)
        self.chunk = _chunk_size(outputs if outputs is not None else 16 * slots, slots)
        self.window = 2 * slots
        self.futures: dict[int, Any] = {}
        self.submitted = 0
        self.next = 0
        self.current: tuple[int, list] | None = None
        self.stopped = False

    def start(self) -> None:
        """Keep the window of chunks in flight."""
        while not self.stopped and len(self.futures) < self.window and (
                self.outputs is None or self.submitted < self.outputs):
            k0 = self.submitted
            k1 = k0 + self.chunk if self.outputs is None else min(k0 + self.chunk, self.outputs)
            n = len(self.sources)
            needed = sorted({k % n for k in range(k0, k1)})
            where = {i: j for j, i in enumerate(needed)}
            self.futures[k0] = self.client.submit(
                generate_chunk, [self.sources[i] for i in needed],
                [(k, where[k % n]) for k in range(k0, k1)], self.operations, self.seed,
                self.backend, pure=False)
            self.submitted = k1

    def take(self) -> Any:
        """The next output (a host ndarray); PipelineError naming the output if it failed."""
        if self.stopped or (self.outputs is not None and self.next >= self.outputs):
            raise StopIteration
        k = self.next
        k0 = k - k % self.chunk
        if self.current is None or self.current[0] != k0:
            fut = self.futures.pop(k0)
            try:
                self.current = (k0, fut.result())
            except Exception as err:
                self.stop()
                raise PipelineError(f"Generator: the cluster task for outputs {k0}.. failed: "
                                    f"{type(err).__name__}: {err}") from err
            self.start()
        value, err = self.current[1][k - k0]
        self.next += 1
        if err is not None:
            self.stop()
            raise PipelineError(f"Generator: output {k} (input {k % len(self.sources)}) "
                                f"failed on the cluster: {err}")
        return value

    def stop(self, join: bool = True) -> None:
        """Cancel the chunks in flight and drop what was made ahead."""
        self.stopped = True
        futures, self.futures, self.current = list(self.futures.values()), {}, None
        if futures:
            with contextlib.suppress(Exception):
                self.client.cancel(futures)


def attach_generator(gen: Any, inputs: Any, operations: Any, device: Any, outputs: Any,
                     return_to_host: Any, seed: Any, client: Any) -> None:
    """Make ``gen`` (a Generator being constructed) produce its outputs on ``client``."""
    ops = check_operations(operations, "Generator")
    if device is not None:
        raise ArgumentError("Generator device cannot be combined with client: each worker "
                            "uses its own device")
    if outputs is not None and (isinstance(outputs, bool) or not isinstance(outputs, int)
                                or outputs < 0):
        raise ArgumentError(f"Generator outputs must be an int >= 0 or None, got {outputs!r}")
    if not isinstance(return_to_host, bool):
        raise ArgumentError(f"Generator return_to_host must be a bool, got "
                            f"{type(return_to_host).__name__}")
    seed = check_seed(seed, "Generator")
    gen.device = 0
    gen.outputs = outputs
    gen.return_to_host = True  # outputs cross the network as host arrays
    gen.seed = mprandom.global_seed() if seed is None else seed
    gen._state = ClusterGenerator(inputs, ops, gen.seed, outputs, client)

