"""The cpu target's kernels as serial Numba functions whose one ``prange`` loop runs in parts.

The generators write a cpu kernel as ``@njit(parallel=True, ...)`` around one ``prange`` loop
whose iterations write disjoint outputs. Numba's parfors lowering of such a kernel cost 40-60%
of its compile time (the loop body is compiled again as a gufunc; measured on the 2-core
machine: an arena gather 8.8 CPU-s parallel against 5.6 serial, the thesis recipe's cold start
59 against 34 CPU-s) and a thread pool's start on every launch, which is most of a small
image's launch. Here each such kernel is compiled serial instead, with two more parameters,
``part_`` and ``parts_`` (defaults 0 and 1): its loop covers iterations ``[part_ * n //
parts_, (part_ + 1) * n // parts_)`` of the ``n`` the ``prange`` had. The cpu backend
(``backend/cpu.py``) calls it once with ``(0, 1)`` for small launches and from its own
threads, one call per part, for large ones (``nogil=True``: the parts run at once). The same
iterations run, each computing what it computed before, so results are unchanged.

Only a ``prange`` loop that is a statement of the function's body (not nested in another loop)
and is its last statement is split: nothing after it may read what other parts wrote. A kernel
that breaks this rule raises ``ValueError`` naming it.
"""

from __future__ import annotations

import re

#: the decorator the generators write for cpu kernels, up to its other options
PARALLEL = "@njit(parallel=True, "
_PRANGE = re.compile(r"^(    for \w+ in )prange\((.*)\):$")


def split_loops(source: str) -> str:
    """``source`` with every ``@njit(parallel=True, ...)`` kernel made serial and split into
    parts (see the module doc); other functions and every comment are kept as they are."""
    if PARALLEL not in source:
        return source
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith(PARALLEL):
            out.append(line)
            i += 1
            continue
        head = lines[i + 1] if i + 1 < len(lines) else ""
        if not (head.startswith("def ") and head.endswith("):")):
            raise ValueError(f"a parallel cpu kernel without its def line: {head!r}")
        name = head[4:head.index("(")]
        out.append("@njit(" + line[len(PARALLEL):])
        out.append(head[:-2] + ", part_=0, parts_=1):")
        j = i + 2
        body: list[str] = []
        while j < len(lines) and (not lines[j] or lines[j][0] in " \t"):
            body.append(lines[j])
            j += 1
        out.extend(_split_body(name, body))
        i = j
    return "\n".join(out)


def _split_body(name: str, body: list[str]) -> list[str]:
    loops = [k for k, b in enumerate(body) if "prange(" in b]
    if len(loops) != 1:
        raise ValueError(f"cpu kernel {name}: {len(loops)} prange loops, one can be split")
    k = loops[0]
    m = _PRANGE.match(body[k])
    if m is None:
        raise ValueError(f"cpu kernel {name}: its prange is not a loop of the function's body: "
                         f"{body[k].strip()!r}")
    after = [b for b in body[k + 1:] if b.strip() and not b.startswith("     ")
             and not b.lstrip().startswith("#")]
    if after:
        raise ValueError(f"cpu kernel {name}: statements after its prange loop "
                         f"({after[0].strip()!r}) would read other parts' outputs")
    n = m.group(2)
    body = list(body)
    body[k] = (f"{m.group(1)}range(part_ * ({n}) // parts_, "
               f"(part_ + 1) * ({n}) // parts_):")
    return body
