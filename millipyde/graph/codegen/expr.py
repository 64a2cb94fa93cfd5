"""Generated kernels for fused NumPy arithmetic: flat elementwise maps and map-reduce.

An expression is a small SSA program over kernel inputs (flat 1-D views, broadcast through
per-input element strides) and scalar parameters. One body serves the CPU (``prange``) and
``@cuda.jit``; reductions differ per target (chunked ``prange`` vs shared-memory blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

from .loader import load
from .target import HEADER

_HELPERS = '''
@_dev
def _minimum(a, b):
    # np.minimum: NaN wins
    if a != a:
        return a
    if b != b:
        return b
    return a if a < b else b


@_dev
def _maximum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b
'''

_CASTS = "from numba import float32, float64, int8, int16, int32, int64, uint8, uint16, " \
    "uint32, uint64, boolean\n"

REDUCE_BLOCK = 256


@dataclass(frozen=True)
class ExprSig:
    """Compile-time shape of a fused expression.

    ``inputs``: one broadcast flag per kernel input. ``steps``: ``(template, args, cast)`` per
    node in order, args naming ``a<k>`` (input k), ``t<j>`` (step j) or ``p<k>`` (parameter k).
    ``reduce``: None, or ``(name, accumulator dtype name)``.
    """

    ndim: int
    inputs: tuple[bool, ...]
    steps: tuple[tuple[str, tuple[str, ...], str], ...]
    reduce: tuple[str, str] | None = None


def _value_lines(sig: ExprSig) -> list[str]:
    lines = []
    if any(sig.inputs):
        lines += ["rem = i * 1"] + [f"o{k} = 0" for k, b in enumerate(sig.inputs) if b]
        lines.append(f"for d in range({sig.ndim} - 1, -1, -1):")
        lines += ["    idx = rem % osh[d]", "    rem = rem // osh[d]"]
        lines += [f"    o{k} += idx * st[{k}, d]" for k, b in enumerate(sig.inputs) if b]
    for k, b in enumerate(sig.inputs):
        lines.append(f"a{k} = in{k}[o{k}]" if b else f"a{k} = in{k}[i]")
    for j, (template, args, cast) in enumerate(sig.steps):
        refs = [f"p[{a[1:]}]" if a[0] == "p" else
                f"{cast}(int64(p[{a[1:]}]))" if a[0] == "c" else a for a in args]
        expr = template.format(*refs)
        lines.append(f"t{j} = {cast}({expr})" if cast else f"t{j} = {expr}")
    lines.append(f"v = t{len(sig.steps) - 1}")
    return lines


def _indent(lines: list[str], n: int) -> str:
    pad = " " * n
    return "".join(pad + line + "\n" for line in lines)


def _combine(name: str) -> str:
    return {"sum": "acc + v", "mean": "acc + v", "min": "_minimum(acc, v)",
            "max": "_maximum(acc, v)"}[name]


def _identity(name: str, acc: str) -> str:
    if name in ("sum", "mean"):
        return f"{acc}(0)"
    big = "math.inf" if acc.startswith("float") else ("9223372036854775807")
    return f"{acc}({big})" if name == "min" else f"{acc}(-{big})"


def expr_source(sig: ExprSig, target: str, sim: bool = False) -> str:
    """Source of ``kernel(in0.., out, p, osh, st, n)`` for ``sig`` on ``target``."""
    ins = ", ".join(f"in{k}" for k in range(len(sig.inputs)))
    head = (f"# millipyde generated expression kernel: {sig}\n" + HEADER[target] + _CASTS
            + _HELPERS)
    body = _value_lines(sig)
    if sig.reduce is None:
        body.append("out[i] = v")
        if target == "cpu":
            dec = "@njit(parallel=True, nogil=True, cache=True, error_model='numpy')"
            loop = "    for i in prange(n):\n" + _indent(body, 8)
        else:
            dec = "@cuda.jit" if sim else "@cuda.jit(cache=True)"
            loop = ("    i0 = cuda.grid(1)\n    step = cuda.gridsize(1)\n"
                    "    for i in range(i0, n, step):\n" + _indent(body, 8))
        return head + f"\n\n{dec}\ndef kernel({ins}, out, p, osh, st, n):\n" + loop
    name, acc = sig.reduce
    comb = _combine(name)
    if target == "cpu":
        dec = "@njit(parallel=True, nogil=True, cache=True, error_model='numpy')"
        src = (
            f"\n\n{dec}\ndef kernel({ins}, out, p, osh, st, n):\n"
            "    nb = out.shape[0]\n    chunk = (n + nb - 1) // nb\n"
            "    for b in prange(nb):\n"
            f"        acc = {_identity(name, acc)}\n"
            "        for i in range(b * chunk, min(n, (b + 1) * chunk)):\n"
            + _indent(body, 12)
            + f"            acc = {comb}\n"
            "        out[b] = acc\n"
        )
        return head + src
    dec = "@cuda.jit" if sim else "@cuda.jit(cache=True)"
    src = (
        f"\n\n{dec}\ndef kernel({ins}, out, p, osh, st, n):\n"
        f"    sm = cuda.shared.array({REDUCE_BLOCK}, {acc})\n"
        "    tid = cuda.threadIdx.x\n"
        f"    acc = {_identity(name, acc)}\n"
        "    i0 = cuda.grid(1)\n    step = cuda.gridsize(1)\n"
        "    for i in range(i0, n, step):\n"
        + _indent(body, 8)
        + f"        acc = {comb}\n"
        "    sm[tid] = acc\n    cuda.syncthreads()\n"
        f"    s = {REDUCE_BLOCK // 2}\n"
        "    while s > 0:\n"
        "        if tid < s:\n"
        "            v = sm[tid + s]\n"
        "            acc = sm[tid]\n"
        f"            sm[tid] = {comb}\n"
        "        cuda.syncthreads()\n"
        "        s //= 2\n"
        "    if tid == 0:\n        out[cuda.blockIdx.x] = sm[0]\n"
    )
    return head + src


def expr_kernel(sig: ExprSig, target: str, sim: bool = False):
    """The compiled (lazily) expression kernel for ``sig``."""
    return load(expr_source(sig, target, sim), target).kernel
