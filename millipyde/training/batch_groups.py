"""The per-member kernel arguments of a recorded batch, built for a whole group at once.

``batch_record`` sorts a batch's outputs into coin *patterns* and records one template output
per pattern; the patterns whose kernels have the same structure share a group
(``graph.exec.batch``'s key). :func:`group_arrays` builds every member's arguments of such
a group with one NumPy operation per *distinct* recipe piece, not one per pattern: the
templates' base parameter rows and tables are stacked and indexed by each member's pattern,
then each drawn column, sampler map, table stage and Gaussian tap set is written for all
the members (of any pattern) that share it. The values are those ``exec.gather.gather_args``
gives each member's own plan (tests compare the outputs bit for bit).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph.codegen import gather_sig as codegen
from ..graph.exec import batch, tables
from ..graph.plan.schedule import affine3
from ..kernels import REGISTRY
from . import batch_math
from .batch_fill import KernelPlans, RowsFill, source_columns


class Draws:
    """A batch's drawn parameters, and what is computed from them for every output at once
    (sampler maps, Gaussian taps), whatever pattern each output has."""

    def __init__(self, params: list) -> None:
        self.params = params
        self.cache: dict[tuple, Any] = {}

    def op(self, t: Any, node: Any) -> int | None:
        """The Operation index whose drawn parameters ``node`` has (None: fixed ones)."""
        j = t.op_of.get(node.id)
        return None if j is None or self.params[j] is None else j

    def maps(self, j: int, spec: Any, mid: tuple[int, int],
             shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """(N, 6) sampler maps of Operation ``j`` and whether each needs the warp clip."""
        key = ("maps", j, mid, shape)
        got = self.cache.get(key)
        if got is None:
            maps = batch_math.sampler_maps(spec, *mid, self.params[j])
            got = self.cache[key] = (maps, batch_math.warp_clips(maps, mid, shape))
        return got

    def taps(self, j: int, reach: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(N, T) Gaussian taps of Operation ``j`` (zero rows where sigma is 0), radii."""
        got = self.cache.get(("taps", j, reach))
        if got is None:
            got = self.cache[("taps", j, reach)] = batch_math.gaussian_taps(
                self.params[j][:, 0], reach)
        return got


@dataclass
class _GatherRecipe:
    """What a template's gather kernel needs per batch, worked out once: its base row, where
    drawn parameters go (``cols``: offset, op), the sampler's op, and per table stage its op
    codes, fixed parameters, drawn ones (``varying``: slot, op) and a key equal for stages
    that differ only in the drawn slots."""

    p: np.ndarray
    lut: np.ndarray
    flags: Any
    cols: list[tuple[int, int]]
    sampler: tuple[int, Any, tuple, tuple] | None
    post_maps: list[np.ndarray]  # index maps after the sampler that ran (``Gather.add``)
    stages: list[tuple[int, np.ndarray, np.ndarray, list[tuple[int, int]], tuple]]
    channels: int
    full: float
    clip: bool  # the sampler's warp clip applies (its bounds are measured at launch)


#: Batch sizes whose per-member tables a gather plan keeps (``_GatherPlan.tiled``; and a
#: stencil's taps, ``_TapsPlan.tiled``): a Pipeline group's chunks are of one or two sizes
#: (``pipeline.chunks.chunk_sizes``), besides a short run's and a Generator's batches.
TILED_SIZES = 8


