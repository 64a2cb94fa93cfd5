"""A Generator batch recorded once: vectorised draws, per-member arrays, no graph per output.

For Operations that are gpuimage recording methods (``image.RECORDING_METHODS``, the random
ones in :data:`RANGES`) on inputs of one shape, every coin and parameter of N outputs is drawn
at once (``random.uniform01_array``, bit-identical to the per-output draws). Outputs whose
coins (and zero-sigma blurs) agree form a *pattern*; the first output of each pattern ever
seen is recorded as usual once (its *template*: the kernels ``graph.exec.batch`` would batch it
with), and every output of that pattern then gets its kernel arguments (parameter rows,
uint8 tables, taps) from the drawn arrays, computed as ``exec.gather.gather_args`` computes them.
The groups run through ``graph.exec.batch``'s batched kernels, one upload per batch.

Outputs this cannot make (a rotation that needs scikit-image's data-dependent clip, a pattern
that does not batch) are made by the Generator's per-output path; the caller gets their
output indices back. Callable Operations make the whole Generator use that path
(documented in ``Generator.batches``).
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import batch_math
from .batch_ops import Ctx, sample_round
from .graph.codegen import gather_sig as codegen
from .graph.exec import batch, tables
from .graph.plan.schedule import _affine3
from .image import RECORDING_METHODS, _bounds, _range, gpuimage
from .kernels import REGISTRY
from .workers import StepError, private_handle

#: Random recording methods: the recorded op and the draw ranges from the bound arguments,
#: exactly as the method computes them (``gpuimage._uniform``).
RANGES = {
    "random_brightness": lambda a: [_bounds(a["min_delta"], a["max_delta"], "", "")],
    "random_rotate": lambda a: [_bounds(a["min_angle"], a["max_angle"], "", "")],
    "random_gaussian": lambda a: [_bounds(a["min_sigma"], a["max_sigma"], "", "")],
    "random_colorize": lambda a: [_range(a[n], n) for n in ("r_range", "g_range", "b_range")],
    "random_adjust_gamma": lambda a: [_range(a["gamma_range"], ""), _range(a["gain_range"], "")],
}


@dataclass(frozen=True)
class _Rule:
    """How Operation ``j`` draws: its coin probability and its draw ranges (None: fixed)."""

    probability: float | None
    ranges: tuple[tuple[float, float], ...] | None
    zero_skips: bool  # random_gaussian: a drawn sigma of 0 records nothing


def rules_for(inputs: list, operations: list) -> list[_Rule] | None:
    """Per Operation its draw rule, or None when the batch cannot be recorded at once."""
    first = inputs[0]
    if not all(isinstance(x, gpuimage) and x.shape == first.shape and x.dtype == first.dtype
               for x in inputs):
        return None
    rules = []
    for op in operations:
        if op.method not in RECORDING_METHODS or not op._records_only(first):
            return None
        ranges = None
        if op.method.startswith("random_"):
            make = RANGES.get(op.method)
            if make is None:
                return None
            sig = inspect.signature(getattr(gpuimage, op.method))
            bound = sig.bind(None, *op.args, **op.kwargs)
            bound.apply_defaults()
            try:
                ranges = tuple(make(bound.arguments))
            except (ValueError, KeyError):
                return None  # the per-output path reports the error
        rules.append(_Rule(op.probability, ranges, op.method == "random_gaussian"))
    return rules


def draw(rules: list[_Rule], seed: int, ks: np.ndarray) -> tuple[np.ndarray, list]:
    """Coins (n, J) and per Operation its (n, nparams) parameters (None where fixed): the
    streams' draws through ``batch_ops.Ctx`` (compiled SplitMix64 rounds, the same bits)."""
    z1 = sample_round(seed, ks) if rules else None
    ctxs = [Ctx(seed, ks, j, _z1=z1) for j in range(len(rules))]
    coins = np.stack([c.coins(r.probability) for c, r in zip(ctxs, rules, strict=True)],
                     axis=1) if rules else np.ones((len(ks), 0), dtype=bool)
    params: list[np.ndarray | None] = []
    for j, r in enumerate(rules):
        if r.ranges is None:
            params.append(None)
            continue
        cols = []
        for t, (lo, hi) in enumerate(r.ranges):
            if lo == hi:
                cols.append(np.full(len(ks), lo))
            else:
                cols.append(lo + (hi - lo) * ctxs[j].u(t))
        params.append(np.stack(cols, axis=1))
    return coins, params


