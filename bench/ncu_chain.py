"""Run the fused thesis 5-op chain once after a warm-up (a target for ``ncu``, GPU only).

    ncu --clock-control none -k regex:'tile2d|kernel' --launch-skip 2 -c 2 \
        python3 bench/ncu_chain.py
"""

from __future__ import annotations

import millipyde as mp
from bench.bench_fusion import _chain, chain_input

if __name__ == "__main__":
    _, base = chain_input(6000)
    for _ in range(2):
        x = base.clone()
        _chain(x)
        x._materialize()
    mp.synchronize()
