"""Where the driving process's CPU goes with ``Pipeline(processes=True)``, by phase.

    MILLIPYDE_BACKEND=cpu python3 bench/probes/pipeline_parent_phases.py

2000 copies of a 32x32 RGB image through ``bench_pipeline.FIVE`` on device 0, each run over
the last run's outputs (steady state: nothing stacked or exported an input); per phase the
thread CPU time of the calls wrapped (grouping, the chunk's message, its reply made values,
commits, the input checks), an input, in the run of least total CPU of seven (``rest``: the
run loop, threads, the Pipeline object). On the cpu backend the chunk's message includes
making its output region (a memfd mapping, ~0.3 ms a chunk); on a GPU that is a pool
allocation and an IPC export.
"""

import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
import millipyde.pipeline as P  # noqa: E402
from bench.bench_pipeline import FIVE, spread_inputs  # noqa: E402
from millipyde.pipeline import processes  # noqa: E402
from millipyde.pipeline import run as R  # noqa: E402

acc: collections.Counter = collections.Counter()


def wrap(obj: object, name: str, label: str) -> None:
    f = getattr(obj, name)

    def timed(*a: object, **k: object) -> object:
        t = time.thread_time()
        try:
            return f(*a, **k)
        finally:
            acc[label] += time.thread_time() - t

    setattr(obj, name, timed)


wrap(R.Run, "units", "units (grouping)")
wrap(R.Run, "_commit", "commit")
wrap(processes.ProcessChunks, "launch", "launch (send)")
wrap(processes.ProcessChunks, "finished", "reply -> values")
wrap(R.Run, "_settle_sources", "settle")
wrap(P, "check_inputs", "check_inputs")
wrap(P, "check_methods", "check_methods")
ops = [mp.Operation(n, *a) for n, a in FIVE]
host = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
b = mp.gpuimage(host)
b._materialize()
N = 2000
xs = spread_inputs([b], N, False, 1)
for _ in range(3):
    mp.Pipeline(xs, ops, device=0, processes=True).run()
best = None
for _ in range(7):
    acc.clear()
    c0 = time.process_time()
    mp.Pipeline(xs, ops, device=0, processes=True).run()
    tot = time.process_time() - c0
    if best is None or tot < best[0]:
        best = (tot, dict(acc))
tot, parts = best
print(f"total {tot/N*1e6:.2f} us an input")
for k, v in sorted(parts.items(), key=lambda e: -e[1]):
    print(f"  {k}: {v/N*1e6:.2f} us")
print(f"  rest: {(tot - sum(parts.values()))/N*1e6:.2f} us")
processes.close()
