"""A Generator batch recorded at once as one fused gather over an arena of mixed-size inputs.

For Operation chains that plan to one gather per output (geometry with at most one sampler,
colour, noise and erasing ops, user ``@mp.elementwise`` / ``@mp.pixelwise`` ops; ``batch_ops``
lists them) the whole batch is recorded with NumPy: coins and parameters drawn at once
(``batch_ops``, bit-identical to the per-output draws), one parameter row per member
(``batch_chain.VGather``, the values ``exec.gather.gather_args`` gives each output), gates as
per-member flags. The Generator's distinct inputs are packed once per device into a flat
*arena* (they are resident and do not change between batches); a member reads its source
through its (offset, width) row, so inputs of different sizes share one launch
(``graph.codegen.arena``). Each op that reads a per-image statistic (``adjust_contrast``,
``autocontrast``, ``equalize``) adds one reduction that leaves each member's row on the
device, where the gather (and later reductions) read it: no host sync. The reductions of ops of
which at most one runs per member (a policy position's statistic entries) share one launch
(:func:`reduction_groups`).

Members are split only where the structure must differ: inputs of another channel count or
dtype, a size-changing op a coin skipped, outputs of different sizes; and, in a policy of two
positions or more, whether a member draws a neighbourhood entry (``PolicyStep.apart``: the
others' gathers then chain none: 80-114 registers on sm_90 in place of 140-172). Members
this cannot make (scikit-image's data-dependent warp clip, a crop window outside the image)
are left to the per-output path, and so is every chain with an op not listed (``make``
returns None).
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import random as mprandom
from ..augmix import AugMix
from ..backend import ACTIVE as runtime  # the active backend
from ..compose import Choice
from ..decorators import UserOp
from ..graph.codegen import arena as codegen_arena
from ..graph.codegen import stat as codegen_stat
from ..graph.codegen.gather_sig import extras_offset, gather_ngates, gather_nparams
from ..image import gpuimage
from ..policies import Policy
from . import batch_augmix, batch_ops, batch_policy_fill
from .batch_chain import ForkStage, Launch, Prefix, Stage, Unsupported, VGather


@dataclass
class _UserStep:
    """A user op's Operation (``@mp.elementwise`` ...): drawn by ``batch_ops.user_op``."""

    op: Any
    reshapes: bool


def launch_of(g: VGather, gates: bool, pos: np.ndarray, rows: np.ndarray | None) -> Launch:
    """The :class:`Launch` of ``g`` (members of one size at every stage) for the batch
    positions ``pos``, reading its source at ``rows`` (None: a fork's branch, whose rows are
    the fork's)."""
    sig, p = g.rows()
    stages: list = []
    for st in g.stages:
        if st.forked is not None:
            f = st.forked
            pieces = [launch_of(cg, cg.gates, at, None) for at, cg in f.pieces]
            stages.append(ForkStage(f.weights, pieces, (int(f.cur[0, 0]), int(f.cur[0, 1])),
                                    st.cin, st.dtype, st.full))
            continue
        ssig, sp = st.rows()
        shw = (int(st.cur[0, 0]), int(st.cur[0, 1]))
        stages.append(Stage(ssig, sp, shw, ssig.cout, st.prefixes,
                            stat_reads(st, ssig, gates, shw)))
    hw = (int(g.cur[0, 0]), int(g.cur[0, 1]))
    return Launch(sig, gates, pos, p, rows, hw, sig.cout, g.dtype, g.prefixes, stages,
                  stat_reads(g, sig, gates, hw))


def stat_reads(g: VGather, sig: Any, gates: bool,
               hw: tuple[int, int]) -> list[tuple[int, ...] | None]:
    """Per statistic prefix of ``g`` (whose rows are of ``sig``, its members' output ``hw``):
    where its reduction reads its parameters in ``g``'s own rows
    (``codegen.stat.ARENA_STAT_COLS``: the extras, the gate flags, the sampler's flag, its
    op's own flag (-1: no flags), no size column (-1) and the size), or None where ``g`` has
    changed since (a sampler, an index map, a pad after the op): the prefix's own rows are
    packed (:func:`own_reads`). A prefix's fixed and chained ops' slots are the first
    columns of ``g``'s rows as long as ``g`` keeps its fixed slots (``VGather.begun``)."""
    if not g.prefixes:
        return []
    if not (g.cur == g.cur[0]).all():  # (a launch's members share their size: never here)
        return [None] * len(g.prefixes)
    end, width = extras_offset(sig), gather_nparams(sig)
    flags = gather_ngates(sig) - 1
    return [(end, width, width + flags, width + gather_ngates(pr.sig) - 1 if gates else -1,
             -1, *hw) if begun else None
            for pr, begun in zip(g.prefixes, g.begun(), strict=True)]


def own_reads(sig: Any, gates: bool) -> tuple[int, ...]:
    """The column arguments of a reduction of ``sig`` that reads a prefix's own rows
    (``Prefix.p``: the parameters, the gate flags with ``gates``, the height and width, the
    op's flag)."""
    end, n = extras_offset(sig), gather_nparams(sig)
    at = n + gather_ngates(sig) if gates else n
    return (end, n, at - 1, at + 2, at, 0, 0)


