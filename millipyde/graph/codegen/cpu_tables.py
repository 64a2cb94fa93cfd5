"""The cpu arena gathers' elementwise runs through per-member tables on uint8 images.

A run of elementwise ops in a gather's chain (the ImageNet recipe's contrast before its
saturation and hue; its brightness after the crop's bilinear sample) computes, for each
channel, a function of one value and the member's parameters (and statistic row). On a uint8
member (``full == 255.0``) every value that reaches such a run is a whole number in [0, 255]:
a source byte, a sample rounded and clipped (``_rint_clip``), or the value of a previous op of
an integer chain, which is rounded and clipped too or whole and in range already
(``OpSpec.whole``). So the run's value is a function of that byte: each member's first row in a
part runs the run's own text on the 256 values of each channel into a table, and its pixels
read the table. An entry is what the pixel would have computed with the same operations, so
values are bit-identical; other integer types (``full`` another maximum) run the text inline,
as before. The per-image tables of GPU gathers (``gather_body.tabled_prologue``,
``batch_tables``) do the same for their chains.

The same chains call the pixelwise ops' byte forms (:func:`byte_forms`: hue's and
saturation's arithmetic for whole values in [0, 255], fewer divisions, the same values), and an
axis-aligned bilinear member blends each source row horizontally once (:func:`separable`,
``_held_rows``).

What the tables and :func:`separable`'s coordinates save on the ImageNet recipe is measured in
bench/RESULTS.md ("cpu backend: per-member tables"); the byte forms and held rows in "cpu
backend: hue's and saturation's byte forms, source rows blended once".
"""

from __future__ import annotations

import re

from ...kernels import REGISTRY
from ...kernels.registry import BYTE_FORMS
from .chain import chain_all
from .gather_sig import GatherSig, chained, op_offsets, stat_layout

#: the member whose tables were filled last in this part (``-1``: none yet)
MEMBER = "eb_"
#: whether the member's tables are read: a uint8 member
ON = "te_"


def _runs(ops: tuple[str, ...], first: int) -> list[tuple[tuple[str, ...], int]]:
    """The maximal runs of elementwise ops (reading no neighbours) of the chain ``ops``,
    each with the global index of its first op (``first`` the chain's)."""
    runs: list[tuple[tuple[str, ...], int]] = []
    start = None
    for i, name in enumerate(ops + ("",)):
        if name and REGISTRY[name].kind == "elementwise":
            start = i if start is None else start
        elif start is not None:
            runs.append((ops[start:i], first + start))
            start = None
    return runs


def _find(lines: list[str], block: list[str]) -> list[tuple[int, str]]:
    """Where ``block`` (lines at indent 0) stands in ``lines`` at one indent: (index, indent)."""
    out = []
    for k, line in enumerate(lines):
        ind = line[:len(line) - len(line.lstrip())]
        if line.lstrip() == block[0] and all(
                k + j < len(lines) and lines[k + j] == ind + b for j, b in enumerate(block)):
            out.append((k, ind))
    return out


