"""A policy's arena launch per structure from a kept template: what depends on the structure
recorded once, what depends on the draws filled per batch.

A batch of a recipe ending in a policy (``RandAugment``, ``TrivialAugmentWide``,
``AutoAugment``) is recorded per structure (how many sampler slots its members draw): the
head (the steps before the policy) once per head group, then per structure
``batch_ops.record_policy`` on the head's gather and ``batch_arena.launch_of``. In the table
path (``batch_ops.ValueTable``: every member of one size) everything that record makes but
the rows is the same for every batch of a structure: the gathers (one per slot, cut where the
slot's sampler starts its next kernel), their signatures, the statistic prefixes' signatures,
groups and the columns their reductions read. :class:`PolicyFill` keeps those per structure
(a :class:`_Template`, learnt from the record of the structure's first batch and checked equal
to it, rows, prefixes' rows and all) and then makes a batch's launch from the draws alone: per
gather the head's rows (of the head group, once a batch) or the slot's fixed slots (its map
per code, ``ValueTable.slot_map``), the value entries' parameter rows and gate flags
(``ValueTable.params`` / ``off`` by code) and the sampler's flag, side by side in one array
(:func:`fill_rows`, compiled). Values are the record's, bit for bit: every column is a copy
of a value the record copies (the check at learning compares the bytes).

Where a batch does not fit (a member left per output, members of several sizes, a code that
breaks the table), the record's own path runs, unchanged.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numba
import numpy as np

from ..graph.codegen.gather_sig import A_OFF, CLIP_HI_OFF, CLIP_OFF, FULL_OFF, MID_OFF, OPS_OFF, P_OFF
from ..ops.base import kind_for
from . import batch_ops
from .batch_chain import Prefix, VGather


class _Gather(NamedTuple):
    sig: Any
    hw: tuple[int, int]
    cout: int
    reads: list
    # per statistic prefix: (stat, sig, hw, group, the columns of [rows | sizes] it takes)
    prefixes: tuple
    span: tuple[int, int]  # the positions whose value entries it records (lo, hi)


class _Template(NamedTuple):
    gathers: tuple[_Gather, ...]  # the stages, then the launch's gather
    dtype: np.dtype


@numba.njit(cache=True, nogil=True)
def fill_rows(out: np.ndarray, head: np.ndarray, hsplit: int, vcodes: np.ndarray,
              params: np.ndarray, off: np.ndarray) -> None:  # pragma: no cover - compiled
    """One gather's rows into ``out`` (m, width): ``head``'s first ``hsplit`` columns
    (the fixed slots and any chained ops' slots before the policy's), then each position's
    value parameters ``params[vcodes[r, b]]``, then ``head``'s other columns but its last
    (the extras and the earlier ops' gate flags), each position's gate flags
    ``off[vcodes[r, b]]`` (1.0 / 0.0), and ``head``'s last column (the sampler's flag)."""
    m, npos = vcodes.shape
    pw, ow = params.shape[1], off.shape[1]
    hw_ = head.shape[1]
    for r in range(m):
        c = 0
        for k in range(hsplit):
            out[r, c] = head[r, k]
            c += 1
        for b in range(npos):
            u = vcodes[r, b]
            for k in range(pw):
                out[r, c] = params[u, k]
                c += 1
        for k in range(hsplit, hw_ - 1):
            out[r, c] = head[r, k]
            c += 1
        for b in range(npos):
            u = vcodes[r, b]
            for k in range(ow):
                out[r, c] = 1.0 if off[u, k] else 0.0
                c += 1
        out[r, c] = head[r, hw_ - 1]


class PolicyFill:
    """Launches of a recipe whose last step is a policy, per structure from kept templates
    (the module doc): :meth:`launch` makes one or says the record's path must; :meth:`learn`
    keeps a structure's template from that path's launch."""

    def __init__(self, rec: Any, step: batch_ops.PolicyStep, j: int) -> None:
        self.rec, self.step, self.j = rec, step, j
        self.templates: dict[tuple, _Template | None] = {}
        self._tries: dict[tuple, int] = {}

    def head_rows(self, g0: VGather) -> np.ndarray | None:
        """The head gather's rows (``VGather.rows``: made once per head group and batch), or
        None where its launches take the record's path (the head has stages, statistic
        prefixes or members left per output, or members of several sizes)."""
        if (g0.stages or g0.prefixes or g0.left.any() or g0.forked is not None
                or not len(g0.cur) or not (g0.cur == g0.cur[0]).all()):
            return None
        return g0.rows()[1]

    def launch(self, g0: VGather, head: np.ndarray | None, sel: np.ndarray | None,
               rows: np.ndarray, inp: np.ndarray, ctx: batch_ops.Ctx,
               on: np.ndarray) -> tuple[Any, tuple | None]:
        """The launch of the members ``rows`` (``sel``: their mask among the head group's, None
        for all of them) from the head gather ``g0`` (the steps before the policy recorded;
        ``head`` its rows, :meth:`head_rows`), the batch's Ctx of the policy and its coins
        ``on`` (of ``rows``): (the launch, None); or (None, what :meth:`learn` needs) where
        the record's path must make it (None there: the path, nothing to learn)."""
        if head is None or not len(rows):
            return None, None
        if sel is not None:
            head = head[sel]
        step = self.step
        dr = step.draws(ctx)
        m = len(rows)
        geo, before, codes, value = dr.geo[rows], dr.before[rows], dr.codes[rows], \
            dr.value[rows]
        npos = geo.shape[1]
        h, w = int(g0.cur[0, 0]), int(g0.cur[0, 1])
        table = step.value_table(kind_for(g0.cin, g0.dtype), h, w, g0.full)
        if table is None or not table.ready(codes.reshape(-1)):
            return None, None
        slots = int(geo[on].sum(axis=1).max(initial=0))
        if slots and not (g0.phase != 0 or g0.positional):
            return None, None  # (the first slot would join the head's gather)
        split0 = g0._layout()[1]  # (where the head's chained ops' slots end)
        key = (table, slots, g0.sig(), head.shape[1], split0, h, w)
        tpl = self.templates.get(key, False)
        if tpl is None:  # (the record's rows differed: kept on that path)
            return None, None
        every = np.arange(m)
        ps, spans = [], []
        for j in range(slots + 1):
            if j:
                # slot j: each member's j-th geometric entry, its map by code
                at = geo & (before == j - 1)
                has = on & at.any(axis=1)
                cd = table.slot_codes(codes[every, np.argmax(at, axis=1)], has)
                if (table.slot_leaves[cd] & has).any():
                    return None, None  # (members per output: the record's path takes them)
                part = np.empty((m, OPS_OFF + 1))
                part[:] = _slot_base(h, w, g0.full)
                part[:, A_OFF:A_OFF + 6] = table.slot_map[cd, :2].reshape(m, 6)
                part[:, OPS_OFF] = ~has
                split = OPS_OFF
            else:
                part, split = head, split0
            # the entries after slot j (``record_policy``'s ``placing``: consecutive)
            placing = [i for i in range(npos) if j <= i and slots - j <= npos - i]
            lo, hi = (placing[0], placing[-1] + 1) if placing else (0, 0)
            vcodes = np.where(on[:, None] & (before[:, lo:hi] == j), value[:, lo:hi],
                              table.none)
            ps.append(_rows(part, split, vcodes, table))
            spans.append((lo, hi))
        if tpl is False:  # (not learnt yet)
            return None, (key, ps, spans, (h, w))
        return self._make(tpl, ps, rows, inp), None

    def _make(self, tpl: _Template, ps: list, rows: np.ndarray, inp: np.ndarray) -> Any:
        from .batch_arena import Launch, Stage

        sizes = np.empty((len(rows), 2), dtype=np.int64)
        sizes[:] = tpl.gathers[-1].hw
        made = []
        for gt, p in zip(tpl.gathers, ps, strict=True):
            prefixes = [Prefix(stat, sig, phw, parts=(p, sizes), take=take, group=group)
                        for stat, sig, phw, group, take in gt.prefixes]
            made.append((gt, p, prefixes))
        stages = [Stage(gt.sig, p, gt.hw, gt.cout, prefixes, gt.reads)
                  for gt, p, prefixes in made[:-1]]
        gt, p, prefixes = made[-1]
        rec = self.rec
        at = inp[rows]
        arena_rows = np.empty((len(rows), 2), dtype=np.int64)
        arena_rows[:, 0], arena_rows[:, 1] = rec.offset[at], rec.hw[at, 1]
        return Launch(gt.sig, True, rows, p, arena_rows, gt.hw, gt.cout, tpl.dtype, prefixes,
                      stages, gt.reads)

    def learn(self, pending: tuple, launches: list, lost: np.ndarray) -> None:
        """Keep the template of ``pending``'s structure (:meth:`launch`) from ``launches``,
        the record's path's launches of the same members, where its rows equal the fill's
        (else the structure stays on that path); a batch with members left per output
        teaches nothing (tried again on a later batch, a few times)."""
        from .batch_arena import ForkStage

        key, ps, spans, hw = pending
        if len(lost) or len(launches) != 1:
            tries = self._tries[key] = self._tries.get(key, 0) + 1
            if tries >= 4:
                self.templates[key] = None
            return
        L = launches[0]
        gathers = [*L.stages, L]
        ok = L.gates and len(gathers) == len(ps) and not any(
            isinstance(st, ForkStage) for st in L.stages)
        kept = []
        if ok:
            for G, p, span in zip(gathers, ps, spans, strict=True):
                if not (G.p.dtype == p.dtype and G.p.shape == p.shape
                        and G.p.tobytes() == p.tobytes() and G.hw == hw):
                    ok = False
                    break
                pres = []
                for pr, r in zip(G.prefixes, G.reads, strict=True):
                    take = pr._take
                    if r is None or take is None or pr.hw != hw:
                        ok = False
                        break
                    sizes = np.empty((len(p), 2), dtype=np.int64)
                    sizes[:] = hw
                    mine = Prefix(pr.stat, pr.sig, pr.hw, parts=(p, sizes), take=take).p
                    if mine.shape != pr.p.shape or mine.tobytes() != pr.p.tobytes():
                        ok = False
                        break
                    pres.append((pr.stat, pr.sig, pr.hw, pr.group, take))
                if not ok:
                    break
                kept.append(_Gather(G.sig, G.hw, G.cout, list(G.reads), tuple(pres), span))
        self.templates[key] = _Template(tuple(kept), L.dtype) if ok else None


