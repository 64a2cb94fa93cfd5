"""Issue 4's measurement: the thesis 5-op chain fused vs fusion off vs cuCIM op by op.

Chain: gaussian(2), adjust_gamma(2), fliplr, rotate(45), rgb2grey on one RGBA image (default
6000 wide, 8000 high), device-resident, CUDA events (or wall clock on the cpu backend), median of
``--repeat`` after a warm-up, in one run. Outputs are checked against each other: fused vs
unfused within one uint8 step, cuCIM (float64 throughout, no uint8 rounding between ops) within
3/255.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import millipyde as mp
from millipyde.backend import launcher
from millipyde.graph.exec import execute
from millipyde.graph.plan import schedule


def _chain(img: mp.gpuimage) -> None:
    img.gaussian(2)
    img.adjust_gamma(2)
    img.fliplr()
    img.rotate(45)
    img.rgb2grey()


def _timer():
    try:
        import cupy

        if mp.backend() not in ("cuda", "hip"):
            raise ImportError
    except ImportError:
        def wall(fn):
            t0 = time.perf_counter()
            fn()
            mp.synchronize()
            return (time.perf_counter() - t0) * 1e3
        return wall

    def events(fn):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        return cupy.cuda.get_elapsed_time(a, b)
    return events


def _median(fn, before, repeat: int, timer) -> float:
    ts = []
    for _ in range(repeat):
        state = before()
        ts.append(timer(lambda s=state: fn(s)))
    return statistics.median(ts)


def chain_input(width: int) -> tuple[np.ndarray, mp.gpuimage]:
    """The chain's input: random opaque RGBA, ``width`` wide, 4/3 as high, host and stored."""
    host = np.random.default_rng(0).integers(0, 256, (width * 4 // 3, width, 4), dtype=np.uint8)
    host[..., 3] = 255
    base = mp.gpuimage(host)
    base._materialize()
    return host, base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench fusion", description=__doc__)
    ap.add_argument("--width", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    w, h = args.width, args.width * 4 // 3
    host, base = chain_input(w)
    timer = _timer()

    def fresh():
        x = base.clone()
        x._materialize()
        mp.synchronize()
        return x

    def run(x, fuse):
        _chain(x)
        with schedule.fusion(fuse):
            execute.materialize(x._node)

    outs, rows = {}, {}
    # "-dispatch": every launch through numba-cuda's dispatcher (millipyde/backend/launcher.py off)
    for name, fuse, cached in (("fused", True, True), ("unfused", False, True),
                               ("fused-dispatch", True, False),
                               ("unfused-dispatch", False, False)):
        launcher.ENABLED = cached
        try:
            x = fresh()
            run(x, fuse)
            outs[name] = np.asarray(x)
            probe = fresh()
            _chain(probe)
            with schedule.fusion(fuse):
                kernels = len(probe.explain().kernels)
            rows[name] = {"ms": _median(lambda s, f=fuse: run(s, f), fresh, args.repeat, timer),
                          "kernels": kernels}
        finally:
            launcher.ENABLED = True
    ok = float(np.abs(outs["fused"] - outs["unfused"]).max()) <= 1.0 / 255 + 1e-12
    for name in rows:
        # the launch path changes nothing in what runs: bit-equal to its cached-launch twin
        same = np.array_equal(outs[name], outs[name.split("-")[0]])
        rows[name]["ok"] = ok and same
    try:
        import cupy
        from cucim.skimage import color, exposure, filters, transform

        def cucim_chain(dev):
            # millipyde blurs and corrects the colour channels only; alpha stays as it is
            y = dev.astype(cupy.float64)
            y[..., :3] = filters.gaussian(y[..., :3], sigma=2, mode="constant", cval=0,
                                          truncate=8, preserve_range=True, channel_axis=-1)
            y /= 255.0
            y[..., :3] = exposure.adjust_gamma(y[..., :3], 2)
            y = cupy.fliplr(y)
            y = transform.rotate(y, 45, order=1, mode="constant", cval=0)
            return color.rgb2gray(color.rgba2rgb(y))

        dev = cupy.asarray(host)
        ref = cupy.asnumpy(cucim_chain(dev))
        err = float(np.abs(ref - outs["fused"]).max())
        rows["cucim"] = {"ms": _median(cucim_chain, lambda: dev, args.repeat, timer),
                         "ok": err <= 3.0 / 255, "max_abs_diff_vs_fused": err}
    except Exception as exc:
        print(f"cucim: skipped ({type(exc).__name__}: {exc})")
    print(f"backend {mp.backend()}, {w}x{h} RGBA, median of {args.repeat}")
    for name, r in rows.items():
        ratio = rows[name]["ms"] / rows["fused"]["ms"]
        print(f"{name:16s} {r['ms']:10.3f} ms  {ratio:6.2f}x fused  "
              f"kernels={r.get('kernels', '-')}  {'ok' if r['ok'] else 'WRONG'}")
    out = Path(args.out or f"bench/results/fusion_{mp.backend()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"size": [h, w], "rows": rows,
                               "date": time.strftime("%Y-%m-%d")}, indent=1))
    return 0 if all(r["ok"] for r in rows.values()) else 1