def _recipe(t: Any, i: int, d: Draws) -> _GatherRecipe:
    """Template ``t``'s recipe of gather kernel ``i`` (worked out on its first batch)."""
    got = t.recipes.get(i)
    if got is not None:
        return got
    k = t.kernels[i]
    lut_t, p_t, flags = t.args[i]
    lut_mode = batch.tables_of(k)
    chained = ([] if lut_mode else k.pre + k.post) + k.grey_ops
    cols = [(codegen.OPS_OFF + 3 * c, j) for c, node in enumerate(chained)
            if not node.gated_off and (j := d.op(t, node)) is not None]
    sampler = next((m for m in k.nodes if getattr(m.op, "kind", "") == "sampler"), None)
    smp = None
    if sampler is not None and not sampler.gated_off and (j := d.op(t, sampler)) is not None:
        smp = (j, sampler.op, tuple(k.mid), tuple(sampler.shape[:2]))
    post_maps, seen, cur = [], False, tuple(k.source.shape[:2])
    for m in k.nodes:  # as Gather.add composes them: A = A @ map, each at its input's shape
        kind = getattr(m.op, "kind", "")
        if kind == "index_map" and seen and not m.gated_off:
            post_maps.append(affine3(m.op, *cur))
        seen = seen or kind == "sampler"
        cur = tuple(m.shape[:2])
    stages = []
    for stage, ops in enumerate((k.pre, k.post) if lut_mode else ()):
        ran = [m for m in ops if not m.gated_off]
        varying = [(q, j) for q, m in enumerate(ran) if (j := d.op(t, m)) is not None]
        if varying:
            fixed = np.array([tables.op_params(m) for m in ran]).reshape(len(ran), 3)
            codes = np.array([m.op.code for m in ran], dtype=np.int64)
            # the template's own draws are overwritten per member: patterns whose stages
            # differ only there build their tables in one call
            shared = fixed.copy()
            for q, j in varying:
                shared[q, :d.params[j].shape[1]] = 0.0
            stages.append((stage, codes, fixed, varying,
                           (stage, codes.tobytes(), shared.tobytes(), tuple(varying))))
    got = t.recipes[i] = _GatherRecipe(p_t, np.ascontiguousarray(lut_t), flags, cols, smp,
                                       post_maps, stages, k.channels,
                                       float(p_t[codegen.FULL_OFF]), bool(k.clip_check))
    return got


def _by(items: list[tuple[Any, int]]) -> dict[Any, list[int]]:
    """Template indices per key, in first-seen order."""
    out: dict[Any, list[int]] = {}
    for key, u in items:
        out.setdefault(key, []).append(u)
    return out


def _flags(us: list[int], n: int) -> np.ndarray:
    """A (n,) mask with ``us`` set."""
    m = np.zeros(n, dtype=bool)
    m[us] = True
    return m


