"""Quick GPU smoke timing of single ops at 6000x8000 RGBA (device-resident, events, median).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda \
        python3 -m bench.probes.smoke_gpu [--check] [--json F]

Per op: ``total`` = clone + op (what the first smoke reported), ``clone`` = the device clone
alone, ``op`` = the op alone on an already-stored input (allocation, parameter upload and Python
dispatch included), and % of roofline = bytes that must move / (op time x copy bandwidth).
``kernel`` rows time the GPU kernels alone (buffers allocated once, 20 back-to-back launches).
``MILLIPYDE_GPU_VARIANTS=0`` forces the generic kernels and ``MILLIPYDE_GPU_POOL=0`` plain
cudaMalloc: run once with both and once without for a before/after table. ``--check`` compares
the GPU variants with the generic kernels on the full-size images (same process).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import millipyde as mp
from millipyde import config
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import gpu as codegen_gpu
from millipyde.graph.exec import execute
from millipyde.graph.exec import gather as exec_gather
from millipyde.graph.exec import stencil as exec_stencil
from millipyde.graph.exec import variants as exec_variants
from millipyde.graph.plan import schedule
from millipyde.kernels import REGISTRY

H, W = 8000, 6000


def _events():
    import cupy

    return cupy.cuda.Event(), cupy.cuda.Event()


def timed(fn, setup=None, reps: int = 20) -> float:
    """Median milliseconds of ``fn(setup())`` between CUDA events (setup not timed)."""
    import cupy

    fn(setup() if setup else None)
    mp.synchronize()
    ts = []
    for _ in range(reps):
        arg = setup() if setup else None
        mp.synchronize()
        a, b = _events()
        a.record()
        fn(arg)
        b.record()
        b.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (bytes read + written), 384 MB each way."""
    import cupy

    a = cupy.empty(384 << 20, dtype=np.uint8)
    a.fill(1)
    b = cupy.empty_like(a)
    t = timed(lambda _: b.__setitem__(Ellipsis, a), reps=20)
    return 2 * a.nbytes / (t * 1e-3)


def _mat(img) -> None:
    execute.materialize(img._node)


def ops_table(base, grey) -> list[tuple[str, object, object, float]]:
    n = H * W
    return [
        ("gamma", base, lambda i: i.adjust_gamma(2), 8.0 * n),
        ("greyscale", base, lambda i: i.rgb2grey(), 4.0 * n + 8.0 * n),
        ("fliplr", base, lambda i: i.fliplr(), 8.0 * n),
        ("transpose", base, lambda i: i.transpose(), 8.0 * n),
        ("rotate45", base, lambda i: i.rotate(45), 8.0 * n),
        ("gaussian_grey", grey, lambda i: i.gaussian(2), 16.0 * n),
        ("gaussian_rgba", base, lambda i: i.gaussian(2), 8.0 * n),
        ("chain5", base, lambda i: (i.gaussian(2), i.adjust_gamma(2), i.fliplr(), i.rotate(45),
                                    i.rgb2grey()), 4.0 * n + 8.0 * n),
    ]


def _stencil_rows(name: str, img, taps: np.ndarray, bw: float, reps: int) -> list[dict]:
    taps_d = runtime.upload_small(np.ascontiguousarray(taps), 0)
    r = len(taps) // 2
    src3 = runtime.as_3d(img._materialize())
    h, w, c = src3.shape
    nc = min(c, 3)
    tmp = runtime.empty((h, w, nc), np.float64, 0)
    dst = runtime.empty(src3.shape, src3.dtype, 0)
    is_int = src3.dtype.kind in "ui"
    full = 255.0 if is_int else 1.0
    moved = float(src3.nbytes * 2)
    rows_fn, cols_fn = exec_stencil._stencil_fns()

    def tiled(_):
        for _ in range(reps):
            exec_stencil.run_stencil_tiled(src3, tmp, dst, taps_d, r, is_int, full, 0)

    trows, tcols = exec_stencil._stencil_tiled_fns(c, nc)
    rb, cb = codegen_gpu.ROWS_BLOCK, codegen_gpu.COLS_BLOCK
    sw = codegen_gpu.rows_segment_width(rb[0], r)

    def tiled_rows(_):
        for _ in range(reps):
            runtime.launch_grid(trows, codegen_gpu.rows_grid(h, w, rb), rb, 0, src3, tmp, taps_d,
                                sw, shared=codegen_gpu.rows_shared_bytes(rb, nc, r))

    def tiled_cols(_):
        for _ in range(reps):
            runtime.launch_grid(tcols, codegen_gpu.cols_grid(h, w, c, cb), cb, 0, src3, tmp, dst,
                                taps_d, is_int, full, shared=codegen_gpu.cols_shared_bytes(cb, r))

    def generic(_):
        for _ in range(reps):
            runtime.launch_2d(rows_fn, h, w * nc, 0, src3, tmp, taps_d, nc)
            runtime.launch_2d(cols_fn, h, w * c, 0, src3, tmp, dst, taps_d, nc, is_int, full)

    out = []
    for label, fn in ((f"{name} tiled", tiled), (f"{name} tiled rows", tiled_rows),
                      (f"{name} tiled cols", tiled_cols), (f"{name} generic", generic)):
        t = timed(fn, reps=5) / reps
        out.append({"kernel": label, "ms": t, "roofline_pct": 100 * moved / (t * 1e-3) / bw})
    return out


