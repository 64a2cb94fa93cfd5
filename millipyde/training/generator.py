"""``Generator``: an iterator of freshly augmented copies of its inputs (thesis 4.4.3 / 9.6).

Output ``k`` is input ``k % n`` cloned onto the Generator's device and passed through the
Operations with random streams keyed on ``(seed, k, operation index)``, so outputs do not depend
on which worker made them. Device workers fill a bounded window ahead of ``next()``; outputs are
delivered strictly in order and the inputs are never modified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import devices
from .. import random as mprandom
from ..array import ArgumentError, gpuarray
from ..backend import ACTIVE as runtime  # the active backend
from ..graph.codegen import heap
from ..image import gpuimage
from ..pipeline import (
    check_device_arg,
    check_inputs,
    check_methods,
    check_operations,
    check_seed,
)
from ..workers import private_handle
from .generator_state import AHEAD_BYTES, GeneratorState, StreamState  # noqa: F401  (tests: GeneratorState)


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
    """Iterator of augmented copies of its source's samples, epoch after epoch.

    Parameters
    ----------
    inputs : list of gpuarray, str / os.PathLike, list of paths, or millipyde.data.Source
        Arrays/images in memory (never modified); a folder (recursive: class subfolders give
        ``labels`` and ``classes``, as torchvision's ImageFolder); a list of image paths; tar
        shards in the WebDataset layout (a ``.tar`` path, a glob, or a list of them); or a
        source of :mod:`millipyde.data` (``Coco``, ...). Folders, paths and shards stream:
        nothing is decoded before it is needed, memory is bounded by a read-ahead window.
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
        ``k % world_size == rank``; ``outputs`` counts every rank's outputs. Give both or
        neither; not with `client`.
    shuffle : bool, default False
        Draw each epoch's order from ``(seed, epoch)`` (:meth:`set_epoch`), as torch's
        ``DistributedSampler``; every rank's share of an epoch has the same length (padded
        with its own samples), disjoint before padding, complete together.
    drop_last : bool, default False
        Cut every rank's share of an epoch to ``n // world_size`` instead of padding it.
    strict : bool, default False
        A file that cannot be read or decoded raises ``millipyde.data.BadSampleError``;
        by default it is skipped with one ``UserWarning`` naming it, counted in
        :attr:`bad_samples`, and its place refilled from this rank's share.
    labels : sequence of int, optional
        One label per input (in-memory inputs, or a list of paths).
    decoder : {"auto", "pillow", "nvimgcodec"}, default "auto"
        How streamed sources decode: nvImageCodec on CUDA GPUs where it is installed (its
        C API, or its Python binding with ``MILLIPYDE_NVIMGCODEC_API=python``), Pillow on a
        thread pool otherwise.
    read_ahead : int, optional
        Bound in bytes on a streamed source's encoded samples read ahead of the decoder
        (default 256 MiB; at least one sample is always read).
    decode_process : bool, optional
        A streamed source is read and decoded in a worker process of its own (its batches
        shared with this process without a copy: CUDA IPC on a GPU, shared memory on the
        cpu backend), so that reading and decoding never wait for this process's GIL; the
        batches are the same either way. None (default): ``MILLIPYDE_DECODE_PROCESS``
        (``1``; ``0``; ``auto``), else ``auto``: a worker process on the cuda backend for a
        rank's epoch of at least 50,000 samples (``data.process.AUTO_SAMPLES``: a worker
        starts once per iterator, ~4 s on an H200), this process otherwise and on the cpu
        backend. True where the backend cannot: ValueError.

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
                 rank: Any = None, world_size: Any = None, *, shuffle: Any = False,
                 drop_last: Any = False, strict: Any = False, labels: Any = None,
                 decoder: Any = "auto", read_ahead: Any = None, decode_process: Any = None,
                 **kwargs: Any) -> None:
        self._state: GeneratorState | None = None
        self._stream: Any = None
        if kwargs:
            raise ArgumentError(f"Generator got unknown keyword argument(s): {', '.join(kwargs)}")
        for v, name in ((shuffle, "shuffle"), (drop_last, "drop_last"), (strict, "strict")):
            if not isinstance(v, (bool, np.bool_)):
                raise ArgumentError(f"Generator {name} must be True or False, got {v!r}")
        from .. import data

        if read_ahead is not None and (isinstance(read_ahead, bool) or not isinstance(
                read_ahead, (int, np.integer)) or read_ahead < 1):
            raise ArgumentError(f"Generator read_ahead must be an int >= 1 (bytes) or None, "
                                f"got {read_ahead!r}")
        if decode_process is not None and not isinstance(decode_process, (bool, np.bool_)):
            raise ArgumentError(f"Generator decode_process must be True, False or None, got "
                                f"{decode_process!r}")
        if decoder not in data.DECODERS:
            raise ArgumentError(f"Generator decoder must be one of {data.DECODERS}, got "
                                f"{decoder!r}")
        if client is not None:  # outputs made on a Dask cluster (millipyde.distributed)
            from ..distributed.generator import attach_generator

            if rank is not None or world_size is not None:
                raise ArgumentError("Generator rank/world_size cannot be combined with client")
            if shuffle or drop_last or labels is not None:
                raise ArgumentError("Generator shuffle/drop_last/labels cannot be combined "
                                    "with client")
            attach_generator(self, inputs, operations, device, outputs, return_to_host, seed,
                             client)
            return
        try:
            source = data.as_source(inputs, labels)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as err:
            raise ArgumentError(f"Generator inputs: {err}") from err
        except ValueError as err:
            raise ArgumentError(f"Generator inputs: {err}") from err
        streamed = source is not None and not source.resident
        if source is not None and source.resident:  # data.Arrays: in memory
            labels = source.labels
            inputs = [x if isinstance(x, gpuarray) else gpuimage(x) for x in source.items]
        items: list = []
        if not streamed:
            items = check_inputs(inputs, "Generator")
            if not items:
                raise ArgumentError("Generator needs at least one input")
        ops = check_operations(operations, "Generator")
        # torchvision's ToDtype / Normalize (millipyde.transforms): settings of batches()
        from ..transforms.options import split_options

        ops, self._batch_options = split_options(ops)
        if not streamed:
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
        # the inputs as they are now: an op recorded on one later (or a Pipeline's commit)
        # rebinds the caller's handle, never these (nodes are immutable values: no copy)
        items = [private_handle(x) for x in items]
        self.device: int = dev
        # batches() spread over every device unless one is chosen; a data-parallel rank keeps
        # to its own (the current) device, as its training process does; a streamed source
        # decodes on one device (one process per GPU: rank=, world_size=)
        self._pinned = device is not None or devices.target_device() is not None or \
            world > 1 or streamed
        self.rank: int = rank
        self.world_size: int = world
        self.outputs: int | None = None if outputs is None else int(outputs)
        self.return_to_host: bool = bool(return_to_host)
        self.seed: int = mprandom.global_seed() if seed is None else seed
        self._epoch = 0
        #: the source's classes (folders of classes), else None
        self.classes: list[str] | None = None
        #: one int64 label per sample (or input), else None
        self.labels: np.ndarray | None = None
        n = len(source) if streamed else len(items)
        # in-memory inputs in order with a count of outputs keep the thesis's cycle (output k
        # is input k % n) where world_size does not divide them (EpochSampler's cycle)
        cycle = not streamed and not shuffle and not drop_last and outputs is not None and \
            n % world != 0
        try:
            self.sampler = data.EpochSampler(n, world, rank, bool(shuffle), self.seed,
                                             bool(drop_last), cycle)
        except ValueError as err:
            raise ArgumentError(f"Generator: {err}") from None
        if streamed:
            from .batch_stream import Stream

            self.source = source
            self.classes, self.labels = source.classes, source.labels
            try:
                worker = data.process.use_process(
                    None if decode_process is None else bool(decode_process),
                    self.sampler.length)
            except ValueError as err:
                raise ArgumentError(f"Generator: {err}") from None
            self._stream = Stream(source, self.sampler, ops, self.seed, decoder, bool(strict),
                                  decode_process=worker,
                                  **({} if read_ahead is None else {"window": int(read_ahead)}))
        else:
            from ..data import Arrays

            if labels is not None:
                labels = data.sources.check_labels(labels, n, "Generator")
            self.labels = labels
            self.source = Arrays(items, labels)
        self._ops = ops
        self._state = self._new_state(0)

    def _new_state(self, epoch: int) -> GeneratorState:
        """The state ``next()`` runs on, from the start of ``epoch``."""
        start = self.sampler.start(epoch)
        if self._stream is not None:
            return StreamState(self._stream, list(self._ops), self.device, self.seed,
                               self.outputs, self.return_to_host, self.rank, self.world_size,
                               start)
        return GeneratorState(self.source.items, list(self._ops), self.device, self.seed,
                              self.outputs, self.return_to_host, self.rank, self.world_size,
                              self.sampler, start)

    @property
    def inputs(self) -> list[gpuarray]:
        """The in-memory inputs outputs are copied from, as they were when the Generator was
        made (new handles on those values: recording on them changes neither the Generator
        nor the arrays it was given).

        Raises
        ------
        TypeError
            The Generator streams its source (see :attr:`source`): nothing is in memory.
        """
        if self._stream is not None:
            raise TypeError(f"a Generator over {self.source!r} streams its samples: it has no "
                            "in-memory inputs (see Generator.source)")
        return [private_handle(x) for x in self._state.inputs]

    @property
    def epoch(self) -> int:
        """The epoch that ``next()`` and new ``batches()`` start from (:meth:`set_epoch`)."""
        return self._epoch

    def set_epoch(self, epoch: Any) -> None:
        """Start ``next()`` and the ``batches()`` made from now on at epoch ``epoch``, as
        torch's ``DistributedSampler.set_epoch``: its order (``shuffle=True``) and every
        draw depend on ``(seed, epoch)``. ``next()`` restarts there (outputs made ahead are
        dropped).

        Raises
        ------
        ValueError
            `epoch` is not an int >= 0, or the Generator cycles its in-memory inputs in order
            with a count of ``outputs`` that ``world_size`` does not divide (no epochs).
        """
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ArgumentError(f"set_epoch needs an int >= 0, got {epoch!r}")
        if not isinstance(self._state, GeneratorState):
            raise ArgumentError("set_epoch needs a Generator of this process (no client=)")
        try:
            self.sampler.start(int(epoch))
        except ValueError as err:
            raise ArgumentError(f"set_epoch: {err}") from None
        self._epoch = int(epoch)
        old = self._state
        self._state = self._new_state(self._epoch)
        old.stop(join=old.group is not None)

    @property
    def epoch_length(self) -> int:
        """This rank's outputs per epoch (``ceil(n / world_size)``, or ``n // world_size``
        with ``drop_last``)."""
        return self.sampler.length

    @property
    def bad_samples(self) -> Any:
        """The files a streamed source skipped (``millipyde.data.BadSamples``: ``names``, a
        dict of file to reason, and ``skipped``, the outputs refilled); None in memory."""
        return None if self._stream is None else self._stream.bad

    @property
    def operations(self) -> list:
        """The Operations applied to each output (a new list)."""
        return list(self._state.operations)

    def explain(self, output: int = 0) -> Any:
        """The fused plan (kernels, devices, bytes) that produces output number ``output``."""
        from ..graph.explain import explain_operations

        items = self.inputs
        x = items[self._state.input_index(output)]
        return explain_operations(x, self._state.operations, self.seed, output, copy=True,
                                  title=f"Generator output {output}")

    def batches(self, size: Any, *, shape: Any = None, layout: Any = "NCHW",
                dtype: Any = "float32", mean: Any = None, std: Any = None, channels: Any = 3,
                drop_last: Any = False, with_indices: Any = False,
                with_targets: Any = False, with_labels: Any = False,
                epochs: Any = None, mix: Any = None) -> Any:
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
        with_labels : bool
            Also yield each sample's label (the Generator's ``labels``, or its source's): an
            int64 gpuarray of shape (n,) on the batch's device, after the indices and before
            the targets. ``with_labels=True`` alone yields ``(batch, labels)``.
        epochs : int, optional
            Yield this many whole epochs from :attr:`epoch`, each ending with its own last
            batch (smaller, or dropped with `drop_last`): ``len()`` is then ``epochs`` times
            the batches of one epoch. Default: batches run on from :attr:`epoch` across epoch
            ends (``outputs=None``: for ever), batch ``b`` holding this rank's outputs
            ``b * size ..`` from the start of the epoch.

        mix : MixUp, CutMix or a RandomChoice of them, optional
            Mix each batch with this batch mixer (``millipyde.MixUp`` ...) as it is made, on
            the worker's stream behind the batch's kernels (no wait of its own, made ahead
            like the batch): the labels yielded are then its soft labels, a float32 gpuarray
            (n, K). The draws of batch ``b`` are the mixer's at ``step`` = the batch's first
            output index (:meth:`BatchMix.__call__` with that ``step`` on the unmixed batch
            gives the same values). Needs ``with_labels=True`` and the mixer's ``layout``;
            not with ``with_targets``.

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
        input sizes (``batch_arena``; two with ``adjust_contrast``). The policies
        (``RandAugment`` ...) and ``AugMix`` record their drawn ops as gated entries of those
        gathers (AugMix: its chains as branches of the batch's gather, mixed by one launch:
        docs/OPS.md, "AugMix"). Generators with other callable Operations make each output as
        ``next()`` does, then convert it (the documented per-output fallback).

        Raises
        ------
        ValueError
            Any invalid argument (naming it).
        """
        from .batches import Batches, BatchSpec

        if not isinstance(self._state, GeneratorState):
            raise ArgumentError("Generator.batches needs a Generator of this process (no "
                                "client=)")
        # ToDtype / Normalize among the operations (millipyde.transforms) where not given here
        opts = getattr(self, "_batch_options", {})
        mean = opts.get("mean") if mean is None else mean
        std = opts.get("std") if std is None else std
        dtype = opts.get("dtype", dtype) if dtype == "float32" else dtype
        spec = BatchSpec.check(size, shape, layout, dtype, mean, std, channels, drop_last,
                               with_indices)
        for v, name in ((with_targets, "with_targets"), (with_labels, "with_labels")):
            if not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {v!r}")
        if with_targets:
            from .batch_targets import check_operations

            check_operations(self._state.operations)
        if with_labels and self.labels is None:
            raise ArgumentError("with_labels=True needs labels: class subfolders, tar "
                                "members' .cls/.json, or Generator(..., labels=)")
        if mix is not None:
            from .batch_mix import check_batches_mix

            check_batches_mix(mix, spec.layout, bool(with_labels), bool(with_targets))
        if epochs is not None:
            if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or \
                    epochs < 1:
                raise ArgumentError(f"epochs must be an int >= 1 or None, got {epochs!r}")
            if self.outputs is not None:
                raise ArgumentError("epochs= counts whole epochs: give it with outputs=None")
            if self.sampler.cycle:
                raise ArgumentError("epochs= needs equal shares (shuffle=True, drop_last, "
                                    "or a world_size dividing the inputs)")
        devs = [self.device] if self._pinned else list(range(devices.get_device_count()))
        st = self._state
        # a sample's size: shape=, else the largest in-memory input (a streamed source's
        # samples are known when decoded: its batches are checked as they are allocated)
        hw = spec.shape or (max((a.shape[:2] for a in st.inputs), key=lambda s: s[0] * s[1])
                            if st.inputs else None)
        samples = spec.size if st.outputs is None else min(spec.size, st.outputs)
        for d in devs if hw is not None else ():
            spec.check_fits(samples, hw, runtime.memory_bytes(d), d)
        # a cold kernel cache: every kernel of the chain compiled at once in worker processes
        from .precompile import before_batches

        before_batches(self, spec)
        return Batches(self, spec, devs, bool(with_targets), with_labels=bool(with_labels),
                       epochs=None if epochs is None else int(epochs), epoch=self._epoch,
                       mix=mix)

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
        if not st.started:  # (once started: no check or call more per output)
            if getattr(st, "compiles_ahead", False) and not st.stopped:
                # a cold kernel cache: the first outputs' kernels compiled at once in worker
                # processes
                from .precompile import before_outputs

                before_outputs(st)
            st.start()
        out = st.take()
        if heap.owed():  # this output's making compiled: collect now, not mid-training
            heap.settle()
        return out

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
        what = f"{self.source!r}" if self._stream is not None else f"{len(st.inputs)} inputs"
        return (f"<Generator: {what}, "
                f"[{', '.join(op.name for op in st.operations)}], device={self.device}, "
                f"outputs={n}>")
