"""The reduction kernels of per-image statistics (``kernels.stats``): the gather body of an op's
*prefix* (the fused gather as it stands before the op) with its stores replaced by the
accumulation of the statistic the op reads.

Two forms, from one body text and one accumulation text:

- :func:`gather_stat_source`, one image (``exec.gather``): ``kernel(src, acc, lut, [stat,] p)``.
  On the CPU ``acc`` holds one partial row per chunk of rows (``prange`` over chunks); on GPUs
  one row that every thread merges into with atomics. The host merges the CPU's partial rows
  (``Statistic.merge``) and keeps the row (uint8 tables are built there).
- :func:`arena_stat_source`, a batch over an arena (``batch_arena``):
  ``kernel(src, rows, p, stat, ...)`` writes member ``b``'s row at offset ``K`` of
  ``stat[b]`` (``stat`` (B, S): the rows of all the gather's statistic ops, end to end in
  chain order), where the gather reads it: no host sync. A member whose op is gated off is
  skipped. Its parameters are read where integer arguments say (``ARENA_STAT_COLS``): from
  the rows of the gather the prefix begins (the prefix's slots are their first columns), so
  a batch uploads no rows of its own for most reductions.

Scalar slots accumulate in registers (``s<k>_``) and merge once per thread (on GPUs across
the warp first, then one atomic per warp); histograms count in a per-block shared array (per
chunk on the CPU), turned into running sums before they are added to the row
(``kernels.stats``: the row is cumulative). A prefix that reads statistics of earlier ops gets
them as ``st_`` (``stat``), as its gather does.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from ...kernels import REGISTRY
from ...kernels.registry import GENERATION
from ...kernels.stats import BINS, STATISTICS, Statistic, stat_channels
from .batch import batched
from .chain import gather_defs, op_def
from .gather_body import (
    extras_prologue,
    gate_prologue,
    gate_words,
    gather_prologue,
    stat_body,
)
from .gather_sig import (
    GatherSig,
    extras_offset,
    gather_ngates,
    gather_nparams,
    stat_layout,
    stat_width,
)
from .loader import load
from .target import HEADER, RINT_CLIP, capped, indent_text, jit_decorator

#: array accesses of a per-image body given the member index ``b`` (``codegen.batch.batched``)
MEMBER_INDEX = {"dst": "b", "lut": "b", "p": "b"}
_SRC = re.compile(r"src\[_u\((\w+)\), _u\((\w+)\), (\d+)\]")

#: threads a GPU reduction runs over one image: (rows, columns) of the one-image grid, capped
#: (each thread strides over many pixels, so few partials merge into the row); the arena
#: reduction's per member (``batch_arena``)
STAT_GRID = (256, 1024)
ARENA_STAT_GRID = (32, 32)
#: row chunks of a one-image reduction on the CPU (the partial rows the host merges)
CPU_CHUNKS = 64


def stat_values(sig: GatherSig) -> list[str]:
    """The names of the values a statistic of ``sig``'s output measures (alpha never)."""
    if sig.grey:
        return ["g"]
    return [f"v{c}" for c in range(stat_channels(sig.cin))]


def _statistic(name: str) -> Statistic:
    if name not in STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(STATISTICS)}, got {name!r}")
    return STATISTICS[name]


def _scalars(stat: Statistic, sig: GatherSig) -> list[tuple[int, str, str]]:
    """(row slot, merge rule, per-pixel value) of each slot accumulated in a register."""
    vals = stat_values(sig)
    if stat.name == "grey_sum":
        if sig.grey:
            grey = "g"
        elif sig.cin == 1:
            grey = "v0"
        else:  # torchvision's floored grey of the pixel
            grey = "_f_tv_grey(v0, v1, v2, 0.0, False)"
        return [(0, "sum", grey), (1, "sum", "1.0")]
    if stat.name == "lightness_moments":  # twice the HLS lightness: max + min of R, G, B
        two_l = (f"(2.0 * {vals[0]})" if len(vals) == 1
                 else "(max(v0, max(v1, v2)) + min(v0, min(v1, v2)))")
        return [(0, "sum", two_l), (1, "sum", f"{two_l} * {two_l}"), (2, "sum", "1.0")]
    if stat.name == "channel_range":
        return [s for j, v in enumerate(vals) for s in ((2 * j, "min", v), (2 * j + 1, "max", v))]
    if stat.hist:
        per = len(stat.merges)
        return [(per * j + BINS, "max", f"float(hb{j}_)") for j in range(len(vals))]
    raise ValueError(f"no accumulation for statistic {stat.name!r}")  # pragma: no cover


