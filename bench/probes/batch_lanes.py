"""A/B of ``batches.LANES`` (streams a recorded batch's groups are spread over), one process.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/batch_lanes.py

``bench_batches.rate`` (figure-5.1 Operations, six 512x512 RGB inputs, ``batches(256)`` float32
NCHW taken as torch tensors and dropped) for each setting in turn, ``--rounds`` times, so
drift shows as spread; then the digest of the first batches per setting (equal: the same
samples whatever the streams).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.getcwd())  # the tree under test

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_batches import _images, operations, rate  # noqa: E402
from millipyde import batches  # noqa: E402


def digest(imgs: list, n: int) -> str:
    """SHA-256 (16 hex digits) of the first ``n`` batches' bytes."""
    h = hashlib.sha256()
    with mp.Generator(imgs, operations(), seed=0).batches(256) as bs:
        for _ in range(n):
            h.update(np.ascontiguousarray(np.asarray(next(bs).get())).tobytes())
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lanes", default="1,2")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--digest", type=int, default=2)
    a = ap.parse_args()
    settings = [int(v) for v in a.lanes.split(",")]
    imgs = _images(512)
    rate(imgs, 256, 2, 0)  # compile every kernel first
    rows: dict[int, list[float]] = {n: [] for n in settings}
    for _ in range(a.rounds):
        for n in settings:
            batches.LANES = n
            rows[n].append(rate(imgs, 256, a.batches, 0))
    for n in settings:
        batches.LANES = n
        r = rows[n]
        print(f"lanes {n}: drop img/s median {np.median(r):,.0f} (min {min(r):,.0f}, "
              f"max {max(r):,.0f}) digest {digest(imgs, a.digest)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
