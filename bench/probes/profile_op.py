"""Host time of one small op on a GPU backend: where it goes, and how much a launch costs.

On a resident 512x512 RGB uint8 image, ``img.adjust_gamma(g); img._materialize()`` with a new
``g`` every call (every call needs a new table):

- ``host us/op``: wall time of N calls with no synchronize between them, divided by N (the
  kernels are a few microseconds, so the host is what the loop waits for, unless a kernel is
  slower than the host); median of 5 runs;
- ``median``: the median over 10,000 calls (``--median-calls``) of each call's own host time,
  from the method call until the kernel is queued, a synchronize (untimed) every 32 calls
  (issue 13's measure: it does not count a kernel slower than the host);
- the same with one ``g`` for every call (the table is the same each time);
- ``py calls/op``: Python function calls per op (cProfile's count over 500 calls: the same on
  any machine), and which replay launch each case ended on (``RawBound2D``: through the
  driver; ``Bound2D``: the backend's general launch; none: the general path);
- a cProfile of 2000 calls (new ``g`` each), top entries by internal and by cumulative time.

Run from the repository root: ``python3 bench/probes/profile_op.py [--calls N] [--no-profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

import numpy as np

import millipyde as mp


def _per_call(fn, n: int) -> float:
    fn(0)
    runs = []
    for r in range(5):
        mp.synchronize()
        t0 = time.perf_counter()
        for i in range(n):
            fn(i + r * n)
        runs.append((time.perf_counter() - t0) / n * 1e6)
        mp.synchronize()
    return statistics.median(runs)


def _median_call(fn, n: int = 10_000) -> float:
    """The issue's measure: median over ``n`` calls of one call's host time, from the method
    call until the kernel is queued; a synchronize (untimed) every 32 calls keeps the launch
    queue short, so a kernel slower than the host never makes a launch wait for a free slot."""
    fn(0)
    mp.synchronize()
    clock = time.perf_counter_ns
    times = []
    for i in range(n):
        t0 = clock()
        fn(i)
        times.append(clock() - t0)
        if i & 31 == 31:
            mp.synchronize()
    mp.synchronize()
    return statistics.median(times) / 1e3


def _calls(fn, n: int = 500) -> float:
    prof = cProfile.Profile()
    prof.enable()
    for i in range(n):
        fn(i)
    prof.disable()
    mp.synchronize()
    return pstats.Stats(prof).total_calls / n


def _launches() -> str:
    from millipyde.graph.exec import replay

    kinds = sorted({type(getattr(e.fast, "bound", None)).__name__
                    for e in replay._cache.values() if e.fast is not None})
    return ",".join(kinds) or "none"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--median-calls", type=int, default=10_000)
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    img = mp.gpuimage(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8))
    img._materialize()
    grey = mp.gpuimage(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8))
    grey._materialize()

    def new_gamma(i: int) -> None:
        img.adjust_gamma(0.5 + (i % 100_000) * 1e-5)
        img._materialize()

    def same_gamma(_: int) -> None:
        img.adjust_gamma(1.0)
        img._materialize()

    def fliplr(_: int) -> None:
        img.fliplr()
        img._materialize()

    def greyscale(_: int) -> None:
        g = grey.clone()
        g.rgb2grey()
        g._materialize()

    for name, fn in (("adjust_gamma, new g each call", new_gamma),
                     ("adjust_gamma, same g", same_gamma), ("fliplr", fliplr),
                     ("clone + rgb2grey", greyscale)):
        us = _per_call(fn, args.calls)
        med = _median_call(fn, args.median_calls)
        print(f"host us/op  {name:32s} {us:8.1f}   median {med:6.1f}   py calls/op "
              f"{_calls(fn):6.1f}   replay launches: {_launches()}", flush=True)
    if args.no_profile:
        return
    prof = cProfile.Profile()
    prof.enable()
    for i in range(args.calls):
        new_gamma(10 * args.calls + i)
    mp.synchronize()
    prof.disable()
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(30)
        print(f"===== cProfile by {key}, {args.calls} new-g gamma calls\n{s.getvalue()}",
              flush=True)


if __name__ == "__main__":
    main()
