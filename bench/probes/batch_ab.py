"""A/B of a module-level setting on the figure-5.1 training batches, in one process.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/batch_ab.py \\
        --flag millipyde.graph.exec.batch_prefix:ENABLED --values True,False

``bench_batches.rate`` (figure-5.1 Operations, six 512x512 RGB inputs, ``batches(256)`` float32
NCHW taken as torch tensors and dropped) for each value in turn, ``--rounds`` times (drift
shows as spread), then per value the digest of the first ``--digest`` batches (equal lines:
the same samples).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib
import os
import sys

sys.path.insert(0, os.getcwd())  # the tree under test

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_batches import _images, operations, rate  # noqa: E402


def digest(imgs: list, n: int) -> str:
    """SHA-256 (16 hex digits) of the first ``n`` batches' bytes."""
    h = hashlib.sha256()
    with mp.Generator(imgs, operations(), seed=0).batches(256) as bs:
        for _ in range(n):
            h.update(np.ascontiguousarray(next(bs).get()).tobytes())
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--flag", required=True, help="module:NAME")
    ap.add_argument("--values", required=True, help="Python literals, comma-separated")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--digest", type=int, default=2)
    a = ap.parse_args()
    mod_name, name = a.flag.split(":")
    mod = importlib.import_module(mod_name)
    values = [ast.literal_eval(v) for v in a.values.split(",")]
    imgs = _images(512)
    rows: dict[int, list[float]] = {i: [] for i in range(len(values))}
    for v in values:  # compile what each value launches
        setattr(mod, name, v)
        rate(imgs, 256, 2, 0)
    for _ in range(a.rounds):
        for i, v in enumerate(values):
            setattr(mod, name, v)
            rows[i].append(rate(imgs, 256, a.batches, 0))
    for i, v in enumerate(values):
        setattr(mod, name, v)
        r = rows[i]
        print(f"{name}={v!r}: drop img/s median {np.median(r):,.0f} (min {min(r):,.0f}, "
              f"max {max(r):,.0f}) digest {digest(imgs, a.digest)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
