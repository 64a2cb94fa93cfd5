"""Dask clusters for :mod:`millipyde.distributed`: embedded, one worker process per GPU."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from ..array import ArgumentError


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

    from .. import config, devices
    from ..backend import ACTIVE

    threads = threads or config.dask_threads()
    var = ACTIVE.visible_devices_var
    if var is not None:
        visible = os.environ.get(var)
        ids = visible.split(",") if visible else [str(i) for i in
                                                  range(devices.get_device_count())]
        n = len(ids) if workers is None else workers
        if var == "CUDA_VISIBLE_DEVICES":
            try:
                from dask_cuda import LocalCUDACluster
            except Exception:  # not installed, or its own dependencies missing
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


def check_client(client: Any, what: str) -> None:
    """``ValueError`` naming ``client`` unless it is None, a cluster spec string
    (:func:`cluster_client`'s) or a ``distributed.Client``."""
    if client is None or isinstance(client, str):
        return
    from distributed import Client

    if not isinstance(client, Client):
        raise ArgumentError(f"{what} client must be a distributed.Client, 'local', "
                            f"'local:WORKERS' or 'tcp://HOST:PORT', got "
                            f"{type(client).__name__} {client!r:.80}")


@contextlib.contextmanager
def client_or_local(client: Any) -> Iterator[Any]:
    if client is not None and not isinstance(client, str):
        yield client
        return
    with cluster_client("local" if client is None else client) as c:
        yield c


def worker_slots(client: Any) -> int:
    """Worker threads of the cluster (at least 1)."""
    return max(1, sum(client.nthreads().values()))
