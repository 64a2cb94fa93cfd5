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

from .cluster import cluster_client, local_cluster, pinned_cluster
from .jobs import MANIFEST, process, run_files

__all__ = ["MANIFEST", "cluster_client", "local_cluster", "pinned_cluster", "process",
           "run_files"]