def patterns(rules: list[_Rule], coins: np.ndarray, params: list) -> np.ndarray:
    """Per output the bits that decide its recorded structure: coins, zero sigmas."""
    bits = [coins]
    for j, r in enumerate(rules):
        if r.zero_skips:
            bits.append((params[j][:, :1] > 0) & coins[:, j:j + 1])
    return np.concatenate(bits, axis=1)


class RecordError(Exception):
    """Recording output ``k`` failed: ``err`` (a ``workers.StepError``) says where."""

    def __init__(self, k: int, err: BaseException) -> None:
        super().__init__(k, err)
        self.k, self.err = k, err


class _Template:
    """One pattern's recorded output: its group key, kernels and which op made each node."""

    def __init__(self, key: tuple, member: Any, op_of: dict[int, int]) -> None:
        self.key = key
        self.kernels = member.kernels
        self.args = member.args
        self.op_of = op_of
        self.recipes: dict[int, Any] = {}  # kernel index -> _GatherRecipe


def record_template(state: Any, rules: list[_Rule], k: int, device: int,
                    stacks: dict) -> _Template | None:
    """Record output ``k`` as the Generator does; its batch analysis (None: not batchable)."""
    x = state.inputs[k % len(state.inputs)]
    nodes = state.stacked_nodes.get(device)
    if nodes is not None:  # the value that was stacked, even if the input changed since
        x = private_handle(x)
        x._bind(nodes[k % len(nodes)])
    y = x.clone()
    op_of: dict[int, int] = {}
    y._pinned = device
    try:
        y._placed()
        for j, op in enumerate(state.operations):
            before = y._node
            try:
                op.apply(y, state.seed, k, j, batch.LIFT_GATES)
            except Exception as err:
                raise RecordError(k, StepError(f"operation {j} ({op.name!r})", err)) from err
            n = y._node
            while n is not before and n.inputs:
                op_of[n.id] = j
                n = n.inputs[0]
    finally:
        y._pinned = None
    got = batch._analyse(y._node, 0, stacks)
    if got is None:
        return None
    t = _Template(got[0], got[1], op_of)
    _check_draws(t, rules, state.seed, k)
    for kern in t.kernels:
        for node in kern.nodes:
            j = op_of.get(node.id)
            if getattr(node.op, "kind", "") == "sampler" and j is not None and \
                    rules[j].ranges is not None and len(node.params) != len(rules[j].ranges):
                return None  # a sampler with fixed parameters beside its drawn ones
    return t


def _check_draws(t: _Template, rules: list[_Rule], seed: int, k: int) -> None:
    """The vectorised draws of output ``k`` must be the parameters its recording drew."""
    _, params = draw(rules, seed, np.array([k], dtype=np.int64))
    for kern in t.kernels:
        for node in kern.nodes:
            j = t.op_of.get(node.id)
            if j is None or params[j] is None or node.gated_off:
                continue
            drawn = params[j][0].tolist()
            # the drawn values lead the recorded parameters (fixed ones may follow)
            if drawn != [float(v) for v in node.params[:len(drawn)]]:
                raise RuntimeError(f"batch_record: vectorised draws of operation {j} "
                                   f"{params[j][0].tolist()} differ from the recorded "
                                   f"{node.params} (output {k})")


