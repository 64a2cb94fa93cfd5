"""Several rows per trip of a batched gather's loop, every load before any store.

A gather's body loads (source, tables, taps) and ends with its stores. The compiler cannot
move a load of the next pixel above a store of this one (the buffers could alias), so each
thread of a batched gather waited for its loads once per pixel, one pixel at a time (the
batched gathers were latency-bound: bench/RESULTS.md, s9-3). With ``n`` rows per trip a
thread computes the pixels of rows ``y``, ``y + sy_``, ... ``y + (n - 1) sy_`` (its next
rows of the grid-stride loop) and then stores them: ``n`` pixels' loads in flight. Each
pixel's arithmetic is the body's own, so the values are the same. A row past the image is
computed at the last row (its reads stay in bounds) and not stored.
"""

from __future__ import annotations

import re

_DST = re.compile(r"^dst\[(?P<i>[^\n]*)\] = (?P<v>[^\n]+)$", re.M)
_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*[-+*/]?=(?!=)", re.M)


def split_stores(body: str) -> tuple[str, str]:
    """``body`` as (the computation, its stores): each unindented store ``dst[i] = v``
    becomes ``sv<k>_ = v`` in the first and ``dst[i] = sv<k>_`` in the second."""
    stores: list[str] = []

    def sub(m: re.Match) -> str:
        stores.append(f"dst[{m['i']}] = sv{len(stores)}_")
        return f"sv{len(stores) - 1}_ = {m['v']}"

    compute = _DST.sub(sub, body)
    if not stores or "dst[" in compute:
        raise RuntimeError("batch_rows: the gather body's stores are not where expected")
    return compute, "\n".join(stores)


def _rename(text: str, names: set[str], j: int) -> str:
    pat = re.compile(r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b")
    return pat.sub(lambda m: f"{m[1]}_r{j}", text)


def rows_body(compute: str, stores: str, n: int) -> str:
    """The body of one trip over ``n`` rows (``n`` = 1: ``compute`` then ``stores``)."""
    if n == 1:
        return compute + "\n" + stores
    names = {"y"} | {v.strip() for m in _ASSIGNED.finditer(compute + "\n" + stores)
                     for v in m[1].split(",")}
    lines = [compute]
    for j in range(1, n):
        lines += [f"y_r{j} = min(_ix(y + {j} * sy_), _ix(h - 1))", _rename(compute, names, j)]
    lines.append(stores)
    for j in range(1, n):
        lines.append(f"if _ix(y + {j} * sy_) < h:")
        lines += ["    " + line for line in _rename(stores, names, j).splitlines()]
    return "\n".join(lines)