def tables(sig: GatherSig, gates: bool, body: str, batched) -> tuple[str, str, str]:
    """``body`` (a batched arena gather body of ``sig``) with each elementwise run of its chains
    read through a per-member table on uint8 members.

    ``batched`` turns per-image text into the body's member-indexed text (``batch.batched``
    with the member index). Returns ``(body, head, per_row)``: the new body, the tables'
    allocation (once per kernel call, before the row loop) and their fill (per row, after the
    member's prologue: it fills only on a new member); ``("", "")`` and ``body`` unchanged
    where there is nothing to table (a float image type, a grey conversion, a bounded window's
    fills, which need not be whole, or no run in the text).
    """
    if not sig.is_int or sig.mode != "chain" or sig.grey or sig.bounded or sig.packed:
        return body, "", ""
    vars_ = [f"v{c}" for c in range(sig.cin)]
    touched = vars_[:3] if len(vars_) > 1 else vars_
    offsets = op_offsets(chained(sig))
    stats = stat_layout(sig)
    lines = body.splitlines()
    fills: list[str] = []
    head: list[str] = []
    for ops, first in (_runs(sig.pre, 0) + _runs(sig.post, len(sig.pre))):
        text = batched(chain_all(ops, vars_, "full", first, offsets, True, gates, stats))
        block = text.splitlines()
        where = _find(lines, block)
        if len(where) != 1:
            continue
        k, ind = where[0]
        t = f"et{len(head)}_"
        reads = [f"{v} = {t}[{c}, _u(int({v}))]" for c, v in enumerate(touched)]
        lines[k:k + len(block)] = ([f"{ind}if {ON}:"] + [f"{ind}    {r}" for r in reads]
                                   + [f"{ind}else:"] + [f"{ind}    {b}" for b in block])
        head.append(f"{t} = np.empty(({len(touched)}, 256))")
        fills += ([f"{v} = float(i_)" for v in touched] + block
                  + [f"{t}[{c}, i_] = {v}" for c, v in enumerate(touched)])
    if not head:
        return body, "", ""
    per_row = "\n".join([f"{ON} = full == 255.0", f"if {ON} and b != {MEMBER}:",
                         f"    {MEMBER} = b", "    for i_ in range(256):"]
                        + ["        " + line for line in fills])
    return "\n".join(lines), "\n".join(head + [f"{MEMBER} = -1"]) + "\n", "\n" + per_row


def byte_forms(sig: GatherSig, defs: str) -> str:
    """``defs`` (a cpu arena gather's device functions, ``chain.gather_defs``) with each
    pixelwise op that has a byte form (``kernels.registry.BYTE_FORMS``: hue) calling it.

    On the integer chains :func:`tables` reads tables for, every value reaching an op of a
    uint8 member is a whole number in [0, 255], which is what a byte form takes (on another
    ``full`` it runs the op's own function): the values are the op's, with cheaper arithmetic.
    ``defs`` unchanged elsewhere.
    """
    if not sig.is_int or sig.mode != "chain" or sig.grey or sig.bounded or sig.packed:
        return defs
    out = defs
    for name in BYTE_FORMS:
        out = out.replace(f"_f_{name} = _dev3(_R[{name!r}].fn)\n",
                          f"_f_{name} = _dev3(_BYTES[{name!r}])\n")
    if out == defs:
        return defs
    return "from millipyde.kernels.registry import BYTE_FORMS as _BYTES\n" + out


#: an edge-mode bilinear sampler's pixel up to its taps (``gather_body``), as the cpu arena
#: gathers write it
_SAMPLE = ["fy = a0_ * y + a1_ * x + a2_", "fx = a3_ * y + a4_ * x + a5_",
           "ty0 = math.floor(fy)", "tx0 = math.floor(fx)", "dr = fy - ty0", "dc = fx - tx0",
           "iy = int(ty0)", "ix = int(tx0)",
           "ya_ = min(max(iy, 0), mh - 1)", "yb_ = min(max(iy + 1, 0), mh - 1)",
           "xa_ = min(max(ix, 0), mw - 1)", "xb_ = min(max(ix + 1, 0), mw - 1)"]
_TAP = "sy = k0_ + ({y}) * ky_ + ({x}) * kx_"
_LOCALS = ("fy", "fx", "ty0", "tx0", "iy", "ix", "ya_", "yb_", "xa_", "xb_")


