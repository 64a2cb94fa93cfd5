"""The Python above the launch of one single op on a fresh image: ``bench_single.py``'s call
(``getattr(g, name)(*args); g._materialize()`` on a clone made and stored beforehand) with each
replay launch's backend call stubbed, so that only the host path down to the bound launch is
timed. Runs without a GPU too (``cudasim``: 16x16 images, the simulator's launches
being a thread at a time), where it is the cuda backend's code above ``RawBound2D``.

Per op: the median host time of the call (method + materialize), of the method alone and of
the materialize alone, cProfile's Python calls per call (method / materialize), and the
cProfile'd time per call (median; the profiler's own cost included: a count of work, not a
speed).

Uses only the public API, ``_materialize`` and the replay cache's ``fast.bound`` (there since
before 7c57e62), so it times any tree of the project: put the tree first on ``PYTHONPATH``
and run this file by its path::

    MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 python3 bench/probes/single_op_host.py \
        [--calls 3000] [--ops rotate45,adjust_gamma,fliplr] [--side 16]

``--real`` keeps the real launches (on a GPU: the same rows with the driver's launch, the
allocation and the context check in them); each op's line names its replay launches' kinds
(``RawBound2D``: the driver called with a kept block; ``Bound2D``: the general launch).
``--top N`` prints the N functions with the most own time per call in the profiled calls.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import statistics
import time
from pathlib import Path

import numpy as np


def _bench_ops() -> dict[str, tuple[str, tuple]]:
    """``bench/bench_single.py``'s ops (label: (method, arguments)), from this file's tree by
    its path (as ``single_op_parts.py`` takes them)."""
    path = Path(__file__).resolve().parents[1] / "bench_single.py"
    spec = importlib.util.spec_from_file_location("_bench_single", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.OPS


def main() -> None:
    import millipyde as mp
    from millipyde.graph.exec import replay

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--ops", default="rotate45,adjust_gamma,fliplr")
    ap.add_argument("--side", type=int, default=None)
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--top", type=int, default=0,
                    help="the N functions with the most own time a call (means: a pause of the "
                         "collector lands in the function that allocated)")
    a = ap.parse_args()
    ops = _bench_ops()
    gpu = mp.backend() == "cuda"
    side = a.side or (512 if gpu else 16)
    src = mp.gpuimage(np.random.default_rng(0).integers(0, 256, (side, side, 3),
                                                        dtype=np.uint8))
    src._materialize()
    load = os.getloadavg()
    print(f"millipyde from {Path(mp.__file__).parent}; backend {mp.backend()}, {side}x{side} "
          f"RGB, launches {'real' if a.real else 'stubbed'}; load {load[0]:.2f}", flush=True)
    for label in a.ops.split(","):
        name, args = ops[label]
        method = getattr(mp.gpuimage, name)

        def fresh() -> object:
            g = src.clone()
            g._materialize()
            return g

        for _ in range(8):  # planned, cached, the replay launch learnt
            g = fresh()
            method(g, *args)
            g._materialize()
        mp.synchronize()
        kept = g._node.buffer
        kinds = sorted({type(getattr(e.fast, "bound", None)).__name__
                        for e in replay._cache.values() if e.fast is not None})
        stubbed = 0
        if not a.real:
            def stub(s: object, params: object, table: object = None,
                     kept: object = kept) -> object:
                return kept

            for e in list(replay._cache.values()):
                bound = getattr(e.fast, "bound", None)
                if bound is not None and type(e.fast).__name__ == "ReplayLaunch":
                    e.fast.bound = stub
                    stubbed += 1
        imgs = [fresh() for _ in range(a.calls)]
        mp.synchronize()
        clock = time.perf_counter_ns
        whole, rec, mat = [], [], []
        for i, g in enumerate(imgs):
            t0 = clock()
            method(g, *args)
            t1 = clock()
            g._materialize()
            t2 = clock()
            whole.append(t2 - t0)
            rec.append(t1 - t0)
            mat.append(t2 - t1)
            if gpu and i & 31 == 31:
                mp.synchronize()
        mp.synchronize()
        n = min(a.calls, 500)
        imgs = [fresh() for _ in range(2 * n)]
        mp.synchronize()
        prof_m, prof_z = cProfile.Profile(), cProfile.Profile()
        for g in imgs[:n]:
            prof_m.enable()
            method(g, *args)
            prof_m.disable()
            prof_z.enable()
            g._materialize()
            prof_z.disable()
        mp.synchronize()
        # cProfile'd: each call's time with the profiler on, the median (the machine's other
        # jobs left out as in the rows above)
        prof, profiled = cProfile.Profile(), []
        prof.enable()
        for g in imgs[n:]:
            t0 = clock()
            method(g, *args)
            g._materialize()
            profiled.append(clock() - t0)
        prof.disable()
        mp.synchronize()
        cm = pstats.Stats(prof_m).total_calls / n
        cz = pstats.Stats(prof_z).total_calls / n

        def med(xs: list[int]) -> float:
            return statistics.median(xs) / 1e3

        print(f"{label:13s} call {med(whole):6.2f} us (method {med(rec):5.2f}, materialize "
              f"{med(mat):5.2f}); Python calls {cm:.0f} + {cz:.0f} = {cm + cz:.0f}; "
              f"cProfile'd {med(profiled):6.2f} us a call; launches {'/'.join(kinds)}, "
              f"{stubbed} stubbed", flush=True)
        if a.top:
            st = pstats.Stats(prof).stats
            for (f, line, fn), (_, nc, tt, _, _) in sorted(st.items(),
                                                         key=lambda kv: -kv[1][2])[:a.top]:
                print(f"    {tt / n * 1e6:6.2f} us {nc / n:5.2f} calls  "
                      f"{Path(f).name}:{line} {fn}")


if __name__ == "__main__":
    main()
