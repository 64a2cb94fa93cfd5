"""A Pipeline chunk's record and launch, timed alone over repeated chunks (any backend).

    MILLIPYDE_BACKEND=cpu python bench/probes/chunk_record.py --inputs 250 --size 4
    MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 python bench/probes/chunk_record.py \\
        --inputs 250 --size 4

``--inputs`` fresh ``--size`` x ``--size`` RGB gpuimages on device 0 run one Pipeline of
``fliplr`` first, so that each is bound to a member of one batch buffer: a chunk of them is
that buffer's rows (``chunks.stack_values``: no stack copy or kernel), and what
``StageChunks.record`` times is its host work (the stacks dict, ``Recorder.groups``, the pack
and its upload). One ``StageChunks`` of the 5-op chain of ``bench_pipeline`` (part A) then
records ``--repeat`` chunks of those inputs, each at new positions, each launched
(``StageChunks.start``) and waited for before the next (``--record-only``: not launched);
medians of ``record`` and ``start``
printed in microseconds. ``--no-reuse`` sets ``chunks.REUSE_FIXED`` off where the tree has it
(every chunk recorded and uploaded). Runs in trees without ``REUSE_FIXED`` too (old trees
record every chunk).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE  # noqa: E402
from millipyde.array import values_of  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.pipeline import chunks  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=250)
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--no-reuse", action="store_true")
    ap.add_argument("--record-only", action="store_true",
                    help="no launch (CUDASIM: its simulated kernels take ~1 min a chunk)")
    args = ap.parse_args()
    if args.no_reuse:
        chunks.REUSE_FIXED = False
    chunks.CHUNK = max(chunks.CHUNK, args.inputs)
    rng = np.random.default_rng(0)
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    n = args.inputs
    xs = [mp.gpuimage(rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8))
          for _ in range(n)]
    mp.Pipeline(xs, [mp.Operation("fliplr")], device=0).run()  # one batch: members
    warm = [mp.gpuimage(rng.integers(0, 256, (args.size, args.size, 3), dtype=np.uint8))
            for _ in range(4)]
    mp.Pipeline(warm, ops, device=0).run()  # compiled, templates recorded
    mp.synchronize()
    nodes = values_of(xs)
    assert chunks.rows_of(nodes, 0) is not None, "the inputs are not one batch's rows"
    stage = chunks.StageChunks(ops, 0)
    key = chunks.group_key(xs[0], nodes[0])
    assert stage.takes(key, xs[0]), "the chain does not record chunks"
    stream = runtime.current_stream()
    rec, start = [], []
    for r in range(args.repeat):
        positions = list(range(r * n, (r + 1) * n))
        t0 = time.perf_counter()
        got = stage.record(key, positions, xs, nodes, 0, stream, lambda: stream,
                           lambda: False)
        t1 = time.perf_counter()
        rec.append(t1 - t0)
        if not args.record_only:
            launched = stage.start(got, stream)
            start.append(time.perf_counter() - t1)
            launched.wait()
            del launched
        del got
    reuse = getattr(chunks, "REUSE_FIXED", None)
    print(f"== {n} inputs a chunk, {args.size}x{args.size}x3, {args.repeat} chunks, backend "
          f"{runtime.name}{' (simulated)' if runtime.simulated else ''}, REUSE_FIXED {reuse}, "
          f"{Path(mp.__file__).parents[1]}")
    for label, ts in (("StageChunks.record", rec), ("StageChunks.start", start))[
            :1 if args.record_only else 2]:
        # (the first chunk records; the others reuse where the tree does)
        print(f"   {label:20s} median {statistics.median(ts[1:]) * 1e6:9.1f} us a chunk  "
              f"(first {ts[0] * 1e6:.1f}, min {min(ts[1:]) * 1e6:.1f})")


if __name__ == "__main__":
    main()