def _rows(part: np.ndarray, split: int, vcodes: np.ndarray,
          table: batch_ops.ValueTable) -> np.ndarray:
    """A gather's rows (:func:`fill_rows`) from ``part`` (the head's rows or a slot's fixed
    slots and flag) and the value codes ``vcodes`` (m, positions)."""
    m, npos = vcodes.shape
    out = np.empty((m, part.shape[1] + npos * (table.params.shape[1] + table.off.shape[1])))
    fill_rows(out, part, split, vcodes, table.params, table.off)
    return out


def _slot_base(h: int, w: int, full: float, _kept: dict = {}) -> np.ndarray:  # noqa: B006
    """A slot gather's fixed slots but its map, then its sampler flag (``VGather._fixed`` of
    the gather a cut starts and a sampler joins: the identity ``P``, the middle size ``h`` x
    ``w``, the full intensity, no clip), kept per argument."""
    key = (h, w, full)
    got = _kept.get(key)
    if got is None:
        got = np.zeros(OPS_OFF + 1)
        got[P_OFF:P_OFF + 6] = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
        got[MID_OFF:MID_OFF + 2] = (h, w)
        got[FULL_OFF] = full
        got[CLIP_OFF], got[CLIP_HI_OFF] = -np.inf, np.inf
        got.flags.writeable = False
        if len(_kept) >= 256:  # (kept bounded)
            _kept.clear()
        _kept[key] = got
    return got


def policy_fill(rec: Any) -> PolicyFill | None:
    """A :class:`PolicyFill` for the recorder ``rec``, where its last step is a policy and
    its rows have gate flags; else None."""
    steps = rec.steps
    if not steps or not rec.gates or not isinstance(steps[-1], batch_ops.PolicyStep) or any(
            isinstance(s, batch_ops.PolicyStep) for s in steps[:-1]):
        return None
    return PolicyFill(rec, steps[-1], len(steps) - 1)
