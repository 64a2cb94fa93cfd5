"""The batch writers: a flat batched gather (``batch_gather``) fused with the training batch's
conversion, writing float32 (n, C, H, W) / (n, H, W, C) samples straight from its last gather
(``Generator.batches``; ``batch_convert.fused_writer``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import batch_tables
from .batch_gather import (
    ROWS_PER_TRIP,
    SAMPLER_ON,
    flat_accesses,
    gated_sampler,
    head,
    loop,
    loop_by,
    prologue,
)
from .batch_rows import rows_body, split_stores
from .gather_body import WORD_TAPS_DEF, gather_body
from .gather_sig import GatherSig
from .loader import load
from .target import capped
from .tile2d_batch import RINT_U8

_STORE = re.compile(r"^(?P<ind>\s*)dst\[y, x, (?P<c>\d+)\] = (?P<v>.+)$", re.M)

# Whole-number values 0..255 (uint8 outputs, ``cfull`` 255) convert through a per-block
# table of the ``channels`` x 256 normalized values: each entry is ``_norm`` of that value,
# rounded to float32 as the direct store rounds it, so the samples are the same bits, and a
# pixel's channels cost a shared-memory read each instead of two float64 divisions. Table-mode
# gathers write uint8 (``cfull`` is 255 wherever they are fused): no check, and no direct
# conversion compiled beside the table's.
_TABLE = """tab_ = cuda.shared.array({n}, dtype=_f32)
tabled_ = {cond}
if tabled_:
    i_ = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    while i_ < {n}:
        c_ = i_ // 256
        tab_[i_] = _norm(float(i_ - c_ * 256), cfull, mean[c_], std[c_])
        i_ += cuda.blockDim.x * cuda.blockDim.y
cuda.syncthreads()
"""

# A grey value written to every channel is normalized once when every channel's mean and std
# are the same (same bits: a zero's sign changes a difference's sign)
_SAME = """same_ = True
for c_ in range(1, {n}):
    if not (_same(mean[c_], mean[0]) and _same(std[c_], std[0])):
        same_ = False
"""
_SAME_DEF = """

@_dev
def _same(a, b):
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
"""

# ``x / 1.0`` is ``x`` for every float64 but NaN (whose bits a division may change), so a
# writer over float64 sources (``cfull`` 1.0) with the default ``std`` (1.0) divides by
# neither: the grey writer's two float64 divisions per pixel were most of its instructions
# (bench/RESULTS.md, 2026-11-24). Otherwise it divides as ``_norm`` does.
_NORMU_DEF = """

@_dev
def _normu(v, full, mean, std):
    a = v
    if not (full == 1.0 and v == v):
        a = v / full
    a = a - mean
    if not (std == 1.0 and a == a):
        a = a / std
    return a
"""
# the launch's first channel statistics, read once (per pixel, a load the compiler cannot
# hoist past the float32 stores)
_UNIT = "m0_ = mean[0]\ns0_ = std[0]\n"

# A member's integer values in the uint8 table writer (every member's ``full`` is 255): the
# blend rounds straight to its table index (``tile2d_batch.RINT_U8``: ``_rint_clip`` to 255
# then ``int``, in integers), and a gated-off member's tap is its chain table's byte, where
# each went to float64 and back per channel (``_rint_clip``'s compares and selects, ``_b2f``,
# ``int``). ``float`` of the index is the value ``_rint_clip`` gave (a whole number 0..255,
# +0.0 for zero), which the inline conversion takes.
_RINT_LINE = re.compile(r"^(?P<ind>\s*)v(?P<c>\d+) = _rint_clip\(v(?P=c), full\)$", re.M)
_OFF_TAP = re.compile(r"^(?P<ind>\s*)t(?P<c>\d+)_0 = _b2f\((?P<e>ct_\[.*\])\)$", re.M)
_OFF_ZERO = re.compile(r"^(?P<ind>\s*)t(?P<c>\d+)_0 = 0\.0$", re.M)


# Tap indices as 32-bit integers: ``int`` of the floored coordinate made each bounds check
# two 64-bit compares and each ``+ 1`` a 64-bit add (registers in pairs). The conversion
# saturates (``_fi``; the simulator's as the GPU's), so a coordinate outside the int32 range
# stays outside the image, and the checks take the same taps.
_FI = ("from numba import int32 as _fi\n"
       "if _config.ENABLE_CUDASIM:\n"
       "    def _fi(v):\n"
       "        return max(-2147483648, min(2147483647, int(v)))\n")
_TAP_INDEX = re.compile(r"^(?P<ind>\s*)(?P<v>i(?P<a>[yx])) = int\(t(?P=a)0\)$", re.M)
_TAP_CHECK = re.compile(r"_u\((?=(?:iy|ix|mh|mw)\b)")


def _int32_taps(body: str) -> str:
    """``body`` with its sampler's tap indices and bounds checks in 32 bits (``_FI``)."""
    body, n = _TAP_INDEX.subn(lambda m: f"{m['ind']}{m['v']} = _fi(t{m['a']}0)", body)
    if n != 2:
        raise RuntimeError("gather_writer_source: tap indices not where expected")
    return _TAP_CHECK.sub("_u32(", body)


