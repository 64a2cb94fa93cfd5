"""Where host time goes: cProfile of the Generator (figure 5.1, 512x512) and a 5-op Pipeline.

Prints the top functions by internal time; used to find per-item Python overhead.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

import numpy as np

import millipyde as mp
from millipyde.cli import figure_5_1_operations


def _report(prof: cProfile.Profile, title: str, n: int = 35) -> None:
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(n)
    print(f"===== {title}\n{s.getvalue()}", flush=True)


def main() -> None:
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)) for _ in range(6)]
    for _ in mp.Generator(imgs, figure_5_1_operations(), outputs=64, seed=1):
        pass
    t0 = time.perf_counter()
    for _ in mp.Generator(imgs, figure_5_1_operations(), outputs=300, seed=0):
        pass
    mp.synchronize()
    print(f"generator: {300 / (time.perf_counter() - t0):.1f} img/s", flush=True)
    ops = figure_5_1_operations()

    def direct(n: int, off: int) -> None:
        # what one Generator worker does per output, in this thread so cProfile sees it
        for k in range(n):
            x = imgs[k % 6].clone()
            for j, op in enumerate(ops):
                op.apply(x, 0, k + off, j)
            x._materialize()
        mp.synchronize()

    direct(64, 10_000)
    t0 = time.perf_counter()
    direct(300, 20_000)
    print(f"direct single thread: {300 / (time.perf_counter() - t0):.1f} img/s", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    direct(200, 30_000)
    prof.disable()
    _report(prof, "direct figure-5.1 outputs", 45)
    # one image, op by op, single thread: the plain per-call overhead
    x = imgs[0].clone()
    x._materialize()
    mp.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        x.adjust_gamma(1.01)
        x._materialize()
    mp.synchronize()
    print(f"single-thread gamma 512x512: {(time.perf_counter() - t0) / 200 * 1e6:.1f} us/op")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        x.adjust_gamma(1.01)
        x._materialize()
    mp.synchronize()
    prof.disable()
    _report(prof, "gamma op loop", 30)


if __name__ == "__main__":
    main()
    sys.exit(0)