def kernel_only(base, grey, bw: float) -> list[dict]:
    """The GPU kernels alone: buffers allocated once, 20 back-to-back launches, per-launch ms."""
    reps = 20
    taps = REGISTRY["gaussian"].fn(2.0)
    rows = _stencil_rows("gaussian_grey", grey, taps, bw, reps)
    rows += _stencil_rows("gaussian_rgba", base, taps, bw, reps)
    src = base._materialize()
    n = H * W
    flat, _ = exec_gather._lut_rgba_fns()
    lut = np.tile(np.arange(256, dtype=np.uint8), (2, 4, 1))
    lut[0, :3] = (255.0 * (np.arange(256) / 255.0) ** 2 + 0.5).astype(np.uint8)
    lut_d = runtime.upload_small(lut, 0)
    dst = runtime.empty(src.shape, src.dtype, 0)
    s32, d32 = exec_variants.words(src, flat=True), exec_variants.words(dst, flat=True)
    launch = codegen_gpu.lut_launch(n)  # as execute launches it

    def lutk(_):
        for _ in range(reps):
            runtime.launch_blocks(flat, *launch, 0, s32, d32, lut_d, True)

    t = timed(lutk, reps=5) / reps
    rows.append({"kernel": "gamma rgba-u32 lut", "ms": t,
                 "roofline_pct": 100 * 2 * src.nbytes / (t * 1e-3) / bw})
    return rows


def profile_op(base) -> None:
    """Where the host time of one small op goes (Python dispatch, planning, allocation)."""
    import cProfile
    import pstats

    xs = []
    for _ in range(50):
        x = base.clone()
        _mat(x)
        xs.append(x)
    mp.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for x in xs:
        x.adjust_gamma(2)
        _mat(x)
    prof.disable()
    mp.synchronize()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def check(base, grey) -> list[str]:
    """GPU variants vs generic kernels on the full-size inputs (max abs difference)."""
    out = []
    for name, src, op, _ in ops_table(base, grey):
        res = {}
        for flag in ("1", "0"):
            os.environ["MILLIPYDE_GPU_VARIANTS"] = flag
            config.refresh()  # the variable is read once per process otherwise
            x = src.clone()
            op(x)
            res[flag] = np.asarray(x).astype(np.float64)
        os.environ.pop("MILLIPYDE_GPU_VARIANTS", None)
        config.refresh()
        diff = float(np.max(np.abs(res["1"] - res["0"])))
        out.append(f"check {name:14s} variant vs generic max|diff| = {diff:.3g}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--label", default="")
    ap.add_argument("--profile", action="store_true", help="cProfile 50 gamma ops (host side)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    base = mp.gpuimage(rng.integers(0, 256, (H, W, 4), dtype=np.uint8))
    base._materialize()
    grey = mp.gpuimage(rng.random((H, W)))
    grey._materialize()
    bw = copy_bandwidth()
    print(f"[{args.label}] variants={exec_variants.gpu_variants_enabled()} "
          f"pool={runtime._cupy_pool() is not None} copy bandwidth {bw / 1e12:.2f} TB/s")
    results = []
    for name, src, op, moved in ops_table(base, grey):
        def total(_, src=src, op=op):
            x = src.clone()
            op(x)
            _mat(x)

        def clone_only(_, src=src):
            _mat(src.clone())

        def stored(src=src):
            x = src.clone()
            _mat(x)
            return x

        def op_only(x, op=op):
            op(x)
            _mat(x)

        t, tc, to = timed(total), timed(clone_only), timed(op_only, stored)
        x = stored()
        op(x)
        nk = len(schedule.plan(x._node))
        pct = 100 * moved / (to * 1e-3) / bw
        results.append({"op": name, "total_ms": t, "clone_ms": tc, "op_ms": to,
                        "roofline_pct": pct, "kernels": nk})
        print(f"{name:14s} total {t:8.3f} ms  clone {tc:7.3f} ms  op {to:8.3f} ms  "
              f"{pct:5.1f}% roofline  {nk} kernel(s)", flush=True)
    kern = kernel_only(base, grey, bw) if exec_variants.gpu_variants_enabled() else []
    for fn in (*exec_stencil._stencil_tiled_fns(1, 1), *exec_stencil._stencil_tiled_fns(4, 3),
               *exec_gather._lut_rgba_fns()):
        for sig, kern_obj in list(getattr(fn, "overloads", {}).items()):
            try:
                regs = kern_obj.regs_per_thread
                local = kern_obj.local_mem_per_thread
                shared = kern_obj.shared_mem_per_block
                print(f"resources {fn.py_func.__name__} {sig}: {regs} regs, {local} B local, "
                      f"{shared} B static shared")
            except Exception as exc:  # informational only
                print(f"resources {fn.py_func.__name__}: {type(exc).__name__}: {exc}")
    for row in kern:
        print(f"kernel {row['kernel']:24s} {row['ms']:8.3f} ms  {row['roofline_pct']:5.1f}% "
              f"roofline", flush=True)
    if args.profile:
        profile_op(base)
    checks = check(base, grey) if args.check else []
    for line in checks:
        print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "copy_bw": bw, "ops": results, "kernels": kern,
                       "checks": checks}, f, indent=1)


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"done in {time.time() - t0:.1f} s", file=sys.stderr)