class _GatherPlan:
    """Gather kernel ``i`` of every template of a group key, as arrays over the templates:
    base rows and tables, and per recipe piece (drawn column, sampler, table stage) a mask
    of the templates that have it."""

    def __init__(self, rs: list[_GatherRecipe], lut_mode: bool, ngates: int,
                 widths: dict[int, int], gateable: bool = False) -> None:
        n = len(rs)
        self.p = np.stack([r.p for r in rs])
        self.lut = np.stack([r.lut for r in rs]) if lut_mode else rs[0].lut[None]
        # the members' one table: a constant of every batch's pack, its device copies here
        self.lut_held: dict[int, Any] = {}
        # per-member tables (``lut_mode``) of one template that draws none of them: the same
        # (n, ...) array for every batch of n members, read-only, a few sizes kept
        self.tiled: dict[int, np.ndarray] = {}
        if not lut_mode:
            self.lut.flags.writeable = False
        self.lut_mode = lut_mode
        self.cols = [(o, j, _flags(us, n)) for (o, j), us in
                     _by([(c, u) for u, r in enumerate(rs) for c in r.cols]).items()]
        smp = [((r.sampler[0], id(r.sampler[1]), r.sampler[2], r.sampler[3]), u)
               for u, r in enumerate(rs) if r.sampler is not None]
        self.samplers = [(rs[us[0]].sampler, rs[us[0]].clip, _flags(us, n))
                         for us in _by(smp).values()]
        # templates with index maps after their sampler: composed per member (rare)
        self.post = [(u, r) for u, r in enumerate(rs) if r.sampler is not None and r.post_maps]
        self.stages = []
        for key, us in _by([(x[4], u) for u, r in enumerate(rs) for x in r.stages]).items():
            stage, codes, fixed, varying, _ = next(x for x in rs[us[0]].stages if x[4] == key)
            self.stages.append((stage, codes, fixed, varying, rs[us[0]].channels,
                                rs[us[0]].full, _flags(us, n)))
        # ``gateable``: a coin may gate one of the kernel's flagged nodes off. The gated kernel
        # is then launched whichever templates have joined (a flag of 0 computes what the
        # ungated one does): which kernel a key launches does not depend on the coin patterns
        # met so far, so a new seed's outputs compile nothing that another seed's did not
        self.gated = gateable or any(r.flags is not None for r in rs)
        self.flags = np.stack([np.zeros(ngates) if r.flags is None else r.flags
                               for r in rs]) if self.gated else np.zeros((n, 0))
        self._pieces(widths)

    def _pieces(self, widths: dict[int, int]) -> None:
        """The drawn columns and sampler maps as ``batch_math.fill_rows`` pieces, over a
        source of the drawn parameters and maps side by side (``sources``)."""
        self.sources: list[Any] = []  # op j (its drawn columns) or a sampler (maps, clip)
        self.source_widths: list[int] = []  # the columns of each
        at: dict[Any, int] = {}
        width = 0
        pieces: list[tuple] = []  # dst, width, at, sel, clip_at, clip
        for o, j, sel in self.cols:
            if j not in at:
                at[j], width = width, width + widths[j]
                self.sources.append(j)
                self.source_widths.append(widths[j])
            pieces.append((o, widths[j], at[j], sel, -1, 0.0))
        for sampler, clip, sel in self.samplers:
            key = ("maps", sampler)
            if key not in at:
                at[key], width = width, width + 7  # six map values, then the clip (0 or 1)
                self.sources.append(sampler)
                self.source_widths.append(7)
            pieces.append((codegen.A_OFF, 6, at[key], sel, at[key] + 6, float(clip)))
        # equal for plans whose sources are (ops by index, samplers by their op's identity,
        # middle and output shapes: what ``Draws.maps`` is keyed by)
        self.skey = tuple(x if not isinstance(x, tuple) else (x[0], id(x[1]), x[2], x[3])
                          for x in self.sources)
        n = len(self.p)
        self.pieces = (np.array([x[0] for x in pieces], dtype=np.int64),
                       np.array([x[1] for x in pieces], dtype=np.int64),
                       np.array([x[2] for x in pieces], dtype=np.int64),
                       np.array([x[3] for x in pieces], dtype=bool).reshape(len(pieces), n),
                       np.array([x[4] for x in pieces], dtype=np.int64),
                       np.array([x[5] for x in pieces], dtype=np.float64))

    def source(self, d: Draws) -> np.ndarray:
        """(N, W) the batch's drawn columns and sampler maps that the pieces copy from (one
        per batch for the plans whose sources are the same: kept in ``d``)."""
        return source_columns(self.sources, self.skey, d)


class _TapsPlan:
    """Stencil kernel ``i`` of every template of a group key: which templates are gated off
    (radius -1), which draw Gaussian taps (per (op, reach)), and the others."""

    def __init__(self, templates: list, i: int, d: Draws) -> None:
        n = len(templates)
        gauss: list[tuple[Any, int]] = []
        self.other: list[int] = []
        for u, t in enumerate(templates):
            node = t.kernels[i].output
            if node.gated_off:
                continue  # radius -1
            j = d.op(t, node)
            if j is not None and node.op.kind == "stencil":  # (the Gaussian's taps)
                gauss.append(((j, int(node.params[1]) if len(node.params) > 1 else None), u))
            else:
                self.other.append(u)
        self.gauss = [(j, reach, _flags(us, n)) for (j, reach), us in _by(gauss).items()]
        # a batch of n members all of one template that draws no taps: its (n, T) taps and
        # (n,) radii, read-only, made once for every batch of n (as ``_GatherPlan.tiled``),
        # a few (template, n) kept. (Not constants of the pack: a constant's device copy is
        # made once a size and process, with the device waited for, holding up a worker
        # that has chunks queued, and kept until shutdown; the upload's copy is ~28 KB a
        # 250-input chunk.)
        self.tiled: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