def kernel_launches(launches: list[Launch]) -> list[tuple]:
    """Every kernel launch a batch of ``launches`` makes, in order: ("gather", sig) for each
    gather (stages and a fork's branches included), ("stat", stat, sig) for each statistic's
    reduction launched alone and ("stats", ((stat, sig), ...)) for reductions that share one
    (:func:`reduction_groups`), ("mix",) for each fork's weighted sum."""
    out: list[tuple] = []
    for L in launches:
        for st in L.stages:
            if isinstance(st, ForkStage):
                out += kernel_launches(st.pieces) + [("mix",)]
                continue
            out += _reductions(st) + [("gather", st.sig)]
        out += _reductions(L) + [("gather", L.sig)]
    return out


def _reductions(G: Launch | Stage) -> list[tuple]:
    out = []
    for grp in reduction_groups(G.prefixes, G.reads):
        prs = [G.prefixes[i] for i in grp]
        out.append(("stat", prs[0].stat, prs[0].sig) if len(prs) == 1
                   else ("stats", tuple((pr.stat, pr.sig) for pr in prs)))
    return out


def reduction_groups(prefixes: list[Prefix], reads: list) -> list[list[int]]:
    """The launches of a gather's statistic reductions, in chain order: the indices of the
    prefixes each runs. Consecutive prefixes of one group (``Prefix.group``: ops of which at
    most one runs per member, so none reads the row of another that measures the member)
    that all read the gather's rows share a launch; every other reduction has its own."""
    out: list[list[int]] = []
    for i, (pr, r) in enumerate(zip(prefixes, reads, strict=True)):
        if (out and r is not None and pr.group is not None
                and prefixes[out[-1][-1]].group == pr.group and reads[out[-1][-1]] is not None):
            out[-1].append(i)
        else:
            out.append([i])
    return out