def _bins(stat: Statistic, sig: GatherSig) -> list[str]:
    """Each measured value's histogram bin ``hb<j>_`` (``kernels.stats.hist_bin``: torchvision's
    float-to-uint8 conversion on float values), kept in range."""
    if not stat.hist:
        return []
    # a grey conversion's values are floats in [0, 1] whatever the source (``_gather_tail``)
    full = "1.0" if sig.grey else "full"
    return [f"hb{j}_ = min(max(int({v} * (255.0 + 1.0 - 1e-3)) if {full} == 1.0 else int({v}), "
            f"0), {BINS - 1})" for j, v in enumerate(stat_values(sig))]


def _init(stat: Statistic, sig: GatherSig) -> list[str]:
    start = {"sum": "0.0", "min": "math.inf", "max": "-math.inf"}
    return [f"s{k}_ = {start[m]}" for k, m, _ in _scalars(stat, sig)]


def _accumulate(stat: Statistic, sig: GatherSig) -> list[str]:
    out = []
    for k, m, v in _scalars(stat, sig):
        out.append(f"s{k}_ += {v}" if m == "sum" else f"s{k}_ = {m}(s{k}_, {v})")
    return out


def _head(sig: GatherSig, stat: Statistic, target: str, what: str) -> str:
    head = (f"# millipyde generated {what} ({stat.name}): {sig}\n" + HEADER[target]
            + gather_defs(sig) + RINT_CLIP + "from numba import int32 as _i32\n")
    if stat.name == "grey_sum":
        head += op_def("tv_grey")
    return head


# --------------------------------------------------------------------------- GPU merges


def _warp_merge(stat: Statistic, sig: GatherSig, sim: bool, target_row: str) -> str:
    """Each thread's registers merged into the row (``target_row(k)``: the atomic's array and
    index of slot ``k``): across the warp first on GPUs (every lane of a block shares the
    image), so an image takes one atomic per warp and slot; the simulator, one per thread."""
    lines = []
    atomic = {"sum": "add", "min": "min", "max": "max"}
    for k, m, _ in _scalars(stat, sig):
        if not sim:
            for d in (16, 8, 4, 2, 1):
                other = f"cuda.shfl_down_sync(0xFFFFFFFF, s{k}_, {d})"
                lines.append(f"s{k}_ += {other}" if m == "sum" else f"s{k}_ = {m}(s{k}_, {other})")
    merges = [f"cuda.atomic.{atomic[m]}({target_row(k)}, s{k}_)" for k, m, _ in _scalars(stat, sig)]
    if sim:
        return "\n".join(merges)
    return "\n".join(lines + ["if cuda.laneid == 0:"] + ["    " + ln for ln in merges])


def _block_hist_head(values: int) -> str:
    """The block's shared counts ``sh_`` (``BINS`` per measured value, ``values`` of them) and
    its thread numbering."""
    return (f"sh_ = cuda.shared.array({values * BINS}, _i32)\n"
            "t_ = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x\n"
            "nt_ = cuda.blockDim.x * cuda.blockDim.y")


def _block_hist_zero(stat: Statistic, sig: GatherSig) -> str:
    n = len(stat_values(sig)) * BINS
    return (f"i_ = t_\nwhile i_ < {n}:\n    sh_[i_] = 0\n    i_ += nt_\ncuda.syncthreads()")


