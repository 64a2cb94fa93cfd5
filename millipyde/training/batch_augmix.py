"""``AugMix`` in a Generator batch (``batch_arena``): the batch's gather forked into the original
and ``mixture_width`` chains, then mixed by one weighted-sum launch.

At an AugMix step the members' gather ends (``VGather.fork``: the gather before it, if it
does anything, becomes a stage whose output every branch reads, as a statistic op's cut
does; an empty one leaves the branches reading its source, the arena itself). Each chain is
a policy (``augmix.AugMixChain``: its ops, bins, signs and depth drawn from the AugMix's
stream, the code the per-output path runs) recorded over the members as the policies are
(``batch_ops.record_policy``: every op of the space a gated entry, a geometric entry a
sampler slot, a position past the member's depth gated off), one gather per number of
geometric entries drawn (0 to 3: at most four per chain, whatever is drawn). The mix of the
original and the chains, weighted per member (``AugMix.weights``), is one launch over the
batch (``graph.codegen.weighted``'s ``mix``), and the Operations after the AugMix read its
output as the next stage.

The members of a fork have one size (the recorder groups members by input size where an
AugMix follows no size-changing op; a group of several sizes there is left per output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..augmix import AugMix
from . import batch_ops
from .batch_chain import Unsupported, VGather


class AugMixStep:
    """An ``AugMix`` in a batch: per chain the :class:`batch_ops.PolicyStep` of its policy."""

    reshapes = False

    def __init__(self, op: AugMix) -> None:
        self.op = op
        self.chains = [batch_ops.PolicyStep(pol) for pol in op.chains]


def augmix_step(op: AugMix, inputs: list) -> AugMixStep | None:
    """The :class:`AugMixStep` of ``op``, or None where an input's class overrides one of the
    methods its entries call (``batch_ops.policy_step``)."""
    if batch_ops.policy_step(op.chains[0], inputs) is None:
        return None
    return AugMixStep(op)


@dataclass
class Fork:
    """A recorded fork of ``n`` members (one size ``cur``): their mixing weights (n, 1 + k)
    and, per chain, its pieces: (member rows, the gather of those members' chain)."""

    weights: np.ndarray
    chains: list[list[tuple[np.ndarray, VGather]]]
    cur: np.ndarray

    def take(self, keep: np.ndarray) -> Fork:
        """The members ``keep`` (a boolean mask) only, renumbered."""
        at = np.cumsum(keep) - 1
        chains = []
        for pieces in self.chains:
            got = []
            for rows, g in pieces:
                kept = keep[rows]
                if kept.any():
                    got.append((at[rows[kept]], g if kept.all() else g.take(kept)))
            chains.append(got)
        return Fork(self.weights[keep], chains, self.cur[keep])


def record_augmix(g: VGather, c: batch_ops.Ctx, step: AugMixStep, on: np.ndarray) -> None:
    """``step``'s AugMix on every member of ``g`` (``c``: its draws): the gather forked, each
    chain recorded per structure, the weights drawn (the module doc). Members a chain's
    gather cannot make (scikit-image's warp clip) are left per output."""
    n = g.n
    if not on.all():  # pragma: no cover - an AugMix has no coin
        raise Unsupported("an AugMix gated off")
    if n and not (g.cur == g.cur[0]).all():
        raise Unsupported("an AugMix over members of several sizes")
    weights = step.op.weights(c.u, n)
    chains = []
    for ps in step.chains:
        structure = ps.structure(c)
        pieces = []
        for s in np.unique(structure).tolist():
            rows = np.flatnonzero(structure == s)
            cg = VGather(g.cur[rows].copy(), g.cin, g.dtype, True, g.stat_cut)
            batch_ops.record_policy(cg, c.sub(rows), ps, np.ones(len(rows), dtype=bool))
            g.left[rows[cg.left]] = True
            pieces.append((rows, cg))
        chains.append(pieces)
    g.fork(Fork(weights, chains, g.cur.copy()))