class Recorder:
    """Records a Generator's batches at once (see module doc); one per Generator state."""

    def __init__(self, state: Any, rules: list[_Rule]) -> None:
        self.state = state
        self.rules = rules
        self.lock = threading.Lock()
        self.templates: dict[tuple[int, bytes], _Template | None] = {}
        self.failed: dict[tuple[int, bytes], int] = {}

    #: Outputs tried as a pattern's template before the pattern is left to per-output work
    #: (an output whose own rotation needs scikit-image's clip does not batch).
    TRIES = 4

    def template(self, device: int, pattern: np.ndarray, candidates: list[int],
                 stacks: dict) -> Any:
        """The pattern's template, recorded from the first candidate that batches."""
        key = (device, pattern.tobytes())
        with self.lock:
            if key in self.templates:
                return self.templates[key]
            tried = self.failed.get(key, 0)
            for k in candidates[:max(0, self.TRIES - tried)]:
                t = record_template(self.state, self.rules, k, device, stacks)
                if t is not None:
                    self.templates[key] = t
                    return t
                tried += 1
            self.failed[key] = tried
            if tried >= self.TRIES:
                self.templates[key] = None
            return None

    def groups(self, ks: list[int], device: int, stacks: dict) -> tuple[list, list[int]]:
        """The batched groups (:class:`ArrayGroup`, ``index``: batch positions) of outputs
        ``ks``, and the positions left to the per-output path."""
        st = self.state
        karr = np.asarray(ks, dtype=np.int64)
        coins, params = draw(self.rules, st.seed, karr)
        pats = patterns(self.rules, coins, params)
        drawn = _Draws(params)
        if pats.shape[1] <= 62:  # one integer per pattern: a 1-D unique is much faster
            pats_1d = pats.astype(np.int64) @ (np.int64(1) << np.arange(pats.shape[1]))
            _, first, inverse = np.unique(pats_1d, return_index=True, return_inverse=True)
        else:
            _, first, inverse = np.unique(pats, axis=0, return_index=True,
                                          return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(first) + 1))
        inputs = st.inputs
        sidx_of = np.array([stacks[n.id][1] for n in st.stacked_nodes[device]],
                           dtype=np.int64)
        parts: dict[tuple, list] = {}
        left: list[int] = []
        for u, f in enumerate(first.tolist()):
            rows = order[bounds[u]:bounds[u + 1]]
            t = self.template(device, pats[f], [ks[r] for r in rows[:self.TRIES].tolist()],
                              stacks)
            if t is None:
                left += rows.tolist()
                continue
            arrays, ok = _pattern_arrays(t, rows, drawn)
            if not ok.all():
                left += rows[~ok].tolist()
                rows = rows[ok]
                arrays = [{name: (a[ok] if isinstance(a, np.ndarray) and name in _PER_ROW
                                  else a) for name, a in d.items()} for d in arrays]
            if len(rows):
                parts.setdefault(t.key, []).append((t, rows, arrays))
        stack = next(iter(stacks.values()))[0] if stacks else None
        groups = [ArrayGroup(key, stack, device, got, sidx_of[karr % len(inputs)])
                  for key, got in parts.items()]
        return groups, sorted(left)


# per-kernel arrays with one row per output (others are the pattern's own constants)
_PER_ROW = ("lut_rows", "p", "taps", "rad")


def _pattern_arrays(t: _Template, rows: np.ndarray, params: Any) -> tuple[list, np.ndarray]:
    """Per kernel of one pattern's outputs ``rows``: its arrays (gather: ``lut`` or
    ``lut_rows``, ``p``, ``flags``; stencil: ``taps`` (n, T), ``rad``), and which rows can
    be made this way (not a sampler with scikit-image's data-dependent clip)."""
    ok = np.ones(len(rows), dtype=bool)
    out = []
    for i, k in enumerate(t.kernels):
        if k.kind == "gather":
            lut, p, flags = _gather_rows(t, i, k, rows, params, ok)
            key = "lut_rows" if lut.ndim == 4 else "lut"
            out.append({key: lut, "p": p, "flags": flags})
        else:
            out.append(_taps_rows(t, i, k, rows, params))
    return out, ok


