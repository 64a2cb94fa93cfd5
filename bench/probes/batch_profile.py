"""cProfile of a Generator's batch worker: where the host time of ``batches(256)`` goes (GPU).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/batch_profile.py

Figure-5.1 operations (``bench_batches.operations``) on 512x512 RGB inputs, float32 NCHW taken
by torch. After six warm batches, ``Batches._write_recorded`` (what the worker thread does per
batch) runs under a per-thread cProfile for ``--batches`` batches. Prints the rate under the
profiler, each batch's wall time in that method, and the top entries by internal and by
cumulative time. The profiler inflates Python time about 2x: compare counts, not rates.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_batches import _images, _sync, _tensor, operations  # noqa: E402
from millipyde.training import batches as batches_mod  # noqa: E402


def main() -> None:
    """Profile the batch worker and print the tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--top", type=int, default=45)
    args = ap.parse_args()
    prof = cProfile.Profile()
    walls: list[float] = []
    plain = batches_mod.Batches._write_recorded

    def profiled(self, *a, **k):
        t = time.perf_counter()
        prof.enable()  # per thread: the worker's calls only
        try:
            return plain(self, *a, **k)
        finally:
            prof.disable()
            walls.append(time.perf_counter() - t)

    imgs = _images(512)
    with mp.Generator(imgs, operations(), seed=0).batches(256) as bs:
        for _ in range(6):
            _tensor(next(bs))
        _sync()
    batches_mod.Batches._write_recorded = profiled
    try:
        with mp.Generator(imgs, operations(), seed=1).batches(256) as bs:
            t0 = time.perf_counter()
            for _ in range(args.batches):
                _tensor(next(bs))
            _sync()
            dt = time.perf_counter() - t0
    finally:
        batches_mod.Batches._write_recorded = plain
    print(f"{args.batches} batches under the profiler: {args.batches * 256 / dt:,.0f} img/s; "
          "_write_recorded ms: " + " ".join(f"{w * 1e3:.1f}" for w in walls))
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        print(s.getvalue())


if __name__ == "__main__":
    main()
