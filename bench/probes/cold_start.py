"""Where a cold start's first batch goes: worker start-up steps and compile jobs (GPU).

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/cold_start.py [--processes 16 8] [--repeat 1] [--alone]

Per ``--processes`` value (``precompile.MAX_PROCESSES``), ``--repeat`` fresh child processes,
each with its own empty kernel cache, run ``bench_batches.cold_child`` (the figure-5.1 chain,
batches of 256 of 512x512 RGB): the first batch's seconds, the second seed's compiles, and
``precompile``'s report (jobs, the last job, per start-up step of the workers the first and
last time one finished it). ``--alone``: first one worker's start-up steps with nothing else
running (``compile_worker.command("cuda")``, one job that fails at once).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys
sys.path.insert(0, {root!r})
from millipyde import precompile
precompile.MAX_PROCESSES = {n}
from bench.bench_batches import cold_child
print(json.dumps(cold_child(256, 512, 0)))
"""


def alone() -> dict:
    """One worker's start-up steps, nothing else running (seconds since it was spawned)."""
    sys.path.insert(0, str(ROOT))
    from millipyde.training.precompile_workers import CompileWorkers

    workers = CompileWorkers(1, warm="cuda")
    workers.submit(("/nonexistent/millipyde_gen_cuda_0.py", "cuda", "kernel", ()))
    workers.close(timeout=300)
    return workers.starts[0] if workers.starts else {"results": workers.results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--processes", type=int, nargs="+", default=[16])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--alone", action="store_true")
    args = ap.parse_args()
    if args.alone:
        print("one worker alone:", json.dumps(alone()), flush=True)
    for n in args.processes:
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as d:
                r = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), n=n)],
                                   env={**os.environ, "MILLIPYDE_CACHE_DIR": d},
                                   capture_output=True, text=True, timeout=600)
            if r.returncode:
                print(f"processes {n}: failed: {r.stderr[-2000:]}", flush=True)
                continue
            got = json.loads(r.stdout.strip().splitlines()[-1])
            pre = got.get("precompile", {})
            print(f"processes {n}: first batch {got['seed0_first_batch_s']:.2f} s, second seed "
                  f"{got['seed1_first_batch_s']:.3f} s, "
                  f"{got['seed1_compiled_total'] - got['seed0_compiled_total']} compiles, "
                  f"{got['seed1_cache_files_written']} files; "
                  f"jobs {pre.get('jobs')} failed {pre.get('failed')}, recorded "
                  f"{pre.get('record_seconds', 0):.2f} s, precompile {pre.get('seconds', 0):.2f} s",
                  flush=True)
            for k in ("last_job", "worker_start", "ready_seconds", "slowest", "errors"):
                print(f"  {k}: {json.dumps(pre.get(k))}", flush=True)


if __name__ == "__main__":
    main()
