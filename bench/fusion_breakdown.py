"""Where the fusion bench's time goes: GPU kernels (CUPTI, through torch.profiler) vs host.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/fusion_breakdown.py

Runs the thesis 5-op chain (bench_fusion's) fused and with fusion off, ``--repeat`` times each
under torch.profiler, and prints per variant: the wall time per chain, the summed GPU kernel time
per chain, and each kernel's mean duration. Wall minus kernels is host time the GPU waited for.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

import millipyde as mp
from bench.bench_fusion import _chain, chain_input
from millipyde.graph import execute, schedule


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--width", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    from torch.profiler import ProfilerActivity, profile

    _, base = chain_input(args.width)
    for fuse in (True, False):
        inputs = [base.clone() for _ in range(args.repeat + 2)]
        for x in inputs:
            x._materialize()
        mp.synchronize()
        for x in inputs[:2]:  # warm-up: compile, pool
            _chain(x)
            with schedule.fusion(fuse):
                execute.materialize(x._node)
        mp.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for x in inputs[2:]:
                _chain(x)
                with schedule.fusion(fuse):
                    execute.materialize(x._node)
            mp.synchronize()
            wall = (time.perf_counter() - t0) * 1e3 / args.repeat
        per = collections.defaultdict(list)
        for ev in prof.events():
            if ev.device_type.name == "CUDA" and "memcpy" not in ev.name.lower():
                per[ev.name].append(ev.device_time_total / 1e3)
        total = sum(sum(v) for v in per.values()) / args.repeat
        print(f"== fusion {'on' if fuse else 'off'}: wall {wall:.3f} ms/chain, "
              f"kernels {total:.3f} ms/chain, host-bound gap {wall - total:.3f} ms")
        for name, ds in sorted(per.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {len(ds) / args.repeat:4.1f}x {np.mean(ds):8.3f} ms  {name[:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
