"""Thread CPU of each kernel of a cpu-backend Pipeline of the 5-op chain (bench_pipeline's part
D: 1000 32x32 RGB inputs), beside the run's wall and process CPU an input.

    NUMBA_NUM_THREADS=1 MILLIPYDE_BACKEND=cpu python bench/probes/cpu_pipeline_kernels.py

Each launch's thread CPU is taken around ``CpuBackend._run_cpu`` in the thread that calls it:
with ``NUMBA_NUM_THREADS=1`` a launch is one part, run in that thread, so the figure is the
kernel's whole cost. Run it in any tree (it imports ``millipyde`` from the working directory).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path.cwd()))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE  # noqa: E402

FIVE = [("gaussian", (2,)), ("adjust_gamma", (2,)), ("fliplr", ()), ("rotate", (45,)),
        ("rgb2grey", ())]


def main() -> None:
    from skimage import data, transform

    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=4)
    args = ap.parse_args()
    n = args.inputs
    host = np.clip(np.rint(transform.resize(data.astronaut(), (32, 32, 3),
                                            preserve_range=True)), 0, 255).astype(np.uint8)
    acc: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    run_cpu = type(ACTIVE)._run_cpu

    def timed(self, kernel, kargs, items):
        c0 = time.thread_time()
        try:
            return run_cpu(self, kernel, kargs, items)
        finally:
            a = acc[Path(kernel.py_func.__code__.co_filename).stem[-8:] + "."
                    + kernel.__name__]
            a[0] += time.thread_time() - c0
            a[1] += 1

    type(ACTIVE)._run_cpu = timed
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    best = None
    for rep in range(args.repeat):
        xs = [mp.gpuimage(host) for _ in range(n)]
        for x in xs:
            x._materialize()
        acc.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        mp.Pipeline(xs, ops).run()
        for x in xs:
            x._materialize()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"run {rep}: wall {wall / n * 1e6:.1f} us an input, process CPU "
              f"{cpu / n * 1e6:.1f} us an input", flush=True)
        if rep and (best is None or cpu < best[1]):
            best = (wall, cpu, {k: tuple(v) for k, v in acc.items()})
    wall, cpu, kernels = best
    print(f"least process CPU (runs after the first): {cpu / n * 1e6:.1f} us an input")
    for name, (t, calls) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
        print(f"  kernel {name:32s} {calls} launches: thread CPU {t / n * 1e6:.1f} us an input")
    rest = cpu - sum(t for t, _ in kernels.values())
    print(f"  everything else (host, all threads): {rest / n * 1e6:.1f} us an input")


if __name__ == "__main__":
    main()
