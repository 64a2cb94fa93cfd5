"""Run the fused thesis 5-op chain once after a warm-up (a target for ``ncu``, GPU only).

    ncu --clock-control none -k regex:'tile2d|kernel' --launch-skip 2 -c 2 \
        python3 bench/ncu_chain.py
"""

from __future__ import annotations

import numpy as np

import millipyde as mp
from bench.bench_fusion import _chain

if __name__ == "__main__":
    host = np.random.default_rng(0).integers(0, 256, (8000, 6000, 4), dtype=np.uint8)
    for _ in range(2):
        x = mp.gpuimage(host)
        _chain(x)
        x._materialize()
    mp.synchronize()
