"""``Generator``: an iterator of freshly augmented copies of its inputs (thesis 4.4.3 / 9.6).

Output ``k`` is input ``k % n`` cloned onto the Generator's device and passed through the
Operations with random streams keyed on ``(seed, k, operation index)``, so outputs do not depend
on which worker made them. Device workers fill a bounded window ahead of ``next()``; outputs are
delivered strictly in order and the inputs are never modified.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import devices
from . import random as mprandom
from .array import ArgumentError, gpuarray
from .generator_state import AHEAD_BYTES, _State  # noqa: F401  (tests reach _State here)
from .pipeline import (
    check_device_arg,
    check_inputs,
    check_methods,
    check_operations,
    check_seed,
)


def _check_rank(rank: Any, world_size: Any) -> tuple[int, int]:
    """(rank, world_size) validated; (0, 1) when neither is given."""
    if rank is None and world_size is None:
        return 0, 1
    if rank is None or world_size is None:
        raise ArgumentError("Generator rank and world_size must be given together")
    for v, name in ((rank, "rank"), (world_size, "world_size")):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ArgumentError(f"Generator {name} must be an int, got {type(v).__name__}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ArgumentError(f"Generator needs world_size >= 1 and 0 <= rank < world_size, "
                            f"got rank={rank}, world_size={world_size}")
    return int(rank), int(world_size)


class Generator:
    """Iterator of augmented copies of `inputs`, cycling through them in order.

    Parameters
    ----------
    inputs : list of gpuarray, or str / os.PathLike
        Arrays/images (never modified), or a directory of images (``mp.images_from_path``).
    operations : list of Operation
        Applied in order to each copy.
    device : int, optional
        Device that makes the outputs. Otherwise the ``with mp.Device`` target at construction,
        else the recommended (best) device, as in the thesis.
    outputs : int, optional
        Number of outputs before ``StopIteration``; None (default) never stops.
    return_to_host : bool, default False
        Yield NumPy ndarrays instead of gpuarrays/gpuimages.
    seed : int, optional
        Seed of the random streams; the global seed (``mp.seed``) at construction if None.
    client : distributed.Client, optional
        Make the outputs on this Dask cluster (``millipyde.distributed``): yielded in order
        as host ndarrays, a bounded window ahead. A directory is read by the workers;
        gpuarray inputs are scattered to them once, here. `device` must then be None.
    rank, world_size : int, optional
        Data-parallel shares: this Generator yields only the outputs ``k`` with
        ``k % world_size == rank`` (same values as a Generator without them makes for those
        ``k``); ``outputs`` counts every rank's outputs. Give both or neither; not with
        `client`.

    Raises
    ------
    ValueError
        Any invalid argument (also an empty or missing directory, or an unknown keyword).

    Examples
    --------
    >>> import millipyde as mp
    >>> ops = [mp.Operation("random_rotate", -30, 30), mp.Operation("fliplr", probability=0.5)]
    >>> with mp.Generator("examples/images", ops, outputs=3) as gen:  # doctest: +SKIP
    ...     batch = list(gen)
    """

    def __init__(self, inputs: Any, operations: Any, device: Any = None, outputs: Any = None,
                 return_to_host: Any = False, seed: Any = None, client: Any = None,
                 rank: Any = None, world_size: Any = None, **kwargs: Any) -> None:
        self._state: _State | None = None
        if kwargs:
            raise ArgumentError(f"Generator got unknown keyword argument(s): {', '.join(kwargs)}")
        if client is not None:  # outputs made on a Dask cluster (millipyde.distributed)
            from ._distributed_generator import attach_generator

            if rank is not None or world_size is not None:
                raise ArgumentError("Generator rank/world_size cannot be combined with client")
            attach_generator(self, inputs, operations, device, outputs, return_to_host, seed,
                             client)
            return
        if isinstance(inputs, (str, os.PathLike)):
            from .io import images_from_path

            try:
                inputs = images_from_path(inputs)
            except (FileNotFoundError, NotADirectoryError) as err:
                raise ArgumentError(f"Generator inputs: {err}") from err
        items = check_inputs(inputs, "Generator")
        if not items:
            raise ArgumentError("Generator needs at least one input")
        ops = check_operations(operations, "Generator")
        # torchvision's ToDtype / Normalize (millipyde.transforms): settings of batches()
        from .transforms.options import split_options

        ops, self._batch_options = split_options(ops)
        check_methods(items, ops, "Generator")
        dev = check_device_arg(device, "Generator")
        if dev is None:
            dev = devices.get_current_device()  # the `with Device` target, else the best device
        if outputs is not None and (isinstance(outputs, bool) or
                                    not isinstance(outputs, (int, np.integer)) or outputs < 0):
            raise ArgumentError(f"Generator outputs must be an int >= 0 or None, got {outputs!r}")
        if not isinstance(return_to_host, (bool, np.bool_)):
            raise ArgumentError(f"Generator return_to_host must be a bool, got "
                                f"{type(return_to_host).__name__}")
        seed = check_seed(seed, "Generator")
        rank, world = _check_rank(rank, world_size)
        for x in items:
            # Settle pending work once, here, so workers only ever clone stored values.
            x._materialize()
        self.device: int = dev
        # batches() spread over every device unless one is chosen; a data-parallel rank keeps
        # to its own (the current) device, as its training process does
        self._pinned = device is not None or devices.target_device() is not None or \
            world > 1
        self.rank: int = rank
        self.world_size: int = world
        self.outputs: int | None = None if outputs is None else int(outputs)
        self.return_to_host: bool = bool(return_to_host)
        self.seed: int = mprandom.global_seed() if seed is None else seed
        self._state = _State(items, ops, dev, self.seed, self.outputs, self.return_to_host,
                             rank, world)

    @property
    def inputs(self) -> list[gpuarray]:
        """The inputs outputs are copied from (a new list; the arrays themselves)."""
        return list(self._state.inputs)

    @property
    def operations(self) -> list:
        """The Operations applied to each output (a new list)."""
        return list(self._state.operations)

    def explain(self, output: int = 0) -> Any:
        """The fused plan (kernels, devices, bytes) that produces output number ``output``."""
        from .graph.explain import explain_operations

        items = self._state.inputs
        x = items[output % len(items)]
        return explain_operations(x, self._state.operations, self.seed, output, copy=True,
                                  title=f"Generator output {output}")

    def batches(self, size: Any, *, shape: Any = None, layout: Any = "NCHW",
                dtype: Any = "float32", mean: Any = None, std: Any = None, channels: Any = 3,
                drop_last: Any = False, with_indices: Any = False,
                with_targets: Any = False) -> Any:
        """Stacked, converted training batches of this Generator's outputs (an iterator).

        Batch ``b`` holds this rank's outputs ``b * size .. b * size + size - 1`` (a fresh
        sequence from output 0, independent of ``next()``), each converted: values to float
        in [0, 1] (``v / 255`` for uint8), then ``(x - mean) / std`` per channel, rounded
        once to float32 (float16: from that float32); grey outputs replicated to `channels`,
        RGBA outputs without alpha.

        Parameters
        ----------
        size : int
            Samples per batch (>= 1).
        shape : (int, int), optional
            Resize every sample to this (height, width), bilinearly as scikit-image's
            ``resize(order=1, mode="edge", anti_aliasing=False)``. Without it, samples of a
            batch of different shapes raise ValueError naming the output index.
        layout : {"NCHW", "NHWC"}
        dtype : {"float32", "float16"}
        mean, std : float or sequence of `channels` floats, optional
            Per-channel normalization (defaults 0 and 1; every std must be nonzero). Where not
            given, a ``millipyde.transforms.Normalize`` among the operations sets them (and a
            ``ToDtype`` the default `dtype`).
        channels : {3, 1}
            Channels per sample; 1 accepts grey outputs only.
        drop_last : bool
            Drop a last, smaller batch of a finite Generator.
        with_indices : bool
            Yield ``(batch, outputs, inputs)``: also each sample's global output index and
            the index of the input it came from (int64 NumPy arrays), so labels follow.
        with_targets : bool
            Also yield, last, a list with each sample's :class:`millipyde.targets.Targets`
            (boxes, labels, keypoints, mask) moved through its operations and the resize to
            ``shape``; None for samples whose input has no targets. Method Operations only.

        Returns
        -------
        Batches
            An iterator of gpuarrays of shape (n, C, H, W) or (n, H, W, C), each on the device
            that made it: every device, unless the Generator has ``device=``, a ``with Device``
            target or ``world_size > 1`` (then its one device). Use it as a context manager or
            call ``close()`` to stop its workers.

        Notes
        -----
        Batches of gpuimage recording methods are recorded at once (``batch_record``) and
        the last gather writes the batch itself; chains that fuse into one gather (the
        issue-15 geometry, colour, noise and erasing methods, ``@mp.elementwise`` /
        ``@mp.pixelwise`` / ``@mp.index_map`` ops) are one launch per batch whatever the
        input sizes (``batch_arena``; two with ``adjust_contrast``). Generators with other
        callable Operations make each output as ``next()`` does, then convert it (the
        documented per-output fallback).

        Raises
        ------
        ValueError
            Any invalid argument (naming it).
        """
        from .batches import Batches, BatchSpec

        if not isinstance(self._state, _State):
            raise ArgumentError("Generator.batches needs a Generator of this process (no "
                                "client=)")
        # ToDtype / Normalize among the operations (millipyde.transforms) where not given here
        opts = getattr(self, "_batch_options", {})
        mean = opts.get("mean") if mean is None else mean
        std = opts.get("std") if std is None else std
        dtype = opts.get("dtype", dtype) if dtype == "float32" else dtype
        spec = BatchSpec.check(size, shape, layout, dtype, mean, std, channels, drop_last,
                               with_indices)
        if not isinstance(with_targets, (bool, np.bool_)):
            raise ValueError(f"with_targets must be True or False, got {with_targets!r}")
        if with_targets:
            from .batch_targets import check_operations

            check_operations(self._state.operations)
        devs = [self.device] if self._pinned else list(range(devices.get_device_count()))
        # a cold kernel cache: every kernel of the chain compiled at once in worker processes
        from .precompile import before_batches

        before_batches(self, spec)
        return Batches(self, spec, devs, bool(with_targets))

    def __iter__(self) -> Generator:
        return self

    def __next__(self) -> Any:
        """The next augmented copy (a gpuarray/gpuimage, or an ndarray with return_to_host).

        Raises
        ------
        StopIteration
            After `outputs` outputs, or once closed.
        PipelineError
            An Operation failed (chained, naming the operation, output, input and device); the
            Generator is closed.
        """
        st = self._state
        st.start()
        return st.take()

    def close(self) -> None:
        """Stop the workers and drop prefetched outputs; ``next()`` then raises StopIteration."""
        if self._state is not None:
            self._state.stop()

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # No join here: __del__ may run at awkward times; workers exit on their own.
        state = getattr(self, "_state", None)
        if state is not None:
            state.stop(join=False)

    def __repr__(self) -> str:
        st = self._state
        n = "infinite" if self.outputs is None else self.outputs
        return (f"<Generator: {len(st.inputs)} inputs, "
                f"[{', '.join(op.name for op in st.operations)}], device={self.device}, "
                f"outputs={n}>")
