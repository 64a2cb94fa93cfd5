"""Does the process exit cleanly after multi-device work? Prints 'done' then exits.

Usage: python3 bench/probes/exit_probe.py {pipeline|generator|generator-open|pipeline-nopool}
"""

from __future__ import annotations

import os
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "pipeline"
if mode.endswith("nopool"):
    os.environ["MILLIPYDE_GPU_POOL"] = "0"

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402

imgs = [mp.gpuimage(np.random.default_rng(i).integers(0, 256, (64, 64, 3), dtype=np.uint8))
        for i in range(32)]
ops = [mp.Operation("fliplr"), mp.Operation("gaussian", 1)]
if mode.startswith("pipeline"):
    mp.Pipeline(imgs, ops).run()
elif mode == "generator":
    with mp.Generator(imgs, ops, outputs=64) as g:
        outs = list(g)
else:  # an infinite generator left open: its threads are still alive at exit
    g = mp.Generator(imgs, ops)
    outs = [next(g) for _ in range(10)]
print("done", mode, mp.get_device_count(), flush=True)