def _int_body(body: str, cin: int, sampler: str) -> str:
    """A table writer's body (``batch_tables.fast_body``, sampler ``"on"`` or ``"off"``)
    whose channel values ``v<c>`` are table indices (module comment above)."""
    if sampler == "on":
        body, n = _RINT_LINE.subn(lambda m: f"{m['ind']}v{m['c']} = _rint_u8(v{m['c']})",
                                  body)
    elif sampler == "off":
        body, n = _OFF_TAP.subn(lambda m: f"{m['ind']}t{m['c']}_0 = _ix({m['e']})", body)
        body, z = _OFF_ZERO.subn(lambda m: f"{m['ind']}t{m['c']}_0 = _ix(0)", body)
        # each channel's value is its one tap (``gather_body._blend``'s gated-off form)
        taken = all(f"\nv{c} = t{c}_0\n" in f"\n{body}\n" for c in range(cin))
        n = n if z == n and taken else -1
    else:
        raise ValueError(f"integer writer bodies are per sampler gate, got {sampler!r}")
    if n != cin:
        raise RuntimeError("gather_writer_source: channel values not where expected")
    return body


def _writes_table(sig: GatherSig, target: str) -> bool:
    """Whether the writer of ``sig`` converts through the table: GPUs (shared memory), values
    that are whole numbers (integer or table outputs that are not grey)."""
    return target != "cpu" and not sig.grey and (sig.is_int or sig.mode == "lut")


def _out_index(layout: str, t: int, channels: int) -> str:
    if layout == "NCHW":
        return f"_u(ob_ + _ix({t} * h * w + y * w + x))"
    return f"_u(ob_ + _ix((y * w + x) * {channels} + {t}))"


def _writer_store(sig: GatherSig, layout: str, channels: int, table: bool,
                  ints: bool = False, unit: bool = False) -> Callable[[re.Match], str]:
    """The writer's stores of channel values (``ints``: whole-number indices 0..255 of the
    table, :func:`_int_body`; ``unit``: through ``_normu`` and the launch's ``m0_``, ``s0_``
    where a grey value is normalized once)."""
    norm = "_normu" if unit else "_norm"

    def store(m: re.Match) -> str:
        ind, c, v = m.group("ind"), int(m.group("c")), m.group("v")
        if c >= 3:
            return ""  # alpha
        targets = range(channels) if sig.cout == 1 else [c]

        def direct(t: int, mean: str, std: str) -> str:
            return f"out[{_out_index(layout, t, channels)}] = {norm}(cv_, cfull, {mean}, {std})"

        if table and ints:
            lines = ["if tabled_:"]
            lines += [f"    out[{_out_index(layout, t, channels)}] = tab_[_u({t * 256} + {v})]"
                      for t in targets]
            lines += ["else:", f"    cv_ = float({v})"] + [
                f"    {direct(t, f'mean[{t}]', f'std[{t}]')}" for t in targets]
            return "\n".join(ind + line for line in lines)
        lines = [f"cv_ = float({v})"]
        if table:
            lines += ["if tabled_:", "    iv_ = int(cv_)"]
            lines += [f"    out[{_out_index(layout, t, channels)}] = tab_[_u({t * 256} + iv_)]"
                      for t in targets]
            lines += ["else:"] + [f"    {direct(t, f'mean[{t}]', f'std[{t}]')}"
                                  for t in targets]
        elif len(targets) > 1:
            m0, s0 = ("m0_", "s0_") if unit else ("mean[0]", "std[0]")
            lines += ["if same_:", f"    nv_ = {norm}(cv_, cfull, {m0}, {s0})"]
            lines += [f"    out[{_out_index(layout, t, channels)}] = nv_" for t in targets]
            lines += ["else:"] + [f"    {direct(t, f'mean[{t}]', f'std[{t}]')}"
                                  for t in targets]
        else:
            lines += [direct(t, f"mean[{t}]", f"std[{t}]") for t in targets]
        return "\n".join(ind + line for line in lines)

    return store


