"""Where a Generator batch's time goes: recording, the batched launches, GPU kernels (GPU only).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/generator_breakdown.py

Does what one Generator worker does for a batch (``Generator._make_batch``: clone and record
the figure-5.1 Operations for each output, then ``batch.materialize_batch``), on 512x512 RGB
inputs, in this thread, and prints per batch: host time recording, host time until the batched
launches return, the wait for the GPU, and (torch.profiler/CUPTI) the summed kernel time with
each kernel's share. Kernel time well below the wall time means the host bounds throughput.

``--recorded``: the same for ``Generator.batches`` (float32 NCHW, ``random_colorize`` as a
method): "record" is then the host time of drawing, grouping and the launches
(``Batches._write_recorded``), "launches" 0, and the GPU wait that of the batch's event.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

import millipyde as mp
from millipyde.cli import figure_5_1_operations
from millipyde.graph.exec import batch
from millipyde.workers import record_operations


def _batch(imgs: list, ops: list, stacks: dict, k0: int, n: int) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    ys = []
    for k in range(k0, k0 + n):
        y = imgs[k % len(imgs)].clone()
        record_operations(y, ops, 0, k, 0, lambda: False, batch.LIFT_GATES)
        ys.append(y)
    t1 = time.perf_counter()
    errors = batch.materialize_batch(ys, stacks)
    t2 = time.perf_counter()
    mp.synchronize()
    t3 = time.perf_counter()
    if any(e is not None for e in errors):
        raise RuntimeError(f"batch failed: {errors}")
    return t1 - t0, t2 - t1, t3 - t2


class _Recorded:
    """``Generator.batches``' batch maker, timed as ``_batch`` times the per-output one."""

    def __init__(self, imgs: list, size: int) -> None:
        from bench.bench_batches import operations
        from millipyde.backend import ACTIVE
        from millipyde.training import batches
        from millipyde.training.batch_convert import BatchSpec

        gen = mp.Generator(imgs, operations(), seed=0)
        spec = BatchSpec.check(size, None, "NCHW", "float32", None, None, 3, False, False)
        self.gen, self.stream = gen, ACTIVE.new_stream(gen.device)
        self.runner = batches.Batches(gen, spec, [gen.device])
        self.rec = batches.recorder(gen._state)

    def __call__(self, k0: int, n: int) -> tuple[float, float, float]:
        t0 = time.perf_counter()
        _, ready = self.runner._write_recorded(self.rec, list(range(k0, k0 + n)),
                                               self.gen.device, self.stream)
        t1 = time.perf_counter()
        ready.synchronize()
        return t1 - t0, 0.0, time.perf_counter() - t1


def _count_calls(make, args) -> None:
    """Python calls per batch of batches already made once (templates recorded): the host
    work, independent of the machine's speed."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for b in range(args.batches):
        make(b * args.batch, args.batch)
    prof.disable()
    print(f"python calls per batch: {pstats.Stats(prof).total_calls / args.batches:,.0f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--recorded", action="store_true",
                    help="Generator.batches recorded at once instead of per output")
    ap.add_argument("--profile", action="store_true",
                    help="then cProfile the batches: functions by own and inclusive time")
    args = ap.parse_args(argv)
    from torch.profiler import ProfilerActivity, profile

    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)) for _ in range(6)]
    for x in imgs:
        x._materialize()
    ops = figure_5_1_operations()
    stacks = batch.stack_inputs([x._node for x in imgs], 0)
    mp.synchronize()
    make = _Recorded(imgs, args.batch) if args.recorded else \
        (lambda k0, n: _batch(imgs, ops, stacks, k0, n))
    for b in range(4):  # warm-up: compile every structure the coins give
        make(10_000 + b * args.batch, args.batch)
    # the host's own time first: CUPTI (below) makes every launch dearer
    plain = [make(20_000 + b * args.batch, args.batch)[0] for b in range(args.batches)]
    print(f"record without the profiler: median {float(np.median(plain)) * 1e3:.2f} ms, "
          f"min {min(plain) * 1e3:.2f} ms per batch of {args.batch}")
    times = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for b in range(args.batches):
            times.append(make(b * args.batch, args.batch))
    rec, launch, wait = (float(np.median(t)) * 1e3 for t in zip(*times, strict=False))
    per = collections.defaultdict(list)
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            per[ev.name].append(ev.device_time_total / 1e3)
    total = sum(sum(v) for v in per.values()) / args.batches
    wall = rec + launch + wait
    print(f"batch of {args.batch}, median of {args.batches}: record {rec:.2f} ms, "
          f"launches {launch:.2f} ms, GPU wait {wait:.2f} ms; wall {wall:.2f} ms "
          f"({args.batch / wall * 1e3:.0f} img/s); kernels {total:.2f} ms/batch")
    for name, ds in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:15]:
        print(f"  {sum(ds) / args.batches:8.3f} ms/batch  {len(ds) / args.batches:5.1f} "
              f"launches  {name[:90]}")
    _count_calls(make, args)
    if args.profile:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        for b in range(args.batches):
            make(50_000 + b * args.batch, args.batch)
        prof.disable()
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(40)
            print(f"===== cProfile by {key}, {args.batches} batches\n{out.getvalue()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
