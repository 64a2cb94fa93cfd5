"""Cold start of ``millipyde augment``: wall, CPU seconds and Numba compiles per recipe.

For each recipe and each source tree, a fresh process with an empty ``MILLIPYDE_CACHE_DIR``
runs ``millipyde augment -o OUT -n N --seed 0 --recipe R -q`` with a listener on Numba's
``numba:compile`` events: the process's wall and CPU seconds (user + system), the number of
top-level compiles (a generated kernel or host function; the device functions they call are
compiled inside them) and their CPU seconds. Trees run one after the other per recipe, so a
baseline and the new code meet the same load; with two trees the outputs are compared pixel
for pixel.

    MILLIPYDE_BACKEND=cpu python -m bench.bench_compile [--tree new=. --tree base=PATH]
        [--recipes imagenet thesis detection] [-n 48] [--warm] [--json FILE]

A tree is a source checkout (its ``millipyde`` package is imported through ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = r"""
import json, os, resource, sys, time
import numba.core.event as ev

compiles = []


class Compiles(ev.Listener):
    def __init__(self):
        self.stack = []

    def on_start(self, event):
        self.stack.append(time.process_time())

    def on_end(self, event):
        t0 = self.stack.pop()
        if not self.stack:  # top level: what the callees cost is inside
            fn = getattr(event.data.get("dispatcher"), "py_func", None)
            compiles.append((getattr(fn, "__qualname__", "?"), time.process_time() - t0))


ev.register("numba:compile", Compiles())
t0 = time.perf_counter()
from millipyde.cli import main
rc = main(sys.argv[1:])
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["BENCH_COMPILE_OUT"], "w") as f:
    import millipyde
    json.dump({"rc": rc, "wall_in_process": wall, "compiles": compiles,
               "package": millipyde.__file__,
               "cpu": ru.ru_utime + ru.ru_stime}, f)
"""


def run(tree: Path, recipe: str, n: int, work: Path) -> dict:
    """One ``augment`` of ``recipe`` from source tree ``tree`` in a fresh process, on the
    kernel cache ``work/cache`` (cold when that is empty)."""
    import time

    cache, out, stats = work / "cache", work / "out", work / "stats.json"
    work.mkdir(parents=True, exist_ok=True)
    # the tree first; what else is on the path stays (a GPU machine's carried wheels)
    env = dict(os.environ, MILLIPYDE_CACHE_DIR=str(cache), BENCH_COMPILE_OUT=str(stats),
               PYTHONPATH=os.pathsep.join([str(tree.resolve()), *(
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]))
    t0 = time.perf_counter()
    before = os.times()
    subprocess.run([sys.executable, "-c", CHILD, "augment", "-o", str(out), "-n", str(n),
                    "--seed", "0", "--recipe", recipe, "-q"], env=env, check=True,
                   stdout=subprocess.DEVNULL, cwd=work)  # (not a tree: ``-c`` puts cwd first)
    after = os.times()
    wall = time.perf_counter() - t0
    got = json.loads(stats.read_text())
    if not got["package"].startswith(str(tree.resolve())):
        raise RuntimeError(f"the child imported {got['package']}, not the tree {tree}")
    return {"wall": wall,
            "cpu": (after.children_user - before.children_user)
            + (after.children_system - before.children_system),
            "kernels": len(got["compiles"]),
            "compile_cpu": sum(c for _, c in got["compiles"]),
            "out": str(out)}


def same_outputs(a: str, b: str) -> bool:
    from PIL import Image

    fa, fb = sorted(Path(a).glob("aug_*.png")), sorted(Path(b).glob("aug_*.png"))
    return len(fa) == len(fb) > 0 and all(
        np.array_equal(np.asarray(Image.open(x)), np.asarray(Image.open(y)))
        for x, y in zip(fa, fb, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[],
                    help="NAME=PATH of a source tree (default new=.)")
    ap.add_argument("--recipes", nargs="+", default=["imagenet", "thesis", "detection"])
    ap.add_argument("-n", type=int, default=48)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--warm", action="store_true",
                    help="after each cold run, the same command on its filled cache")
    args = ap.parse_args(argv)
    trees = [t.split("=", 1) for t in (args.tree or ["new=."])]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        for recipe in args.recipes:
            got = {}
            for name, path in trees:
                work = Path(tmp) / f"{recipe}-{name}"
                got[name] = run(Path(path), recipe, args.n, work)
                r = got[name]
                rows.append({"recipe": recipe, "tree": name,
                             **{k: v for k, v in r.items() if k != "out"}})
                print(f"{recipe:10s} {name:6s} wall {r['wall']:7.1f} s  CPU {r['cpu']:6.1f} s  "
                      f"{r['kernels']:3d} compiles, {r['compile_cpu']:6.1f} CPU-s in them",
                      flush=True)
                if args.warm:
                    # the same command again on the cache the cold run filled
                    w = run(Path(path), recipe, args.n, work)
                    rows[-1].update({"warm_" + k: v for k, v in w.items() if k != "out"})
                    print(f"{recipe:10s} {name:6s} warm wall {w['wall']:7.1f} s  CPU "
                          f"{w['cpu']:6.1f} s  {w['kernels']:3d} compiles", flush=True)
            if len(trees) > 1:
                first = trees[0][0]
                for name, _ in trees[1:]:
                    same = same_outputs(got[first]["out"], got[name]["out"])
                    rows[-1]["same_outputs_as_" + first] = same
                    print(f"{recipe:10s} outputs of {name} equal to {first}'s: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