def _block_hist_flush(stat: Statistic, sig: GatherSig, target_row: str) -> str:
    """The block's counts as running sums per channel, added into the row's histogram slots
    (``target_row``: the atomic's array and index, of ``j_`` the channel and ``k_`` the
    bin); then the block waits, so the counts may be zeroed for the next image."""
    n = len(stat_values(sig)) * BINS
    return (f"cuda.syncthreads()\ni_ = t_\nwhile i_ < {n}:\n"
            f"    j_ = i_ // {BINS}\n    k_ = i_ - j_ * {BINS}\n    c_ = 0\n    m_ = j_ * {BINS}\n"
            "    while m_ <= i_:\n        c_ += sh_[m_]\n        m_ += 1\n"
            f"    if c_ != 0:\n        cuda.atomic.add({target_row}, float(c_))\n"
            "    i_ += nt_\ncuda.syncthreads()")


def _gpu_hist_count(stat: Statistic, sig: GatherSig) -> list[str]:
    return [f"cuda.atomic.add(sh_, {j * BINS} + hb{j}_, 1)"
            for j in range(len(stat_values(sig)))] if stat.hist else []


# --------------------------------------------------------------------------- CPU merges


def _cpu_flush(stat: Statistic, sig: GatherSig, row: str, at: str) -> str:
    """Registers merged into ``row`` (one the loop owns: a chunk's partial, a member's row) at
    slot ``at + k``, then its histograms turned into running sums."""
    lines = []
    for k, m, _ in _scalars(stat, sig):
        cell = f"{row}[{at} + {k}]"
        lines.append(f"{cell} += s{k}_" if m == "sum" else f"{cell} = {m}({cell}, s{k}_)")
    if stat.hist:
        per = len(stat.merges)
        for j in range(len(stat_values(sig))):
            base = f"{at} + {per * j}"
            lines += [f"for i_ in range(1, {BINS}):",
                      f"    {row}[{base} + i_] += {row}[{base} + i_ - 1]"]
    return "\n".join(lines)


def _cpu_hist_count(stat: Statistic, sig: GatherSig, row: str, at: str) -> list[str]:
    per = len(stat.merges)
    return [f"{row}[{at} + {per * j} + hb{j}_] += 1.0"
            for j in range(len(stat_values(sig)))] if stat.hist else []


# --------------------------------------------------------------------------- one image


def gather_stat_source(sig: GatherSig, stat_name: str, target: str, sim: bool = False) -> str:
    """Source of ``kernel(src, acc, lut, [stat,] p)``: statistic ``stat_name`` of what the
    gather of ``sig`` would store, over one image (see the module doc). ``stat`` (the
    statistic rows the prefix's own ops read) is an argument only where ``sig`` has such ops.

    The output height and width are ``p[n]``, ``p[n + 1]`` (``n`` the gather's parameters);
    ``acc`` starts at the statistic's ``init`` row(s): (chunks, width) on the CPU, (width,)
    on GPUs."""
    stat = _statistic(stat_name)
    n = gather_nparams(sig) + (gather_ngates(sig) if sig.gates else 0)
    reads = stat_width(sig) > 0
    prologue = (f"h = int(p[{n}])\nw = int(p[{n + 1}])\n" + gather_prologue()
                + extras_prologue(sig) + ("\n" + gate_prologue(sig) if sig.gates else "")
                + ("\nst_ = stat" if reads else ""))
    params = "p" if target != "cuda" else ", ".join(f"p_{i}" for i in range(n + 2))
    args = "src, acc, lut, " + ("stat, " if reads else "") + params
    fn = (f"\n\n{jit_decorator(target, sim)}\ndef kernel({args}):\n" + indent_text(prologue, 4))
    body = stat_body(sig, sig.gates) + _bins(stat, sig)
    if target == "cpu":
        pixel = "\n".join(body + _accumulate(stat, sig)
                          + _cpu_hist_count(stat, sig, "acc[r_]", "0"))
        loop = ("nr_ = acc.shape[0]\nfor r_ in prange(nr_):\n"
                + indent_text("\n".join(_init(stat, sig)), 4)
                + "    for y in range(r_ * h // nr_, (r_ + 1) * h // nr_):\n"
                + "        for x in range(w):\n" + indent_text(pixel, 12)
                + indent_text(_cpu_flush(stat, sig, "acc[r_]", "0"), 4))
    else:
        pixel = "\n".join(body + _accumulate(stat, sig) + _gpu_hist_count(stat, sig))
        loop = ""
        if stat.hist:
            loop += (_block_hist_head(len(stat_values(sig))) + "\n"
                     + _block_hist_zero(stat, sig) + "\n")
        loop += ("\n".join(_init(stat, sig)) + "\nx0, y0 = cuda.grid(2)\n"
                 "sx_, sy_ = cuda.gridsize(2)\ny = y0\nwhile y < h:\n    x = x0\n"
                 "    while x < w:\n" + indent_text(pixel, 8) + "        x += sx_\n    y += sy_\n"
                 + _warp_merge(stat, sig, sim, lambda k: f"acc, {k}"))
        if stat.hist:
            per = len(stat.merges)
            loop += "\n" + _block_hist_flush(stat, sig, f"acc, j_ * {per} + k_")
    source = _head(sig, stat, target, "statistic gather") + fn + indent_text(loop, 4)
    if target == "cuda":
        source = re.sub(r"\bp\[(\d+)\]", r"p_\1", source)
    return source