def gather_writer_source(sig: GatherSig, target: str, sim: bool, gates: bool, channels: int,
                         layout: str, wide: bool = False, u8: bool | None = None,
                         words: bool = False) -> str:
    """Source of ``kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, out, pos, mean, std,
    cfull)``: the flat batched gather of ``sig`` writing the training batch itself.

    Where the gather stores channel ``c`` of member ``b``, this one stores
    ``normalize(v, cfull, mean, std)`` (the value as stored, in float64) into sample
    ``pos[b]`` of the flat float32 batch ``out`` ((N, channels, h, w) or (N, h, w,
    channels)): grey replicated to ``channels``, alpha dropped. The arithmetic before the
    store is the gather's own, so the samples equal converting the gather's output (uint8 or
    float64, whose stored value is the computed one).

    ``u8``: whether the source is uint8, where the caller knows (None: not known). A chain
    through per-block tables (``batch_tables``) is taken by the members whose ``full`` is
    255, the uint8 sources' (``plan.schedule.full_range``, which sets every member's
    ``full``): with ``u8`` known, every member or none of them, so the kernel holds only
    the table loops or only the inline ones. Compiled together, the inline loops' registers
    (108: a chain per tap and channel) made ptxas spill in the table loops at the
    80-register cap, which alone take 72 (sm_90, ptxas 13.0; bench/RESULTS.md,
    2026-11-23/24). The values are the same either way.

    ``words`` (where :func:`word_taps` holds): the kernel takes a last argument ``srcw``,
    ``src``'s uint64 view (``Backend.words``: a whole number of aligned words), and reads
    the rotated taps of interior pixels as words (``gather_body.word_taps_head``).
    """
    from .convert import DEFS, DIGEST

    if words and not word_taps(sig, target, u8):
        raise ValueError(f"word taps need a uint8 RGB source, a sampler, GPUs: {sig}")

    if sig.packed:
        raise ValueError("packed gathers are not fused with the batch conversion")
    table = _writes_table(sig, target)
    rows = 1 if target == "cpu" else ROWS_PER_TRIP["grey writer" if sig.cout == 1
                                                   else "writer"]
    # a uint8 member's chain through its block's table (batch_tables), others inline; with a
    # gated sampler, members whose sampler is gated off read one tap (``gated_sampler``)
    chained = batch_tables.chain_tables(sig, target) and u8 is not False
    only = chained and u8 is True  # every member through the table
    split = gated_sampler(sig, gates, target)
    samplers = [(SAMPLER_ON, "on"), ("", "off")] if split else [("", "pixel")]
    # the uint8 table writer's values as table indices (every member's ``full`` is 255)
    ints = only and table and split and INT_INDEX
    unit = target != "cpu" and UNIT_DIVISIONS
    i32 = target != "cpu" and not wide and sig.sampler and INT32_TAPS

    def made(make: Callable[..., str], sampler: str) -> str:
        body = make(sig, gates, sampler)
        if ints:
            body = _int_body(body, sig.cin, sampler)
        return _int32_taps(body) if i32 else body

    makes = ([("" if only else "cton_",
               lambda s, g, m: batch_tables.fast_body(s, g, m, words))] if chained else []) + (
        [] if only else [("", lambda s, g, m: gather_body(s, g, True, m, words))])
    bodies = [(" and ".join(c for c in (cond, on) if c),
               _writer_body(made(make, sampler), sig, layout, channels, table, rows, ints,
                            unit))
              for cond, make in makes for on, sampler in samplers]
    per = _member_text(sig, gates, channels, chained, only)
    launch = _launch_text(sig, channels, chained, table, unit)
    top = (head(sig, target, wide, f"gather + batch writer {layout} channels={channels} "
                 f"rows={rows} math={DIGEST}" + (" chain-tables" if chained else "")
                 + (" uint8" if only else "") + (" words" if words else ""))
            + DEFS + "from numba import float32 as _f32\n" + _SAME_DEF
            + (batch_tables.HEAD if chained else "") + (WORD_TAPS_DEF if words else "")
            + (RINT_U8 if ints else "") + (_NORMU_DEF if unit else "")
            + (_FI if i32 else ""))
    fn = (f"\n\n{capped(target, sim, 'writer')}\n"
          "def kernel(src, sidx, lut, p, nb, h, w, sn_, sw_, out, pos, mean, std, cfull"
          + (", srcw" if words else "") + "):\n")
    if len(bodies) > 1:
        return top + fn + loop_by(per, bodies, launch, rows)
    return top + fn + loop(target, per, bodies[0][1], launch, rows)