class ArrayGroup(batch._Group):
    """A ``graph.exec.batch`` group whose per-member arguments come as stacked arrays.

    ``parts``: (template, rows, per-kernel arrays) of the patterns that share the group's
    key; ``sidx_rows``: per batch position, its input's index in the stack.
    """

    def __init__(self, key: tuple, stack: Any, device: int, parts: list,
                 sidx_rows: np.ndarray) -> None:
        super().__init__(key, stack, device)
        self.parts = parts
        self.index = np.concatenate([rows for _, rows, _ in parts])
        self.sidx = sidx_rows[self.index]
        self._kernels = parts[0][0].kernels
        self._taps: dict[int, list] = {}

    def kernels(self) -> list:
        return self._kernels

    def sidx_host(self) -> list[int]:
        return self.sidx.tolist()

    def taps_host(self, i: int) -> list[Any]:
        return self._taps[i]  # set by pack, which runs first

    def pack(self, pk: batch._Pack) -> None:
        """Lay the group's arrays out in ``pk`` (``_Group.pack``'s slots, from the stacks)."""
        n = len(self.index)
        self.slots = [pk.add(self.sidx), pk.add(np.arange(n, dtype=np.int64))]
        self.gated = []
        for i, k in enumerate(self._kernels):
            ds = [(rows, a[i]) for _, rows, a in self.parts]
            if k.kind == "gather":
                if k.lut_mode:
                    lut = np.concatenate([d["lut_rows"] if "lut_rows" in d else
                                          np.broadcast_to(d["lut"], (len(r), *d["lut"].shape))
                                          for r, d in ds])
                else:
                    lut = ds[0][1]["lut"][None]
                p = np.concatenate([d["p"] for _, d in ds])
                self.gated.append(any(d["flags"] is not None for _, d in ds))
                if self.gated[-1]:
                    g = codegen.gather_ngates(self.key[2 + i][1])
                    flags = np.concatenate([np.broadcast_to(
                        np.zeros(g) if d["flags"] is None else d["flags"], (len(r), g))
                        for r, d in ds])
                    p = np.concatenate([p, flags], axis=1)
                self.slots.append((pk.add(lut), pk.add(p)))
            else:
                self.gated.append(False)
                width = max(d["taps"].shape[1] for _, d in ds)
                taps = np.zeros((n, width))
                at = 0
                for _, d in ds:
                    m, t = d["taps"].shape
                    taps[at:at + m, :t] = d["taps"]
                    at += m
                self.slots.append((pk.add(taps), pk.add(np.concatenate([d["rad"]
                                                                         for _, d in ds]))))
                self._taps[i] = [None if r < 0 else taps[m, :2 * r + 1] for m, r in
                                 enumerate(np.concatenate([d["rad"] for _, d in ds]).tolist())]


class _Draws:
    """A batch's drawn parameters, and what is computed from them for every output at once
    (sampler maps, Gaussian taps), whatever pattern each output has."""

    def __init__(self, params: list) -> None:
        self.params = params
        self.cache: dict[tuple, Any] = {}

    def op(self, t: _Template, node: Any) -> int | None:
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
            s = self.params[j][:, 0]
            pos = np.flatnonzero(s > 0)
            taps, radius = batch_math.gaussian_taps(s[pos], reach)
            mat = np.zeros((len(s), taps.shape[1]))
            rad = np.full(len(s), -1, dtype=np.int64)
            mat[pos], rad[pos] = taps, radius
            got = self.cache[("taps", j, reach)] = (mat, rad)
        return got


def _node_params(t: _Template, node: Any, rows: np.ndarray, d: _Draws) -> np.ndarray | None:
    """The drawn parameters (n, nparams) of ``node`` for ``rows``, None where fixed
    (:func:`_check_draws` checked them against the template's recording)."""
    j = d.op(t, node)
    return None if j is None else d.params[j][rows]


@dataclass
class _GatherRecipe:
    """What a template's gather kernel needs per batch, worked out once: its base row, where
    drawn parameters go (``cols``: offset, op), the sampler's op, and per table stage its op
    codes, fixed parameters and drawn ones (``varying``: slot, op)."""

    p: np.ndarray
    lut: np.ndarray
    flags: Any
    cols: list[tuple[int, int]]
    sampler: tuple[int, Any, tuple, tuple] | None
    post_maps: list[np.ndarray]  # index maps after the sampler that ran (``Gather.add``)
    stages: list[tuple[int, np.ndarray, np.ndarray, list[tuple[int, int]]]]
    channels: int
    full: float


