"""Time the one-pass 2-D tiled Gaussian alone for several tile geometries (GPU only).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/tile_ablation.py

6000x8000 RGBA uint8 and float64 grey, sigma 2; kernels only (buffers allocated once), CUDA
events, median of 20; output checked equal to the default geometry's. RGBA runs both the
byte-loading kernel and the one staging words (``packed``). Geometries needing more than 48 KB of
shared memory per block run opted in (``runtime.launch_grid``), up to the device's limit.
``--sigma`` picks the Gaussian (2: 33 taps).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.probes.smoke_gpu import timed  # noqa: E402
from millipyde.backend import ACTIVE as runtime  # noqa: E402
from millipyde.graph.codegen import gpu as codegen_gpu  # noqa: E402
from millipyde.graph.codegen.loader import load  # noqa: E402
from millipyde.graph.plan import footprint  # noqa: E402
from millipyde.kernels import REGISTRY  # noqa: E402

GEOMETRIES = [(32, 4, 8, 8, 2), (32, 4, 8, 8, 4), (32, 8, 8, 8, 1), (32, 8, 8, 8, 2),
              (32, 4, 4, 8, 2), (32, 4, 8, 4, 4), (32, 2, 8, 8, 4), (64, 2, 8, 8, 2),
              (64, 4, 8, 8, 2), (32, 4, 16, 8, 2)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sigma", type=float, default=2.0)
    sigma = ap.parse_args().sigma
    rng = np.random.default_rng(0)
    imgs = {"rgba": rng.integers(0, 256, (8000, 6000, 4), dtype=np.uint8),
            "grey": rng.random((8000, 6000, 1))}
    taps = REGISTRY["gaussian"].fn(sigma)
    taps_d = runtime.upload_small(taps, 0)
    r = len(taps) // 2
    lut = runtime.upload_small(np.tile(np.arange(256, dtype=np.uint8), (2, 4, 1)), 0)
    for kind, host in imgs.items():
        src = runtime.from_host(host, 0)
        c = host.shape[2]
        is_int = host.dtype == np.uint8
        first = None
        cases = [(g, p) for p in ((False, True) if c == 4 else (False,)) for g in GEOMETRIES]
        for geom, packed in cases:
            name = f"{kind}{' packed' if packed else ''} {geom}"
            shared = (codegen_gpu.packed_shared_bytes if packed
                      else codegen_gpu.tile_shared_bytes)(r, geom)
            if shared > runtime.shared_limit(0):
                print(f"{name}: {shared} B shared, more than the device allows")
                continue
            src_text = codegen_gpu.stencil_2d_source(
                c, min(c, 3), geometry=geom, packed=packed,
                unsigned=codegen_gpu.unsigned_source(host.dtype))
            fn = load(src_text, "cuda").tile2d
            dst = runtime.empty(host.shape, host.dtype, 0)
            grid = codegen_gpu.tile_grid(8000, 6000, geom)
            # the kernels read flat buffers (codegen/tile2d.py)
            ends = tuple(a.reshape(a.size) for a in (src, dst))
            if packed:
                ends = tuple(a.view(np.uint32).reshape(8000 * 6000) for a in (src, dst))
            span = runtime.upload_small(footprint.full_spans(
                8000, 6000, codegen_gpu.tile_size(geom)[0]), 0)
            args = (*ends, 8000, 6000, taps_d, is_int, 255.0 if is_int else 1.0, lut, span)

            def go(_=None, fn=fn, grid=grid, geom=geom, shared=shared, args=args):
                runtime.launch_grid(fn, grid, geom[:2], 0, *args, shared=shared)

            ms = timed(go)
            out = runtime.to_host(dst)
            if first is None:
                first = out
            same = bool(np.array_equal(out, first))
            regs = next(iter(fn.get_regs_per_thread().values()))
            print(f"{name}: {ms:.3f} ms  regs {regs}  shared {shared} B  "
                  f"{'same' if same else 'DIFFERENT'}", flush=True)


if __name__ == "__main__":
    main()
