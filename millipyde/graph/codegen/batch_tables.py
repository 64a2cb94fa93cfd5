"""Per-block chain tables of the batched gathers: a member's uint8 elementwise chain run once
per byte value, its pixels (or sampler taps) reading the table.

A batch records no host tables for images up to ``gather.INLINE_TABLE_MAX_PIXELS``: its
gathers ran each member's chain (brightness, colorize: float64 calls, each rounded) on every
loaded value, per pixel and per sampler tap (the figure-5.1 first gathers and colour writer,
bench/RESULTS.md, 2026-11-23). Here each block first runs its member's chain on the 256
values of each channel into shared memory (``ct_``), as the per-image ``tabled`` gather does,
and the body is the same gather in table mode (``lut`` stage 0) reading ``ct_``: a table entry
is the chain's value on that byte, so every value is the inline chain's.

Flat gathers know their source is uint8 when they are generated (:func:`tabled`). The batch
writers are generated without the source's type: theirs is a run-time choice per member,
``full == 255.0`` (uint8), with the inline body kept for other sources (the writer runs the
member's pixels through one or the other: ``batch_gather.loop_by``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...kernels import REGISTRY
from .chain import chain_all
from .gather_body import flat_offsets, gather_body
from .gather_sig import GatherSig, chained, op_offsets
from .subscripts import rewrite_subscripts

#: Whether uint8 elementwise chains of batched gathers run through per-block tables on GPUs;
#: benchmarks turn it off to compare.
TABLED = True

# the table's uint8 conversion (the simulator runs Python, where a numba type makes signatures)
HEAD = ("from numba import uint8 as _tu8t\n"
        "_tu8 = _tu8t\n"
        "if _config.ENABLE_CUDASIM:\n"
        "    def _tu8(v):\n"
        "        return int(v)\n")


def chain_tables(sig: GatherSig, target: str) -> bool:
    """Whether ``sig``'s chain can run as a per-block table: elementwise integer ops before
    any sampler (no post chain, grey chain, pad, edge mode, user map or packing), RGB or grey
    sources (an alpha channel would take the chain here), GPUs (shared memory)."""
    return (TABLED and target != "cpu" and sig.mode == "chain" and sig.is_int
            and bool(sig.pre) and not sig.post and not sig.grey_ops and not sig.packed
            and not sig.bounded and not sig.edge and not sig.umap and sig.cin <= 3
            and all(REGISTRY[n].kind == "elementwise" and not REGISTRY[n].stat
                    for n in sig.pre))


def tabled(sig: GatherSig, target: str, src_dtype: Any) -> bool:
    """Whether the flat batched gather of ``sig`` over a ``src_dtype`` source is tabled."""
    return chain_tables(sig, target) and np.dtype(src_dtype) == np.uint8


def launch_text(sig: GatherSig) -> str:
    """The kernel's table, declared once per thread before its loops."""
    return f"ct_ = cuda.shared.array({256 * sig.cin}, dtype=_tu8t)\n"


def table_text(sig: GatherSig, gates: bool, guard: str = "") -> str:
    """Per member (after its prologue): the block fills ``ct_`` (where ``guard`` holds)."""
    chans = range(sig.cin)
    vars_ = [f"v{c}" for c in chans]
    chain = chain_all(sig.pre, vars_, "full", 0, op_offsets(chained(sig)), True, gates)
    ind = "    " if guard else ""
    fill = (["i_ = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x", "while i_ < 256:"]
            + [f"    {v} = float(i_)" for v in vars_]
            + ["    " + line for line in chain.splitlines()]
            # whole numbers 0..255 (the chain rounds after each op)
            + [f"    ct_[_u32({c * 256} + i_)] = _tu8(v{c})" for c in chans]
            + ["    i_ += cuda.blockDim.x * cuda.blockDim.y"])
    return "\n".join(
        # flat offsets for the table body; the block's pixels of the previous member have
        # read its table
        ([flat_offsets(sig.cin).strip()] if not sig.plain else [])
        + ["cuda.syncthreads()"] + ([f"if {guard}:"] if guard else [])
        + [ind + line for line in fill] + ["cuda.syncthreads()"])


def fast_body(sig: GatherSig, gates: bool, sampler: str = "pixel", words: bool = False
              ) -> str:
    """The gather of ``sig`` in table mode, its stage-0 table the block's ``ct_``
    (``sampler``, ``words``: ``gather_body.gather_body``'s)."""
    table_sig = dataclasses.replace(sig, mode="lut", pre=(), lut_stages=(True, False))
    body = gather_body(table_sig, gates, flat=True, sampler=sampler, words=words)
    # the byte widened first: under the simulator a uint8 plus an int stays uint8
    return rewrite_subscripts(body, "lut", lambda ps: f"_u32(_u32({ps[2]}) + {ps[1]} * 256)",
                              to="ct_")
