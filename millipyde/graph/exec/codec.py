"""Run a block codec stencil (``kernels.registry.BlockCodec``: ``jpeg``): its four passes
(``graph.codegen.codec``) over two float64 planes of the image padded to whole 8x8 blocks."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from ...kernels.registry import BlockCodec
from ..codegen.codec import codec_kernels
from ..plan.schedule import Stencil
from .tables import IDENTITY_LUT, stencil_tables

#: the passes a block codec launches (samples, coefficients, decode, colour)
PASSES = 4


@functools.cache
def _codec_fns():
    return codec_kernels(runtime.codegen_target, runtime.simulated)


@functools.cache
def dct_basis() -> np.ndarray:
    """``basis[i, u] = C(u) / 2 cos((2 i + 1) u pi / 16)``, ``C(0) = 1 / sqrt(2)``, else 1:
    the orthonormal 8-point DCT-II (``F = B.T f B``; ``f = B F B.T``)."""
    i = np.arange(8)[:, None]
    u = np.arange(8)[None, :]
    b = 0.5 * np.cos((2 * i + 1) * u * np.pi / 16)
    b[:, 0] = np.sqrt(0.125)
    return b


def _blocks(n: int) -> int:
    return -(-n // 8) * 8


def run_codec(k: Stencil, src: Any, device: int, codec: BlockCodec) -> Any:
    """The stencil's output: the four passes, luma (and chroma for colour images)."""
    out = k.output
    src3 = runtime.as_3d(src)
    h, w, c = src3.shape
    nc = min(c, 3)
    dst = runtime.empty(out.shape, out.dtype, device)
    if h == 0 or w == 0:
        return dst
    dst3 = runtime.as_3d(dst)
    ncomp = 3 if nc == 3 else 1
    ch, cw = -(-h // 2), -(-w // 2)
    hc, wc = (_blocks(ch), _blocks(cw)) if ncomp == 3 else (0, 0)
    hb, wb = _blocks(h), _blocks(w)
    lut = stencil_tables(k, c)
    table = runtime.upload_small(np.ascontiguousarray(IDENTITY_LUT[:, :c] if lut is None
                                                      else lut), device)
    quant = runtime.upload_small(np.ascontiguousarray(codec.quant, dtype=np.float64), device)
    basis = runtime.upload_small(dct_basis(), device)
    smp = runtime.empty((hb, wb, ncomp), np.float64, device)
    coef = runtime.empty((hb, wb, ncomp), np.float64, device)
    samples, coefficients, decode, colour = _codec_fns()
    runtime.launch_2d(samples, hb, wb, device, src3, smp, h, w, ch, hc, wc, ncomp, table)
    runtime.launch_2d(coefficients, hb, wb * ncomp, device, smp, coef, quant, basis, hc, wc,
                      ncomp)
    runtime.launch_2d(decode, hb, wb * ncomp, device, coef, smp, basis, hc, wc, ncomp)
    runtime.launch_2d(colour, h, w * c, device, src3, smp, dst3, nc, ncomp, ch, cw, table)
    return dst
