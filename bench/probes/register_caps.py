"""Register caps of the batched gathers against batch rates (GPU only).

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/register_caps.py [--caps none,128,96,64] [--rounds 2] [--batches 300]

The arena gathers of a policy batch hold every op of the policy behind per-image gates, and
the compiler gives them 140-206 registers a thread: one 256-thread block an SM, 12.5%
occupancy (ncu, bench/RESULTS.md 2026-11-29). This probe sets
``target.MAX_REGISTERS`` of ``--kinds`` (the arena and arena statistic gathers) to each cap
in turn, in a fresh process (the cap is in the generated source, so each cap compiles its own
kernels), and measures in that process:
RandAugment(2, 9) and TrivialAugmentWide (``bench_policies.millipyde_rate``), the ImageNet
recipe (``bench_recipes.millipyde_batches``) and the figure-5.1 batches
(``bench_batches.rate``), img/s. The caps alternate over ``--rounds`` rounds. Each child
compiles its kernels cold (the uncapped RandAugment child took 42 s on an H200, a capped one
more than 60 s): one 600-s device call holds three or four children, so give ``--timeout``
room and few caps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("arena", "stat")  # ``--kinds``: the kernel kinds the cap applies to
ROWS = ("randaugment", "trivial", "imagenet", "figure_5_1")  # ``--rows``
sys.path.insert(0, str(ROOT))


def child(cap: str, batches: int, kinds: tuple[str, ...] = KINDS,
          rows: tuple[str, ...] = ROWS) -> dict:
    from millipyde.graph.codegen import target

    for kind in kinds:
        target.MAX_REGISTERS[kind] = None if cap == "none" else int(cap)
    import millipyde as mp
    from bench.bench_batches import _images, rate
    from bench.bench_policies import millipyde_rate
    from bench.bench_recipes import _photos, millipyde_batches

    hosts = _photos()
    out: dict = {"cap": cap}
    t0 = time.perf_counter()
    runs = {
        "randaugment": lambda: millipyde_rate(hosts, mp.RandAugment(2, 9), 256, batches, 224)[0],
        "trivial": lambda: millipyde_rate(hosts, mp.TrivialAugmentWide(), 256, batches, 224)[0],
        "imagenet": lambda: millipyde_batches(hosts, 256 * batches)["img_s"],
        "figure_5_1": lambda: rate(_images(512), 256, batches, 0),
    }
    for row in rows:
        t1 = time.perf_counter()
        out[row] = runs[row]()
        print(f"  cap {cap} {row}: {out[row]:,.0f} img/s ({time.perf_counter() - t1:.1f} s)",
              file=sys.stderr, flush=True)
    out["seconds"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caps", default="none,128,96,64")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a child")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="kinds of target.MAX_REGISTERS the cap applies to")
    ap.add_argument("--rows", default=",".join(ROWS), help="workloads, of " + ",".join(ROWS))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child, a.batches, tuple(a.kinds.split(",")),
                               tuple(a.rows.split(",")))))
        return
    rows = []
    for r in range(a.rounds):
        caps = a.caps.split(",")
        for cap in caps if r % 2 == 0 else caps[::-1]:
            try:
                p = subprocess.run([sys.executable, __file__, "--child", cap,
                                    "--batches", str(a.batches), "--kinds", a.kinds,
                                    "--rows", a.rows], stdout=subprocess.PIPE, text=True,
                                   timeout=a.timeout, env=os.environ.copy())
                row = json.loads(p.stdout.strip().splitlines()[-1])
            except (subprocess.TimeoutExpired, ValueError, IndexError) as err:
                row = {"cap": cap, "error": repr(err)[:200]}
            row["round"] = r
            rows.append(row)
            print(json.dumps(row), flush=True)
    names = a.rows.split(",")
    print("cap   round  " + "  ".join(f"{n:>11s}" for n in names) + "  (img/s)")
    for row in rows:
        if "error" in row:
            print(f"{row['cap']:5s} {row['round']:5d}  {row['error']}")
            continue
        print(f"{row['cap']:5s} {row['round']:5d}  "
              + "  ".join(f"{row[n]:11,.0f}" for n in names))


if __name__ == "__main__":
    main()
