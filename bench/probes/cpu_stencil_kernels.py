"""The cpu backend's fused Gaussian stencils alone, one thread, thread CPU (best of ``--repeat``).

    MILLIPYDE_BACKEND=cpu python bench/probes/cpu_stencil_kernels.py

- the batched kernel (``codegen.cpu.stencil_batch_source``) over ``--members`` 32x32 RGB uint8
  members, sigma 2 (truncate 8: 33 taps), microseconds a member, with the multiply-adds a member
  needs (rows pass: the rows' outputs of each group of taps that reads an input pixel;
  columns pass: the taps inside the image);
- the per-image kernel (``codegen.cpu.stencil_source``) on a 2000x2000 RGB uint8 image and on a
  4000x5333 float64 grey one, nanoseconds an output value.

Run it in any tree (it imports ``millipyde`` from the working directory) to set two side by
side. ``--out FILE`` saves the batched kernel's output (to check two trees bit for bit).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path.cwd()))

import millipyde.ops  # noqa: E402,F401  (registers the ops)
from millipyde.graph.codegen import cpu as codegen_cpu  # noqa: E402
from millipyde.graph.exec import tables  # noqa: E402
from millipyde.kernels import REGISTRY  # noqa: E402


def _best(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        c0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - c0)
    return best


def _batched(members: int, repeat: int, out: str | None) -> None:
    h = w = 32
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (members, h, w, 3), dtype=np.uint8)
    taps = REGISTRY["gaussian"].fn(2.0)
    r = len(taps) // 2
    tapss = np.tile(taps, (members, 1))
    rad = np.full(members, r, dtype=np.int64)
    dst = np.empty_like(src)
    band, strip = codegen_cpu.stencil_tiles(h, w, 3, len(taps), 1)
    k = codegen_cpu.stencil_batch_kernel()
    args = (src, np.arange(members, dtype=np.int64), dst, tapss, rad, 3, True, 255.0, band,
            strip, tables.IDENTITY_LUT, 0, 1)
    t = _best(lambda: k(*args), repeat)
    cols = sum(min(h, y + r + 1) - max(0, y - r) for y in range(h)) * w * 3
    print(f"batched, {members} x 32x32 RGB uint8, {len(taps)} taps: {t / members * 1e6:.1f} us "
          f"a member (columns pass {cols:,} multiply-adds, rows pass at least as many)")
    if out:
        np.save(out, dst)


def _per_image(shape: tuple[int, ...], dtype: type, repeat: int) -> None:
    rng = np.random.default_rng(1)
    src = (rng.integers(0, 256, shape, dtype=np.uint8) if dtype == np.uint8
           else rng.random(shape))
    h, w, c = src.shape
    taps = REGISTRY["gaussian"].fn(2.0)
    band, strip = codegen_cpu.stencil_tiles(h, w, min(c, 3), len(taps), 1)
    dst = np.empty_like(src)
    k = codegen_cpu.stencil_kernel()
    full = 255.0 if dtype == np.uint8 else 1.0
    t = _best(lambda: k(src, dst, taps, min(c, 3), dtype == np.uint8, full, band, strip,
                        tables.IDENTITY_LUT, False, False, 0, 1), repeat)
    print(f"per image, {h}x{w}x{c} {np.dtype(dtype).name}: {t * 1e3:.0f} ms, "
          f"{t / src.size * 1e9:.2f} ns an output value")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=250)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--small-only", action="store_true")
    args = ap.parse_args()
    _batched(args.members, args.repeat, args.out)
    if not args.small_only:
        _per_image((2000, 2000, 3), np.uint8, 3)
        _per_image((4000, 5333, 1), np.float64, 3)


if __name__ == "__main__":
    main()
