"""Registers and spills of a policy batch's arena gathers for sm_90 (no GPU needed: NVVM + ptxas).

    MILLIPYDE_BACKEND=cpu python -m bench.probes.policy_regs [--policy randaugment|trivial|both]
        [--size 256] [-k TEXT] [--json] [--source DIR]

The recipe of ``bench_policies.py`` (six photographs, random resized crop 224, flip, the policy;
float32 NCHW batches with ImageNet's mean and std). One batch is *recorded* (the arena
recorder's launches, nothing run), and every kernel its ``batch_arena.write`` would launch is
generated for the CUDA target as the GPU compiles it: each stage's gather (into a uint8 stage),
each reduction group's arena statistic gather (``codegen.stat``), each launch's gather into the
NCHW batch or into its own-size temporary (``codegen.arena``). Each is compiled to PTX with the
argument types the launches pass (``codegen.ptx.compile_ptx``) and assembled by ``ptxas -v
-arch=sm_90`` (``stencil_ptx._assemble``: a newer PTX ``.version`` relabelled): registers a
thread, spill stores and loads (bytes), stack frame. Needs ``ptxas`` on PATH or ``$PTXAS``.

An H200 with 256-thread blocks holds ``65536 // (256 * regs rounded up to 8)`` blocks an SM:
one above 128 registers, two at <= 128, three at <= 80 (the ``blocks/SM`` column).

``--source DIR`` writes each kernel's generated source there (for variants by hand); ``--cap N``
also assembles each under ``--maxrregcount=N`` and prints its spills (static bytes, not executed
ones).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
from numba import types  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_policies import _recipe  # noqa: E402
from bench.bench_recipes import _photos  # noqa: E402
from bench.probes.stencil_ptx import arr, ptxas_info  # noqa: E402
from millipyde.graph.codegen import arena as codegen_arena  # noqa: E402
from millipyde.graph.codegen import stat as codegen_stat  # noqa: E402
from millipyde.graph.codegen.loader import load  # noqa: E402
from millipyde.graph.codegen.ptx import CC, compile_ptx  # noqa: E402


def _gather_types(layout: str, dtype: np.dtype) -> tuple:
    """The argument types of an arena gather's launch (``batch_arena.write``, ``_run_stages``)."""
    src, two = arr(dtype, 1), arr(np.int64, 2)
    f2 = arr(np.float64, 2)
    if layout:
        return (src, two, f2, f2, arr(np.float32, 4), arr(np.int64, 1), arr(np.float64, 1),
                arr(np.float64, 1), types.float64)
    return (src, two, arr(dtype, 4), f2, f2)


def _stat_types(k: int, dtype: np.dtype) -> tuple:
    return (arr(dtype, 1), arr(np.int64, 2), arr(np.float64, 2), arr(np.float64, 2),
            *[types.int64] * (k * len(codegen_stat.ARENA_STAT_COLS)))


