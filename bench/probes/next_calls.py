"""Python calls and host time per output of ``Generator.__next__`` on the figure-5.1 recipe,
by function (cProfile in the consumer's thread and in the worker's), kernels taken out.

    MILLIPYDE_BACKEND=cpu NUMBA_NUM_THREADS=1 MILLIPYDE_WORKERS=1 \
        python bench/probes/next_calls.py [--side 32] [--outputs 4096] [--top 30]

Part C's ``next()`` over the six photographs (the recipe's colorize an opaque callable, each
output taken as it comes by ``np.asarray``), after a warm-up Generator of seed 3, as
``next_host.py``. ``--seeds`` Generators (4, 5, ..) are timed without a profiler first (thread
CPU of the process per output, kernels out; the garbage collector's passes), then one more
(seed 100) under cProfile in both threads: calls per output (Python and C functions) and the
functions with the most own time. ``--one-thread R``: R Generators whose worker loop runs in
the calling thread with the window unbounded, then every output taken (thread CPU, no second
thread's noise), and the profile of one more such (its calls per output do not depend on the
two threads' timing). ``--objects``: the tracked objects a kept output holds and the
collector's passes with outputs kept and dropped. Run it from a tree (``PYTHONPATH``) to
measure that tree.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import millipyde as mp

sys.path.append(str(Path(__file__).resolve().parents[2]))
from bench.bench_pipeline import part_c_photos  # noqa: E402
from bench.probes.next_host import kernel_seconds, recipes  # noqa: E402


def one_thread(g: mp.Generator, n: int, kernel_s: list) -> float:
    """Thread CPU us an output, kernels out, of ``g``'s worker loop run in this thread (the
    window unbounded: it claims all ``n`` outputs, the ramp then grown claims, without
    waiting) and of ``n`` takes of them: the host path of an output with no second thread."""
    st = g._state
    st.depth = st.depth0 = 1 << 40
    k0, t0 = kernel_s[0], time.thread_time()
    st._worker(0, None)
    for _ in range(n):
        np.asarray(st.take())
    t = time.thread_time() - t0 - (kernel_s[0] - k0)
    g.close()
    return t / n * 1e6


def objects(gen: Any, n: int, passes: list[int]) -> None:
    """The tracked objects each of a Generator's ``n`` outputs holds (kept in a list, as part
    C's tensors keep them; by type) and the collector's passes by generation in its run; then
    the passes of a Generator whose outputs are dropped as they come."""
    gc.collect()
    before = collections.Counter(type(o).__name__ for o in gc.get_objects())
    passes[:] = [0, 0, 0]
    with gen(7) as g:
        kept = []
        for x in g:
            np.asarray(x)
            kept.append(x)
    held = list(passes)
    gc.collect()
    added = collections.Counter(type(o).__name__ for o in gc.get_objects()) - before
    print(f"outputs kept: {sum(added.values()) / n:.2f} tracked objects an output "
          f"({', '.join(f'{k} {v}' for k, v in added.most_common(5))}); passes {held}")
    del kept
    passes[:] = [0, 0, 0]
    with gen(8) as g:
        for x in g:
            np.asarray(x)
    print(f"outputs dropped: passes {passes}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--outputs", type=int, default=4096)
    ap.add_argument("--seeds", type=int, default=3, help="Generators timed unprofiled")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--one-thread", type=int, default=0, metavar="ROUNDS",
                    help="also time a Generator's whole host path in this thread, best of "
                         "ROUNDS: its worker's loop run here with the window unbounded, "
                         "then every output taken")
    ap.add_argument("--dump", default="", help="write the profile (pstats) to this file")
    ap.add_argument("--objects", action="store_true",
                    help="also count the tracked objects a kept output holds and the "
                         "collector's passes with the outputs kept and dropped")
    args = ap.parse_args()
    hosts = part_c_photos(args.side)
    ops = recipes.figure_5_1_operations()
    n = args.outputs
    kernel_s = kernel_seconds()

    def gen(seed: int) -> mp.Generator:
        return mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=seed,
                            device=0)

    passes = [0, 0, 0]
    gc.callbacks.append(lambda phase, info: phase == "stop" and passes.__setitem__(
        info["generation"], passes[info["generation"]] + 1))
    with gen(3) as g:
        for x in g:
            np.asarray(x)
    print(f"millipyde from {mp.__file__}; side {args.side}, {n} outputs")
    for seed in range(4, 4 + args.seeds):
        with gen(seed) as g:
            passes[:] = [0, 0, 0]
            k0, c0, t0 = kernel_s[0], time.process_time(), time.perf_counter()
            for x in g:
                np.asarray(x)
            wall, c = time.perf_counter() - t0, time.process_time() - c0
        print(f"seed {seed}: process CPU outside kernels "
              f"{(c - (kernel_s[0] - k0)) / n * 1e6:.1f} us/output, wall {wall / n * 1e6:.1f} "
              f"us/output, gc passes {passes}", flush=True)
    if args.objects:
        objects(gen, n, passes)
    for r in range(args.one_thread):
        best = one_thread(gen(20 + r), n, kernel_s)
        print(f"one thread, seed {20 + r}: {best:.2f} us/output (thread CPU, kernels out, "
              "garbage collection in)", flush=True)
    if args.no_profile:
        return
    if args.one_thread:  # the profile of one more such Generator: calls that do not hang on
        # the two threads' timing (the claims a worker makes while next() waits)
        p = cProfile.Profile()
        p.enable()
        one_thread(gen(100), n, kernel_s)
        p.disable()
        st = pstats.Stats(p)
        print(f"one thread: {sum(v[1] for v in st.stats.values()) / n:.1f} calls/output")
        if args.dump:
            st.dump_stats(args.dump)
        st.sort_stats("tottime").print_stats(args.top)
        return
    from millipyde.training import generator_state

    profiles: list[cProfile.Profile] = []
    plain = generator_state.GeneratorState._worker

    def worker(self, device, stream):
        p = cProfile.Profile()
        profiles.append(p)
        p.enable()
        try:
            return plain(self, device, stream)
        finally:
            p.disable()

    generator_state.GeneratorState._worker = worker
    main_p = cProfile.Profile()
    with gen(100) as g:
        main_p.enable()
        for x in g:
            np.asarray(x)
        main_p.disable()
    generator_state.GeneratorState._worker = plain
    for name, ps in (("consumer", [main_p]), ("workers", profiles)):
        st = pstats.Stats(*ps)
        calls = sum(v[1] for v in st.stats.values())
        print(f"{name}: {calls / n:.1f} calls/output")
    st = pstats.Stats(main_p, *profiles)
    if args.dump:
        st.dump_stats(args.dump)
    calls = sum(v[1] for v in st.stats.values())
    print(f"both: {calls / n:.1f} calls/output")
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("ncalls").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