def _member_text(sig: GatherSig, gates: bool, channels: int, chained: bool,
                 only: bool) -> str:
    """The writer's per-member prologue: the gather's, the member's chain table where its
    chain goes through one (``only``: every member's; ``chained``: the members with
    ``full`` 255, ``cton_``), and its sample's offset ``ob_`` in the batch."""
    per = prologue(sig, gates)
    if only:
        per += "\n" + batch_tables.table_text(sig, gates)
    elif chained:
        per += "\ncton_ = full == 255.0\n" + batch_tables.table_text(sig, gates, "cton_")
    return flat_accesses(per, sig) + f"\nob_ = pos[b] * ({channels} * h * w)"


def _launch_text(sig: GatherSig, channels: int, chained: bool, table: bool,
                 unit: bool) -> str:
    """What the writer's blocks read once per launch: the chain tables' set-up, the
    conversion table (``table``) or, for grey values replicated to ``channels``, whether
    the channels' statistics are the same (and the first channel's, ``unit``)."""
    launch = batch_tables.launch_text(sig) if chained else ""
    if table:
        launch += _TABLE.format(n=channels * 256,
                                cond="True" if sig.mode == "lut" else "cfull == 255.0")
    elif sig.cout == 1 and channels > 1:
        launch += _SAME.format(n=channels) + (_UNIT if unit else "")
    return launch


def _writer_body(body: str, sig: GatherSig, layout: str, channels: int, table: bool,
                 rows: int, ints: bool = False, unit: bool = False) -> str:
    """A gather body of ``sig`` with its stores made the batch writer's (``ints``, ``unit``:
    :func:`_writer_store`'s)."""
    compute, stores = split_stores(body)
    stores, n = _STORE.subn(_writer_store(sig, layout, channels, table, ints, unit), stores)
    if n != sig.cout or "dst[" in stores:
        raise RuntimeError("gather_writer_source: stores not where expected")
    return flat_accesses(rows_body(compute, stores, rows), sig)


def gather_writer_kernel(sig: GatherSig, target: str, sim: bool, gates: bool, channels: int,
                         layout: str, wide: bool = False, u8: bool | None = None,
                         words: bool = False):
    """The compiled fused gather + batch writer (:func:`gather_writer_source`)."""
    return load(gather_writer_source(sig, target, sim, gates, channels, layout, wide, u8,
                                     words), target).kernel


#: Whether the uint8 table writers round their blends straight to table indices
#: (``_int_body``); benchmarks turn it off to compare.
INT_INDEX = True

#: Whether GPU writers index their sampler taps in 32 bits (``_int32_taps``); benchmarks
#: turn it off to compare.
INT32_TAPS = True

#: Whether GPU writers skip divisions by 1.0 (``_NORMU_DEF``); benchmarks turn it off to
#: compare.
UNIT_DIVISIONS = True

#: Whether batch writers over uint8 RGB stacks of whole aligned words read their rotated
#: taps as uint64 words (:func:`word_taps`); benchmarks turn it off to compare.
WORD_TAPS = True


def word_taps(sig: GatherSig, target: str, u8: bool | None) -> bool:
    """Whether the batch writer of ``sig`` can read its sampler's taps as words
    (``gather_writer_source``'s ``words``): GPUs, a known uint8 (``u8``) three-channel
    source, a sampler in a flat body (a plain gather, or a chain the uint8 writer runs
    through its tables alone: no pads, edge modes, user maps or packing)."""
    return (target != "cpu" and u8 is True and sig.cin == 3 and sig.sampler
            and not sig.packed and (sig.plain or batch_tables.chain_tables(sig, target)))
