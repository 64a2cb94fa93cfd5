"""Count instruction kinds in the PTX of the GPU stencil kernels (no GPU needed: NVVM only).

    MILLIPYDE_BACKEND=cpu python -m bench.probes.stencil_ptx [--json] [--regs] [--sass]

``--regs``: registers per thread as ``ptxas -v`` allocates them for sm_90 (the PTX's ``.reg``
declarations are only an upper bound). The figure-5.1 batch gathers are listed too (``batch
gather ...``, ``batch writer ...``: ``codegen.batch_gather``'s flat kernels).

For each kernel (per-image one-pass 2-D tile: uint8 RGB, float64 grey, packed uint8 RGBA;
batched 2-D tile uint8 RGB; tiled rows/cols passes, per image and batched) compiled for sm_90
with the argument types the launches pass: 64-bit integer multiplies (``mul.lo.s64``,
``mad.lo.s64``, ``mul.wide``), 32-bit ones, global loads, generic (no state space) loads and
stores, float64 FMAs and 64-bit integer divisions. Static counts (instructions in the text, not
executed ones): the index arithmetic of the inner loops shows as 64-bit multiplies, and loads
through a pointer whose space NVVM cannot prove as generic ``ld``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter

import numpy as np
from numba import types
from numba.np.numpy_support import from_dtype

from millipyde.graph.codegen import batch as codegen_batch
from millipyde.graph.codegen import gpu as codegen_gpu
from millipyde.graph.codegen.ptx import compile_ptx

CC = (9, 0)

PATTERNS = {
    "mul64": r"\bmul\.lo\.[su]64\b",
    "mad64": r"\bmad\.lo\.[su]64\b",
    "mul_wide": r"\bmul\.wide\.[su]32\b",
    "mad_wide": r"\bmad\.wide\.[su]32\b",
    "mul32": r"\bmul\.lo\.[su]32\b",
    "mad32": r"\bmad\.lo\.[su]32\b",
    "div64": r"\b(?:div|rem)\.[su]64\b",
    "ld_global": r"\bld\.global\.",
    "ld_generic": r"\bld\.(?!global|shared|param|local|const)[a-z0-9]+\b",
    "ld_shared": r"\bld\.shared\.",
    "st_global": r"\bst\.global\.",
    "st_generic": r"\bst\.(?!global|shared|param|local)[a-z0-9]+\b",
    "fma_f64": r"\bfma\.rn\.f64\b",
    "cvt_int_f64": r"\bcvt\.rn\.f64\.[su](?:8|16|32|64)\b",
    "div_f64": r"\bdiv\.rn\.f64\b",
}


# SASS opcode families counted with ``--sass``: ``IMAD`` the multiplies (``.HI``, ``.SHL``...),
# ``IMAD_WIDE`` the 32x32->64-bit ones, ``MOV`` includes ``IMAD.MOV`` (ptxas's register moves)
SASS_OPS = ("IMAD", "IMAD_WIDE", "MOV", "IADD3", "LEA", "SHF", "ISETP", "DFMA", "DADD", "DMUL",
            "I2F", "LDG", "LD", "LDS", "STG", "ST", "STS")


def arr(dtype: type, ndim: int) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def counts(ptx: str) -> dict[str, int]:
    """Occurrences of each of ``PATTERNS`` in ``ptx``."""
    return {k: len(re.findall(p, ptx)) for k, p in PATTERNS.items()}


def _family(op: str) -> str:
    if op.startswith("IMAD.MOV"):
        return "MOV"
    return "IMAD_WIDE" if op.startswith("IMAD.WIDE") else op.split(".")[0]


def _assemble(ptx: str, ptxas: str, out: str, *flags: str) -> subprocess.CompletedProcess:
    """``ptxas`` of ``ptx`` for sm_90 into ``out``.

    NVVM may write a newer ``.version`` than an older ``ptxas`` accepts; the text is then
    labelled with the version that ``ptxas`` names (these kernels use nothing newer).
    """
    src = out + ".ptx"
    for _ in range(2):
        with open(src, "w") as f:
            f.write(ptx)
        run = subprocess.run([ptxas, *flags, "-arch=sm_90", src, "-o", out],
                             capture_output=True, text=True)
        if run.returncode == 0:
            return run
        got = re.search(r"current version is '([0-9.]+)'", run.stderr)
        if not got:
            raise RuntimeError(run.stderr)
        ptx = re.sub(r"^\.version [0-9.]+", f".version {got.group(1)}", ptx, flags=re.M)
    raise RuntimeError(run.stderr)


def sass_counts(ptx: str, ptxas: str, cuobjdump: str) -> dict[str, int]:
    """Static SASS opcode counts of ``ptx`` assembled for sm_90 by ``ptxas``."""
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        _assemble(ptx, ptxas, cubin)
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout
    ops = Counter(_family(m.group(1)) for m in re.finditer(
        r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_.]*)", sass))
    return {f"sass_{k}": ops.get(k, 0) for k in SASS_OPS} | {"sass_total": sum(ops.values())}


def kernels() -> list[tuple[str, object, tuple]]:
    """(name, dispatcher, argument types) of each stencil kernel, as the launches call them."""
    tail = (types.boolean, types.float64, arr(np.uint8, 3), arr(np.int32, 2))
    idx = arr(np.int64, 1)
    u8, f64, taps1, taps2 = arr(np.uint8, 3), arr(np.float64, 3), arr(np.float64, 1), arr(
        np.float64, 2)
    hw = (types.int64, types.int64)
    flat = {np.uint8: arr(np.uint8, 1), np.float64: arr(np.float64, 1),
            np.uint32: arr(np.uint32, 1)}
    tiled = codegen_gpu.stencil_tiled_kernels(3, 3)
    btiled = codegen_batch.stencil_tiled_batch_kernels(3, 3)
    return [
        ("tile2d uint8 RGB", codegen_gpu.stencil_2d_kernel(3, 3, unsigned=True),
         (flat[np.uint8], flat[np.uint8], *hw, taps1, *tail)),
        ("tile2d float64 grey", codegen_gpu.stencil_2d_kernel(1, 1),
         (flat[np.float64], flat[np.float64], *hw, taps1, *tail)),
        ("tile2d packed RGBA", codegen_gpu.stencil_2d_kernel(4, 3, packed=True),
         (flat[np.uint32], flat[np.uint32], *hw, taps1, *tail)),
        ("batch tile2d uint8 RGB", codegen_batch.stencil_2d_batch_kernel(3, 3, unsigned=True),
         (flat[np.uint8], idx, flat[np.uint8], *hw, taps2, idx, *tail)),
        ("batch tile2d uint8 RGB u8",
         codegen_batch.stencil_2d_batch_kernel(3, 3, unsigned=True, u8=True),
         (flat[np.uint8], idx, flat[np.uint8], *hw, taps2, idx, *tail)),
        ("rows uint8 RGB", tiled[0], (u8, f64, taps1, types.int64)),
        ("cols uint8 RGB", tiled[1], (u8, f64, u8, taps1, types.boolean, types.float64)),
        ("batch rows uint8 RGB", btiled[0],
         (arr(np.uint8, 4), idx, arr(np.float64, 4), taps2, idx, types.int64)),
        ("batch cols uint8 RGB", btiled[1],
         (arr(np.uint8, 4), idx, arr(np.float64, 4), arr(np.uint8, 4), taps2, idx,
          types.boolean, types.float64)),
    ]


def ptxas_info(ptx: str, ptxas: str, cap: int = 0) -> dict[str, int]:
    """``ptxas -v``'s registers, spill store / load bytes and stack frame of ``ptx``'s (one)
    kernel; with ``cap``, assembled under ``--maxrregcount`` (as ``target.MAX_REGISTERS``
    caps it)."""
    flags = ("-v", f"--maxrregcount={cap}") if cap else ("-v",)
    with tempfile.TemporaryDirectory() as d:
        run = _assemble(ptx, ptxas, os.path.join(d, "k.o"), *flags)
    info = run.stderr
    regs = re.search(r"Used (\d+) registers", info)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    stack = re.search(r"(\d+) bytes stack frame", info)
    if not regs or not spill:
        raise RuntimeError(info)
    return {"regs": int(regs[1]), "spill_st": int(spill[1]), "spill_ld": int(spill[2]),
            "stack": int(stack[1]) if stack else 0}


def ptxas_registers(ptx: str, ptxas: str) -> int:
    """Registers per thread that ``ptxas`` allocates for the (one) kernel of ``ptx``."""
    return ptxas_info(ptx, ptxas)["regs"]


def gather_kernels() -> list[tuple[str, object, tuple]]:
    """The figure-5.1 batch gathers (``Generator.batches``), with their flat launch types."""
    from millipyde.graph.codegen import batch_gather, batch_writer
    from millipyde.graph.codegen.gather_sig import GatherSig

    i64, flat_u8, flat_f8 = arr(np.int64, 1), arr(np.uint8, 1), arr(np.float64, 1)
    lead = (i64, flat_u8, flat_f8) + (types.int64,) * 5
    writer_tail = (arr(np.float32, 1), i64, flat_f8, flat_f8, types.float64)
    rgb = GatherSig(3, "lut", True, True, "", lut_stages=(True, False), clip=False)
    grey = GatherSig(1, "chain", False, True, "", lut_stages=(False, False), clip=False)
    first = GatherSig(3, "lut", True, False, "", lut_stages=(True, False), clip=False)
    return [
        ("batch gather first RGB", batch_gather.gather_flat_kernel(first, "cuda"),
         (flat_u8, *lead, flat_u8)),
        ("batch gather first grey",
         batch_gather.gather_flat_kernel(GatherSig(3, "lut", True, False, "rgb2grey",
                                                   lut_stages=(True, False), clip=False),
                                         "cuda"), (flat_u8, *lead, flat_f8)),
        ("batch writer RGB", batch_writer.gather_writer_kernel(rgb, "cuda", False, True, 3,
                                                                "NCHW"),
         (flat_u8, *lead, *writer_tail)),
        ("batch writer grey", batch_writer.gather_writer_kernel(grey, "cuda", False, True, 3,
                                                                 "NCHW"),
         (flat_f8, *lead, *writer_tail)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true", help="one JSON line per kernel")
    ap.add_argument("-k", default="", help="only kernels whose name contains this")
    ap.add_argument("--sass", action="store_true",
                    help="also count SASS opcodes (needs ptxas and cuobjdump: PATH, or "
                         "$PTXAS / $CUOBJDUMP)")
    ap.add_argument("--regs", action="store_true",
                    help="also ptxas's registers per thread (needs ptxas: PATH or $PTXAS)")
    args = ap.parse_args()
    ptxas = os.environ.get("PTXAS") or shutil.which("ptxas")
    if args.regs and not ptxas:
        raise SystemExit("--regs needs ptxas")
    tools = ()
    if args.sass:
        tools = (os.environ.get("PTXAS") or shutil.which("ptxas"),
                 os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump"))
        if not all(tools):
            raise SystemExit(f"--sass needs ptxas and cuobjdump, found {tools}")
    for name, fn, argtys in kernels() + gather_kernels():
        if args.k not in name:
            continue
        ptx = compile_ptx(fn.py_func, argtys, CC)
        row = {"kernel": name, **counts(ptx)}
        if args.regs:
            row["regs"] = ptxas_registers(ptx, ptxas)
        if tools:
            row |= sass_counts(ptx, *tools)
        print(json.dumps(row) if args.json else
              f"{name:24s} " + " ".join(f"{k}={v}" for k, v in row.items() if k != "kernel"),
              flush=True)


if __name__ == "__main__":
    main()
