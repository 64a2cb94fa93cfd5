"""Run planned kernels: allocate outputs, build parameters, launch, store, free intermediates."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import faults, runtime
from ..kernels import REGISTRY
from . import codegen
from .node import Node
from .schedule import Gather, Kernel, full_range, plan

_IDENTITY_LUT = np.tile(np.arange(256, dtype=np.uint8), (2, 4, 1))


@functools.lru_cache(maxsize=None)
def _gather_fn(sig: codegen.GatherSig):
    return codegen.gather_kernel(sig, runtime.TARGET, runtime.SIM)


@functools.lru_cache(maxsize=None)
def _stencil_fns():
    return codegen.stencil_kernels(runtime.TARGET, runtime.SIM)


@functools.lru_cache(maxsize=None)
def _lut_build():
    return codegen.lut_builder()


def _op_params(n: Node) -> list[float]:
    vals = [float(v) for v in n.params]
    return (vals + [0.0, 0.0, 0.0])[:3]


def build_lut(nodes: list[Node], channels: int, full: float) -> np.ndarray:
    """Compose uint8 elementwise ops into one (channels, 256) table, rounding after each op."""
    out = np.empty((channels, 256), dtype=np.uint8)
    codes = np.array([n.op.code for n in nodes], dtype=np.int64)
    params = np.array([_op_params(n) for n in nodes], dtype=np.float64).reshape(len(nodes), 3)
    _lut_build()(codes, params, channels, full, out)
    return out


def gather_args(k: Gather) -> tuple[codegen.GatherSig, np.ndarray, np.ndarray]:
    """Signature, LUT array and parameter array of a fused gather kernel."""
    c = k.channels
    lut_mode = k.lut_mode
    full = full_range(k.source.dtype)
    names = lambda ns: tuple(n.op.name for n in ns)  # noqa: E731
    sig = codegen.GatherSig(
        cin=c,
        mode="lut" if lut_mode else "chain",
        is_int=k.source.dtype.kind in "ui",
        sampler=k.A is not None,
        grey=k.phase == 2,
        pre=() if lut_mode else names(k.pre),
        post=() if lut_mode else names(k.post),
        grey_ops=names(k.grey_ops),
    )
    if lut_mode and (k.pre or k.post):
        lut = _IDENTITY_LUT[:, :c].copy()
        if k.pre:
            lut[0] = build_lut(k.pre, c, full)
        if k.post:
            lut[1] = build_lut(k.post, c, full)
    else:
        lut = _IDENTITY_LUT[:, :c]
    chained = ([] if lut_mode else k.pre + k.post) + k.grey_ops
    p = np.zeros(codegen.OPS_OFF + 3 * len(chained))
    p[codegen.P_OFF:codegen.P_OFF + 6] = k.P[:2].ravel()
    if k.A is not None:
        p[codegen.A_OFF:codegen.A_OFF + 6] = k.A[:2].ravel()
        p[codegen.MID_OFF:codegen.MID_OFF + 2] = k.mid
    p[codegen.FULL_OFF] = full
    for i, n in enumerate(chained):
        p[codegen.OPS_OFF + 3 * i:codegen.OPS_OFF + 3 * i + 3] = _op_params(n)
    return sig, lut, p


def _run_gather(k: Gather, src: Any, device: int) -> Any:
    out = k.output
    sig, lut, p = gather_args(k)
    dst = runtime.empty(out.shape, out.dtype, device)
    fn = _gather_fn(sig)
    h, w = out.shape[0], out.shape[1]
    runtime.launch_2d(
        fn, h, w, device, runtime.as_3d(src), runtime.as_3d(dst),
        runtime.upload_small(np.ascontiguousarray(lut), device), runtime.upload_small(p, device),
    )
    return dst


def _run_stencil(k: Kernel, src: Any, device: int) -> Any:
    n = k.output
    rows, cols = _stencil_fns()
    taps = REGISTRY[n.op.name].fn(*n.params)
    src3 = runtime.as_3d(src)
    h, w, c = src3.shape
    nc = min(c, 3)
    tmp = runtime.empty((h, w, nc), np.float64, device)
    dst = runtime.empty(n.shape, n.dtype, device)
    taps_d = runtime.upload_small(np.ascontiguousarray(taps, dtype=np.float64), device)
    runtime.launch_2d(rows, h, w * nc, device, src3, tmp, taps_d, nc)
    is_int = n.dtype.kind in "ui"
    runtime.launch_2d(cols, h, w * c, device, src3, tmp, runtime.as_3d(dst), taps_d, nc,
                      is_int, full_range(n.dtype))
    return dst


def run_kernel(k: Kernel) -> None:
    """Launch one planned kernel and store its output node's value."""
    out = k.output
    with out.lock:
        if not out.materialized:
            _run_locked(k, out)


def _run_locked(k: Kernel, out: Node) -> None:
    src = k.source.buffer
    device = out.device
    for n in k.nodes:
        faults.check(f"op:{n.name}", device)
    with runtime.on_device(device):
        if k.kind == "gather":
            buf = _run_gather(k, src, device)
        elif k.kind == "stencil":
            buf = _run_stencil(k, src, device)
        elif k.kind in ("copy", "move"):
            buf = runtime.copy(src, device, k.source.device)
        else:  # pragma: no cover - plan() only makes the kinds above
            raise TypeError(f"unknown kernel kind {k.kind}")
    out.settle(buf)


def materialize(target: Node) -> Any:
    """Compute ``target`` (and what it needs) and return its buffer; a no-op when stored."""
    if target.materialized:
        return target.buffer
    with target.lock:
        if target.materialized:
            return target.buffer
        for k in plan(target):
            if k.source.buffer is None:
                materialize(k.source)
            run_kernel(k)
    return target.buffer
