"""``Generator(..., client=c)``: a Generator whose outputs are made on a Dask cluster.

Kept apart from :mod:`millipyde.distributed` (which it uses) so that ``generator.py`` only
delegates here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import random as mprandom
from ..array import ArgumentError
from ..pipeline import PipelineError, check_operations, check_seed
from .cluster import check_client, worker_slots
from .jobs import batch_for, chunk_size, generator_batch, source_list
from .tasks import generate_chunk


class ClusterGenerator:
    """The state behind ``Generator(..., client=c)``: outputs made on the cluster, in order.

    At most ``window`` chunks of outputs are in flight ahead of ``next()``. Outputs come back
    as host ndarrays. A directory input is listed here and read by the workers; gpuarray
    inputs are copied to the host and scattered to the workers once, when the Generator is
    made.
    """

    def __init__(self, inputs: Any, operations: list, seed: int, outputs: int | None,
                 client: Any) -> None:
        from .. import backend
        from ..image import gpuimage
        from ..pipeline import check_inputs

        self.client = client
        self.operations = operations
        self.seed = seed
        self.outputs = outputs
        self.backend = backend()
        if isinstance(inputs, (str, os.PathLike)):
            self.inputs: list = [Path(p) for p in source_list(inputs)]
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
        if isinstance(inputs, (str, os.PathLike)):
            self.batch = generator_batch(client, [str(p) for p in self.inputs])
        else:
            self.batch = batch_for([(x.shape, x.dtype) for x in self.inputs])
        slots = worker_slots(client)
        self.chunk = chunk_size(outputs if outputs is not None else 16 * slots, slots,
                                 self.batch)
        self.window = 2 * slots
        self.futures: dict[int, Any] = {}
        self.submitted = 0
        self.next = 0
        self.current: tuple[int, list] | None = None
        self.stopped = False
        #: the first window submitted (``next()`` calls :meth:`start` until then; each chunk
        #: :meth:`take` finishes submits the next one)
        self.started = False

    def start(self) -> None:
        """Keep the window of chunks in flight."""
        self.started = True
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
                self.backend, self.batch, pure=False)
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
    if outputs is not None and (isinstance(outputs, (bool, np.bool_))
                                or not isinstance(outputs, (int, np.integer)) or outputs < 0):
        raise ArgumentError(f"Generator outputs must be an int >= 0 or None, got {outputs!r}")
    outputs = None if outputs is None else int(outputs)
    if isinstance(client, str):  # (process() takes a spec; a Generator outlives a call)
        raise ArgumentError(f"Generator client must be a distributed.Client, got {client!r} "
                            "(make one with millipyde.distributed.cluster_client)")
    check_client(client, "Generator")
    if not isinstance(return_to_host, (bool, np.bool_)):
        raise ArgumentError(f"Generator return_to_host must be a bool, got "
                            f"{type(return_to_host).__name__}")
    seed = check_seed(seed, "Generator")
    gen.device = 0
    gen.outputs = outputs
    gen.return_to_host = True  # outputs cross the network as host arrays
    gen.seed = mprandom.global_seed() if seed is None else seed
    gen._state = ClusterGenerator(inputs, ops, gen.seed, outputs, client)

