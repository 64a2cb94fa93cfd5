"""A small PyTorch adapter for training loops (optional extra: ``pip install millipyde[torch]``).

>>> import millipyde as mp
>>> from millipyde.torch import BatchStream
>>> gen = mp.Generator("train/", ops, shuffle=True, seed=0,
...                    rank=rank, world_size=world_size)                 # doctest: +SKIP
>>> stream = BatchStream(gen, 256, shape=(224, 224), mean=0.5, std=0.25)  # doctest: +SKIP
>>> for epoch in range(90):                                             # doctest: +SKIP
...     stream.set_epoch(epoch)
...     for x, y in stream:            # one epoch: len(stream) batches, every rank alike
...         loss = criterion(model(x), y)

``x`` is each ``Generator.batches`` batch as a torch tensor, zero-copy (through
``__cuda_array_interface__`` on GPUs, DLPack on the cpu backend), on the device that made it,
made ahead of the loop by millipyde's own threads; ``y`` the int64 labels of its samples (the
source's: class folders, tar ``.cls``, ``Generator(labels=)``; or ``labels=`` here, one per
in-memory input), a tensor on the same device. Iterating a stream over a Generator with
``outputs=None`` runs one epoch, the next iteration the next epoch (:meth:`BatchStream.set_epoch`
picks one, as torch's ``DistributedSampler.set_epoch``); with a count of ``outputs`` it runs
them all. :func:`iterable_dataset` wraps the same as a ``torch.utils.data.IterableDataset``:
use it with ``DataLoader(ds, batch_size=None, num_workers=0)`` (the batches are made on the
GPU already: loader worker processes would each copy the Generator, so they are refused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np


def to_tensor(batch: Any) -> Any:
    """A batch (gpuarray) as a torch tensor sharing its memory."""
    import torch

    from .backend import ACTIVE

    if ACTIVE.caps.external_memory:
        return torch.as_tensor(batch, device=f"cuda:{batch.device}")
    return torch.from_dlpack(batch)


class BatchStream:
    """Iterable of a Generator's batches as tensors, with labels and targets (see the module
    doc).

    Parameters
    ----------
    generator : Generator
    size : int
        Samples per batch.
    labels : sequence, optional
        One label per in-memory Generator input (else the Generator's own ``labels``, where
        it has them, are yielded).
    with_targets : bool, default False
        Also yield, last, each sample's ``millipyde.targets.Targets`` (boxes, labels, mask,
        keypoints) in the batch's size: a COCO source, or inputs with targets set.
    convert : callable, optional
        Turns a batch (and the labels) into tensors (default :func:`to_tensor`).
    **kwargs
        ``Generator.batches`` options (``shape``, ``layout``, ``dtype``, ``mean``, ``std``,
        ``channels``, ``drop_last``).

    Yields
    ------
    x, or (x, y), (x, targets), (x, y, targets)
        ``y`` where there are labels, ``targets`` with `with_targets`.
    """

    def __init__(self, generator: Any, size: int, *, labels: Sequence | None = None,
                 with_targets: bool = False, convert: Callable[[Any], Any] | None = None,
                 **kwargs: Any) -> None:
        if labels is not None and len(labels) != len(generator.inputs):
            raise ValueError(f"BatchStream labels: one per Generator input "
                             f"({len(generator.inputs)}), got {len(labels)}")
        self.generator = generator
        self.size = size
        self.labels = None if labels is None else np.asarray(labels)
        self.with_targets = bool(with_targets)
        self.convert = convert or to_tensor
        self.kwargs = kwargs
        #: the epoch the next iteration runs (Generators with ``outputs=None``)
        self.epoch = generator.epoch
        self._resume: dict | None = None
        self._current: Any = None
        generator.batches(size, **kwargs)  # checks the options now (nothing starts)

    @property
    def _epochs(self) -> bool:
        return self.generator.outputs is None

    def set_epoch(self, epoch: int) -> None:
        """Run epoch ``epoch`` on the next iteration (its order and draws)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        """Batches per iteration: one epoch of this rank (``outputs=None``), else all."""
        gen = self.generator
        if self._epochs:
            return gen.sampler.batches_per_epoch(self.size, bool(self.kwargs.get("drop_last")))
        return len(gen.batches(self.size, **self.kwargs))

    def _open(self) -> Any:
        gen = self.generator
        kw = dict(self.kwargs, with_targets=self.with_targets)
        if self.labels is not None:
            kw["with_indices"] = True
        elif gen.labels is not None:
            kw["with_labels"] = True
        if self._epochs:
            if gen.epoch != self.epoch:
                gen.set_epoch(self.epoch)
            kw["epochs"] = 1
        return gen.batches(self.size, **kw)

    def __iter__(self) -> Iterator[Any]:
        _refuse_loader_workers()
        bs = self._open()
        if self._resume is not None:
            bs.load_state_dict(self._resume)
            self._resume = None
        self._current = bs
        with bs:
            for item in bs:
                yield self._item(item)
        self._current = None
        if self._epochs:
            self.epoch += 1

    def _item(self, item: Any) -> Any:
        parts = list(item) if isinstance(item, tuple) else [item]
        batch = parts.pop(0)
        x = self.convert(batch)
        out = [x]
        if self.labels is not None:
            _, inputs = parts.pop(0), parts.pop(0)
            out.append(self._labels(self.labels[inputs], x))
        elif self.generator.labels is not None:
            out.append(self.convert(parts.pop(0)))
        if self.with_targets:
            out.append(parts.pop(0))
        return out[0] if len(out) == 1 else tuple(out)

    def _labels(self, values: np.ndarray, x: Any) -> Any:
        if self.convert is not to_tensor:
            return values
        import torch

        return torch.as_tensor(values, device=x.device)

    def state_dict(self) -> dict:
        """Where this stream is (the epoch, and the batch within it where one is running):
        :meth:`load_state_dict` on a new stream of the same settings resumes with exactly the
        batches the uninterrupted stream would have yielded."""
        cur = self._current
        return {"epoch": self.epoch, "batches": None if cur is None else cur.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Resume from :meth:`state_dict`'s ``state`` at the next iteration."""
        self.epoch = int(state["epoch"])
        self._resume = state.get("batches")


def _refuse_loader_workers() -> None:
    """RuntimeError inside a DataLoader worker process: each would run its own copy of the
    Generator (duplicated batches, or a GPU context in a forked process)."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        return
    if get_worker_info() is not None:
        raise RuntimeError("millipyde batches are made on the GPU by millipyde's own threads: "
                           "use DataLoader(..., batch_size=None, num_workers=0)")


def iterable_dataset(generator: Any, size: int, **kwargs: Any) -> Any:
    """:class:`BatchStream` as a ``torch.utils.data.IterableDataset`` (with ``len``)."""
    import torch.utils.data

    cls = type("BatchDataset", (BatchStream, torch.utils.data.IterableDataset), {})
    return cls(generator, size, **kwargs)