def gather_stat_kernel(sig: GatherSig, stat_name: str, target: str, sim: bool = False):
    """The compiled one-image reduction (:func:`gather_stat_source`)."""
    return load(gather_stat_source(sig, stat_name, target, sim), target).kernel


# --------------------------------------------------------------------------- arena batches


def arena_reads(text: str, cin: int) -> str:
    """Source reads of the per-image body as flat reads of the member's source."""
    out, n = _SRC.subn(lambda m: f"src[_u(so_ + ({m[1]} * sw_ + {m[2]}) * {cin} + {m[3]})]",
                       text)
    if n == 0 or out.count("src[") != n:
        raise RuntimeError("arena: gather body reads its source in an unexpected form")
    return out


def arena_per_image(sig: GatherSig, gates: bool, extra: str = "") -> str:
    """Per member ``b`` of an arena kernel: its source's offset and width, the gather's
    per-launch reads (gate flags with ``gates``) from its parameter row, and its statistic
    row ``st_`` where ``sig``'s ops read one."""
    text = gather_prologue() + extras_prologue(sig) + ("\n" + gate_prologue(sig) if gates else "")
    st = "st_ = stat[b]\n" if stat_width(sig) else ""
    return "so_ = rows[b, 0]\nsw_ = rows[b, 1]\n" + st + extra + batched(text, MEMBER_INDEX)


#: the arena reduction's scalar arguments after ``stat``, per reduction of the kernel (each
#: name with the reduction's index before its ``_``; :func:`arena_stats_source`): where in
#: ``p`` its extras, gate flags, sampler flag, own gate flag and size start
ARENA_STAT_COLS = ("pcx_", "pcf_", "pcs_", "pco_", "pch_", "ph_", "pw_")
_MEMBER_P = re.compile(r"\bp\[b, (\d+)\]")


def arena_stat_args(k: int) -> list[str]:
    """The names of reduction ``k``'s column arguments (``ARENA_STAT_COLS``)."""
    return [f"{c[:-1]}{k}_" for c in ARENA_STAT_COLS]


def _read_columns(text: str, sig: GatherSig, gates: bool, k: int) -> str:
    """``text`` (per-member reads ``p[b, i]`` of ``sig``'s own layout) reading its extras, gate
    flags and sampler flag at the columns reduction ``k``'s arguments give
    (``arena_stat_args``); the fixed slots and the chained ops' slots stay where they are (a
    prefix's are the first columns of its gather's rows)."""
    end, n = extras_offset(sig), gather_nparams(sig)
    t = gather_ngates(sig) - 1
    cx, cf, cs = arena_stat_args(k)[:3]

    def sub(m: re.Match) -> str:
        i = int(m[1])
        if i < end:
            return m[0]
        if i < n:
            return f"p[b, {cx} + {i - end}]"
        if gates and i < n + t:
            return f"p[b, {cf} + {i - n}]"
        if gates and i == n + t:
            return f"p[b, {cs}]"
        raise RuntimeError(f"arena statistic: a read of p[b, {i}] past {sig}'s layout")

    out = _MEMBER_P.sub(sub, text)
    if re.search(r"\bp\[b, (?!\d|pc)", out) or re.search(r"\bp\[(?!b, )", out):
        raise RuntimeError("arena statistic: the body reads its parameters in an unexpected form")
    return out


