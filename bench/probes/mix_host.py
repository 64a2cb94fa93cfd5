"""Host time of a batch mixer's ``queue`` (``Generator.batches(mix=)``'s per-batch work), GPU.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/mix_host.py [--size 256] [--hw 224] [--calls 200]

On a float32 NCHW batch of ``size`` on device 0 and one pooled stream (as a batch worker):
the host seconds of ``params``, of the label upload, of ``queue`` whole (no wait), of a
recorded event, of ``queue_classes`` (the batch worker's call, from the uploaded indices:
from its second call on the kept launch), medians over ``calls`` (the stream synchronised
every 16 calls, outside the timings); then a cProfile of ``calls`` ``queue`` calls, its
functions by own time; the backend calls inside ``queue``; and MixUp's kernel alone, 50
launches back to back, per ``graph.codegen.mix.AHEAD`` (samples loaded ahead of their
stores).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.workers import STREAMS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    n, hw = args.size, args.hw
    x = mp.gpuarray(np.random.default_rng(0).random((n, 3, hw, hw), dtype=np.float32))
    host = (np.arange(n) % 1000).astype(np.int64)
    stream, _ = STREAMS.acquire(0)
    rows: dict[str, list[float]] = {}
    with runtime.on_device(0), runtime.using_stream(stream):
        for name, mix in (("MixUp", mp.MixUp(num_classes=1000, seed=0)),
                          ("CutMix", mp.CutMix(num_classes=1000, seed=0))):
            for step in range(args.calls + 1):
                t0 = time.perf_counter()
                mix.params(step, hw, hw)
                t1 = time.perf_counter()
                lab = runtime.upload_parts([(0, host)], host.nbytes, 0)[0]
                t2 = time.perf_counter()
                mix.queue(x, mp.gpuarray.from_buffer(lab, 0), step)
                t3 = time.perf_counter()
                runtime.record_event(stream)
                t4 = time.perf_counter()
                # the batch worker's call (``Batches._extras``): from the uploaded indices,
                # from a batch shape's second call on the kept launch
                mix.queue_classes(x, lab, step + args.calls + 1)
                t5 = time.perf_counter()
                if step:
                    for k, v in (("params", t1 - t0), ("label upload", t2 - t1),
                                 ("queue", t3 - t2), ("event", t4 - t3),
                                 ("queue_classes", t5 - t4)):
                        rows.setdefault(f"{name} {k}", []).append(v)
                if step % 16 == 0:
                    runtime.synchronize(0)
            runtime.synchronize(0)
            lab = mp.gpuarray.from_buffer(runtime.upload_parts([(0, host)], host.nbytes, 0)[0],
                                          0)
            prof = cProfile.Profile()
            prof.enable()
            for step in range(args.calls):
                mix.queue(x, lab, step)
                if step % 16 == 0:
                    runtime.synchronize(0)
            prof.disable()
            runtime.synchronize(0)
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
            print(f"--- {name}: {args.calls} queue calls, by own time\n"
                  + "\n".join(s.getvalue().splitlines()[6:24]))
            # the kernels alone: the stream's time for calls in a row
            runtime.synchronize(0)
            t0 = time.perf_counter()
            for step in range(args.calls):
                mix.queue(x, lab, step)
            runtime.synchronize(0)
            rows.setdefault(f"{name} queue+GPU, in a row", []).append(
                (time.perf_counter() - t0) / args.calls)
        # where a queue call's host time goes: the backend calls it makes, timed
        spent: dict[str, float] = {}

        def timed(owner: object, name: str) -> None:
            real = getattr(owner, name)

            def wrapper(*a: object, **k: object) -> object:
                t = time.perf_counter()
                try:
                    return real(*a, **k)
                finally:
                    spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
            setattr(owner, name, wrapper)

        for name in ("reshape", "empty", "launch_grid", "launch_1d", "on_device"):
            timed(runtime, name)
        mix = mp.MixUp(num_classes=1000, seed=0)
        timed(mix, "params")
        runtime.synchronize(0)
        t0 = time.perf_counter()
        for step in range(args.calls):
            mix.queue(x, lab, step)
            if step % 16 == 0:
                runtime.synchronize(0)
        total = time.perf_counter() - t0
        runtime.synchronize(0)
        print(f"--- MixUp queue, parts (us a call; the calls nest): total "
              f"{total / args.calls * 1e6:.1f}")
        for name, v in sorted(spent.items(), key=lambda kv: -kv[1]):
            print(f"{name:14s} {v / args.calls * 1e6:9.1f}")
        # the kernel alone: MixUp's whole-batch blend launched back to back (its launch
        # costs less than its run: the stream's time is the kernel's), per AHEAD
        from millipyde.graph.codegen import mix as mix_codegen
        from millipyde.training.batch_mix import _launch_box, _no_labels

        flat = runtime.reshape(x._materialize(), (x.size,))
        lab0, dst0, _ = _no_labels(0)
        for ahead in (1, 4, 8, 16) if runtime.codegen_target != "cpu" else ():
            mix_codegen.AHEAD = ahead
            kernel = mix_codegen.mix_kernel(runtime.codegen_target, runtime.simulated)
            kargs = (flat, dst0, lab0, n, 3, hw, hw, 0, 0.3, 0, hw, 0, hw, 0.3)
            _launch_box(kernel, 0, (3, hw, hw), kargs)  # compiled, loaded
            runtime.synchronize(0)
            t0 = time.perf_counter()
            for _ in range(50):
                _launch_box(kernel, 0, (3, hw, hw), kargs)
            runtime.synchronize(0)
            rows[f"MixUp kernel, AHEAD {ahead}"] = [(time.perf_counter() - t0) / 50]
        mix_codegen.AHEAD = 8
    print(f"batch {n} x 3 x {hw} x {hw} float32, medians (us)")
    for k, v in rows.items():
        print(f"{k:32s} {statistics.median(v) * 1e6:9.1f}")


if __name__ == "__main__":
    main()
