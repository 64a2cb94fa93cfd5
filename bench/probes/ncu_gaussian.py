"""Run the Gaussian (sigma 2, 33 taps) on 6000x8000 float64 grey and RGBA uint8 (a target for
``ncu``, GPU only): twice each, so ``--launch-skip`` can pass over the warm-up.

    ncu --clock-control none -k regex:tile2d --launch-skip 1 -c 1 \
        python3 bench/probes/ncu_gaussian.py grey|rgba
"""

from __future__ import annotations

import sys

import numpy as np

import millipyde as mp

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    kind = sys.argv[1] if len(sys.argv) > 1 else "grey"
    host = (rng.random((8000, 6000)) if kind == "grey"
            else rng.integers(0, 256, (8000, 6000, 4), dtype=np.uint8))
    base = mp.gpuimage(host)
    base._materialize()
    for _ in range(2):
        x = base.clone()
        x.gaussian(2)
        x._materialize()
    mp.synchronize()