def _recipe(t: _Template, i: int, k: Any, d: _Draws) -> _GatherRecipe:
    lut_t, p_t, flags = t.args[i]
    chained = ([] if k.lut_mode else k.pre + k.post) + k.grey_ops
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
            post_maps.append(_affine3(m.op, *cur))
        seen = seen or kind == "sampler"
        cur = tuple(m.shape[:2])
    stages = []
    for stage, ops in enumerate((k.pre, k.post) if k.lut_mode else ()):
        ran = [m for m in ops if not m.gated_off]
        varying = [(q, j) for q, m in enumerate(ran) if (j := d.op(t, m)) is not None]
        if varying:
            fixed = np.array([tables._op_params(m) for m in ran]).reshape(len(ran), 3)
            codes = np.array([m.op.code for m in ran], dtype=np.int64)
            stages.append((stage, codes, fixed, varying))
    return _GatherRecipe(p_t, np.ascontiguousarray(lut_t), flags, cols, smp, post_maps,
                         stages, k.channels, float(p_t[codegen.FULL_OFF]))


def _gather_rows(t: _Template, i: int, k: Any, rows: np.ndarray, params: Any,
                 ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
    """Per-member (lut, p, flags) of gather kernel ``i`` (``batch._gather_member_args``)."""
    r = t.recipes.get(i)
    if r is None:
        r = t.recipes[i] = _recipe(t, i, k, params)
    n = len(rows)
    p = np.repeat(r.p[None], n, axis=0)
    for o, j in r.cols:
        vals = params.params[j]
        p[:, o:o + vals.shape[1]] = vals[rows]
    if r.sampler is not None:
        maps, clips = params.maps(*r.sampler)
        ok &= ~clips[rows]
        if r.post_maps:
            # composed per member with the same 3x3 products as Gather.add (exact equality)
            j, spec, mid, _ = r.sampler
            for m, row in enumerate(rows.tolist()):
                a = _affine3(spec, *mid, tuple(params.params[j][row].tolist()))
                for q in r.post_maps:
                    a = a @ q
                p[m, codegen.A_OFF:codegen.A_OFF + 6] = a[:2].ravel()
        else:
            p[:, codegen.A_OFF:codegen.A_OFF + 6] = maps[rows]
    lut = r.lut
    for stage, codes, fixed, varying in r.stages:
        if lut.ndim == 3:
            lut = np.repeat(r.lut[None], n, axis=0)
        prm = np.repeat(fixed[None], n, axis=0)
        for q, j in varying:
            vals = params.params[j]
            prm[:, q, :vals.shape[1]] = vals[rows]
        out = np.empty((n, r.channels, 256), dtype=np.uint8)
        batch_math.lut_many()(codes, prm, r.channels, r.full, out)
        lut[:, stage] = out
    return lut, p, r.flags


def _taps_rows(t: _Template, i: int, k: Any, rows: np.ndarray, params: Any) -> dict:
    """Stencil kernel ``i``'s taps of ``rows``: ``taps`` (n, T), ``rad`` (n,) (-1: gated off,
    a copy)."""
    node = k.output
    n = len(rows)
    if node.gated_off:
        return {"taps": np.zeros((n, 1)), "rad": np.full(n, -1, dtype=np.int64)}
    j = params.op(t, node)
    if j is not None and node.op.name == "gaussian":
        reach = int(node.params[1]) if len(node.params) > 1 else None
        mat, rad = params.taps(j, reach)
        return {"taps": mat[rows], "rad": rad[rows]}
    vals = _node_params(t, node, rows, params)
    if vals is None:
        taps = [t.args[i]] * n
    else:
        fn, tail = REGISTRY[node.op.name].fn, tuple(node.params[vals.shape[1]:])
        taps = [np.asarray(fn(*v, *tail), dtype=np.float64) for v in vals.tolist()]
    width = max(len(a) for a in taps)
    out = np.zeros((n, width))
    for m, a in enumerate(taps):
        out[m, :len(a)] = a
    return {"taps": out, "rad": np.array([len(a) // 2 for a in taps], dtype=np.int64)}
