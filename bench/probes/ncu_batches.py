"""A target for ``ncu``: figure-5.1 ``Generator.batches`` (as ``bench/bench_batches.py``), the
profiled range one batch after ``--warmup`` batches (GPU only).

    ncu --clock-control none --profile-from-start off --target-processes application-only \
        --section SpeedOfLight ... python3 bench/probes/ncu_batches.py [--warmup 4]

Run from the root of the tree under test (it imports that tree's ``millipyde``). The range is
opened after the warm-up batches (every coin pattern's kernels compiled and loaded) and closed
after the next batch and a synchronize: it holds that batch's kernels, and any a worker
thread launched for the batches after it meanwhile.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.getcwd())  # the tree under test, not this file's

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_batches import operations  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--px", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=4)
    args = ap.parse_args(argv)
    from numba import cuda

    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (args.px, args.px, 3), dtype=np.uint8))
            for _ in range(6)]
    with mp.Generator(imgs, operations(), seed=0).batches(args.size) as bs:
        it = iter(bs)
        for _ in range(args.warmup):
            next(it)
        mp.synchronize()
        cuda.profile_start()
        next(it)
        mp.synchronize()
        cuda.profile_stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
