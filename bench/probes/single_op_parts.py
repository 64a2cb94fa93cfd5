"""Where a single op's time on a resident 512x512 RGB image goes: the synchronised call
(``bench_single.py``'s measure), the host time alone, and the device work a call launches
(kernels, copies, memsets, and the host's CUDA driver / runtime calls: names, count and mean
duration, from a CUPTI trace taken through ``torch.profiler``).

Uses only the public API and ``_materialize``, so it times any tree of the project (put the
tree first on ``PYTHONPATH`` and run this file by its path)::

    python3 bench/probes/single_op_parts.py [--calls 200] [--ops gaussian,rotate45]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def _bench_single() -> object:
    """``bench/bench_single.py`` of this file's tree, by its path (the tree timed is the one
    on ``PYTHONPATH``, whose own ``bench`` package may differ)."""
    path = Path(__file__).resolve().parents[1] / "bench_single.py"
    spec = importlib.util.spec_from_file_location("_bench_single", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: the ops and arguments ``bench_single.py`` times
OPS = _bench_single().OPS


def main() -> None:
    import skimage.data
    from torch.profiler import ProfilerActivity, profile

    import millipyde as mp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--ops", default=",".join(OPS))
    a = ap.parse_args()
    print(f"millipyde from {Path(mp.__file__).parent}")
    src = mp.gpuimage(np.ascontiguousarray(skimage.data.astronaut()))
    src._materialize()
    for label in a.ops.split(","):
        name, args = OPS[label]

        def call(g: object, name: str = name, args: tuple = args) -> None:
            getattr(g, name)(*args)
            g._materialize()

        clones = [src.clone() for _ in range(a.calls + 5)]
        for g in clones:
            g._materialize()
        mp.synchronize()
        synced, host = [], []
        for g in clones[:5]:
            call(g)
        for g in clones[5:]:  # bench_single's measure: the call, then a synchronize
            g2 = g.clone()
            g2._materialize()
            mp.synchronize()
            t0 = time.perf_counter()
            call(g2)
            mp.synchronize()
            synced.append(time.perf_counter() - t0)
        mp.synchronize()
        for g in clones[5:]:  # host only: no synchronize between calls
            t0 = time.perf_counter()
            call(g)
            host.append(time.perf_counter() - t0)
        mp.synchronize()
        print(f"{label}: synced call {statistics.median(synced) * 1e6:.1f} us, host alone "
              f"{statistics.median(host) * 1e6:.1f} us (medians of {a.calls})")
        if mp.backend() == "cpu":  # (no device trace)
            continue
        fresh = [src.clone() for _ in range(a.calls)]
        for g in fresh:
            g._materialize()
        mp.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for g in fresh:
                call(g)
            mp.synchronize()
        path = Path(tempfile.mkdtemp()) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
        dev = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset",
                                                     "cuda_runtime", "cuda_driver")
               and "dur" in e]
        by: dict[str, list[float]] = {}
        for e in dev:
            by.setdefault(f"{e['cat']}: {e['name'][:100]}", []).append(e["dur"])
        for k, ds in sorted(by.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {len(ds) / a.calls:5.2f} a call, mean {statistics.mean(ds):7.2f} us  {k}")


if __name__ == "__main__":
    main()
