"""Values held as members of a computed batch buffer, made into graph nodes when read.

A Pipeline chunk computes the outputs of its inputs in one batch buffer ``(n, *shape)``. Each
input is then bound to a :class:`Member` of that buffer (``gpuarray._bind_member``): a
reference (the batch and an index), not a value of its own. No device-array view and no leaf
node is made per input until its value is read: its node (a next op, ``np.asarray``,
``__cuda_array_interface__``, whose kept dict is per node) by :meth:`Member.node`, the
member's view and a leaf node around it, once; its buffer alone (``gpuarray._materialize``)
by :meth:`Member.view`, the view only. A next Pipeline (or connected stage) over unread members
groups, checks and stacks them by the member (its batch's shape, dtype and device; the stack
from the views, or the batch buffer's slice itself where the chunk's inputs are its members in
order: ``pipeline.chunks``), making no node. The eager outputs cost a view and a node each on the
worker that committed them (3.4 us an input on an H200 host, under the GIL every other device's
worker needs: bench/RESULTS.md, 2026-11-28); an output never read costs neither.

The batch buffer lives as long as any of its members does (each member holds the batch, each
view made holds the buffer's memory), as the eagerly made views kept it before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .node import Node, stored

#: Held while an array's binding moves to or from a member and while a member's node is made
#: (``gpuarray``: a read of a lazily bound value converts it once, whichever thread reads it).
#: Nothing else is waited for under it (``array.bind_members``, a Pipeline chunk's binds under
#: it once, only tries each input's commit lock).
LOCK = threading.Lock()


class Batch:
    """A computed batch buffer whose members are values.

    Parameters
    ----------
    buffer : device buffer
        ``(n, *shape)``, C-contiguous, of ``dtype`` on ``device``: its kernels are done (or
        queued on a stream that anything reading it waits for, as for any stored value).
    shape, dtype, device
        One member's value.
    view : callable
        ``view(m)``: member ``m``'s view (the active backend's ``member_views(buffer)``).
    """

    __slots__ = ("buffer", "shape", "dtype", "device", "view")

    def __init__(self, buffer: Any, shape: tuple[int, ...], dtype: np.dtype, device: int,
                 view: Callable[[int], Any]) -> None:
        self.buffer = buffer
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.device = device
        self.view = view

    def members(self, n: int) -> list[Member]:
        """A :class:`Member` for each of the first ``n`` members, in order."""
        new = Member.__new__
        out = []
        for m in range(n):  # (``__init__`` per member written out: a chunk makes 256)
            ref = new(Member)
            ref.batch, ref.index, ref.made, ref.held = self, m, None, None
            out.append(ref)
        return out


class Member:
    """Member ``index`` of ``batch`` as a value; ``made``: its node once read, ``held``: its
    view once made (else None)."""

    __slots__ = ("batch", "index", "made", "held")

    def __init__(self, batch: Batch, index: int) -> None:
        self.batch, self.index, self.made, self.held = batch, index, None, None

    # its value's shape, dtype and device, as its node would have them (a Pipeline groups and
    # stacks an input bound to an unread member by these, without making its node)
    @property
    def shape(self) -> tuple[int, ...]:
        return self.batch.shape

    @property
    def dtype(self) -> np.dtype:
        return self.batch.dtype

    @property
    def device(self) -> int:
        return self.batch.device

    def view(self) -> Any:
        """The member's view (its device buffer), made on the first call. A read of the
        buffer alone (``gpuarray._materialize``) needs no node. (Two threads that ask at once
        may both make one: views of the same memory, either kept.)"""
        held = self.held
        if held is None:
            held = self.held = self.batch.view(self.index)
        return held

    def node(self) -> Node:
        """The value as a leaf node around the member's view, made on the first call; the
        caller holds :data:`LOCK` (one node per member, whichever thread asks first)."""
        made = self.made
        if made is None:
            b = self.batch
            made = self.made = stored(self.view(), b.shape, b.dtype, b.device)
        return made

    def __repr__(self) -> str:
        return (f"Member({self.index} of a batch of {self.batch.buffer.shape[0]}, "
                f"{self.batch.shape}, {self.batch.dtype}, dev {self.batch.device}, "
                f"{'read' if self.made is not None else 'unread'})")