class ArenaRecorder:
    """Records a Generator's batches as arena gathers (see the module doc).

    ``layout``: the arena is already laid out (a decoded batch's one allocation,
    :func:`given_arena`): the inputs' (H, W, C) shapes, their one dtype's ``str``, each
    input's offset in elements and the arena's size; else the inputs are packed one after
    another, per dtype (:func:`pack`)."""

    def __init__(self, state: Any, steps: list,
                 layout: tuple[np.ndarray, str, np.ndarray, int] | None = None) -> None:
        self.state = state
        self.steps = steps
        xs = state.inputs
        if layout is not None:
            shapes, dt, self.offset, size = layout
            self.hw = np.ascontiguousarray(shapes[:, :2], dtype=np.int64)
            chans, kind = np.unique(shapes[:, 2], return_inverse=True)
            self.kinds = [(int(c), dt) for c in chans.tolist()]  # as sorted(set(kinds))
            self.kind = kind.astype(np.int64)
            self.arena_size: dict[str, int] = {dt: int(size)}
        else:
            self.hw = np.array([x.shape[:2] for x in xs], dtype=np.int64)
            kinds = [(1 if x.ndim == 2 else int(x.shape[2]), x.dtype.str) for x in xs]
            self.kinds = sorted(set(kinds))
            self.kind = np.array([self.kinds.index(k) for k in kinds], dtype=np.int64)
            # offsets of each input in its dtype's arena
            self.offset = np.zeros(len(xs), dtype=np.int64)
            self.arena_size = {}
            for i, x in enumerate(xs):
                at = self.arena_size.get(x.dtype.str, 0)
                self.offset[i] = at
                self.arena_size[x.dtype.str] = at + int(x.size)
        self.gates = any(s.op.probability is not None and not s.reshapes for s in steps) or \
            any(isinstance(s, batch_ops.Step) and s.form.skips for s in steps) or \
            any(isinstance(s, (batch_ops.ChoiceStep, batch_ops.PolicyStep,
                               batch_augmix.AugMixStep)) for s in steps)
        self.lock = threading.Lock()
        self.arenas: dict[int, dict[str, Any]] = {}
        # an AugMix before any size-changing op: its members are grouped by input size
        fork = next((j for j, s in enumerate(steps) if isinstance(s, batch_augmix.AugMixStep)),
                    None)
        self.fork_sizes = fork is not None and not any(s.reshapes for s in steps[:fork]) and \
            len({tuple(v) for v in self.hw.tolist()}) > 1
        # end a gather before a statistic op after a sampler (``VGather.stat_cut``): the cpu
        # runs a statistic's reduction one member a thread, so there the gather before it is
        # run once, as a stage, rather than again inside the reduction; a GPU does not
        self.stat_cut = not runtime.caps.grid_launches
        # a last step that is a policy: its structures' launches from kept templates
        self.fill = batch_policy_fill.policy_fill(self)

    # -- inputs on the device ------------------------------------------------------------------
    def arena(self, device: int) -> dict[str, Any]:
        """Per dtype, the flat arena of the inputs on ``device`` (made once per device)."""
        with self.lock:
            got = self.arenas.get(device)
            if got is not None:
                return got
            got = {}
            for key, size in self.arena_size.items():
                got[key] = runtime.empty((max(size, 1),), np.dtype(key), device)
            with runtime.on_device(device):
                for i, x in enumerate(self.state.inputs):
                    buf = x._materialize()
                    n = int(x.size)
                    if x._node.device != device:
                        buf = runtime.copy(buf, device, x._node.device)
                    flat = runtime.reshape(buf, (n,))
                    dst = got[x.dtype.str]
                    o = int(self.offset[i])
                    if runtime.caps.device_memory:
                        dst[o:o + n].copy_to_device(flat, stream=runtime.current_stream())
                    else:
                        dst[o:o + n] = flat
                runtime.synchronize(device)  # other streams read it
            self.arenas[device] = got
            return got

    # -- recording --------------------------------------------------------------------------------
    def record(self, ks: list[int] | np.ndarray,
               inp: Any = None) -> tuple[list[Launch], list[int]]:
        """The launches making outputs ``ks`` (a list, or an int64 array: not copied) and the
        batch positions left per output;
        ``inp``: the input each output reads (default: the state's ``input_index``)."""
        st = self.state
        karr = np.asarray(ks, dtype=np.int64)
        inp = st.input_index(karr) if inp is None else np.asarray(inp, dtype=np.int64)
        z1 = batch_ops.sample_round(st.seed, karr)
        ctxs = [batch_ops.Ctx(st.seed, karr, j, _z1=z1) for j in range(len(self.steps))]
        coins = [c.coins(s.op.probability) for c, s in zip(ctxs, self.steps, strict=True)]
        # the structure: input kind, and the coins of size-changing ops
        cols = [self.kind[inp]] + [c.astype(np.int64) for c, s in zip(coins, self.steps,
                                                                      strict=True)
                                   if s.reshapes and s.op.probability is not None]
        if self.fork_sizes:  # (a fork's members have one size: ``batch_augmix``)
            cols.append(_groups_of(self.hw[inp, 0] * (1 << 31) + self.hw[inp, 1]))
        first = _code(cols)
        # a policy records two structures: with and without its sampler slot
        # (and, where it splits them, whether they draw a neighbourhood entry:
        # ``PolicyStep.apart``)
        cols += [col for c, s in zip(ctxs, self.steps, strict=True)
                 if isinstance(s, batch_ops.PolicyStep) for col in (s.structure(c), s.apart(c))]
        inverse = _groups_of(_code(cols))
        # the steps before the first policy are recorded once for the members that share
        # their structure, then taken per policy structure (the same rows: each member's are
        # its own)
        cut = next((j for j, s in enumerate(self.steps) if isinstance(s, batch_ops.PolicyStep)),
                   0)
        heads = _groups_of(first) if cut else None
        # head group -> (its rows, its gather, its rows for ``fill``) or None: unsupported
        head: dict[int, Any] = {}
        # (the fill's gathers are a GPU's record: none ended before a statistic op)
        fill = self.fill if cut and not self.stat_cut else None
        launches: list[Launch] = []
        left: list[np.ndarray] = []
        for u in range(int(inverse.max(initial=-1)) + 1):
            rows = np.flatnonzero(inverse == u)
            g, pending = None, None
            if heads is not None:
                h = int(heads[rows[0]])
                if h not in head:
                    hrows = np.flatnonzero(heads == h)
                    try:
                        g0 = self._record(self._gather(hrows, inp), hrows, ctxs, coins, 0,
                                          cut)
                        head[h] = (hrows, g0, None if fill is None else
                                   fill.head_rows(g0, hrows, inp))
                    except Unsupported:
                        head[h] = None
                if head[h] is None:
                    left.append(rows)
                    continue
                hrows, g0, hp = head[h]
                if fill is not None:
                    made, pending = fill.launch(hp, rows, ctxs[cut], coins[cut][rows])
                    if made is not None:
                        launches.append(made)
                        continue
                g = g0 if len(hrows) == len(rows) else g0.take(inverse[hrows] == u)
            try:
                got, lost = self._group(rows, inp, ctxs, coins, g, cut)
            except Unsupported:
                left.append(rows)
                continue
            if pending is not None:
                fill.learn(pending, got, lost)
            launches += got
            left.append(lost)
        out_left = np.sort(np.concatenate(left)) if left else np.zeros(0, dtype=np.int64)
        return launches, out_left.tolist()

    def _gather(self, rows: np.ndarray, inp: np.ndarray) -> VGather:
        """An empty gather of the members ``rows`` (of one input kind)."""
        cin, dt = self.kinds[int(self.kind[inp[rows[0]]])]
        region = getattr(self.state, "region", None)
        return VGather(self.hw[inp[rows]], cin, np.dtype(dt), self.gates,
                       stat_cut=self.stat_cut,
                       region=None if region is None else region[inp[rows]])

    def _record(self, g: VGather, rows: np.ndarray, ctxs: list, coins: list, start: int,
                stop: int) -> VGather:
        """Steps ``start`` .. ``stop - 1`` recorded on ``g`` (the members ``rows``)."""
        for j in range(start, stop):
            s = self.steps[j]
            on = coins[j][rows]
            if s.reshapes and not on.any():
                continue  # skipped by every member of this structure
            c = ctxs[j].sub(rows)
            if isinstance(s, batch_augmix.AugMixStep):
                batch_augmix.record_augmix(g, c, s, on)
            elif isinstance(s, (batch_ops.Step, batch_ops.ChoiceStep, batch_ops.PolicyStep)):
                batch_ops.record_step(g, c, s, on)
            else:
                batch_ops.user_op(g, c, s.op.function, s.op.args, on)
        return g

    def _group(self, rows: np.ndarray, inp: np.ndarray, ctxs: list, coins: list,
               g: VGather | None = None, start: int = 0) -> tuple[list[Launch], np.ndarray]:
        """The launches of the members ``rows`` (one structure) and the rows they leave;
        ``g``: their gather with the steps before ``start`` recorded (None: a new one)."""
        if g is None:
            g, start = self._gather(rows, inp), 0
        self._record(g, rows, ctxs, coins, start, len(self.steps))
        lost = [rows[g.left]]
        ok = ~g.left
        cur = g.cur
        okrows = np.flatnonzero(ok)
        if g.stages:  # every stage's size is shared by a launch's members
            allsz = np.concatenate([cur] + [st.cur for st in g.stages], axis=1)[ok]
            if not len(allsz) or (allsz == allsz[0]).all():  # (one size: a 2-D unique is slow)
                which = np.zeros(len(allsz), dtype=np.int64)
            else:
                which = np.unique(allsz, axis=0, return_inverse=True)[1].reshape(-1)
        else:
            which = _groups_of(cur[ok, 0] * (1 << 31) + cur[ok, 1])
        sizes = np.zeros((int(which.max(initial=-1)) + 1, 2), dtype=np.int64)
        sizes[which] = cur[ok]
        launches = []
        base = self.offset[inp[rows]]
        widths = self.hw[inp[rows], 1]
        for v in range(len(sizes)):
            if len(sizes) == 1 and len(okrows) == len(rows):
                mask, sub = slice(None), g  # the common case: every member, no copy
            else:
                mask = np.zeros(len(rows), dtype=bool)
                mask[okrows[which == v]] = True
                sub = g.take(mask)
            arena_rows = np.empty((len(sub.cur), 2), dtype=np.int64)
            arena_rows[:, 0], arena_rows[:, 1] = base[mask], widths[mask]
            launches.append(launch_of(sub, self.gates, rows[mask], arena_rows))
        return launches, np.concatenate(lost)


