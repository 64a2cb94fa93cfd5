"""The cuda backend's bound launch (``RawBound2D.__call__``) over a no-op driver built here
(``host_fastpath._noop_bound``: gcc, no GPU), with the same 17 scalars (rotate's gather) passed
either as a list made each call (a new value each call) or as one tuple every call (a repeated
call: a kept call's parameters), through its ctypes path and then its compiled one; medians of
``--calls`` calls, microseconds, three rounds each.

``python3 bench/probes/bound_repeat.py [--calls 20000]`` from a tree's root (the probe it
imports is that tree's) with ``MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

from bench.probes.host_fastpath import _noop_bound  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20_000)
    a = ap.parse_args()
    got = _noop_bound(17, 512)
    if got is None:
        raise SystemExit("no gcc: no no-op driver")
    raw, src, p = got
    same = tuple(p)

    def median(fn: object) -> float:
        clock, times = time.perf_counter_ns, []
        for _ in range(a.calls):
            t0 = clock()
            fn()
            times.append(clock() - t0)
        return statistics.median(times) / 1e3

    rows = {"list made each call": lambda: raw(src, list(p)),
            "the same tuple": lambda: raw(src, same)}
    out: dict[str, list[float]] = {}
    for path in ("ctypes", "compiled"):
        if path == "compiled":
            raw._attach()
            if raw.jit is None:
                break
        for _ in range(3):
            for name, fn in rows.items():
                out.setdefault(f"{name} ({path})", []).append(median(fn))
    import millipyde

    print(f"millipyde from {Path(millipyde.__file__).parent}; load {os.getloadavg()[0]:.2f}")
    for name, vs in out.items():
        print(f"  {name:32s} {' '.join(f'{v:5.2f}' for v in vs)} us")


if __name__ == "__main__":
    main()
