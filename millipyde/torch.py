"""A small PyTorch adapter for training loops (optional extra: ``pip install millipyde[torch]``).

>>> import millipyde as mp
>>> from millipyde.torch import BatchStream
>>> gen = mp.Generator("images/", ops, seed=0)                        # doctest: +SKIP
>>> for x, y in BatchStream(gen, 256, labels=labels, mean=0.5, std=0.25):  # doctest: +SKIP
...     loss = criterion(model(x), y)

``x`` is each ``Generator.batches`` batch as a torch tensor, zero-copy (through
``__cuda_array_interface__`` on GPUs, DLPack on the cpu backend), on the device that made it;
``y`` the labels of the inputs its samples came from. :func:`iterable_dataset` wraps the same
as a ``torch.utils.data.IterableDataset`` (use ``DataLoader(ds, batch_size=None)``: the batches
are already made, on the GPU, so no loader workers are needed).
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
    """Iterable of a Generator's batches as tensors, with labels when given.

    Parameters
    ----------
    generator : Generator
    size : int
        Samples per batch.
    labels : sequence, optional
        One label per Generator input: each batch then comes with the labels of its samples
        (a tensor on the batch's device, or what ``convert`` makes of an int64 array).
    convert : callable, optional
        Turns a batch into a tensor (default :func:`to_tensor`).
    **kwargs
        ``Generator.batches`` options (``shape``, ``layout``, ``dtype``, ``mean``, ``std``,
        ``channels``, ``drop_last``).
    """

    def __init__(self, generator: Any, size: int, *, labels: Sequence | None = None,
                 convert: Callable[[Any], Any] | None = None, **kwargs: Any) -> None:
        if labels is not None and len(labels) != len(generator.inputs):
            raise ValueError(f"BatchStream labels: one per Generator input "
                             f"({len(generator.inputs)}), got {len(labels)}")
        self.generator = generator
        self.size = size
        self.labels = None if labels is None else np.asarray(labels)
        self.convert = convert or to_tensor
        self.kwargs = kwargs
        generator.batches(size, **kwargs)  # checks the options now (nothing starts)

    def __iter__(self) -> Iterator[Any]:
        with self.generator.batches(self.size, with_indices=True, **self.kwargs) as bs:
            for batch, _, inputs in bs:
                x = self.convert(batch)
                if self.labels is None:
                    yield x
                else:
                    yield x, self._labels(self.labels[inputs], x)

    def _labels(self, values: np.ndarray, x: Any) -> Any:
        if self.convert is not to_tensor:
            return values
        import torch

        return torch.as_tensor(values, device=x.device)


def iterable_dataset(generator: Any, size: int, **kwargs: Any) -> Any:
    """:class:`BatchStream` as a ``torch.utils.data.IterableDataset``."""
    import torch.utils.data

    cls = type("BatchDataset", (BatchStream, torch.utils.data.IterableDataset), {})
    return cls(generator, size, **kwargs)
