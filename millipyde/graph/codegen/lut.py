"""The host LUT builder: uint8 elementwise chains composed into per-channel 256-entry tables.

Each op has a table pass of its own (``table_pass``): a host function that maps rows of 256
values through the op and rounds (``_rint_clip``), as a chain's kernel does after each op. A
chain's tables are its ops' passes one after another (``compose_tables``). A single builder
dispatching over every registered op compiled all of them (~20 scalar kernels, 6 CPU-s) for a
chain of one; a pass compiles only its op, once per process (and once on disk).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...kernels import REGISTRY
from .chain import op_def
from .loader import load
from .target import HEADER, RINT_CLIP


def pass_source(name: str) -> str:
    """Source of ``apply(vals, chan, p, stats, full)`` for elementwise op ``name``: row ``r``
    of ``vals`` (R, 256) float64, of channel ``chan[r]`` with parameters ``p[r]`` (3 slots),
    mapped through the op and rounded in place. An op that reads a statistic finds its row in
    ``stats`` at the offset in its third slot."""
    spec = REGISTRY[name]
    if spec.kind != "elementwise":
        raise ValueError(f"op {name!r} is {spec.kind}: only elementwise ops have uint8 tables")
    call = (f"_f_{name}(vals[r, i], c, full, a, b, stats, int(d))" if spec.stat
            else f"_f_{name}(vals[r, i], c, full, a, b, d)")
    # ``tables``: a chain of this op alone, every member's tables in one call (``apply``
    # over rows of 0 .. 255 then the cast into ``out``, without the host arrays and the
    # NumPy calls around it: the same op on the same float64 values, rounded the same way;
    # the rounded values are whole numbers in [0, 255], so their uint8 store is exact)
    one = call.replace("vals[r, i]", "float(i)")
    return (
        f"# millipyde generated LUT pass of {name}\n"
        + HEADER["cpu"] + op_def(name) + RINT_CLIP.replace("@_dev", "@njit(cache=True)")
        + "\n\n@njit(cache=True, nogil=True, error_model='numpy')\n"
        "def apply(vals, chan, p, stats, full):\n"
        "    for r in range(vals.shape[0]):\n"
        "        c = chan[r]\n"
        "        a = p[r, 0]\n"
        "        b = p[r, 1]\n"
        "        d = p[r, 2]\n"
        "        for i in range(256):\n"
        f"            v = {call}\n"
        "            vals[r, i] = _rint_clip(v, full)\n"
        "\n\n@njit(cache=True, nogil=True, error_model='numpy')\n"
        "def tables(params, stats, channels, full, out):\n"
        "    nc = min(channels, 3)\n"
        "    for m in range(params.shape[0]):\n"
        "        a = params[m, 0, 0]\n"
        "        b = params[m, 0, 1]\n"
        "        d = params[m, 0, 2]\n"
        "        for c in range(nc):\n"
        "            for i in range(256):\n"
        f"                v = {one}\n"
        "                out[m, c, i] = _rint_clip(v, full)\n"
        "        for c in range(nc, channels):\n"
        "            for i in range(256):\n"
        "                out[m, c, i] = i\n"
    )


@functools.cache
def _module(name: str, digest: str) -> Any:
    # keyed by what the op computes too: a user op re-registered under its name is another op
    return load(pass_source(name), "cpu")


def table_pass(name: str) -> Any:
    """The compiled (lazily, by Numba) ``apply`` of ``pass_source(name)``."""
    return _module(name, REGISTRY[name].digest).apply


def table_fill(name: str) -> Any:
    """The compiled (lazily, by Numba) ``tables`` of ``pass_source(name)``:
    ``tables(params, stats, channels, full, out)``, :func:`compose_tables` of the chain of
    ``name`` alone (``params`` float64)."""
    return _module(name, REGISTRY[name].digest).tables


_RAMP = np.arange(256, dtype=np.float64)


def compose_tables(names: list[str], params: np.ndarray, stats: np.ndarray, channels: int,
            full: float, out: np.ndarray) -> None:
    """Fill ``out`` (n, channels, 256) uint8 with the tables of the chain of ops ``names``,
    member ``m``'s parameters ``params[m]`` (len(names), 3): each value of each of the first
    three channels through every op in turn, rounded after each; a fourth (alpha) channel is
    the identity. ``stats``: the statistic rows the ops read, end to end."""
    if len(names) == 1:  # (one op: one compiled call, no host arrays; the same values)
        if params.dtype != np.float64:
            params = params.astype(np.float64)
        table_fill(names[0])(params, stats, channels, full, out)
        return
    n = params.shape[0]
    nc = min(channels, 3)
    vals = np.empty((n * nc, 256), dtype=np.float64)
    vals[:] = _RAMP
    chan = np.tile(np.arange(nc, dtype=np.int64), n)
    for k, name in enumerate(names):
        # row m * nc + c holds channel c of member m
        p = np.ascontiguousarray(np.repeat(params[:, k, :3], nc, axis=0), dtype=np.float64)
        table_pass(name)(vals, chan, p, stats, full)
    # whole numbers in [0, 255]: the cast is exact
    out[:, :nc] = vals.reshape(n, nc, 256)
    if channels > nc:
        out[:, nc:] = _RAMP.astype(np.uint8)
