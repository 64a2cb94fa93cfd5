"""Run a fused elementwise/broadcast expression kernel, or a reduction to one value."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from ..codegen.expr import REDUCE_BLOCK, ExprSig, expr_kernel
from ..ir.node import Node
from ..plan.schedule import Expr, Gather
from . import execute


@functools.cache
def _expr_fn(sig: ExprSig):
    return expr_kernel(sig, runtime.codegen_target, runtime.simulated)


def _numba_type(dtype: np.dtype) -> str:
    return "boolean" if dtype == np.bool_ else dtype.name


def expr_args(k: Expr) -> tuple[ExprSig, list[Node], np.ndarray, np.ndarray, np.ndarray]:
    """Signature, leaves, scalar parameters, output shape and input strides of a fused expr."""
    reduce = k.output.op if _is_reduce(k.output) else None
    maps = k.nodes[:-1] if reduce is not None else k.nodes
    shape = (k.output.inputs[0].shape if reduce is not None else k.output.shape) or (1,)
    index = {n.id: j for j, n in enumerate(maps)}
    leaf_index = {n.id: j for j, n in enumerate(k.leaves)}
    params: list[float] = []
    steps = []
    for n in maps:
        args, inputs = [], iter(n.inputs)
        for slot in n.params:
            if slot is None:
                i = next(inputs)
                args.append(f"t{index[i.id]}" if i.id in index else f"a{leaf_index[i.id]}")
            else:
                # NumPy treats a Python scalar as the array's dtype (NEP 50): an int scalar on
                # an int array must wrap like it, not go through float64 (which saturates on
                # GPUs when converted back)
                k_ = len(params)
                args.append(f"p{k_}" if n.dtype.kind not in "iu" else f"c{k_}")
                params.append(float(slot))
        steps.append((n.op.template, tuple(args), _numba_type(n.dtype)))
    if not steps:
        steps.append(("{0}", ("a0",), ""))
    ndim = len(shape)
    strides = np.zeros((len(k.leaves), ndim), dtype=np.int64)
    bcast = []
    for j, leaf in enumerate(k.leaves):
        lshape = (1,) * (ndim - len(leaf.shape)) + tuple(leaf.shape)
        bcast.append(tuple(lshape) != tuple(shape))
        step = 1
        for d in range(ndim - 1, -1, -1):
            strides[j, d] = 0 if lshape[d] == 1 and shape[d] != 1 else step
            step *= lshape[d]
    red = None
    if reduce is not None:
        src_dtype = maps[-1].dtype if maps else k.leaves[0].dtype
        acc = "float64" if src_dtype.kind == "f" else "int64"
        red = (reduce.name, acc)
    sig = ExprSig(ndim, tuple(bcast), tuple(steps), red)
    return sig, maps, np.array(params + [0.0]), np.array(shape, dtype=np.int64), strides


def _is_reduce(n: Node) -> bool:
    return getattr(n.op, "kind", None) == "reduce"


@execute.runs("expr")
def run_expr(k: Expr, src: Any, device: int, reader: Gather | None = None
             ) -> tuple[Any, bool]:
    """Launch expression ``k`` (its leaves are stored): its output buffer, never partial."""
    sig, _, p, osh, st = expr_args(k)
    n = int(np.prod(osh))
    fn = _expr_fn(sig)
    ins = [runtime.flat(leaf.buffer) for leaf in k.leaves]
    small = [runtime.upload_small(a, device) for a in (p, osh, st)]
    out = k.output
    if sig.reduce is None:
        dst = runtime.empty(out.shape or (1,), out.dtype, device)
        runtime.launch_1d(fn, n, device, *ins, runtime.flat(dst), *small, n)
        return dst, False
    name, acc = sig.reduce
    blocks = max(1, min((n + REDUCE_BLOCK - 1) // REDUCE_BLOCK, 1024))
    part = runtime.empty((blocks,), np.dtype(acc), device)
    runtime.launch_blocks(fn, blocks, REDUCE_BLOCK, device, *ins, part, *small, n)
    host = runtime.to_host(part)
    value = {"sum": np.sum, "mean": np.sum, "min": np.min, "max": np.max}[name](host)
    if name == "mean":
        value = value / n
    return runtime.from_host(np.array([value], dtype=out.dtype), device), False