class KeyPlan:
    """One group key's templates and, per kernel, their arrays (:class:`_GatherPlan`,
    :class:`_TapsPlan`), rebuilt when a template joins: a batch then costs one NumPy
    operation per recipe piece, however many patterns it holds."""

    def __init__(self, key: tuple, coins: tuple[bool, ...] = ()) -> None:
        self.key = key
        # per Operation index: whether its coin may gate its nodes off (``gateable``)
        self.coins = coins
        self.templates: list[Any] = []
        self.index: dict[Any, int] = {}  # template -> its index
        self.kernels: list[Any] = []
        self.lock = threading.Lock()
        self.memo: dict[Any, Any] = {}  # compiled launches of the key (``Group.memo``)
        # what a batch whose templates all joined already reads without the lock
        # (``batch_record``'s fast path): (templates, kernel plans), set before ``ready``
        # (template -> its index) names the templates they cover
        self.state: tuple[list[Any], list[Any]] = ([], [])
        self.ready: dict[Any, int] = {}

    def ids(self, parts: list[tuple[Any, np.ndarray]],
            d: Draws) -> tuple[np.ndarray, list[Any], list[Any]]:
        """Per member (``parts``' rows in order) its template's index, and the templates and
        kernel plans those index (new templates join first)."""
        index = self.index  # (templates hash by identity)
        with self.lock:
            try:
                at = [index[t] for t, _ in parts]
            except KeyError:  # new templates join, the kernel plans are rebuilt
                for t, _ in parts:
                    if t not in index:
                        index[t] = len(self.templates)
                        self.templates.append(t)
                self.kernels = self._build(d)
                at = [index[t] for t, _ in parts]
                self.state = (self.templates[:], self.kernels)
                self.ready = dict(index)
            got = self.templates[:], self.kernels
        if len(parts) == 1:
            return np.full(parts[0][1].shape[0], at[0], dtype=np.int64), *got
        return np.repeat(np.asarray(at, dtype=np.int64), [r.shape[0] for _, r in parts]), *got

    def gateable(self, t: Any, i: int) -> bool:
        """Whether a coin may gate off a node of template ``t``'s gather ``i`` that a flag
        skips (``batch._gather_member_args``: chained ops outside the uint8 tables, the
        sampler); every template of the key has the same nodes from the same Operations."""
        k = t.kernels[i]
        flagged = ([] if batch.tables_of(k) else k.pre + k.post) + k.grey_ops + \
            [m for m in k.nodes if getattr(m.op, "kind", "") == "sampler"]
        coins = self.coins
        return any((j := t.op_of.get(m.id)) is not None and j < len(coins) and coins[j]
                   for m in flagged)

    def _build(self, d: Draws) -> list[Any]:
        ts = self.templates
        out = KernelPlans()
        for i, k in enumerate(ts[0].kernels):
            if k.kind == "gather":
                out.append(_GatherPlan([_recipe(t, i, d) for t in ts], batch.tables_of(k),
                                       codegen.gather_ngates(self.key[2 + i][1]),
                                       {j: v.shape[1] for j, v in enumerate(d.params)
                                        if v is not None}, self.gateable(ts[0], i)))
            else:
                out.append(_TapsPlan(ts, i, d))
        out.fill = RowsFill.of([(i, kp) for i, kp in enumerate(out)
                                if isinstance(kp, _GatherPlan)])
        return out