def _code(cols: list[np.ndarray]) -> np.ndarray:
    """One integer per distinct row of the columns ``cols`` (non-negative integers)."""
    code = cols[0]
    for col in cols[1:]:  # one integer per structure: a 1-D unique is much faster
        code = code * (int(col.max(initial=0)) + 1) + col
    return code


def _groups_of(code: np.ndarray) -> np.ndarray:
    """Per entry, the index of its value among the distinct values of ``code`` (sorted;
    non-negative integers)."""
    if len(code) and (code == code[0]).all():
        return np.zeros(len(code), dtype=np.int64)
    top = int(code.max(initial=0))
    if top < 4 * len(code) + 64:
        # small codes (a batch's structures): each value's rank among those present, from a
        # table of the values (a sort's ``np.unique`` costs several times more)
        present = np.zeros(top + 1, dtype=np.int64)
        present[code] = 1
        return (np.cumsum(present) - 1)[code]
    return np.unique(code, return_inverse=True)[1].reshape(-1)


def make(state: Any) -> ArenaRecorder | None:
    """An :class:`ArenaRecorder` for the Generator state, or None where its Operations or
    inputs need the per-output path (an op not handled, a callable, targets, an argument
    error any input would raise)."""
    xs = state.inputs
    if not xs or not all(isinstance(x, gpuimage) and x.ndim in (2, 3) for x in xs):
        return None
    # (inputs' targets do not enter the pixels: whoever needs them records them apart,
    # ``batch_targets``)
    # a subclass that overrides a method makes it Python: per output
    if any(op.method is not None and
           not all(getattr(type(x), op.method, None) is getattr(gpuimage, op.method, 0)
                   for x in xs) for op in state.operations):
        return None
    steps = arena_steps(state.operations, xs)
    if steps is None:
        return None
    # each input records every Operation without error (the per-output path reports them)
    if not all(records_cleanly(x, state.operations, state.seed) for x in xs):
        return None
    rec = ArenaRecorder(state, steps)
    # (a policy's structure depends on the draws: the first outputs are tried until one plans)
    tries = 16 if any(isinstance(s, (batch_ops.PolicyStep, batch_augmix.AugMixStep))
                      for s in steps) else 1
    for i in range(tries):
        k = np.array([state.global_index(i)], dtype=np.int64)
        if plans_one_gather(rec, k, state.input_index(k)):
            return rec
    return None


def arena_steps(operations: list, inputs: list = ()) -> list | None:
    """The steps of an arena recording of ``operations`` on ``inputs`` (plain gpuimages where
    not given), or None where an Operation needs the per-output path (a callable, a method
    without a batch handler, a choice among methods an input's class overrides)."""
    steps = []
    for op in operations:
        if isinstance(op, AugMix):  # its chains as policies, forked and mixed (batch_augmix)
            step = batch_augmix.augmix_step(op, list(inputs))
            if step is None:
                return None
            steps.append(step)
            continue
        if isinstance(op, Policy):  # a per-sample policy: its entries as gates (batch_ops)
            policy = batch_ops.policy_step(op, list(inputs))
            if policy is None:
                return None
            steps.append(policy)
            continue
        if isinstance(op, Choice):  # a per-sample choice: gates as data (batch_ops)
            choice = batch_ops.choice_step(op, list(inputs))
            if choice is None:
                return None
            steps.append(choice)
            continue
        if op.method is None:
            if not isinstance(op.function, UserOp) or op.kwargs:
                return None
            # a user map may change the size, and has no gated-off form: its coins split
            steps.append(_UserStep(op, op.function.kind == "index_map"))
            continue
        step = batch_ops.step_of(op)
        if step is None:
            return None
        steps.append(step)
    return steps


def records_cleanly(x: Any, operations: list, seed: int) -> bool:
    """Whether input ``x`` records every Operation without an argument error (with sample 0's
    draws; the per-output path reports the errors)."""
    y = x.clone()
    try:
        for j, op in enumerate(operations):
            with mprandom.operation_stream(seed, 0, j):
                op._bound(y)()
    except Exception:
        return False
    return True