def separable(body: str) -> tuple[str, str, str]:
    """``body`` (a cpu arena gather's, with ``arena.cpu_steps``' flat offsets) with an
    axis-aligned member's bilinear coordinates computed once a row and once a column.

    A member whose map has ``a1_ == a3_ == 0`` (a crop, resize and flip: the ImageNet
    recipe's stage) samples row ``fy = a0_ y + a1_ x + a2_`` and column ``fx = a3_ y + a4_ x +
    a5_``: ``a1_ x`` is a zero of ``a1_``'s sign for every column ``x >= 0``, the same as
    ``a1_ * 0``, so ``fy`` (and its floor, fraction and clamped taps) is the row's, and ``fx``
    the column's. Each row computes its two tap rows' offsets and ``dr`` once; each member's
    first row in a part fills the columns' offsets and ``dc``; the pixel reads them. The
    offsets are the same integers summed in another order and ``dr``, ``dc`` the same floats,
    so values are bit-identical. Such a member's rows are also blended horizontally once
    (:func:`_held_rows`). Other members run the pixel's own arithmetic, as before.
    Returns ``(body, head, per_row)`` as :func:`tables`; the body unchanged (and ``""``) where
    it is not such a sampler's.
    """
    lines = body.splitlines()
    if lines[:len(_SAMPLE)] != _SAMPLE:
        return body, "", ""
    rest = lines[len(_SAMPLE):]
    taps = {_TAP.format(y=y, x=x): f"sy = {y[:2]}o_ + {x[:2]}o_"
            for y in ("ya_", "yb_") for x in ("xa_", "xb_")}
    if sum(line.strip() in taps for line in rest) != 4 or any(
            re.search(rf"\b{n}\b", line) for line in rest for n in _LOCALS
            if line.strip() not in taps):
        return body, "", ""
    rest = [line[:len(line) - len(line.lstrip())] + taps[line.strip()]
            if line.strip() in taps else line for line in rest]
    pixel = (["if sep_:", "    dr = rdr_", "    dc = cdc_[x]", "    yao_ = ryao_",
              "    ybo_ = rybo_", "    xao_ = cxao_[x]", "    xbo_ = cxbo_[x]", "else:"]
             + ["    " + line for line in _SAMPLE]
             + ["    yao_ = k0_ + ya_ * ky_", "    ybo_ = k0_ + yb_ * ky_",
                "    xao_ = xa_ * kx_", "    xbo_ = xb_ * kx_"])
    head = ("cdc_ = np.empty(w)\ncxao_ = np.empty(w, np.int64)\ncxbo_ = np.empty(w, np.int64)\n"
            "cb_ = -1\n")
    per_row = "\n".join([
        "\nsep_ = a1_ == 0.0 and a3_ == 0.0",
        "if sep_:",
        "    if b != cb_:",
        "        cb_ = b",
        "        for x in range(w):",
        "            fx = a3_ * 0.0 + a4_ * x + a5_",
        "            tx0 = math.floor(fx)",
        "            cdc_[x] = fx - tx0",
        "            ix = int(tx0)",
        "            cxao_[x] = min(max(ix, 0), mw - 1) * kx_",
        "            cxbo_[x] = min(max(ix + 1, 0), mw - 1) * kx_",
        "    fy = a0_ * y + a1_ * 0.0 + a2_",
        "    ty0 = math.floor(fy)",
        "    rdr_ = fy - ty0",
        "    iy = int(ty0)",
        "    ryao_ = k0_ + min(max(iy, 0), mh - 1) * ky_",
        "    rybo_ = k0_ + min(max(iy + 1, 0), mh - 1) * ky_",
        "else:",
        "    rdr_ = 0.0",
        "    ryao_ = 0",
        "    rybo_ = 0"])
    rest, rows_head, rows_fill = _held_rows(rest)
    if rows_head:
        # a pixel of held rows reads dr alone (not the columns' taps)
        pixel = ["if hs_:", "    dr = rdr_", "el" + pixel[0]] + pixel[1:]
        head += rows_head
        per_row = per_row.replace("        cb_ = b\n", "        cb_ = b\n        hk_[0] = -1\n"
                                  "        hk_[1] = -1\n", 1) + rows_fill
    return "\n".join(pixel + rest), head, per_row


_MIX = ("(1.0 - dr) * ((1.0 - dc) * t{c}_0 + dc * t{c}_1) + "
        "dr * ((1.0 - dc) * t{c}_2 + dc * t{c}_3)")
_LOAD = re.compile(r"t(\d+)_([0-3]) = float\(src\[_u\(sy \+ (\d+)\)\]\)")