def _gather_arrays(kp: _GatherPlan, tid: np.ndarray, rows: np.ndarray, d: Draws,
                   ok: np.ndarray, p: np.ndarray | None = None) -> dict[str, Any]:
    """Per member ``lut``, ``p`` (gate flags appended where any template has one) of a gather
    kernel (``batch._gather_member_args`` of each member); ``p`` given: its rows, filled
    already (``batch_fill.RowsFill``)."""
    # base rows, gate flags, drawn columns and sampler maps in one compiled pass; a member
    # whose warp clip differs from its template's plans differently (the clip splits the
    # kernel): it needs a template of its own (``Recorder.groups``)
    if p is None:
        p = batch_math.fill_rows(kp.p, kp.flags, tid, rows, kp.source(d), kp.pieces, ok)
    for u, r in kp.post:  # index maps after the sampler: the same 3x3 products as Gather.add
        j, spec, mid, _ = r.sampler
        for at in np.flatnonzero(tid == u).tolist():
            a = affine3(spec, *mid, tuple(d.params[j][rows[at]].tolist()))
            for q in r.post_maps:
                a = a @ q
            p[at, codegen.A_OFF:codegen.A_OFF + 6] = a[:2].ravel()
    if kp.lut_mode:
        if not kp.stages and len(kp.lut) == 1:  # every member's tables its template's
            lut = kp.tiled.get(len(tid))
            if lut is None:
                lut = np.broadcast_to(kp.lut, (len(tid), *kp.lut.shape[1:])).copy()
                lut.flags.writeable = False
                if len(kp.tiled) < TILED_SIZES:
                    kp.tiled[len(tid)] = lut
            return {"lut": lut, "p": p, "gated": kp.gated}
        lut = kp.lut[tid]
        for stage, codes, fixed, varying, channels, full, sel in kp.stages:
            m = sel[tid]
            mrows = rows[m]
            cnt = len(mrows)
            if not cnt:
                continue
            # (the arrays' own methods: no NumPy wrapper functions per stage and group)
            prm = fixed[None].repeat(cnt, axis=0)
            for q, j in varying:
                vals = d.params[j]
                prm[:, q, :vals.shape[1]] = vals[mrows]
            out = np.empty((cnt, channels, 256), dtype=np.uint8)
            batch_math.lut_many()(codes, prm, channels, full, out)
            lut[m, stage] = out
        return {"lut": lut, "p": p, "gated": kp.gated}
    # one table for every member (``Group.pack``), the plan's own array every batch: a
    # constant of the pack whose device copies the plan keeps (``Pack.constant``)
    return {"lut": kp.lut, "p": p, "gated": kp.gated, "lut_held": kp.lut_held}


