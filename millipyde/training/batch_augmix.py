"""``AugMix`` in a Generator batch (``batch_arena``): the batch's gather forked into the original
and ``mixture_width`` chains, then mixed by one weighted-sum launch.

At an AugMix step the members' gather ends (``VGather.fork``: the gather before it, if it
does anything, becomes a stage whose output every branch reads, as a statistic op's cut
does; an empty one leaves the branches reading its source, the arena itself). The ``k``
chains of the ``n`` members are ``k * n`` *branches* of one policy (``augmix.AugMixChain``:
each branch's ops, bins, signs and depth drawn from its chain's part of the AugMix's stream,
the code the per-output path runs, :class:`ChainCtx`), recorded as the policies are
(``batch_ops.record_policy``: every op of the space a gated entry, a geometric entry a
sampler slot, a position past the branch's depth gated off), one gather per number of
geometric entries drawn (0 to 3: at most four, whatever is drawn and whatever ``k`` is).
The mix of the original and the chains, weighted per member (``AugMix.weights``), is one
launch over the batch (``graph.codegen.weighted``'s ``mix``), and the Operations after the
AugMix read its output as the next stage.

The members of a fork have one size (the recorder groups members by input size where an
AugMix follows no size-changing op; a group of several sizes there is left per output).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import random as mprandom
from ..augmix import AugMix
from . import batch_math, batch_ops
from .batch_chain import Unsupported, VGather


class AugMixStep:
    """An ``AugMix`` in a batch: the :class:`batch_ops.PolicyStep` of its chains' policy."""

    reshapes = False

    def __init__(self, op: AugMix) -> None:
        self.op = op
        self.chain = batch_ops.PolicyStep(op.chain)


def augmix_step(op: AugMix, inputs: list) -> AugMixStep | None:
    """The :class:`AugMixStep` of ``op``, or None where an input's class overrides one of the
    methods its entries call (``batch_ops.policy_step``)."""
    if batch_ops.policy_step(op.chain, inputs) is None:
        return None
    return AugMixStep(op)


class ChainCtx(batch_ops.Ctx):
    """The draws of ``k * n`` *branches*: branch ``i * n + r`` is chain ``i`` of member ``r``
    of an AugMix's :class:`~batch_ops.Ctx` (``n`` members), its draw ``t`` the member's draw
    ``base + t`` (``base`` the chain's, ``AugMixChain.chain_base``): the values
    ``Ctx.u`` gives, bit for bit (``batch_math.mix_uniforms`` of the same state and word)."""

    def __init__(self, c: batch_ops.Ctx, bases: np.ndarray, rows: np.ndarray) -> None:
        super().__init__(c.seed, c.ks[rows], c.j, c._z[rows])
        self.bases = bases  # (branches,) int64: each branch's chain base

    @classmethod
    def of(cls, c: batch_ops.Ctx, chain: Any, k: int) -> ChainCtx:
        """The branches of ``c``'s members' ``k`` chains of ``chain`` (an ``AugMixChain``)."""
        n = c.n
        bases = np.repeat(np.array([chain.chain_base(i) for i in range(k)], dtype=np.int64), n)
        return cls(c, bases, np.tile(np.arange(n), k))

    def sub(self, rows: np.ndarray) -> ChainCtx:
        out = ChainCtx(self, self.bases[rows], rows)
        out.parent = (self, rows)
        return out

    def u(self, t: int, rows: np.ndarray | None = None) -> np.ndarray:
        bases = self.bases if rows is None else self.bases[rows]
        z = self._z if rows is None else self._z[rows]
        out = np.empty(len(z))
        for b in np.unique(bases).tolist():
            at = bases == b
            out[at] = batch_math.mix_uniforms(z[at], np.array(
                [(b + t) & mprandom.MASK], dtype=np.uint64))[:, 0]
        return out

    def block(self) -> np.ndarray:  # pragma: no cover - a branch's draws are all ``u``'s
        raise RuntimeError("ChainCtx: a branch has no block of draws")

    def uniforms(self, ts: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.stack([self.u(int(t), rows) for t in np.asarray(ts).tolist()], axis=1)


@dataclass
class Fork:
    """A recorded fork of ``n`` members (one size ``cur``) and their ``k`` chains: the mixing
    weights (n, 1 + k) and the pieces of the branches (branch ``i * n + r``: chain ``i`` of
    member ``r``), one per structure drawn: (its branches, their gather)."""

    weights: np.ndarray
    pieces: list[tuple[np.ndarray, VGather]]
    cur: np.ndarray

    def take(self, keep: np.ndarray) -> Fork:
        """The members ``keep`` (a boolean mask) only, renumbered."""
        k = self.weights.shape[1] - 1
        kept_b = np.tile(keep, k)
        at = np.cumsum(kept_b) - 1  # branch i * n + r -> i * n' + r'
        pieces = []
        for rows, g in self.pieces:
            kept = kept_b[rows]
            if kept.any():
                pieces.append((at[rows[kept]], g if kept.all() else g.take(kept)))
        return Fork(self.weights[keep], pieces, self.cur[keep])


def record_augmix(g: VGather, c: batch_ops.Ctx, step: AugMixStep, on: np.ndarray) -> None:
    """``step``'s AugMix on every member of ``g`` (``c``: its draws): the gather forked, the
    branches recorded as the chains' policy per structure (the number of geometric entries
    drawn: at most ``MAX_DEPTH + 1`` gathers whatever ``mixture_width`` is), the weights
    drawn (the module doc). Members a branch's gather cannot make (scikit-image's warp clip)
    are left per output."""
    n = g.n
    if not on.all():  # pragma: no cover - an AugMix has no coin
        raise Unsupported("an AugMix gated off")
    if n and not (g.cur == g.cur[0]).all():
        raise Unsupported("an AugMix over members of several sizes")
    k = step.op.mixture_width
    weights = step.op.weights(c.u, n)
    cb = ChainCtx.of(c, step.op.chain, k)
    structure = step.chain.structure(cb)
    member = np.tile(np.arange(n), k)
    pieces = []
    for s in np.unique(structure).tolist():
        rows = np.flatnonzero(structure == s)
        cg = VGather(g.cur[member[rows]].copy(), g.cin, g.dtype, True, g.stat_cut)
        batch_ops.record_policy(cg, cb.sub(rows), step.chain, np.ones(len(rows), dtype=bool),
                                cut_positions=True)
        g.left[member[rows[cg.left]]] = True
        pieces.append((rows, cg))
    g.fork(Fork(weights, pieces, g.cur.copy()))
