"""The uint8 Gaussian's kernel forms side by side: what the cold-start cuts cost a method call.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/gaussian_variants.py

``graph.exec.stencil.TABLES_ALWAYS`` (uint8 tiles with their tables on, identity where the
chain has none: fewer kernel variants) and ``graph.codegen.tile2d.PACKED_LOOP`` (the RGBA
tile's channels in a run-time loop: a smaller kernel to compile) are both on by default; this
times ``gaussian(2)`` on uint8 RGB and RGBA images at two sizes with both on and both off, in
one process (each form's kernels compiled in an untimed warm-up). Timed as
``bench_single.py`` times a method: the call, ``_materialize()`` and a device synchronize, on
a clone made untimed; median of ``--repeat``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from millipyde.graph.codegen import tile2d  # noqa: E402
from millipyde.graph.exec import stencil  # noqa: E402


def _time(src: mp.gpuimage, repeat: int) -> float:
    times = []
    for _ in range(repeat + 3):
        g = src.clone()
        g._materialize()
        mp.synchronize()
        t0 = time.perf_counter()
        g.gaussian(2.0)
        g._materialize()
        mp.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[3:]) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases = [(f"{h}x{w}x{c}", rng.integers(0, 256, (h, w, c), dtype=np.uint8))
             for h, w in ((512, 682), (3000, 4000)) for c in (3, 4)]
    forms = {"on (default)": (True, True), "off (variants, unrolled)": (False, False)}
    rows: dict[str, dict[str, float]] = {}
    for _ in range(2):  # two interleaved rounds: the machine's drift falls on both forms
        for form, (tables, loop) in forms.items():
            stencil.TABLES_ALWAYS, tile2d.PACKED_LOOP = tables, loop
            for name, host in cases:
                t = _time(mp.gpuimage(host), args.repeat)
                got = rows.setdefault(name, {})
                got[form] = min(got.get(form, t), t)
    print(f"\n| image | {' | '.join(forms)} | on / off |")
    print("| --- | " + " | ".join("---:" for _ in forms) + " | ---: |")
    for name, got in rows.items():
        on, off = (got[f] for f in forms)
        print(f"| {name} | {on:.4f} ms | {off:.4f} ms | {on / off:.2f}x |")


if __name__ == "__main__":
    main()
