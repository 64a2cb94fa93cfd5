"""Nodes of the lazy operation graph.

A node is a value: an op applied to input nodes, or a leaf holding a device buffer. Image methods
never change a node; they make a new one and move the array's handle to it, so a node is
immutable once made and two handles can share history (``clone``) safely.
"""

from __future__ import annotations

import _thread
import itertools
from typing import Any

import numpy as np

from ...kernels import OpSpec

_ids = itertools.count()
#: the lock of the nodes :func:`stored` makes with their value (only checked under it)
_STORED_LOCK = _thread.RLock()


class Node:
    """One recorded value in the operation graph."""

    __slots__ = (
        "id", "op", "inputs", "params", "shape", "dtype", "device", "buffer", "users",
        "lock", "label", "gated_off", "__weakref__",
    )

    def __init__(
        self,
        op: OpSpec | str | None,
        inputs: tuple[Node, ...],
        params: tuple[Any, ...],
        shape: tuple[int, ...],
        dtype: np.dtype,
        device: int,
        buffer: Any = None,
        label: str | None = None,
    ) -> None:
        self.id = next(_ids)
        self.op = op
        self.inputs = inputs
        self.params = params
        # an op that keeps its input's shape passes that tuple of ints: shared, not rebuilt
        self.shape = (inputs[0].shape if inputs and type(shape) is tuple
                      and shape == inputs[0].shape else tuple(int(s) for s in shape))
        self.dtype = np.dtype(dtype)
        self.device = device
        self.buffer = buffer
        self.users = 0
        self.lock = _thread.RLock()  # (``threading.RLock`` is a Python call around it)
        self.label = label
        # A batched Generator records an Operation whose probability coin said skip as if it
        # ran, marked here: its value is then its input's (see graph/batch.py). Nothing else
        # ever sees such a node.
        self.gated_off = False
        for n in inputs:
            n.users += 1

    @property
    def name(self) -> str:
        """The op name (``"leaf"`` for materialized data)."""
        if self.op is None:
            return "leaf"
        if isinstance(self.op, str):
            return self.op
        return self.label or self.op.name

    @property
    def materialized(self) -> bool:
        """True when the node's value sits in a buffer."""
        return self.buffer is not None

    def settle(self, buffer: Any) -> None:
        """Store the computed value and forget the inputs so intermediates can be freed."""
        self.buffer = buffer
        for n in self.inputs:
            n.users -= 1
        self.inputs = ()

    def __repr__(self) -> str:
        state = "buffer" if self.materialized else f"{len(self.inputs)} inputs"
        return (f"Node#{self.id}({self.name}, {self.shape}, {self.dtype}, dev {self.device}, "
                f"{state})")


def leaf(buffer: Any, shape: tuple[int, ...], dtype: np.dtype, device: int) -> Node:
    """A materialized node around an existing buffer."""
    return Node(None, (), (), shape, dtype, device, buffer=buffer)


def leaves(buffers: list[Any], shape: tuple[int, ...], dtype: np.dtype,
           device: int) -> list[Node]:
    """Materialized nodes around ``buffers``, all of one ``shape`` and ``dtype`` (a batch's
    outputs, one per member): :func:`leaf` each, the shape and dtype normalised once."""
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    # :func:`stored`'s nodes, their objects and ids made by ``map`` (no Python call per node:
    # a claim's outputs, hundreds at a time)
    n = len(buffers)
    nodes = list(map(Node.__new__, itertools.repeat(Node, n)))
    for node, buffer, i in zip(nodes, buffers, map(next, itertools.repeat(_ids, n)),
                               strict=True):
        node.id, node.buffer = i, buffer
        node.op, node.inputs, node.params, node.label = None, (), (), None
        node.shape, node.dtype, node.device = shape, dtype, device
        node.users, node.lock, node.gated_off = 0, _STORED_LOCK if buffer is not None else \
            _thread.RLock(), False
    return nodes


def stored(buffer: Any, shape: tuple[int, ...], dtype: np.dtype, device: int) -> Node:
    """:func:`leaf` of a ``shape`` that is a tuple of ints and a ``dtype`` that is a NumPy
    dtype already, its attributes set directly (a Pipeline chunk's outputs are made one by one
    as they are read; a Generator batch's all at once)."""
    n = Node.__new__(Node)
    n.id = next(_ids)
    n.op, n.inputs, n.params, n.label = None, (), (), None
    n.shape, n.dtype, n.device, n.buffer = shape, dtype, device, buffer
    # a node's lock guards computing its value: one stored with its value (never replaced)
    # is only ever checked under it, so such nodes share one lock, not a tracked RLock each
    # (a Generator's or a chunk's outputs: one per output)
    n.users, n.lock, n.gated_off = 0, _STORED_LOCK if buffer is not None else \
        _thread.RLock(), False
    return n


def apply(op: OpSpec | str, x: Node, params: tuple[Any, ...], shape: tuple[int, ...],
          dtype: np.dtype, device: int | None = None, label: str | None = None) -> Node:
    """Record ``op`` on ``x`` (nothing runs)."""
    return Node(op, (x,), tuple(params), shape, dtype, x.device if device is None else device,
                label=label)