def arena_stat_source(sig: GatherSig, stat_name: str, target: str, sim: bool = False,
                      gates: bool = False) -> str:
    """Source of ``kernel(src, rows, p, stat, pcx0_, pcf0_, pcs0_, pco0_, pch0_, ph0_, pw0_)``:
    per member ``b``, statistic ``stat_name`` of what the arena gather of ``sig`` would store
    (:func:`arena_stats_source` of this one reduction)."""
    return arena_stats_source(((sig, stat_name),), target, sim, gates)


def arena_stats_source(parts: tuple[tuple[GatherSig, str], ...], target: str,
                       sim: bool = False, gates: bool = False) -> str:
    """Source of ``kernel(src, rows, p, stat, <each reduction's arena_stat_args>)``: the
    reductions ``parts`` ((prefix signature, statistic) each, prefixes of one gather in chain
    order) in one launch, for members of which at most one reduction's op runs (the entries
    of one position of a policy: ``VGather.chain_many``'s ``groups``). Per member ``b`` the
    first reduction whose op is not gated off measures statistic ``stat_name`` of what the
    arena gather of its ``sig`` would store, into ``stat[b, K:]`` (``K`` the width of the rows
    ``sig``'s own ops read, which come first; the caller starts them at ``init``); a member
    with none is skipped. (None reads the row of another that measures the member: their ops
    are gated off where it runs.)

    ``p[b]`` holds the member's parameters: the fixed slots and chained ops' slots of each
    ``sig`` at their own offsets, then anywhere in the row (reduction ``k``'s integer
    arguments say where): the extras from column ``pcx<k>_``, with ``gates`` the chained
    ops' gate flags from ``pcf<k>_`` and the sampler's at ``pcs<k>_``; a flag at ``pco<k>_``
    (negative: none), nonzero where the op is gated off for the member; the output height
    and width at ``pch<k>_``, ``pch<k>_ + 1`` (negative: every member's are ``ph<k>_``,
    ``pw<k>_``). So the rows of a prefix laid out on their own and the rows of the gather the
    prefix begins (whose first columns are the prefix's) are read by one kernel. On the CPU
    one ``prange`` over members; on GPUs each block measures part of one member (launch it
    over ``ARENA_STAT_GRID`` per member)."""
    stats = [(sig, _statistic(name)) for sig, name in parts]
    last = stats[-1][0]
    chained = [sig.pre + sig.post + sig.grey_ops for sig, _ in stats]
    if any(chained[-1][:len(c)] != c for c in chained):
        raise ValueError("arena statistics: the reductions are not prefixes of one gather")
    hist = max((len(stat_values(sig)) for sig, st in stats if st.hist), default=0)
    branches = []
    for k, (sig, stat) in enumerate(stats):
        K = stat_width(sig)
        pch, ph, pw = arena_stat_args(k)[4:]
        per = _read_columns(arena_per_image(sig, gates), sig, gates, k) + (
            f"\nh = int(p[b, {pch}]) if {pch} >= 0 else {ph}"
            f"\nw = int(p[b, {pch} + 1]) if {pch} >= 0 else {pw}")
        body = _read_columns(batched(arena_reads("\n".join(stat_body(sig, gates)
                                                           + _bins(stat, sig)), sig.cin),
                                     MEMBER_INDEX), sig, gates, k)
        if target != "cpu":  # (as ``arena._gate_words``)
            per, body = gate_words(per, body)
        if target == "cpu":
            pixel = "\n".join([body] + _accumulate(stat, sig)
                              + _cpu_hist_count(stat, sig, "stat[b]", str(K)))
            member = ("\n".join(_init(stat, sig)) + "\nfor y in range(h):\n"
                      "    for x in range(w):\n" + indent_text(pixel, 8)
                      + _cpu_flush(stat, sig, "stat[b]", str(K)))
        else:
            pixel = "\n".join([body] + _accumulate(stat, sig) + _gpu_hist_count(stat, sig))
            member = _block_hist_zero(stat, sig) + "\n" if stat.hist else ""
            member += ("\n".join(_init(stat, sig)) + "\ny = y0\nwhile y < h:\n    x = x0\n"
                       "    while x < w:\n" + indent_text(pixel, 8)
                       + "        x += sx_\n    y += sy_\n"
                       + _warp_merge(stat, sig, sim, lambda j, K=K: f"stat, (b, {K + j})"))
            if stat.hist:
                pslots = len(stat.merges)
                member += "\n" + _block_hist_flush(stat, sig,
                                                   f"stat, (b, {K} + j_ * {pslots} + k_)")
        branches.append(per + "\n" + member)
    offs = [f"of{k}_ = p[b, {a[3]}] if {a[3]} >= 0 else 0.0"
            for k, a in enumerate(map(arena_stat_args, range(len(stats))))]
    # ``of<k>_`` are the member's, so the same for every thread of a block (they share
    # ``b``): the block's barriers are reached by all of its threads or by none
    text = "\n".join(offs + [f"{'el' if k else ''}if of{k}_ == 0.0:\n" + indent_text(br, 4)
                             for k, br in enumerate(branches)])
    args = ", ".join(a for k in range(len(stats)) for a in arena_stat_args(k))
    fn = (f"\n\n{capped(target, sim, 'stat')}\ndef kernel(src, rows, p, stat, {args}):\n"
          "    nb = stat.shape[0]\n")
    if target == "cpu":
        loop = "    for b in prange(nb):\n" + indent_text(text, 8)
    else:
        head = "x0, y0, b0 = cuda.grid(3)\nsx_, sy_, sb_ = cuda.gridsize(3)\n"
        if hist:
            head += _block_hist_head(hist) + "\n"
        loop = (indent_text(head, 4) + "    b = b0\n    while b < nb:\n" + indent_text(text, 8)
                + "        b += sb_\n")
    names = ", ".join(st.name for _, st in stats)
    head = (f"# millipyde generated arena statistic gather ({names}): {last}\n"
            + HEADER[target] + gather_defs(last) + RINT_CLIP + "from numba import int32 as _i32\n")
    if any(st.name == "grey_sum" for _, st in stats):
        head += op_def("tv_grey")
    return head + fn + loop


