"""Run the thesis 5-op chain once after a warm-up (a target for ``ncu``, GPU only).

    ncu --clock-control none -k regex:'tile2d|kernel' --launch-skip 2 -c 2 \
        python3 bench/probes/ncu_chain.py [--unfused]

``--unfused`` runs it with fusion off (five kernels per chain).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_fusion import _chain, chain_input  # noqa: E402
from millipyde.graph.plan import schedule  # noqa: E402

if __name__ == "__main__":
    _, base = chain_input(6000)
    with schedule.fusion("--unfused" not in sys.argv[1:]):
        for _ in range(2):
            x = base.clone()
            _chain(x)
            x._materialize()
    mp.synchronize()
