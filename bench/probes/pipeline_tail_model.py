"""A model of a chunked Pipeline run over two devices: where its end falls, per chunk layout.

    python bench/probes/pipeline_tail_model.py [--host-scale 1.0 0.6 0.4]

No GPU and no millipyde run: the workers of ``pipeline.run.Run._worker`` as events. Every
group's chunks start in device 0's queue (inputs made there); device 0's worker takes its
queue's first unit, device 1's the second while the queue holds two or more (the tree's
``_StageQueue.take``) or, with ``--take-back``, the last (the take before 2d1be3f). A worker
launches its next chunk under the run's host lock (``fixed + per_input * n`` ms), then waits
for the chunk before it and commits it under the lock (``commit_fixed + commit * n``); a
chunk's kernels start when its launch is done and its device is free and take
``kernel[d] * n``. The defaults are part A's on two H200s at d4347e8 (bench/RESULTS.md,
2026-11-29: 7.0 us an input of launch, ~0.3 ms of it a chunk; 0.97 us of commit; kernels
13.05 us an input on device 0, 14.8 on device 1, whose stack reads device 0's inputs).
``--host-scale`` scales the per-input host costs (a cheaper launch). Printed: the run's end
(ms) and chunks per device for the even cut of ``chunk_sizes`` with ``TAPER = 0`` and for
the tree's own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from millipyde.pipeline import chunks  # noqa: E402


def simulate(sizes: list[int], take_back: bool, fixed: float, per_input: float,
             commit_fixed: float, commit: float, kernel: tuple[float, float]
             ) -> tuple[float, list[int]]:
    """The end (ms) of a run of chunks ``sizes`` over two devices, and chunks per device."""
    queue = list(sizes)
    host = 0.0  # the host lock is free from
    free = [0.0, 0.0]  # each device is free from
    now = [0.0, 0.0]
    inflight: list[list[tuple[float, int]]] = [[], []]
    done = [False, False]
    count = [0, 0]

    def finish(d: int) -> None:
        nonlocal host
        end, n = inflight[d].pop(0)
        host = max(now[d], end, host) + commit_fixed + commit * n
        now[d] = host

    while not all(done):
        d = min((i for i in (0, 1) if not done[i]), key=lambda i: now[i])
        n = None
        if d == 0 and queue:
            n = queue.pop(0)
        elif d == 1 and len(queue) > 1:
            n = queue.pop() if take_back else queue.pop(1)
        if n is None:
            if inflight[d]:
                finish(d)
            elif d == 1 and queue:
                now[d] += 0.05  # (polls: waits for the queue to change)
            else:
                done[d] = True
            continue
        host = max(now[d], host) + fixed + per_input * n
        now[d] = host
        free[d] = max(host, free[d]) + kernel[d] * n
        count[d] += 1
        inflight[d].append((free[d], n))
        while len(inflight[d]) > 1:
            finish(d)
    return max(now), count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--host-scale", type=float, nargs="+", default=[1.0, 0.6, 0.4])
    ap.add_argument("--take-back", action="store_true")
    args = ap.parse_args()
    shape = (512, 512, 3)
    taper = chunks.TAPER
    try:
        chunks.TAPER = 0
        even = chunks.chunk_sizes(args.inputs, shape, 2)
    finally:
        chunks.TAPER = taper
    tree = chunks.chunk_sizes(args.inputs, shape, 2)
    for scale in args.host_scale:
        for name, sizes in (("even", even), ("tree", tree)):
            end, count = simulate(sizes, args.take_back, 0.3, 5.8e-3 * scale, 0.05,
                                  0.76e-3 * scale, (13.05e-3, 14.8e-3))
            print(f"host x{scale:<4} {name:5s} end {end:6.2f} ms  chunks per device {count}  "
                  f"sizes {sizes}")


if __name__ == "__main__":
    main()