def arena_stat_kernel(sig: GatherSig, stat_name: str, target: str, sim: bool = False,
                      gates: bool = False):
    """The compiled arena reduction (:func:`arena_stat_source`)."""
    return load(arena_stat_source(sig, stat_name, target, sim, gates), target).kernel


def arena_stats_kernel(parts: tuple[tuple[GatherSig, str], ...], target: str,
                       sim: bool = False, gates: bool = False):
    """The compiled arena reductions in one launch (:func:`arena_stats_source`)."""
    return load(arena_stats_source(parts, target, sim, gates), target).kernel


def stat_init(sig: GatherSig) -> np.ndarray:
    """The statistic row of ``sig``'s kernel before anything is measured (each op's
    statistic's ``init``, end to end as ``gather_sig.stat_layout`` lays them); read only."""
    return _stat_init(sig, GENERATION[0])


@functools.lru_cache(maxsize=1024)
def _stat_init(sig: GatherSig, generation: int) -> np.ndarray:
    # (a batch asks for every launch's and stage's row: made once per signature)
    out = _make_stat_init(sig)
    out.flags.writeable = False
    return out


def _make_stat_init(sig: GatherSig) -> np.ndarray:
    ops = sig.pre + sig.post + sig.grey_ops
    parts = [STATISTICS[REGISTRY[ops[i]].stat].init(ch)
             for i, (_, ch) in sorted(stat_layout(sig).items())]
    return np.concatenate(parts) if parts else np.zeros(0)