def plans_one_gather(rec: ArenaRecorder, k: np.ndarray, inp: np.ndarray) -> bool:
    """Whether the recorder's chain plans to one gather for output ``k`` (of input ``inp``):
    the structure does not depend on the member."""
    try:
        rec._group(np.zeros(1, dtype=np.int64), inp,
                   [batch_ops.Ctx(rec.state.seed, k, j) for j in range(len(rec.steps))],
                   [np.ones(1, dtype=bool) for _ in rec.steps])
    except Unsupported:
        return False
    return True


def pack(rec: ArenaRecorder, buffers: list, device: int) -> dict[str, Any]:
    """The arena of ``buffers`` (the recorder's inputs, as device buffers) on ``device``: one
    flat buffer per dtype at the recorder's offsets, copied on the current stream (device to
    device; host copies on the cpu backend). Set as the recorder's arena there."""
    arena = {key: runtime.empty((max(size, 1),), np.dtype(key), device)
             for key, size in rec.arena_size.items()}
    if runtime.caps.batched_copies:
        _pack_by_address(rec, arena, buffers, device)
    else:
        _pack_each(rec, arena, buffers)
    with rec.lock:
        rec.arenas[device] = arena
    return arena


def given_arena(rec: ArenaRecorder, whole: Any, device: int) -> None:
    """Set ``whole`` (one device allocation holding every input at the recorder's offsets,
    ``ArenaRecorder(layout=...)``) as the recorder's arena on ``device``: no copy."""
    with rec.lock:
        rec.arenas[device] = {np.dtype(whole.dtype).str: whole}


def _pack_by_address(rec: ArenaRecorder, arena: dict, buffers: list, device: int) -> None:
    """Every buffer's copy into the arena in one driver call (``copy_addresses``)."""
    from numba.cuda.cudadrv import driver

    n = len(buffers)
    dsts = np.empty(n, np.uint64)
    srcs = np.empty(n, np.uint64)
    sizes = np.empty(n, np.uint64)
    base = {key: int(driver.device_pointer(a)) for key, a in arena.items()}
    for i, buf in enumerate(buffers):
        dt = np.dtype(buf.dtype)
        ptr = getattr(buf, "device_ptr", None)  # memory of another library, by address
        dsts[i] = base[dt.str] + int(rec.offset[i]) * dt.itemsize
        srcs[i] = ptr if ptr is not None else int(driver.device_pointer(buf))
        sizes[i] = int(buf.size) * dt.itemsize
    runtime.copy_addresses(dsts, srcs, sizes, device)


def _pack_each(rec: ArenaRecorder, arena: dict, buffers: list) -> None:
    """One copy call per buffer (the cpu backend, the simulator, HIP)."""
    for i, buf in enumerate(buffers):
        dst, o = arena[np.dtype(buf.dtype).str], int(rec.offset[i])
        ptr = getattr(buf, "device_ptr", None)  # memory of another library, by address
        if ptr is not None:
            runtime.copy_from_pointer(dst, o, ptr, int(buf.size) * np.dtype(buf.dtype).itemsize)
        else:
            runtime.copy_into(dst, o, buf, int(np.prod(buf.shape, dtype=np.int64)))


# --------------------------------------------------------------------------- launching

#: the ``stat`` argument of a gather that reads no statistic (never read)
_NO_STATS = np.zeros((1, 1))


@functools.cache
def _gather_fn(sig: Any, gates: bool, layout: str, channels: int) -> Any:
    return codegen_arena.arena_gather_kernel(sig, runtime.codegen_target, runtime.simulated,
                                             gates, layout, channels)


@functools.cache
def _stat_fn(sig: Any, stat: str, gates: bool) -> Any:
    return codegen_stat.arena_stat_kernel(sig, stat, runtime.codegen_target, runtime.simulated,
                                          gates)


@functools.cache
def _stats_fn(parts: tuple, gates: bool) -> Any:
    return codegen_stat.arena_stats_kernel(parts, runtime.codegen_target, runtime.simulated,
                                           gates)


def _upload(launches: list[Launch], device: int) -> tuple[Any, list[tuple], Any]:
    """Every launch's per-member arrays in one pack, uploaded: the pack, per launch its
    slots (:func:`_slots`) and what must live until the kernels are done besides them (the
    statistics' and stages' one buffer and its copy's source, made on the device:
    :func:`_batch_buffers`)."""
    from ..graph.exec.batch import Pack

    pk = Pack()
    stats = _batch_buffers(launches, device)
    slots = [_slots(pk, L, L.rows, device, stats) for L in launches]
    pk.upload(device)
    return pk, slots, stats.get("held")


def _slots(pk: Any, L: Launch, rows: np.ndarray, device: int,
           stats: dict[Any, Any] | None = None) -> tuple:
    """Launch ``L``'s arrays added to ``pk`` (``rows``: where its members read their source):
    (parameters, rows, positions, the statistics' buffer, the statistics' prefix rows, per
    stage its slots: a gather's (parameters, rows, statistics, prefix rows), a fork's
    :func:`_fork_slots`), a gather stage's output buffer last. ``stats``: the batch's
    (:func:`_batch_buffers`); a gather or stage not there gets its own when run."""
    m = len(L.pos)
    stat = _stat_of(stats, L, m, device)
    pres = _prefix_slots(pk, L.prefixes, L.reads)
    stages = []
    at = pk.add(rows)  # the pack slot of the rows the next gather reads
    before = None  # the stage before (its output's rows are a kept constant)
    for st in L.stages:
        # a stage after the first reads the one before: member r's image at r * size
        if isinstance(st, ForkStage):
            if before is not None:  # (a fork takes its source rows as an array)
                h, w = before.hw
                rows = stage_rows(m, h * w * before.cout, w)
            stages.append(_fork_slots(pk, st, rows, at, m, device, stats))
        else:
            stages.append((pk.add(st.p), at, _stat_of(stats, st, m, device),
                           _prefix_slots(pk, st.prefixes, st.reads),
                           None if stats is None else stats.get((id(st), "out"))))
        at, before = _stage_rows(pk, m, st), st
    return (pk.add(L.p), at, pk.add(L.pos.astype(np.int64)), stat, pres, stages)