def _taps_arrays(kp: _TapsPlan, templates: list, i: int, tid: np.ndarray, rows: np.ndarray,
                 d: Draws) -> dict[str, Any]:
    """Stencil kernel ``i``'s ``taps`` (n, T) and ``rad`` (n,) (-1: gated off, a copy)."""
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # mask, taps, radii
    for u in kp.other:
        m = tid == u
        if not m.any():
            continue
        t = templates[u]
        node = t.kernels[i].output
        j = d.op(t, node)
        vals = None if j is None else d.params[j][rows[m]]
        if vals is None:  # the template's taps for each of its members, one copy
            cnt = int(m.sum())
            if cnt == len(tid) and not kp.gauss:  # every member: one tiled table a size
                got = kp.tiled.get((u, cnt))
                if got is None:
                    got = _tiled_taps(t.args[i], cnt)
                    if len(kp.tiled) < TILED_SIZES:
                        kp.tiled[(u, cnt)] = got
                return {"taps": got[0], "rad": got[1]}
            pieces.append((m, *_tiled_taps(t.args[i], cnt)))
            continue
        fn, tail = REGISTRY[node.op.name].fn, tuple(node.params[vals.shape[1]:])
        taps = [np.asarray(fn(*v, *tail), dtype=np.float64) for v in vals.tolist()]
        mat = np.zeros((len(taps), max(len(a) for a in taps)))
        for at, a in enumerate(taps):
            mat[at, :len(a)] = a
        pieces.append((m, mat, np.array([len(a) // 2 for a in taps], dtype=np.int64)))
    for j, reach, sel in kp.gauss:
        mat, rad = d.taps(j, reach)
        m = sel[tid]
        if m.all():
            pieces.append((m, mat[rows], rad[rows]))
        elif m.any():
            pieces.append((m, mat[rows[m]], rad[rows[m]]))
    if len(pieces) == 1 and pieces[0][0].all():  # one tap set for every member
        return {"taps": pieces[0][1], "rad": pieces[0][2]}
    out = np.zeros((len(rows), max((t.shape[1] for _, t, _ in pieces), default=1)))
    rad = np.full(len(rows), -1, dtype=np.int64)
    for m, t, r in pieces:
        out[m, :t.shape[1]] = t
        rad[m] = r
    return {"taps": out, "rad": rad}


def _tiled_taps(taps: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``taps`` for each of ``n`` members and their radius, read-only."""
    a = np.asarray(taps, dtype=np.float64)
    mat = np.broadcast_to(a, (n, len(a))).copy()
    rad = np.full(n, len(a) // 2, dtype=np.int64)
    mat.flags.writeable = rad.flags.writeable = False
    return mat, rad


def group_arrays(plan: KeyPlan, parts: list[tuple[Any, np.ndarray]],
                 d: Draws) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray, list[Any]]:
    """The batch rows of a group's members (``parts``: per pattern its template and rows),
    per kernel their arrays, the rows whose sampler's warp clip differs from their
    template's (they plan another kernel structure), and the kernel plans they came from."""
    tid, templates, kernels = plan.ids(parts, d)
    rows = parts[0][1] if len(parts) == 1 else np.concatenate([r for _, r in parts])
    return (*member_arrays(templates, kernels, tid, rows, d), kernels)


def member_arrays(templates: list[Any], kernels: list[Any], tid: np.ndarray, rows: np.ndarray,
                  d: Draws) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
    """:func:`group_arrays` of members given as their templates' indices ``tid`` into
    ``templates`` (a key plan's, with its ``kernels``) and their batch ``rows``."""
    ok = np.ones(len(rows), dtype=bool)
    arrays = []
    fill = getattr(kernels, "fill", None)
    filled = {} if fill is None else fill.rows(tid, rows, d, ok)
    for i, kp in enumerate(kernels):
        if isinstance(kp, _GatherPlan):
            arrays.append(_gather_arrays(kp, tid, rows, d, ok, filled.get(i)))
        else:
            arrays.append(_taps_arrays(kp, templates, i, tid, rows, d))
    if ok.all():
        return rows, arrays, rows[:0]
    for kp, a in zip(kernels, arrays, strict=True):
        for name in ("p", "taps", "rad"):
            if name in a:
                a[name] = a[name][ok]
        if isinstance(kp, _GatherPlan) and kp.lut_mode:  # per-member tables (else one)
            a["lut"] = a["lut"][ok]
            a.pop("lut_held", None)  # (a tiled table's copies are of all its rows)
    return rows[ok], arrays, rows[~ok]


class ArrayGroup(batch.Group):
    """A ``graph.exec.batch`` group whose per-member arguments come as stacked arrays.

    ``plan``: its key's :class:`KeyPlan`; ``kernels``: the group's kernels (its first
    template's); ``index``: its members' batch
    positions; ``arrays``: per kernel what :func:`group_arrays` built; ``sidx_rows``: per
    batch position, its input's index in the stack; ``stack4``: the recorder's memo of the
    stack's (S, H, W, C) view (the key plan's memo may be shared by Generators,
    ``template_share``: it must not keep a Generator's stack alive).
    """

    def __init__(self, plan: KeyPlan, stack: Any, device: int, kernels: list,
                 index: np.ndarray, arrays: list[dict[str, Any]], sidx_rows: np.ndarray,
                 plans: Any = None, stack4: dict | None = None) -> None:
        super().__init__(plan.key, stack, device)
        self._s4 = stack4
        # the key plan's kernel plans the arrays came from (what decides a shared prefix:
        # ``batch_prefix``), None where not known
        self.plans = plans
        self.memo = plan.memo  # the key's compiled launches, across batches
        self.index = index
        self.arrays = arrays
        self.sidx = sidx_rows[index]
        self._kernels = kernels

    def kernels(self) -> list:
        return self._kernels

    def rebound(self, stack: Any) -> ArrayGroup:
        g = super().rebound(stack)
        if self._s4 is not None:
            # its own stack's view, made on its first launch: the recorder's memo (shared by
            # a batch's groups) would keep the last chunk's stack alive with a kept copy
            g._s4 = {}
        return g

    def _stack4(self) -> Any:
        return super()._stack4() if self._s4 is None else self.stack4_of(self._s4, self.stack)

    def sidx_host(self) -> list[int]:
        return self.sidx.tolist()

    def size(self) -> int:
        return len(self.index)

    def taps_host(self, i: int) -> list[Any]:
        a = self.arrays[i]
        return [None if r < 0 else a["taps"][m, :2 * r + 1]
                for m, r in enumerate(a["rad"].tolist())]

    def radius(self, i: int) -> int:
        return int(self.arrays[i]["rad"].max(initial=0))

    def pack(self, pk: batch.Pack, start: int = 0) -> None:
        """Lay the group's arrays out in ``pk`` (``Group.pack``'s slots); ``start``: those of
        kernels ``start ..`` only (``pack_arrays``)."""
        self.pack_arrays(pk, self.sidx, self.arrays, start)
