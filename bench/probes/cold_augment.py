"""Cold ``millipyde augment`` per recipe and source tree: import, wall, and compiling ahead.

    source bench/gpu_env.sh
    python3 bench/probes/cold_augment.py --tree new=. --tree base=PATH [--repeat 2]
        [--recipes imagenet thesis detection] [-n 48] [--budget 110]

Per repeat, recipe and tree (interleaved, so that trees meet the same load), a fresh process
with an empty ``MILLIPYDE_CACHE_DIR`` times, in-process, ``from millipyde import cli``
(``import_s``) and then ``cli.main(["augment", "-o", OUT, "-n", N, "--seed", "0", "--recipe",
R, "-q"])`` (``wall_s``: both; when compiling ahead began and ended, in seconds since the
import began), and prints ``precompile.last`` (jobs, the in-process share,
how long before compiling ahead its workers were started, their start-up steps, the last job
and the slowest). A run starts only while ``--budget`` seconds have not passed; a summary
table (best and mean wall per recipe and tree) ends the output.
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

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from millipyde import cli
t1 = time.perf_counter()
from millipyde.training import precompile
real, marks = precompile._compile_ahead, []


def timed(*a, **k):
    marks.append(time.perf_counter() - t0)
    try:
        return real(*a, **k)
    finally:
        marks.append(time.perf_counter() - t0)


precompile._compile_ahead = timed
rc = cli.main(sys.argv[1:])
t2 = time.perf_counter()
import millipyde
last = dict(precompile.last)
keep = ("jobs", "failed", "in_process", "processes", "workers_ahead_seconds",
        "record_seconds", "seconds", "worker_start", "last_job", "slowest", "errors")
print("RESULT " + json.dumps({"rc": rc, "import_s": t1 - t0, "wall_s": t2 - t0,
                              "package": millipyde.__file__, "compile_ahead_at": marks,
                              "precompile": {k: last.get(k) for k in keep}}, default=str))
"""


def run(tree: Path, recipe: str, n: int, work: Path) -> dict:
    """One cold ``augment`` of ``recipe`` from ``tree`` in a fresh process (its own empty
    kernel cache under ``work``)."""
    cache, out = work / "cache", work / "out"
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MILLIPYDE_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(tree.resolve()), *(
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, "augment", "-o", str(out), "-n", str(n),
                        "--seed", "0", "--recipe", recipe, "-q"], env=env, cwd=work,
                       capture_output=True, text=True, timeout=300)
    process_s = time.perf_counter() - t0
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not lines:
        return {"error": (r.stderr or r.stdout)[-1500:], "process_s": process_s}
    got = json.loads(lines[-1][len("RESULT "):])
    if not got["package"].startswith(str(tree.resolve())):
        raise RuntimeError(f"the child imported {got['package']}, not the tree {tree}")
    got["process_s"] = process_s
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH (default new=.)")
    ap.add_argument("--recipes", nargs="+", default=["imagenet", "thesis", "detection"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("-n", type=int, default=48)
    ap.add_argument("--budget", type=float, default=110.0,
                    help="start no run after this many seconds")
    args = ap.parse_args()
    trees = [t.split("=", 1) for t in (args.tree or ["new=."])]
    start = time.perf_counter()
    print(f"load average at start: {os.getloadavg()}, cores {os.cpu_count()}", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cold-augment-") as tmp:
        for rep in range(args.repeat):
            for recipe in args.recipes:
                for name, path in trees:
                    if time.perf_counter() - start > args.budget:
                        print(f"budget spent: {recipe} {name} #{rep} not run", flush=True)
                        continue
                    got = run(Path(path), recipe, args.n, Path(tmp) / f"{recipe}-{name}-{rep}")
                    rows.append({"recipe": recipe, "tree": name, "rep": rep, **got})
                    if "error" in got:
                        print(f"{recipe:9s} {name:5s} #{rep} FAILED: {got['error']}",
                              flush=True)
                        continue
                    pre = got["precompile"]
                    at = ", ".join(f"{a:.2f}-{b:.2f}" for a, b in
                                   zip(got["compile_ahead_at"][::2],
                                       got["compile_ahead_at"][1::2], strict=False))
                    print(f"{recipe:9s} {name:5s} #{rep} import_s {got['import_s']:.2f} "
                          f"wall_s {got['wall_s']:.2f} (process {got['process_s']:.2f}) "
                          f"compiling ahead at {at or '-'} s, "
                          f"precompile {pre.get('seconds') or 0:.2f} s, jobs {pre.get('jobs')} "
                          f"({pre.get('in_process')} here, {pre.get('failed')} failed), "
                          f"workers started {pre.get('workers_ahead_seconds') or 0:.2f} s "
                          f"before it", flush=True)
                    print("   precompile.last: " + json.dumps(
                        {k: pre.get(k) for k in ("worker_start", "last_job", "slowest",
                                                 "errors")}, default=str), flush=True)
    print(f"load average at end: {os.getloadavg()}; {time.perf_counter() - start:.0f} s")
    print("| recipe | tree | runs | wall_s (each) | best | import_s (each) |")
    print("| --- | --- | ---: | --- | ---: | --- |")
    for recipe in args.recipes:
        for name, _ in trees:
            ok = [r for r in rows if r["recipe"] == recipe and r["tree"] == name
                  and "error" not in r]
            if ok:
                walls = ", ".join(f"{r['wall_s']:.2f}" for r in ok)
                imports = ", ".join(f"{r['import_s']:.2f}" for r in ok)
                print(f"| {recipe} | {name} | {len(ok)} | {walls} | "
                      f"{min(r['wall_s'] for r in ok):.2f} | {imports} |")


if __name__ == "__main__":
    main()