def _prefix_slots(pk: Any, prefixes: list[Prefix], reads: list) -> list[int | None]:
    """The pack slots of the prefixes' own rows, where their reductions read those (None:
    they read their gather's rows, ``stat_reads``)."""
    return [pk.add(pr.p) if r is None else None for pr, r in zip(prefixes, reads, strict=True)]


def _fork_slots(pk: Any, F: ForkStage, rows: np.ndarray, at: int, m: int,
                device: int, stats: dict[Any, Any] | None = None) -> tuple:
    """A fork's arrays: (weights, its source rows (``rows``, already in ``pk`` at slot ``at``:
    the branches take theirs from the array), each member's chain images' offsets in the
    fork's buffer (m, k), per branch launch (the launch, its :func:`_slots`, its offset)): the
    launches' images side by side."""
    h, w = F.hw
    size = h * w * F.cout
    k = F.weights.shape[1] - 1
    frows = np.zeros(k * m, dtype=np.int64)  # per branch, then as (m, k)
    pieces = []
    start = 0
    for P in F.pieces:
        n = len(P.pos)
        frows[P.pos] = (start + np.arange(n, dtype=np.int64)) * size
        pieces.append((P, _slots(pk, P, rows[P.pos % m], device, stats), start * size))
        start += n
    return (pk.add(np.ascontiguousarray(F.weights, dtype=np.float64)), at,
            pk.add(np.ascontiguousarray(frows.reshape(k, m).T)), pieces)


def _stat_rows(init: np.ndarray, sig: Any, m: int, device: int) -> Any:
    """(m, len(init)) statistic rows on ``device``, each at ``init`` (its rules' starting
    values: sums 0, minima +inf...), for ``m`` members of a launch of ``sig``: copied on the
    device from a kept constant of such rows, not written into every batch's upload (an
    equalize's rows are 6 KB a member). A launch without statistics gets a kept (1, 1)
    buffer it never reads."""
    if not len(init):
        return runtime.constant(("arena-no-stats",), _NO_STATS, device)
    width = len(init)
    size = 1 << max(0, m - 1).bit_length()  # (constants for a few sizes: powers of two)
    src = runtime.constant(("arena-stat-init", sig, size),
                           lambda: np.tile(init, size), device)
    buf = runtime.empty((m * width,), init.dtype, device)
    if m:
        runtime.copy_into(buf, 0, src[:m * width], m * width)
    return runtime.reshape(buf, (m, width))


def _stat_of(stats: dict[Any, Any] | None, G: Launch | Stage, m: int, device: int) -> Any:
    """Gather ``G``'s statistic rows: its view of the batch's (``stats``), else its own."""
    got = None if stats is None else stats.get(id(G))
    return _stat_rows(codegen_stat.stat_init(G.sig), G.sig, m, device) if got is None \
        else got


def _stat_gathers(L: Launch, m: int, out: list, temps: list | None = None) -> None:
    """Every gather of launch ``L`` (``m`` members) that keeps statistic rows, as
    :func:`_slots` visits them: (gather, members, its rows' starting values); and into
    ``temps`` every stage's output that :func:`_run_stages` writes: (stage, its (m, h, w, c)
    shape, its dtype)."""
    if not m:
        return
    stat_init = codegen_stat.stat_init
    init = stat_init(L.sig)
    if len(init):
        out.append((L, m, init))
    for st in L.stages:
        if isinstance(st, ForkStage):
            for P in st.pieces:
                _stat_gathers(P, len(P.pos), out, temps)
            continue
        init = stat_init(st.sig)
        if len(init):
            out.append((st, m, init))
        if temps is not None:
            temps.append((st, (m, *st.hw, st.cout), np.dtype(L.dtype)))


#: the layouts of statistic rows whose starting values are kept (:func:`_batch_buffers`),
#: and their bytes
_STAT_LAYOUTS: dict[tuple, int] = {}
#: the most layouts kept, and their most bytes in all (a RandAugment recipe keeps ~4 of up
#: to ~7 MB; past either, new layouts take per-gather rows: the kept values are the
#: backend's constants, held until it shuts down)
STAT_LAYOUTS_MAX = 64
STAT_LAYOUTS_BYTES = 64 << 20
#: where a stage's output starts in a batch's buffer (bytes: as an allocation's start)
_TEMP_ALIGN = 256
#: a batch's buffer's size, rounded up to a multiple of this (bytes)
_BUFFER_ROUND = 1 << 16


