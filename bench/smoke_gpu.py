"""Quick GPU smoke timing of single ops at 6000x8000 RGBA (device-resident, events, median)."""

from __future__ import annotations

import sys
import time

import numpy as np

import millipyde as mp
from millipyde.graph import execute, schedule


def timed(fn, reps: int = 20) -> float:
    import cupy

    fn()
    mp.synchronize()
    ts = []
    for _ in range(reps):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def main() -> None:
    h, w = 8000, 6000
    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    base = mp.gpuimage(host)
    base._materialize()
    grey = mp.gpuimage(rng.random((h, w)))
    grey._materialize()
    cases = {
        "gamma": (base, lambda i: i.adjust_gamma(2)),
        "greyscale": (base, lambda i: i.rgb2grey()),
        "fliplr": (base, lambda i: i.fliplr()),
        "transpose": (base, lambda i: i.transpose()),
        "rotate45": (base, lambda i: i.rotate(45)),
        "gaussian_grey": (grey, lambda i: i.gaussian(2)),
        "chain5": (base, lambda i: (i.gaussian(2), i.adjust_gamma(2), i.fliplr(), i.rotate(45),
                                    i.rgb2grey())),
    }
    for name, (src, op) in cases.items():
        def run(src=src, op=op):
            x = src.clone()
            op(x)
            execute.materialize(x._node)
        # the clone (a device copy) is timed too: report it separately
        def clone_only(src=src):
            execute.materialize(src.clone()._node)
        t = timed(run)
        tc = timed(clone_only)
        x = src.clone()
        op(x)
        nk = len(schedule.plan(x._node)) - 1
        print(f"{name:14s} {t:9.3f} ms total, clone {tc:7.3f} ms, op ~{t - tc:8.3f} ms, "
              f"{nk} kernel(s)", flush=True)


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"done in {time.time() - t0:.1f} s", file=sys.stderr)
