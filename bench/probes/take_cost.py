"""What taking one ``next()`` output costs the consumer on a GPU: part C's ``take``.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/take_cost.py [--outputs 4096] [--rounds 3]

Part C of ``bench_pipeline.py engine`` hands each output of the thesis recipe's Generator
(six 512x512 photographs, its colorize an opaque callable) to ``torch.as_tensor(x,
device="cuda")`` as it comes. Here the outputs are made first (listed), then, per output,
in turns over the same list: ``torch.as_tensor`` of it (fresh outputs, as the take meets
them), ``x.__cuda_array_interface__`` alone and ``torch.as_tensor`` again (where the tree
keeps the interface dict: its kept cost), ``torch.as_tensor`` of its device array, of an
object holding the same dict ready (with and without its stream), ``torch.from_dlpack`` of
it, a torch tensor's row ``t[i]``; and the whole Generator's ``next()`` loop with the take
(``torch.as_tensor``, and ``torch.from_dlpack``) for the wall time per output beside them.
Medians over the rounds, us an output. To run it against an older tree, copy it into that
tree's ``bench/probes`` (it imports the tree it sits in).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import part_c_photos  # noqa: E402
from millipyde.training import recipes  # noqa: E402


class _Cai:
    """An object holding a ready CUDA Array Interface dict (what a cached interface costs)."""

    def __init__(self, cai: dict, drop_stream: bool) -> None:
        if drop_stream:
            cai = {k: v for k, v in cai.items() if k != "stream"}
        self.__cuda_array_interface__ = cai


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outputs", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import torch

    hosts = part_c_photos(512)
    ops = recipes.figure_5_1_operations()

    def gen(seed: int) -> mp.Generator:
        return mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=a.outputs,
                            seed=seed, device=0)

    with gen(3) as g:  # warm-up: compiles
        for x in g:
            torch.as_tensor(x, device="cuda")
    rows: dict[str, list[float]] = {}
    for r in range(a.rounds):
        with gen(10 + r) as g:
            t0 = time.perf_counter()
            outs = [torch.as_tensor(x, device="cuda") for x in g]
            torch.cuda.synchronize()
            rows.setdefault("next() + take, wall", []).append(time.perf_counter() - t0)
        with gen(30 + r) as g:
            t0 = time.perf_counter()
            outs = [torch.from_dlpack(x) for x in g]
            torch.cuda.synchronize()
            rows.setdefault("next() + from_dlpack, wall", []).append(time.perf_counter() - t0)
        with gen(20 + r) as g:
            t0 = time.perf_counter()
            made = list(g)
            torch.cuda.synchronize()
            rows.setdefault("next() alone, wall", []).append(time.perf_counter() - t0)
        # first on fresh outputs (as the take meets them: a tree that keeps the interface
        # dict builds it here), then again (a kept dict's cost)
        t0 = time.perf_counter()
        outs = [torch.as_tensor(x, device="cuda") for x in made]
        rows.setdefault("torch.as_tensor(gpuimage)", []).append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for x in made:
            x.__cuda_array_interface__  # noqa: B018  (the property's cost is the row)
        rows.setdefault("__cuda_array_interface__", []).append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        outs = [torch.as_tensor(x, device="cuda") for x in made]
        rows.setdefault("torch.as_tensor(gpuimage), again", []).append(time.perf_counter() - t0)
        bufs = [x._materialize() for x in made]
        t0 = time.perf_counter()
        outs = [torch.as_tensor(b, device="cuda") for b in bufs]
        rows.setdefault("torch.as_tensor(its device array)", []).append(
            time.perf_counter() - t0)
        cais = [dict(b.__cuda_array_interface__) for b in bufs]
        for name, drop in (("torch.as_tensor(a cached interface dict)", False),
                           ("torch.as_tensor(cached dict, no stream)", True)):
            objs = [_Cai(c, drop) for c in cais]
            t0 = time.perf_counter()
            outs = [torch.as_tensor(o, device="cuda") for o in objs]
            rows.setdefault(name, []).append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        outs = [torch.from_dlpack(x) for x in made]
        rows.setdefault("torch.from_dlpack(gpuimage)", []).append(time.perf_counter() - t0)
        whole = torch.empty((len(made), *made[0].shape), device="cuda")
        t0 = time.perf_counter()
        outs = [whole[i] for i in range(len(made))]
        rows.setdefault("a torch tensor's row (t[i])", []).append(time.perf_counter() - t0)
        del outs, made, bufs, cais, objs, whole
    n = a.outputs
    for name, ts in rows.items():
        us = [t / n * 1e6 for t in ts]
        print(f"{name:40s} {statistics.median(us):8.2f} us an output "
              f"({' / '.join(f'{u:.2f}' for u in us)})")


if __name__ == "__main__":
    main()