def _batch_buffers(launches: list[Launch], device: int) -> dict[Any, Any]:
    """A batch's statistic rows and stages' outputs in one buffer, the rows filled by one
    device copy, instead of a buffer and a copy per gather (:func:`_stat_rows`) and a buffer
    per stage: by ``id`` of a gather its (m, width) statistic rows; by ``(id, "out")`` of a
    stage its (m, h, w, c) output; ``"held"``: the buffer and the copy's source.

    Each gather's rows hold room for a power of two of members at least its ``m`` (a few
    layouts per recipe: the copy's source, every part's starting values end to end, is a
    kept constant per layout); its first ``m`` rows are its view, at its rules' starting
    values as :func:`_stat_rows` makes them. Past ``STAT_LAYOUTS_MAX`` layouts or
    ``STAT_LAYOUTS_BYTES`` kept, a new layout's rows are left to :func:`_stat_rows`."""
    gathers: list = []
    temps: list = []
    for L in launches:
        _stat_gathers(L, len(L.pos), gathers, temps)
    if not gathers and not temps:
        return {}
    layout, offs, at = [], [], 0
    for G, m, init in gathers:
        size = 1 << max(0, m - 1).bit_length()
        layout.append((G.sig, size, init.dtype.str))
        offs.append(at)
        at += -(-(size * init.nbytes) // 8) * 8  # (each part 8-byte aligned)
    key = ("arena-stat-layout", tuple(layout))
    if gathers and key not in _STAT_LAYOUTS:
        if len(_STAT_LAYOUTS) >= STAT_LAYOUTS_MAX or \
                sum(_STAT_LAYOUTS.values()) + at > STAT_LAYOUTS_BYTES:
            gathers, layout, offs, at = [], [], [], 0
        else:
            _STAT_LAYOUTS[key] = at
    copied = at
    at = -(-at // _TEMP_ALIGN) * _TEMP_ALIGN
    starts = []
    for _, shape, dtype in temps:
        starts.append(at)
        at += -(-(max(math.prod(shape), 1) * dtype.itemsize) // _TEMP_ALIGN) * _TEMP_ALIGN

    def starting() -> np.ndarray:
        host = np.zeros(copied, dtype=np.uint8)
        for (_, size, _), (_, _, init), off in zip(layout, gathers, offs, strict=True):
            part = np.tile(init, size)
            host[off:off + part.nbytes] = part.view(np.uint8)
        return host

    # (rounded up: a batch's size varies, and each size is a layout the pool keeps)
    buf = runtime.empty((-(-max(at, 1) // _BUFFER_ROUND) * _BUFFER_ROUND,), np.uint8, device)
    src = None
    if copied:
        src = runtime.constant(key, starting, device)
        runtime.copy_into(buf, 0, src, copied)
    out: dict[Any, Any] = {"held": (buf, src)}
    # (the views made in one call: stamped from their layouts on CUDA)
    layout_of = [(off, init.dtype, (m, len(init)))
                 for (_, m, init), off in zip(gathers, offs, strict=True)]
    layout_of += [(start, dtype, shape)
                  for (_, shape, dtype), start in zip(temps, starts, strict=True)]
    views = iter(runtime.parts(buf, layout_of, device))
    for G, _, _ in gathers:
        out[id(G)] = next(views)
    for st, _, _ in temps:
        out[(id(st), "out")] = next(views)
    if len(out) != 1 + len(gathers) + len(temps):  # pragma: no cover
        return {}  # (a gather met twice: no part of its own to give it)
    return out


def _stage_rows(pk: Any, m: int, st: Stage | ForkStage) -> int:
    """The pack slot of the arena rows of a stage's output (member ``r``'s image at ``r * h *
    w * c``): a kept constant of such rows for a power of two of members at least ``m`` (the
    kernels read the first ``m``), not written into every batch's upload."""
    h, w = st.hw
    size = h * w * st.cout
    rows = 1 << max(0, m - 1).bit_length()
    return pk.constant(functools.partial(stage_rows, rows, size, w),
                       ("arena-stage-rows", rows, size, w))


def stage_rows(m: int, size: int, w: int) -> np.ndarray:
    """(m, 2) int64 arena rows of ``m`` images of ``size`` elements and width ``w`` one after
    another."""
    return np.stack([np.arange(m, dtype=np.int64) * size, np.full(m, w, dtype=np.int64)],
                    axis=1)


def _run_stages(L: Launch, pk: Any, slot: tuple, src: Any, device: int,
                keep: list) -> Any:
    """Run the launch's stages (each into a buffer of its own, kept in ``keep``); the flat
    source the last gather reads (``src`` where there are none)."""
    from ..graph.exec.batch import launch

    m = len(L.pos)
    for st, sslot in zip(L.stages, slot[5], strict=True):
        if isinstance(st, ForkStage):
            src = _run_fork(st, pk, sslot, src, m, device, keep)
            continue
        sp, srows, sstat, spres, tmp = sslot
        _reduce(st.prefixes, st.reads, spres, L.gates, m, pk, sp, srows, src, sstat, device)
        if tmp is None:  # (not in the batch's buffer: ``_batch_buffers``)
            tmp = runtime.empty((m, *st.hw, st.cout), L.dtype, device)
            keep.append(tmp)
        launch(_gather_fn(st.sig, L.gates, "", 3), m, *st.hw, device, src, pk[srows], tmp,
                pk[sp], sstat)
        src = runtime.reshape(tmp, (m * st.hw[0] * st.hw[1] * st.cout,))
    return src


@functools.cache
def _mix_fn() -> Any:
    from ..graph.codegen.weighted import weighted_batch_kernel

    return weighted_batch_kernel(runtime.codegen_target, runtime.simulated)


def _run_fork(F: ForkStage, pk: Any, sslot: tuple, src: Any, m: int, device: int,
              keep: list) -> Any:
    """A fork on the flat source ``src``: each branch's stages, reductions and gather into its
    part of one buffer, then the mix (one launch); the flat image it leaves."""
    from ..graph.exec.batch import launch

    wts, rows, frows, pieces = sslot
    h, w = F.hw
    size = h * w * F.cout
    item = np.dtype(F.dtype).itemsize
    total = max((F.weights.shape[1] - 1) * m * size, 1)
    forks = runtime.empty((total * item,), np.uint8, device)
    keep.append(forks)
    for P, pslot, base in pieces:
        psrc = _run_stages(P, pk, pslot, src, device, keep)
        _statistics(P, pk, pslot, psrc, device)
        n = len(P.pos)
        view = runtime.part(forks, base * item, F.dtype, (n, h, w, F.cout))
        pp, prows, _, pstat, _, _ = pslot
        launch(_gather_fn(P.sig, P.gates, "", 3), n, h, w, device, psrc, pk[prows], view,
                pk[pp], pstat)
    dst = runtime.empty((m, h, w, F.cout), F.dtype, device)
    keep.append(dst)
    launch(_mix_fn(), m, h, w * F.cout, device, src, pk[rows],
            runtime.part(forks, 0, F.dtype, (total,)), pk[frows], pk[wts], dst,
            min(F.cout, 3), int(F.dtype.kind in "ui"), F.full)
    return runtime.reshape(dst, (m * size,))


def _statistics(L: Launch, pk: Any, slot: tuple, src: Any, device: int) -> None:
    """The launch's per-member statistic reductions into its statistics slot, one per stat op
    in chain order (each reads the rows of those before it)."""
    p, rows, _, stat, pres, _ = slot
    _reduce(L.prefixes, L.reads, pres, L.gates, len(L.pos), pk, p, rows, src, stat, device)


def _reduce(prefixes: list[Prefix], reads: list, pres: list, gates: bool, m: int, pk: Any,
            p: int, rows: int, src: Any, stat: Any, device: int) -> None:
    """The reductions of a gather's ``prefixes`` (its rows at pack slot ``p``, its sources'
    at ``rows``), in chain order, into its statistics ``stat``: each reads its parameters
    from the gather's rows at ``reads``' columns, or from its own rows (slot in ``pres``)."""
    from ..graph.exec.batch import launch

    for grp in reduction_groups(prefixes, reads):
        prs = [prefixes[i] for i in grp]
        h, w = (min(max(pr.hw[a] for pr in prs), codegen_stat.ARENA_STAT_GRID[a])
                for a in (0, 1))
        if len(grp) > 1:  # (every one reads the gather's rows)
            fn = _stats_fn(tuple((pr.sig, pr.stat) for pr in prs), gates)
            slot, cols = p, [c for i in grp for c in reads[i]]
        else:
            fn = _stat_fn(prs[0].sig, prs[0].stat, gates)
            i = grp[0]
            slot, cols = (p, reads[i]) if reads[i] is not None else \
                (pres[i], own_reads(prs[0].sig, gates))
        launch(fn, m, h, w, device, src, pk[rows], pk[slot], stat, *cols)


def write(launches: list[Launch], arena: dict[str, Any], out: Any, spec: Any,
          consts: tuple[Any, Any], hw: tuple[int, int], device: int) -> list[Any]:
    """Run ``launches`` into the batch ``out`` (one upload of every per-member array); the
    uploaded pack and temporaries (kept alive by the caller until the kernels are done)."""
    from ..graph.exec.batch import launch
    from ..graph.plan.schedule import full_range
    from .batch_convert import write_sample

    pk, slots, held = _upload(launches, device)
    keep: list[Any] = [pk, slots, held]  # (slots, held: the statistics' buffers)
    mean, std = consts
    for L, slot in zip(launches, slots, strict=True):
        p, rows, pos, stat, _, _ = slot
        src = _run_stages(L, pk, slot, arena[L.dtype.str], device, keep)
        m = len(L.pos)
        _statistics(L, pk, slot, src, device)
        if L.hw == tuple(hw) and L.dtype in (np.uint8, np.float64):
            launch(_gather_fn(L.sig, L.gates, spec.layout, spec.channels), m, *hw, device,
                    src, pk[rows], pk[p], stat, out, pk[pos], mean, std,
                    full_range(L.dtype))
            continue
        tmp = runtime.empty((m, *L.hw, L.cout), L.dtype, device)
        keep.append(tmp)
        launch(_gather_fn(L.sig, L.gates, "", spec.channels), m, *L.hw, device, src,
                pk[rows], tmp, pk[p], stat)
        write_sample(out, pk[pos], tmp, spec, consts, hw, device)
    return keep


def native(launches: list[Launch], arena: dict[str, Any],
           device: int) -> tuple[list[Any], list[Any]]:
    """Run ``launches`` into outputs of the images' own dtype and size (``next()``'s outputs,
    not a training batch): per launch its (m, H, W, C) buffer, and what must stay alive until
    the kernels are done."""
    from ..graph.exec.batch import launch

    pk, slots, held = _upload(launches, device)
    outs = []
    keep: list[Any] = [pk, slots, held]  # (slots, held: the statistics' buffers)
    for L, slot in zip(launches, slots, strict=True):
        p, rows, _, stat, _, _ = slot
        src = _run_stages(L, pk, slot, arena[L.dtype.str], device, keep)
        _statistics(L, pk, slot, src, device)
        tmp = runtime.empty((len(L.pos), *L.hw, L.cout), L.dtype, device)
        # (channels only names a training batch's layout: 3, the compiled kernel that a
        # batch's own-size temporaries use too)
        launch(_gather_fn(L.sig, L.gates, "", 3), len(L.pos), *L.hw, device, src,
                pk[rows], tmp, pk[p], stat)
        outs.append(tmp)
    return outs, keep
