"""How many of a cpu-backend Pipeline's threads want a core, sampled through a run of the 5-op
chain (bench_pipeline's part D: 1000 32x32 RGB inputs), beside its wall and process CPU.

    MILLIPYDE_BACKEND=cpu python bench/probes/cpu_pipeline_demand.py [--runs 12]

A child process runs the Pipeline ``--runs`` times; this process reads the state of each of
the child's threads from ``/proc`` meanwhile (R: running or waiting for a core; S: asleep,
e.g. waiting for the GIL or for another thread's part of a launch) and counts, over the
samples that fall inside the runs, how many threads were in R. On two cores, a sample with
fewer than two is a core the run left idle, whatever else the machine runs: the figure holds
on a loaded machine, where the wall does not. Linux only. Run it in any tree (the child
imports ``millipyde`` from the working directory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = """
import json, sys, time
sys.path.insert(0, {cwd!r})
import numpy as np
import millipyde as mp
host = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
ops = [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2), mp.Operation("fliplr"),
       mp.Operation("rotate", 45), mp.Operation("rgb2grey")]
spans = []
for i in range({runs} + 1):  # the first run compiles and is not counted
    xs = [mp.gpuimage(host) for _ in range({inputs})]
    for x in xs:
        x._materialize()
    if i == 1:
        print("ready", flush=True)
    t0, c0 = time.monotonic(), time.process_time()
    mp.Pipeline(xs, ops).run()
    if i:
        spans.append((t0, time.monotonic(), time.process_time() - c0))
json.dump(spans, open({out!r}, "w"))
"""


def _runnable(pid: int) -> int:
    """Threads of ``pid`` in state R now."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        n += stat[stat.rindex(")") + 2] == "R"
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--inputs", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "spans.json")
        code = _CHILD.format(cwd=str(Path.cwd()), runs=args.runs, inputs=args.inputs, out=out)
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            sys.exit(f"the child process failed (exit status {child.wait()})")
        samples = []
        while child.poll() is None:
            try:
                samples.append((time.monotonic(), _runnable(child.pid)))
            except OSError:  # the child ended
                break
            time.sleep(0.0002)  # the sampler's own share of a core stays small
        if child.wait():
            sys.exit(f"the child process failed (exit status {child.returncode})")
        spans = json.load(open(out))
    counts: dict[int, int] = {}
    for t0, t1, _ in spans:
        for t, n in samples:
            if t0 <= t <= t1:
                counts[n] = counts.get(n, 0) + 1
    total = sum(counts.values())
    per = 1e6 / args.inputs
    walls = sorted((t1 - t0) * per for t0, t1, _ in spans)
    cpus = sorted(c * per for _, _, c in spans)
    print(f"{args.runs} runs: wall min {walls[0]:.1f} median {walls[len(walls) // 2]:.1f} us an "
          f"input; process CPU min {cpus[0]:.1f} median {cpus[len(cpus) // 2]:.1f}; load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{total} samples in the runs: " + ", ".join(
        f"{k} threads in R {100 * counts[k] / total:.0f}%" for k in sorted(counts)))
    mean = sum(k * v for k, v in counts.items()) / total
    idle = sum(v for k, v in counts.items() if k < 2) / total
    print(f"mean threads in R {mean:.2f}; samples with fewer than 2: {100 * idle:.0f}%")


if __name__ == "__main__":
    main()
