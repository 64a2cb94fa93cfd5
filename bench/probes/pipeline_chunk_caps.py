"""A Pipeline's chunk size against its wall time on one device and on several.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/pipeline_chunk_caps.py \
        [--size 3500x4666] [--inputs 100] [--caps 256,4,2,1] [--devices 2]

The thesis 5-op chain (``bench_pipeline.FIVE``) over ``--inputs`` RGBA images of ``--size``,
made alternately on the devices (spread, as ``bench_pipeline``'s part B(1)), with the chunk
cap ``pipeline.chunks.CHUNK`` set before each pair of cases (the bytes cap ``CHUNK_BYTES`` still
applies: the default 256 gives 8 inputs a chunk at 3500x4666). Each case: one warm-up run,
then four runs on fresh inputs, each timed from the call to every output materialised and the
devices synchronised; prints the best and every run.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE  # noqa: E402
from millipyde.pipeline import chunks  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="3500x4666", help="HxW")
    ap.add_argument("--inputs", type=int, default=100)
    ap.add_argument("--caps", default="256,4,2,1")
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=4)
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    host = np.random.default_rng(0).integers(0, 256, (h, w, 4), dtype=np.uint8)
    ops = [mp.Operation(name, *a) for name, a in FIVE]
    bases = []
    for d in range(args.devices):
        with mp.Device(d):
            b = mp.gpuimage(host)
            b._materialize()
            bases.append(b)

    def make(nd: int) -> list:
        xs = []
        for i in range(args.inputs):
            with mp.Device(i % nd):
                xs.append(bases[i % nd].clone())
        for x in xs:
            x._materialize()
        return xs

    for cap in (int(c) for c in args.caps.split(",")):
        chunks.CHUNK = cap
        for nd in sorted({1, args.devices}):
            device = 0 if nd == 1 else None
            warm = make(nd)[:2 * nd]
            mp.Pipeline(warm, ops, device=device).run()
            mp.synchronize()
            del warm
            times = []
            for _ in range(args.repeat):
                xs = make(nd)
                gc.collect()
                mp.synchronize()
                t0 = time.perf_counter()
                mp.Pipeline(xs, ops, device=device).run()
                for x in xs:
                    x._materialize()
                mp.synchronize()
                times.append(time.perf_counter() - t0)
            print(f"cap {cap:3d}, {nd} device(s): best {min(times):.4f} s; runs "
                  + " ".join(f"{t:.4f}" for t in times), flush=True)


if __name__ == "__main__":
    main()
