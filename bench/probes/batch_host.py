"""Host time of recording a batch at once (``batch_record``, ``batch_arena``), any backend.

    MILLIPYDE_BACKEND=cpu python bench/probes/batch_host.py [--px 64] [--size 256] [--profile]
        [--recipe thesis|imagenet]

``thesis``: figure-5.1 operations (``bench_batches.operations``) on six RGB inputs of
``--px``: per batch, the time to draw, group and build every per-member array
(``Recorder.groups``) and lay them out for the one upload (``ArrayGroup.pack``).
``imagenet``: ``recipes.operations("imagenet")`` on six RGB inputs of mixed sizes around
``--px`` (``batch_arena``): draws, parameter rows, the pack. No kernel runs in either. At
100k img/s a batch of 256 has 2.56 ms.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_batches import operations  # noqa: E402
from millipyde.graph.exec import batch  # noqa: E402
from millipyde.training import batches  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--px", type=int, default=64)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--recipe", choices=("thesis", "imagenet"), default="thesis")
    ap.add_argument("--fresh", action="store_true",
                    help="with --full: a new Generator per repeat, timed from its second "
                    "batch on (what bench_batches times: templates recorded there included)")
    ap.add_argument("--full", action="store_true",
                    help="thesis: the whole Batches._write_recorded (draws, groups, pack, "
                    "upload, launches, conversion), kernels not run (cpu backend)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    if args.recipe == "imagenet":
        return _imagenet(args, rng)
    imgs = [mp.gpuimage(rng.integers(0, 256, (args.px, args.px, 3), dtype=np.uint8))
            for _ in range(6)]
    st = mp.Generator(imgs, operations(), seed=0)._state
    rec = batches.recorder(st)
    stacks = st.stacks_on(0, None)
    n = args.size

    def host(b: int) -> tuple:
        groups, left = rec.groups(list(range(b * n, b * n + n)), 0, stacks)
        pk = batch.Pack()
        for g in groups:
            g.pack(pk)
        return groups, left

    if args.full:
        return _full(args, st, rec)
    for b in range(4):  # templates of the common patterns
        host(b)
    dt, (groups, left) = _timed(host, args)
    print(f"thesis: host per batch of {n}: {dt * 1e3:.2f} ms ({n / dt:,.0f} img/s bound); "
          f"{len(groups)} groups, {len(left)} outputs per output, "
          f"{len(rec.templates)} templates")
    return 0


def _full(args, st, rec) -> int:
    """The worker's whole host path of a recorded batch on the cpu backend with every kernel
    run skipped: what a GPU worker does per batch, less the driver's own costs. As on GPUs,
    the stencil step takes the batched passes (one launch each) and uint8 chains are inlined
    (no host tables)."""
    from millipyde.backend import ACTIVE as runtime
    from millipyde.graph.exec import batch_group, batch_stencil, gather

    if mp.backend() != "cpu":
        raise SystemExit("--full runs on the cpu backend (MILLIPYDE_BACKEND=cpu)")
    n = args.size
    gen = mp.Generator(st.inputs, st.operations, seed=0)
    bs = gen.batches(n)
    made = []
    bs._made = lambda ks, device, stream: made.extend(ks) or []  # counted, not made
    batch_stencil.CPU_FUSED_STENCIL = False
    runtime._run_cpu = lambda kernel, a: None
    # buffers reused as the GPU backends' pools reuse them (no page faults per batch)
    pool: dict = {}
    empty = runtime.empty
    runtime.empty = lambda shape, dtype, device: pool.get((tuple(shape), np.dtype(dtype))) \
        if (tuple(shape), np.dtype(dtype)) in pool else pool.setdefault(
            (tuple(shape), np.dtype(dtype)), empty(shape, dtype, device))
    # uint8 chains inlined per pixel, as device backends batch them (no host tables)
    batch_group.tables_of = batch.tables_of = lambda k: k.lut_mode and not (
        (k.pre or k.post) and k.output.shape[0] * k.output.shape[1]
        <= gather.INLINE_TABLE_MAX_PIXELS)
    rec = batches.recorder(gen._state)

    def host(b: int) -> tuple:
        value = bs._write_recorded(rec, list(range(b * n, b * n + n)), 0, None)
        return value, made

    if args.fresh:
        return _fresh(args, st, host, made, bs)
    for b in range(4):
        host(b)
    made.clear()
    dt, _ = _timed(host, args)
    print(f"thesis full: host per batch of {n}: {dt * 1e3:.2f} ms ({n / dt:,.0f} img/s "
          f"bound); {len(made)} outputs left per output (not made here)")
    bs.close()
    return 0


def _fresh(args, st, host, made, bs) -> int:
    """``--full --fresh``: per repeat a new Generator (new templates), batch 0 untimed, then
    batches 1 .. ``--batches`` timed and counted as ``bench_batches`` times them."""
    import millipyde.training.batch_record as batch_record

    recorded = [0]
    plain = batch_record.record_template

    def counted(*a, **k):
        recorded[0] += 1
        return plain(*a, **k)

    batch_record.record_template = counted
    best, first = float("inf"), []
    for rep in range(args.repeat + 1):
        gen = mp.Generator(st.inputs, st.operations, seed=100 + rep)
        fresh = gen.batches(args.size)
        fresh._made = bs._made
        rec = batches.recorder(gen._state)
        recorded[0] = 0
        t0 = time.perf_counter()
        fresh._write_recorded(rec, list(range(args.size)), 0, None)
        first.append(time.perf_counter() - t0)
        ahead = recorded[0]
        recorded[0] = 0
        prof = cProfile.Profile() if rep == args.repeat else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        for b in range(1, 1 + args.batches):
            fresh._write_recorded(rec, list(range(b * args.size, (b + 1) * args.size)), 0,
                                  None)
        if prof:
            prof.disable()
            calls = pstats.Stats(prof).total_calls / args.batches
        else:
            best = min(best, (time.perf_counter() - t0) / args.batches)
        fresh.close()
        gen.close()
    print(f"thesis full, fresh Generators: batch 0 {min(first) * 1e3:.1f} ms (templates "
          f"recorded there: {ahead}); batches 1-{args.batches}: {best * 1e3:.2f} ms per batch "
          f"(best of {args.repeat}), templates recorded there: {recorded[0]}, python calls "
          f"per batch {calls:,.0f}; {len(made)} outputs left per output")
    bs.close()
    return 0


def _timed(host, args) -> tuple[float, tuple]:
    """Seconds per batch: the best of ``--repeat`` runs of ``--batches`` batches (a shared
    machine's other work only adds time)."""
    dt = one = cpu = float("inf")
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        for b in range(4, 4 + args.batches):
            t1 = time.perf_counter()
            got = host(b)
            one = min(one, time.perf_counter() - t1)
        dt = min(dt, (time.perf_counter() - t0) / args.batches)
        cpu = min(cpu, (time.thread_time() - c0) / args.batches)
    # thread CPU time: what the batch costs this thread, whatever else runs on the machine
    print(f"fastest single batch: {one * 1e3:.2f} ms; thread CPU time per batch: "
          f"{cpu * 1e3:.2f} ms")
    # Python calls per batch of batches already seen (templates recorded): machine-independent
    prof = cProfile.Profile()
    prof.enable()
    for b in range(4, 4 + args.batches):
        host(b)
    prof.disable()
    calls = pstats.Stats(prof).total_calls
    print(f"python calls per batch: {calls / args.batches:,.0f}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for b in range(100, 100 + args.batches):
            host(b)
        prof.disable()
        pstats.Stats(prof).sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(25)
    return dt, got


def _imagenet(args, rng) -> int:
    from millipyde.training import recipes

    sizes = [(args.px + 3 * i, args.px + 5 * (5 - i)) for i in range(6)]
    imgs = [mp.gpuimage(rng.integers(0, 256, (*s, 3), dtype=np.uint8)) for s in sizes]
    st = mp.Generator(imgs, recipes.operations("imagenet", size=min(224, args.px)),
                      seed=0)._state
    rec = batches.arena_recorder(st)
    if rec is None:
        raise SystemExit("the imagenet recipe is not recorded as arena batches")
    n = args.size

    def host(b: int) -> tuple:
        launches, left = rec.record(list(range(b * n, b * n + n)))
        pk = batch.Pack()
        for L in launches:
            for a in (L.p, L.rows, L.pos, np.zeros(len(L.pos))) + (
                    () if L.prefix is None else (L.prefix.p,)):
                pk.add(a)
        return launches, left

    host(0)
    dt, (launches, left) = _timed(host, args)
    print(f"imagenet: host per batch of {n}: {dt * 1e3:.2f} ms ({n / dt:,.0f} img/s bound); "
          f"{len(launches)} launches, {len(left)} outputs per output")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
