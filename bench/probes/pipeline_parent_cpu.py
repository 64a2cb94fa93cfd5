"""The driving process's CPU an input of ``Pipeline(processes=...)``, in steady state.

    MILLIPYDE_BACKEND=cpu python3 bench/probes/pipeline_parent_cpu.py [--inputs 2000]

``--inputs`` copies of a 32x32 RGB image through the thesis 5-op chain
(``bench_pipeline.FIVE``) on device 0, with worker processes and without: after three warm
runs, seven runs over the last run's outputs (rows of chunk buffers: nothing stacked or
exported an input) alternated with seven over fresh clones; the least CPU time of this
process (every thread of it, not the workers') an input of each. This is the host work left
under the one GIL: 3.6x on four GPUs needs at most 5.3 us an input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, spread_inputs  # noqa: E402
from millipyde.pipeline import processes  # noqa: E402


def _cpu(xs: list, ops: list, procs: bool) -> float:
    c0 = time.process_time()
    mp.Pipeline(xs, ops, device=0, processes=procs).run()
    return time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    n = args.inputs
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    host = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    base = mp.gpuimage(host)
    base._materialize()
    for procs in (True, False):
        xs = spread_inputs([base], n, False, 1)
        for _ in range(3):
            _cpu(xs, ops, procs)
        over, fresh = [], []
        for _ in range(args.rounds):
            over.append(_cpu(xs, ops, procs))
            fresh.append(_cpu(spread_inputs([base], n, False, 1), ops, procs))
        print(f"processes={procs}: this process's CPU an input: over outputs "
              f"{min(over) / n * 1e6:.2f} us, fresh inputs {min(fresh) / n * 1e6:.2f} us",
              flush=True)
    processes.close()


if __name__ == "__main__":
    main()
