"""A policy's arena launch per structure from a kept template: what depends on the structure
recorded once, what depends on the draws filled per batch.

A batch of a recipe ending in a policy (``RandAugment``, ``TrivialAugmentWide``,
``AutoAugment``) is recorded per structure (how many sampler slots its members draw, and
where the policy splits them whether they draw a neighbourhood entry, whose members' table
then has none: ``batch_ops.PolicyStep.apart``): the
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
(:func:`policy_rows`, one compiled call a structure). Values are the record's, bit for bit:
every column is a copy of a value the record copies (the check at learning compares the
bytes).

It fills a GPU's record (``ArenaRecorder.stat_cut`` off: no gather ended before a statistic
op; the cpu backend's record ends one there, and keeps the record's path). Where a batch does
not fit (a member left per output, members of several sizes, a code that breaks the table),
the record's own path runs, unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from ..graph.codegen.gather_sig import (
    A_OFF,
    CLIP_HI_OFF,
    CLIP_OFF,
    FULL_OFF,
    MID_OFF,
    OPS_OFF,
    P_OFF,
)
from ..graph.codegen.loader import load
from ..ops.base import kind_for
from . import batch_ops
from .batch_chain import ForkStage, Launch, Prefix, Stage, VGather


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


_FILL_SOURCE = '''# millipyde generated rows of a policy structure's gathers (batch_policy_fill)
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def policy_rows(head, hpos, split0, rows, on, geo, before, codes, value, params, off, filled,
                slot_map, slot_leaves, slot_filled, none, base, a_off):
    m, npos = len(rows), geo.shape[1]
    slots = 0
    for r in range(m):
        k = rows[r]
        s = 0
        for b in range(npos):
            if not filled[codes[k, b]]:
                return 1, 0, np.empty(0)
            if geo[k, b]:
                s += 1
        if on[r] and s > slots:
            slots = s
    pw, ow, hw_ = params.shape[1], off.shape[1], head.shape[1]
    bw = len(base)
    total = 0
    for j in range(slots + 1):
        lo, hi = j, min(npos - slots + j + 1, npos)
        total += (hw_ if j == 0 else bw) + max(hi - lo, 0) * (pw + ow)
    out = np.empty(m * total)
    at = 0
    scratch = np.empty(bw)
    for j in range(slots + 1):
        lo, hi = j, min(npos - slots + j + 1, npos)
        width = (hw_ if j == 0 else bw) + max(hi - lo, 0) * (pw + ow)
        for r in range(m):
            k = rows[r]
            c = at + r * width
            if j == 0:
                src = head[hpos[k]]
                split = split0
            else:
                cd = none
                if on[r]:
                    for b in range(npos):
                        if geo[k, b] and before[k, b] == j - 1:
                            cd = codes[k, b]
                            break
                if not slot_filled[cd]:
                    return 2, slots, np.empty(0)
                if cd != none and slot_leaves[cd]:
                    return 3, slots, np.empty(0)
                src = scratch
                src[:] = base
                for q in range(2):
                    for t in range(3):
                        src[a_off + 3 * q + t] = slot_map[cd, q, t]
                src[bw - 1] = 1.0 if cd == none else 0.0
                split = bw - 1
            for q in range(split):
                out[c] = src[q]
                c += 1
            for b in range(lo, hi):
                u = value[k, b] if on[r] and before[k, b] == j else none
                for q in range(pw):
                    out[c] = params[u, q]
                    c += 1
            for q in range(split, len(src) - 1):
                out[c] = src[q]
                c += 1
            for b in range(lo, hi):
                u = value[k, b] if on[r] and before[k, b] == j else none
                for q in range(ow):
                    out[c] = 1.0 if off[u, q] else 0.0
                    c += 1
            out[c] = src[len(src) - 1]
        at += m * width
    return 0, slots, out
'''


@functools.cache
def _fill_module() -> Any:
    return load(_FILL_SOURCE, "cpu")


def policy_rows(head: np.ndarray, hpos: np.ndarray, split0: int, rows: np.ndarray,
                on: np.ndarray, geo: np.ndarray, before: np.ndarray, codes: np.ndarray,
                value: np.ndarray, table: batch_ops.ValueTable,
                base: np.ndarray) -> tuple[int, int, np.ndarray]:
    """Every gather's rows of the members ``rows`` (batch positions) of one structure, side by
    side in one flat buffer: (status, slots, buffer). Status 0: made; 1: a member's code has
    no table row yet (``ValueTable.ready``); 2: a slot's code has no map yet
    (``ValueTable.slot_codes``); 3: a member's slot sends it per output (``slot_leaves``).

    Gather 0 is the head's (``head[hpos[row]]``: its fixed slots and chained ops' slots up to
    column ``split0``, then its extras, gate flags and sampler flag) with the value entries
    between the head and slot 1; gather ``j`` >= 1 is slot ``j``'s (``base``: the fixed slots
    of a fresh gather, its map ``slot_map`` by the member's ``j``-th geometric entry's code,
    and its sampler flag) with the entries after it (``batch_ops.record_policy``'s
    ``placing``). Each gather's row: the fixed and earlier chained slots, each position's
    value parameters ``params[code]``, the extras and earlier flags, each position's gate
    flags ``off[code]``, the sampler's flag: ``VGather.rows`` of the record."""
    return _fill_module().policy_rows(
        head, hpos, split0, rows, on, geo, before, codes, value, table.params, table.off,
        table.filled, table.slot_map, table.slot_leaves, table.slot_filled, table.none, base,
        A_OFF)


