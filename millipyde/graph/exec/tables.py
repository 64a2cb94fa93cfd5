"""Host-side inputs of the kernels: uint8 tables composed from elementwise ops, the identity
tables, each op's parameter slots and the per-image statistics some ops read."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from ...kernels.stats import STATISTICS
from ..codegen.lut import compose_tables
from ..ir.node import Node
from ..plan.schedule import Stencil

IDENTITY_LUT = np.tile(np.arange(256, dtype=np.uint8), (2, 4, 1))


#: per-image statistic rows (``kernels.stats``) computed by Stat kernels, by the op node that
#: reads them (host arrays: uint8 tables are built on the host)
STAT_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def op_params(n: Node) -> list[float]:
    """An op node's parameters as its kernel's slots take them.

    Parameters
    ----------
    n : Node
        The op's node.

    Returns
    -------
    list of float
        Its parameters as floats, padded with zeros (or cut) to ``n.op.slots``.
    """
    vals = [float(v) for v in n.params]
    return (vals + [0.0] * n.op.slots)[:n.op.slots]


def stat_row(n: Node, channels: int) -> np.ndarray:
    """The statistic row op node ``n`` reads (measured over ``channels`` channels); zeros for a
    node none was measured for (gated off: its op is not called)."""
    row = STAT_ROWS.get(n)
    if row is None:
        return np.zeros(STATISTICS[n.op.stat].width(channels))
    return row


def build_lut(nodes: list[Node], channels: int, full: float) -> np.ndarray:
    """Compose uint8 elementwise ops into one (channels, 256) table, rounding after each op."""
    out = np.empty((channels, 256), dtype=np.uint8)
    params = np.array([op_params(n)[:3] for n in nodes], dtype=np.float64).reshape(
        len(nodes), 3)
    rows = []
    at = 0
    for i, n in enumerate(nodes):
        if n.op.stat:  # its row's offset in its third slot (``codegen.lut``)
            row = stat_row(n, min(channels, 3))
            params[i, 2] = at
            rows.append(row)
            at += len(row)
    stats = np.concatenate(rows) if rows else np.zeros(1)
    compose_tables([n.op.name for n in nodes], params[None], stats, channels, full, out[None])
    return out


def host_tables(pre: list[Node], post: list[Node], channels: int, full: float) -> np.ndarray:
    """The (2, channels, 256) uint8 tables of a gather's ``pre`` and ``post`` chains (identity
    where a stage holds no op), as the kernel reads them."""
    lut = IDENTITY_LUT[:, :channels].copy()
    if pre:
        lut[0] = build_lut(pre, channels, full)
    if post:
        lut[1] = build_lut(post, channels, full)
    return lut


def identity_table(channels: int, device: int) -> Any:
    """The (2, channels, 256) identity tables on ``device``, uploaded once and kept: a kernel
    whose table stages hold no op takes them unread, with no upload or cache lookup per call.
    """
    return runtime.constant(("identity_lut", channels), IDENTITY_LUT[:, :channels], device)


def stencil_tables(k: Stencil, channels: int) -> np.ndarray | None:
    """The (2, channels, 256) uint8 prologue/epilogue tables of a fused stencil, or None."""
    if not (k.pre or k.post):
        return None
    lut = IDENTITY_LUT[:, :channels].copy()
    if k.pre:
        lut[0] = build_lut(k.pre, channels, 255.0)
    if k.post:
        lut[1] = build_lut(k.post, channels, 255.0)
    return lut
