"""Graph nodes: the batch constructor of leaves builds what ``leaf`` builds."""

from __future__ import annotations

import numpy as np

from millipyde.graph.ir.node import Node, leaf, leaves, stored


def test_leaves_equal_leaf_but_for_id_and_buffer():
    bufs = [np.zeros((2, 3), np.uint8), np.ones((2, 3), np.uint8), np.full((2, 3), 7, np.uint8)]
    shape = [np.int64(2), 3]  # as a chunk's recorded node may hold it: not a tuple of ints
    got = leaves(bufs, shape, "uint8", 1)
    want = leaf(bufs[0], shape, "uint8", 1)
    assert len(got) == 3
    ids = [n.id for n in got]
    assert ids == sorted(ids) and len(set(ids)) == 3 and want.id not in ids
    for n, b in zip(got, bufs, strict=True):
        assert type(n) is Node and n.buffer is b
        for slot in Node.__slots__:
            if slot in ("id", "buffer", "lock", "__weakref__"):
                continue
            assert getattr(n, slot) == getattr(want, slot), slot
        assert type(n.shape) is tuple and all(type(s) is int for s in n.shape)
        assert n.materialized and n.name == "leaf"
        with n.lock:  # reentrant, as leaf's
            with n.lock:
                pass
    # nodes stored with their value are only ever checked under their lock: they share one
    # (no tracked RLock per output); a node stored without one (its value still to come) has
    # its own
    assert got[0].lock is got[1].lock is stored(bufs[0], (2, 3), np.dtype(np.uint8), 1).lock
    pending = stored(None, (2, 3), np.dtype(np.uint8), 1)
    assert pending.lock is not got[0].lock
    assert pending.lock is not stored(None, (2, 3), np.dtype(np.uint8), 1).lock