class PolicyFill:
    """Launches of a recipe whose last step is a policy, per structure from kept templates
    (the module doc): :meth:`launch` makes one or says the record's path must; :meth:`learn`
    keeps a structure's template from that path's launch."""

    def __init__(self, rec: Any, step: batch_ops.PolicyStep) -> None:
        self.rec, self.step = rec, step
        self.templates: dict[tuple, _Template | None] = {}
        self._tries: dict[tuple, int] = {}

    def head_rows(self, g0: VGather, hrows: np.ndarray, inp: np.ndarray) -> tuple | None:
        """What :meth:`launch` reads of a head gather ``g0`` (the members ``hrows`` of a batch
        whose outputs read inputs ``inp``), made once per head group and batch: its rows
        (``VGather.rows``), each batch position's row there, its value table, where its
        chained ops' slots end, its signature and size, each batch position's arena row
        (``ArenaRecorder._group``'s: its input's offset and width); None where its launches
        take the record's path (the head has stages, statistic prefixes or members left per
        output, members of several sizes, no value table)."""
        if (g0.stages or g0.prefixes or g0.left.any() or g0.forked is not None
                or not len(g0.cur) or not (g0.cur == g0.cur[0]).all()):
            return None
        h, w = int(g0.cur[0, 0]), int(g0.cur[0, 1])
        kind = kind_for(g0.cin, g0.dtype)
        # (and, where the policy splits them, the table of the members that draw no
        # neighbourhood entry: ``PolicyStep.apart``)
        table = self.step.value_table(kind, h, w, g0.full)
        plain = self.step.value_table(kind, h, w, g0.full, True) if self.step.splits else table
        if table is None or plain is None:
            return None
        hpos = np.zeros(len(inp), dtype=np.int64)
        hpos[hrows] = np.arange(len(hrows))
        head = g0.rows()[1]
        # (a slot that would join the head's gather: its rows are not these)
        joins = not (g0.phase != 0 or g0.positional)
        sig, end, _ = g0._layout()
        arena = np.empty((len(inp), 2), dtype=np.int64)
        arena[:, 0], arena[:, 1] = self.rec.offset[inp], self.rec.hw[inp, 1]
        return (head, hpos, (table, plain), end, sig, h, w, g0.full, joins, arena)

    def launch(self, hp: tuple | None, rows: np.ndarray, ctx: batch_ops.Ctx,
               on: np.ndarray) -> tuple[Any, tuple | None]:
        """The launch of the members ``rows`` (one structure) from their head gather (``hp``:
        :meth:`head_rows`), the batch's Ctx of the policy and its coins ``on`` (of ``rows``):
        (the launch, None); or (None, what :meth:`learn` needs) where the record's path must
        make it (None there: the path, nothing to learn)."""
        if hp is None or not len(rows):
            return None, None
        head, hpos, tables, split0, sig0, h, w, full, joins, arena = hp
        dr = self.step.draws(ctx)
        table = tables[self.step.plain(dr.value[rows])]  # (``record_policy``'s choice)
        if table.broken:
            return None, None
        args = (head, hpos, split0, rows, on, dr.geo, dr.before, dr.codes, dr.value)
        for _ in range(3):
            status, slots, buf = policy_rows(*args, table, _slot_base(h, w, full))
            if status == 1:  # (codes first drawn: their rows made, as the record makes them)
                if not table.ready(dr.codes[rows].reshape(-1)):
                    return None, None
            elif status == 2:  # (slot codes first drawn: their maps made)
                geo = dr.geo[rows] & on[:, None]
                table.slot_codes(dr.codes[rows][geo], np.ones(int(geo.sum()), dtype=bool))
            else:
                break
        if status != 0 or (slots and joins):
            return None, None  # (members per output, or a slot joining the head's gather)
        key = (table, slots, sig0, head.shape[1], split0, h, w)
        tpl = self.templates.get(key, False)
        if tpl is None:  # (the record's rows differed: kept on that path)
            return None, None
        m, npos = len(rows), dr.geo.shape[1]
        wide = table.params.shape[1] + table.off.shape[1]
        ps, spans, at = [], [], 0
        for j in range(slots + 1):
            lo, hi = j, min(npos - slots + j + 1, npos)
            width = (head.shape[1] if j == 0 else OPS_OFF + 1) + max(hi - lo, 0) * wide
            ps.append(buf[at:at + m * width].reshape(m, width))
            spans.append((lo, max(lo, hi)))
            at += m * width
        if tpl is False:  # (not learnt yet)
            return None, (key, ps, spans, (h, w), rows, arena[rows])
        return self._make(tpl, ps, rows, arena[rows]), None

    def _make(self, tpl: _Template, ps: list, rows: np.ndarray, arena_rows: np.ndarray) -> Any:
        sizes = _sizes(tpl.gathers[-1].hw, len(rows))
        made = []
        for gt, p in zip(tpl.gathers, ps, strict=True):
            prefixes = [Prefix(stat, sig, phw, parts=(p, sizes), take=take, group=group)
                        for stat, sig, phw, group, take in gt.prefixes]
            made.append((gt, p, prefixes))
        stages = [Stage(gt.sig, p, gt.hw, gt.cout, prefixes, gt.reads)
                  for gt, p, prefixes in made[:-1]]
        gt, p, prefixes = made[-1]
        return Launch(gt.sig, True, rows, p, arena_rows, gt.hw, gt.cout, tpl.dtype, prefixes,
                      stages, gt.reads)

    def learn(self, pending: tuple, launches: list, lost: np.ndarray) -> None:
        """Keep the template of ``pending``'s structure (:meth:`launch`) from ``launches``,
        the record's path's launches of the same members, where its rows equal the fill's
        (else the structure stays on that path); a batch with members left per output
        teaches nothing (tried again on a later batch, a few times)."""
        key, ps, spans, hw, rows, arena_rows = pending
        if len(lost) or len(launches) != 1:
            tries = self._tries[key] = self._tries.get(key, 0) + 1
            if tries >= 4:
                self.templates[key] = None
            return
        L = launches[0]
        gathers = [*L.stages, L]
        ok = L.gates and len(gathers) == len(ps) and not any(
            isinstance(st, ForkStage) for st in L.stages) and np.array_equal(L.pos, rows) \
            and np.array_equal(L.rows, arena_rows)
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
                    mine = Prefix(pr.stat, pr.sig, pr.hw, parts=(p, _sizes(hw, len(p))),
                                  take=take).p
                    if mine.shape != pr.p.shape or mine.tobytes() != pr.p.tobytes():
                        ok = False
                        break
                    pres.append((pr.stat, pr.sig, pr.hw, pr.group, take))
                if not ok:
                    break
                kept.append(_Gather(G.sig, G.hw, G.cout, list(G.reads), tuple(pres), span))
        if len(self.templates) >= 1024:  # (many sizes or tables: kept bounded)
            self.templates.clear()
        self.templates[key] = _Template(tuple(kept), L.dtype) if ok else None


def _sizes(hw: tuple[int, int], m: int, _kept: dict = {}) -> np.ndarray:  # noqa: B006
    """(m, 2) int64 rows of ``hw`` (a prefix's sizes, ``Prefix.p``'s last columns but one):
    the first ``m`` of a kept read-only array per size, grown by powers of two."""
    got = _kept.get(hw)
    if got is None or len(got) < m:
        got = np.empty((1 << max(0, m - 1).bit_length(), 2), dtype=np.int64)
        got[:] = hw
        got.flags.writeable = False
        if len(_kept) >= 256:  # (kept bounded)
            _kept.clear()
        _kept[hw] = got
    return got[:m]


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
    return PolicyFill(rec, steps[-1])
