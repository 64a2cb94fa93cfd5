"""Is a chunked Pipeline run bound by the host or by the GPU? Its kernels from a CUPTI trace.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/pipeline_kernels.py [--inputs 2000] [--size 512] [--runs 3]

The 5-op chain of ``bench_pipeline`` (part A) over ``--inputs`` copies of a ``--size`` RGB
image, run once to compile and record, then ``--runs`` times on fresh inputs (made untimed) for
one device and, where there are several, for every device with the inputs made on device 0:
first without the profiler (the best wall time), then the same runs under ``torch.profiler``
(CUPTI sees every kernel of the process, Numba's included). From the trace, per device: the
kernels, copies and sets with their summed durations, the union of the device's busy intervals
against the runs' wall time (a busy share near 1: bound by the GPU; well below: by the host),
and the largest kernels. Per profiled run and device, the first device event's start and the
last one's end in ms from the run's call (``run N`` ranges in the same trace), and the busy
time in between: the start lag and the tail a scaling figure loses.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, _inputs  # noqa: E402
from bench.probes.policy_gpu_time import _busy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--top", type=int, default=8, help="largest kernels listed")
    a = ap.parse_args()
    from torch.profiler import ProfilerActivity, profile, record_function

    rng = np.random.default_rng(0)
    base = mp.gpuimage(rng.integers(0, 256, (a.size, a.size, 3), dtype=np.uint8))
    base._materialize()
    ops = [mp.Operation(name, *args) for name, args in FIVE]
    ngpu = mp.get_device_count()
    cases = [("1 device", 0)] + ([(f"{ngpu} devices, inputs on 0", None)] if ngpu > 1 else [])
    for tag, device in cases:
        mp.Pipeline(_inputs(base, max(16, 4 * ngpu)), ops, device=device).run()
        mp.synchronize()
        plain = []
        for _ in range(a.runs):
            xs = _inputs(base, a.inputs)
            t0 = time.perf_counter()
            mp.Pipeline(xs, ops, device=device).run()
            mp.synchronize()
            plain.append(time.perf_counter() - t0)
        inputs = [_inputs(base, a.inputs) for _ in range(a.runs)]
        walls = []
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i, xs in enumerate(inputs):
                t0 = time.perf_counter()
                with record_function(f"run {i}"):
                    mp.Pipeline(xs, ops, device=device).run()
                    mp.synchronize()
                walls.append(time.perf_counter() - t0)
        path = Path(tempfile.mkdtemp()) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
        dev = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
               and "dur" in e]
        n = a.runs * a.inputs
        print(f"== {tag}: wall best {min(plain) * 1e3:.2f} ms plain "
              f"({a.inputs / min(plain):,.0f} img/s), profiled runs "
              f"{[round(w * 1e3, 2) for w in walls]} ms", flush=True)
        if not dev:
            print("   no device events in the trace (CUPTI did not record)")
            continue
        _run_edges(events, dev)
        for d in sorted({e.get("args", {}).get("device", 0) for e in dev}):
            mine = [e for e in dev if e.get("args", {}).get("device", 0) == d]
            busy = _busy([(e["ts"], e["ts"] + e["dur"]) for e in mine])
            span = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
            print(f"   device {d}: busy {busy / 1e3:.2f} ms over the {a.runs} runs "
                  f"({busy / n:.2f} us an input of all), {busy / 1e3 / a.runs:.2f} ms a run "
                  f"against {sum(walls) / a.runs * 1e3:.2f} ms of wall a run "
                  f"({busy / 1e3 / sum(w * 1e3 for w in walls):.0%}); span "
                  f"{span / 1e3:.2f} ms")
            by: dict[tuple[str, str], list[float]] = {}
            for e in mine:
                by.setdefault((e["cat"], e["name"][:80]), []).append(e["dur"])
            for (cat, name), ds in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:a.top]:
                print(f"     {cat:10s} {len(ds) / a.runs:7.1f} a run, mean "
                      f"{statistics.mean(ds):8.1f} us, {sum(ds) / a.runs / 1e3:7.3f} ms a run"
                      f"  {name}")


def _run_edges(events: list[dict], dev: list[dict]) -> None:
    """Per run and device: first start, last end (ms from the run's call) and busy between."""
    runs = sorted((e for e in events if str(e.get("name", "")).startswith("run ")
                   and e.get("ph") == "X"), key=lambda e: e["ts"])
    for r in runs:
        lo, hi = r["ts"], r["ts"] + r["dur"]
        parts = []
        for d in sorted({e.get("args", {}).get("device", 0) for e in dev}):
            mine = [(e["ts"], e["ts"] + e["dur"]) for e in dev
                    if e.get("args", {}).get("device", 0) == d and lo <= e["ts"] <= hi]
            if mine:
                parts.append(f"device {d} {(min(s for s, _ in mine) - lo) / 1e3:.2f}-"
                             f"{(max(t for _, t in mine) - lo) / 1e3:.2f} ms, busy "
                             f"{_busy(mine) / 1e3:.2f}")
        print(f"   {r['name']}: {r['dur'] / 1e3:.2f} ms; " + "; ".join(parts))


if __name__ == "__main__":
    main()
