"""Seconds to compile each generated CUDA kernel to PTX (sm_90), per device-function form.

    MILLIPYDE_BACKEND=cpu python -m bench.probes.compile_times [--form forceinline|inline|plain]
        [-k NAME] [--json]

No GPU needed (``millipyde.graph.codegen.ptx``): typing, lowering and NVVM are the CPU work a
GPU process does on its first launch of a kernel (less loading the PTX). ``--form`` rewrites the
generated modules' device-function decorator: ``forceinline`` (the shipped one: NVVM inlines),
``inline`` (Numba inlines at its IR level, the form before s10), ``plain`` (``cuda.jit(device=
True)``: NVVM decides). Each kernel reports its seconds and the functions its PTX still calls.
The first compile of a process also pays Numba's start-up: a small grey gather is compiled
first, untimed.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench.probes.stencil_ptx import arr
from bench.probes.stencil_ptx import kernels as stencil_kernels
from millipyde.graph.codegen import batch as codegen_batch
from millipyde.graph.codegen import target
from millipyde.graph.codegen.gather import gather_kernel
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams
from millipyde.graph.codegen.ptx import calls, compile_ptx

FORMS = {"forceinline": target.DEVICE_DECORATOR, "inline": "cuda.jit(device=True, inline=True)",
         "plain": "cuda.jit(device=True)"}


def use_form(form: str) -> None:
    """Make the CUDA modules generated from now on declare device functions as ``form``."""
    head = target.HEADER["cuda"]
    if head.count(target.DEVICE_DECORATOR) != 1:
        raise RuntimeError("the CUDA header no longer names DEVICE_DECORATOR once")
    # the codegen modules hold the same dict: every generator sees the new header
    target.HEADER["cuda"] = head.replace(target.DEVICE_DECORATOR, FORMS[form])


def gathers() -> list[tuple[str, object, tuple]]:
    """(name, dispatcher, argument types): a per-image and a batched RGB sampler gather."""
    from numba import types

    sig = GatherSig(3, "lut", True, True, "")
    u8 = arr(np.uint8, 3)
    per_image = (u8, u8, u8) + (types.float64,) * gather_nparams(sig)
    bsig = GatherSig(3, "lut", True, True, "")
    batched = (arr(np.uint8, 4), arr(np.int64, 1), arr(np.uint8, 4), arr(np.uint8, 4),
               arr(np.float64, 2))
    return [("gather uint8 RGB sampler", gather_kernel(sig, "cuda"), per_image),
            ("batch gather uint8 RGB sampler", codegen_batch.gather_batch_kernel(bsig, "cuda"),
             batched)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--form", choices=sorted(FORMS), default="forceinline")
    ap.add_argument("-k", default="", help="only kernels whose name contains this")
    ap.add_argument("--json", action="store_true", help="one JSON line per kernel")
    args = ap.parse_args()
    from numba import types

    use_form(args.form)
    todo = gathers() + stencil_kernels()
    # Numba's start-up, untimed: a kernel none of the timed ones shares device functions with
    warm = GatherSig(1, "lut", True, False, "")
    compile_ptx(gather_kernel(warm, "cuda").py_func, (arr(np.uint8, 3),) * 3
                + (types.float64,) * gather_nparams(warm))
    total = 0.0
    for name, fn, argtys in todo:
        if args.k not in name:
            continue
        t0 = time.perf_counter()
        ptx = compile_ptx(fn.py_func, argtys)
        sec = time.perf_counter() - t0
        total += sec
        row = {"kernel": name, "form": args.form, "seconds": round(sec, 2),
               "calls": len(calls(ptx))}
        print(json.dumps(row) if args.json else
              f"{name:32s} {args.form:12s} {sec:7.2f} s  calls={row['calls']}", flush=True)
    print(f"{'total':32s} {args.form:12s} {total:7.2f} s", flush=True)


if __name__ == "__main__":
    main()
