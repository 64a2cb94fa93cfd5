"""rgb2grey on 6000x8000 RGBA for several pixels-per-thread settings (GPU only).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/grey_items.py

Sets ``gather.GATHER_ITEMS`` (pixels of a row each thread takes per trip of a packed gather
without a sampler), times the op (CUDA events, median of 20; host path included, the clone
not) and reports it against the copy bandwidth for the bytes that must move (4 read + 8
written per pixel). Every setting's output must equal the first's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.probes.smoke_gpu import copy_bandwidth, timed  # noqa: E402
from millipyde.graph.codegen import gather  # noqa: E402
from millipyde.graph.exec import gather as exec_gather  # noqa: E402


def main() -> None:
    host = np.random.default_rng(0).integers(0, 256, (8000, 6000, 4), dtype=np.uint8)
    base = mp.gpuimage(host)
    base._materialize()
    bw = copy_bandwidth()
    first = None
    for items in (1, 2, 4, 8, 16):
        gather.GATHER_ITEMS = items
        exec_gather._gather_fn.cache_clear()

        def clone():
            x = base.clone()
            x._materialize()
            return x

        def op(x):
            x.rgb2grey()
            x._materialize()
            return x

        ms = timed(op, clone)
        out = np.asarray(op(clone()))
        first = out if first is None else first
        share = host.shape[0] * host.shape[1] * 12 / (ms * 1e-3) / bw * 100
        same = "same" if np.array_equal(out, first) else "DIFFERENT"
        print(f"items {items:2d}: {ms:.3f} ms, {share:.1f}% of copy, {same}", flush=True)

if __name__ == "__main__":
    main()