def _held_rows(rest: list[str]) -> tuple[list[str], str, str]:
    """The pixel lines ``rest`` (after :func:`separable`'s coordinates) with an axis-aligned
    member's rows blended horizontally once: ``(rest, head, per_row)``, or ``rest`` unchanged
    and ``""`` where its taps are not read and blended as below.

    A bilinear value is ``(1 - dr) * ha + dr * hb``, ``ha`` (``hb``) the horizontal blend
    ``(1 - dc) * t0 + dc * t1`` of the taps in source row ``ya`` (``yb``) at the column's two
    tap columns. On an axis-aligned member ``dc`` and the tap columns are the column's, so
    ``ha`` is a function of the source row and the output column: each output row fills the
    rows it does not hold yet (two held, keyed by their flat offset; the next output row of a
    crop or resize reads the same source rows or the next one), and its pixels read them,
    with the same operations on the same values: bit-identical. A sampler gated off for the
    member (``gs_``) reads its taps, as before.
    """
    first = next((k for k, line in enumerate(rest) if re.fullmatch(r"\s*t\d+_0 = 0\.0", line)),
                 None)
    if first is None:
        return rest, "", ""
    ind = rest[first][:len(rest[first]) - len(rest[first].lstrip())]
    chans: list[int] = []
    loads: set[tuple[int, int, int]] = set()
    end = first
    for k in range(first, len(rest)):
        line = rest[k].strip()
        m = _LOAD.fullmatch(line)
        if m:
            loads.add((int(m[1]), int(m[2]), int(m[3])))
        elif re.fullmatch(r"t\d+_[0-3] = 0\.0|sy = y[ab]o_ \+ x[ab]o_|if gs_ != 0\.0:|else:", line):
            pass
        elif re.fullmatch(r"v(\d+) = t\1_0", line):
            pass
        elif re.fullmatch(r"v(\d+) = _rint_clip\(v\1, full\)", line):
            pass
        elif any(_MIX.format(c=c) in line for c in range(len(chans) + 1)):
            c = len(chans)
            if not re.fullmatch(rf"v{c} = (min\(max\()?{re.escape(_MIX.format(c=c))}"
                                r"(, clip_lo\), clip_hi\))?", line):
                return rest, "", ""
            chans.append(c)
        else:
            break
        end = k + 1
    n = len(chans)
    if not n or loads != {(c, k, c) for c in range(n) for k in range(4)} or any(
            re.search(r"\bt\d+_\d\b", line) for line in rest[end:]):
        return rest, "", ""
    # the held rows' pixel: each channel's lines of the sampler on (no taps), then the rest
    held = []
    for line in rest[first:end]:
        text = line.strip()
        for c in range(n):
            if _MIX.format(c=c) in text:
                held.append(ind + "    " + text.replace(
                    _MIX.format(c=c), f"(1.0 - dr) * hh_[ia_, x, {c}] + dr * hh_[ib_, x, {c}]"))
                break
        else:
            if re.fullmatch(r"v(\d+) = _rint_clip\(v\1, full\)", text):
                held.append(ind + "    " + text)
    rest = (rest[:first] + [ind + "if hs_:"] + held + [ind + "else:"]
            + ["    " + line for line in rest[first:end]] + rest[end:])
    gate = " and gs_ == 0.0" if any("gs_" in line for line in rest) else ""
    fill = [f"hs_ = sep_{gate}", "ia_ = 0", "ib_ = 1", "if hs_:",
            "    if hk_[0] != ryao_ and (hk_[1] == ryao_ or hk_[0] == rybo_):",
            "        ia_ = 1", "        ib_ = 0",
            "    for j_ in range(2):",
            "        k_ = ia_ if j_ == 0 else ib_",
            "        yo_ = ryao_ if j_ == 0 else rybo_",
            "        if hk_[k_] != yo_:",
            "            hk_[k_] = yo_",
            "            for x in range(w):",
            "                dc = cdc_[x]",
            "                sa_ = yo_ + cxao_[x]",
            "                sb_ = yo_ + cxbo_[x]"]
    fill += [f"                hh_[k_, x, {c}] = ((1.0 - dc) * float(src[_u(sa_ + {c})]) "
             f"+ dc * float(src[_u(sb_ + {c})]))" for c in range(n)]
    head = f"hh_ = np.empty((2, w, {n}))\nhk_ = np.full(2, -1, np.int64)\n"
    return rest, head, "\n" + "\n".join(fill)
