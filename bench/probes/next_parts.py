"""Host time per output of the parts of a callable Generator's claim, one thread, no workers.

    MILLIPYDE_BACKEND=cpu NUMBA_NUM_THREADS=1 python bench/probes/next_parts.py [--side 32]

The figure-5.1 recipe over part C's six photographs (its colorize an opaque callable): claims
of ``--claim`` outputs (256 by default) made by ``GeneratorState.make_many``
in the calling thread, and their parts timed alone: the callable's capture
(``CallableRecorder._capture``), the recorded groups (``CallableRecorder.groups``: the
capture, the draws, the groups' arrays) and the whole claim (groups, launches, output
objects); and a whole fresh Generator's claims as its worker makes them (the ramp, then grown
claims; seeds 4, 5, ..; a Generator of seed 3 first). Thread CPU time per output, best of
``--rounds``; the kernels' own time on the cpu backend taken out of the claims
(``CpuBackend._run_cpu``, as ``next_host.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import millipyde as mp

sys.path.append(str(Path(__file__).resolve().parents[2]))
from bench.bench_pipeline import part_c_photos  # noqa: E402
from bench.probes.next_host import kernel_seconds, recipes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--side", type=int, default=32)
    ap.add_argument("--claim", type=int, default=256)
    ap.add_argument("--claims", type=int, default=16, help="claims a round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--outputs", type=int, default=4096, help="a whole Generator's outputs")
    args = ap.parse_args()
    kernel_s = kernel_seconds()
    hosts = part_c_photos(args.side)
    g = mp.Generator([mp.gpuimage(h) for h in hosts], recipes.figure_5_1_operations(),
                     outputs=None, seed=4, device=0)
    st = g._state
    from millipyde.training.batches import recorder

    rec = recorder(st)
    stream = None
    n, m = args.claim, args.claims
    claims = [list(range(c * n, (c + 1) * n)) for c in range(m)]
    for ks in claims[:2]:  # compiled, templates recorded
        st.make_many(ks, 0, stream)
    best: dict[str, float] = {}

    def clock(name: str, fn) -> None:
        k0, t0 = kernel_s[0], time.thread_time()
        for ks in claims:
            fn(ks)
        t = time.thread_time() - t0 - (kernel_s[0] - k0)
        best[name] = min(best.get(name, 1e9), t / (n * m) * 1e6)

    stacks = st.stacks_on(0, stream)
    ops = recipes.figure_5_1_operations()

    def whole(seed: int) -> float:
        """A fresh Generator of ``--outputs`` outputs made as its worker claims them (the
        ramp 1, 1, 2, 4, .. then grown claims), in this thread: CPU us an output, kernels
        out."""
        with mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=args.outputs,
                          seed=seed, device=0) as gen:
            s = gen._state
            k0, t0 = kernel_s[0], time.thread_time()
            while s.claimed < args.outputs:
                j0, m = s.claimed, s._want()
                s.claimed += m
                s._grow(s._make_batch(j0, m, 0, stream))
            return (time.thread_time() - t0 - (kernel_s[0] - k0)) / args.outputs * 1e6

    whole(3)  # (the templates of this chain and seed's patterns recorded)
    for r in range(args.rounds):
        clock("capture", lambda ks: rec._capture(ks, 0))
        clock("groups", lambda ks: rec.groups(ks, 0, stacks))
        clock("claim (kernels out)", lambda ks: st.make_many(ks, 0, stream))
        best["Generator's claims"] = min(best.get("Generator's claims", 1e9), whole(4 + r))
    print(f"millipyde from {mp.__file__}; side {args.side}, claims of {n}")
    for k, v in best.items():
        print(f"{k:>22}: {v:6.2f} us/output")
    g.close()


if __name__ == "__main__":
    main()