def recorded_kernels(policy: object, size: int) -> list[tuple[str, str, tuple]]:
    """(name, CUDA source, argument types) of each distinct kernel one recorded batch of the
    recipe with ``policy`` launches, in launch order (the name ends with how many of the
    batch's members its launches run)."""
    from millipyde.training import batch_arena
    from millipyde.training.batch_chain import ForkStage
    from millipyde.training.batches import arena_recorder

    hosts = _photos()
    gen = mp.Generator([mp.gpuimage(h) for h in hosts], _recipe(policy, 224), seed=0)
    rec = arena_recorder(gen._state)
    if rec is None:
        raise SystemExit("the recipe is not recorded into arena launches")
    launches, left = rec.record(list(range(size)))
    out: dict[tuple, tuple[str, str, tuple]] = {}
    members: dict[tuple, int] = {}

    def gather(sig, gates: bool, layout: str, dtype: np.dtype, what: str, m: int) -> None:
        key = ("g", sig, gates, layout)
        members[key] = members.get(key, 0) + m
        if key not in out:
            src = codegen_arena.arena_gather_source(sig, "cuda", False, gates, layout, 3)
            out[key] = (f"{what} ({len(sig.post + sig.pre + sig.grey_ops)} ops)", src,
                        _gather_types(layout, dtype))

    def reduce(prefixes: list, reads: list, gates: bool, dtype: np.dtype, m: int) -> None:
        for grp in batch_arena.reduction_groups(prefixes, reads):
            prs = [prefixes[i] for i in grp]
            parts = tuple((pr.sig, pr.stat) for pr in prs)
            key = ("s", parts, gates)
            members[key] = members.get(key, 0) + m
            if key in out:
                continue
            src = (codegen_stat.arena_stats_source(parts, "cuda", False, gates) if len(grp) > 1
                   else codegen_stat.arena_stat_source(parts[0][0], parts[0][1], "cuda", False,
                                                       gates))
            names = ",".join(pr.stat for pr in prs)
            n = len(prs[-1].sig.post + prs[-1].sig.pre + prs[-1].sig.grey_ops)
            out[key] = (f"statistic {names} ({n} ops)", src, _stat_types(len(grp), dtype))

    for L in launches:
        for st in L.stages:
            if isinstance(st, ForkStage):
                raise SystemExit("fork stages (AugMix) are not walked by this probe")
            reduce(st.prefixes, st.reads, L.gates, L.dtype, len(L.pos))
            gather(st.sig, L.gates, "", L.dtype, "gather into a stage", len(L.pos))
        reduce(L.prefixes, L.reads, L.gates, L.dtype, len(L.pos))
        if L.hw == (224, 224) and L.dtype in (np.uint8, np.float64):
            gather(L.sig, L.gates, "NCHW", L.dtype, "gather into the NCHW batch", len(L.pos))
        else:
            gather(L.sig, L.gates, "", L.dtype, "gather into a temporary", len(L.pos))
    if left:
        print(f"({len(left)} members per output, not in arena launches)")
    return [(f"{name} x{members[key]}", src, tys) for key, (name, src, tys) in out.items()]


def blocks_per_sm(regs: int, threads: int = 256) -> int:
    """Blocks of ``threads`` an sm_90 SM holds by registers (allocated per warp in 256s)."""
    per_warp = -(-regs * 32 // 256) * 256
    return min(65536 // (per_warp * (threads // 32)), 2048 // threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="both", choices=["randaugment", "trivial", "both"])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("-k", default="", help="only kernels whose name contains this")
    ap.add_argument("--json", action="store_true", help="one JSON line per kernel")
    ap.add_argument("--source", type=Path, default=None, help="write the sources here")
    ap.add_argument("--cap", type=int, default=0,
                    help="also assemble under this register cap: its spills (static bytes)")
    a = ap.parse_args()
    ptxas = os.environ.get("PTXAS") or shutil.which("ptxas")
    if not ptxas:
        raise SystemExit("needs ptxas (PATH or $PTXAS)")
    pols = {"randaugment": lambda: mp.RandAugment(2, 9), "trivial": mp.TrivialAugmentWide}
    names = list(pols) if a.policy == "both" else [a.policy]
    for pname in names:
        print(f"# {pname}, batches of {a.size}")
        for i, (name, src, argtys) in enumerate(recorded_kernels(pols[pname](), a.size)):
            if a.k not in name:
                continue
            if a.source:
                a.source.mkdir(parents=True, exist_ok=True)
                (a.source / f"{pname}_{i}.py").write_text(src)
            ptx = compile_ptx(load(src, "cuda").kernel.py_func, argtys, CC)
            row = {"policy": pname, "kernel": name, **ptxas_info(ptx, ptxas)}
            row["blocks_sm"] = blocks_per_sm(row["regs"])
            if a.cap:
                capped = ptxas_info(ptx, ptxas, a.cap)
                row |= {f"cap_{k}": v for k, v in capped.items() if k != "regs"}
            header = src.splitlines()[0]
            row["sig"] = header[header.index(":") + 2:] if ":" in header else header
            print(json.dumps(row) if a.json else
                  f"{i:2d} {name:56s} regs={row['regs']:3d} spill_st={row['spill_st']} "
                  f"spill_ld={row['spill_ld']} stack={row['stack']} "
                  f"blocks/SM={row['blocks_sm']}"
                  + (f" | cap {a.cap}: spill_st={row['cap_spill_st']} "
                     f"spill_ld={row['cap_spill_ld']} stack={row['cap_stack']}" if a.cap else ""),
                  flush=True)


if __name__ == "__main__":
    main()
