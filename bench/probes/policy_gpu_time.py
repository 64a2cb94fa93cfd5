"""Is a policy batch bound by the host or by the GPU? Kernel time a batch from a CUPTI trace.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/policy_gpu_time.py [--policy randaugment] [--batches 100]
        [--trace trace.json]
    ncu --clock-control none --profile-from-start off --target-processes application-only \
        --section SpeedOfLight ... python3 bench/probes/policy_gpu_time.py --ncu

The recipe of ``bench_policies.py`` (six photographs at their own sizes, random resized crop
224, flip, the policy, float32 NCHW batches of 256 with ImageNet's mean and std, each taken by
torch). First ``--batches`` batches without the profiler (the wall period a batch), then the
same number under ``torch.profiler`` (CUPTI sees every kernel of the process, Numba's
included). From the trace: the kernels, copies and sets a batch with their summed durations,
the union of the device's busy intervals over the profiled window (the GPU's busy share), and
the largest kernels. A busy share near 1 says the batch is bound by its kernels; well below 1,
by the host (the worker's record and launches, or the consumer). With ``--ncu`` the probe is a
target for ``ncu``: the profiled range holds one batch after five warm-up batches.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_batches import _sync, _tensor  # noqa: E402
from bench.bench_policies import _recipe  # noqa: E402
from bench.bench_recipes import MEAN, STD, _photos  # noqa: E402


def _policy(name: str) -> object:
    return mp.RandAugment(2, 9) if name == "randaugment" else mp.TrivialAugmentWide()


def _busy(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="randaugment", choices=["randaugment", "trivial"])
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--ncu", action="store_true", help="profile one batch's range for ncu")
    a = ap.parse_args()
    from torch.profiler import ProfilerActivity, profile

    hosts = _photos()
    gen = mp.Generator([mp.gpuimage(h) for h in hosts], _recipe(_policy(a.policy), 224), seed=0)
    with gen.batches(a.size, dtype="float32", layout="NCHW", mean=MEAN, std=STD) as bs:
        for _ in range(5):
            _tensor(next(bs))
        _sync()
        if a.ncu:
            from numba import cuda

            cuda.profile_start()
            _tensor(next(bs))
            _sync()
            cuda.profile_stop()
            return
        t0 = time.perf_counter()
        for _ in range(a.batches):
            _tensor(next(bs))
        _sync()
        plain = (time.perf_counter() - t0) / a.batches
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(a.batches):
                _tensor(next(bs))
            _sync()
            profiled = (time.perf_counter() - t0) / a.batches
    path = a.trace or Path(tempfile.mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    dev = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and "dur" in e]
    if not dev:
        print("no device events in the trace (CUPTI did not record)")
        return
    first = min(e["ts"] for e in dev)
    last = max(e["ts"] + e["dur"] for e in dev)
    span = last - first
    busy = _busy([(e["ts"], e["ts"] + e["dur"]) for e in dev])
    n = a.batches
    print(f"policy {a.policy}, batches of {a.size}, {n} batches a window")
    print(f"wall a batch: {plain * 1e3:.3f} ms plain ({a.size / plain:,.0f} img/s), "
          f"{profiled * 1e3:.3f} ms profiled ({a.size / profiled:,.0f} img/s)")
    print(f"device span {span / 1e3:.2f} ms, busy {busy / 1e3:.2f} ms "
          f"({busy / span:.1%} of the span); busy a batch {busy / n / 1e3:.3f} ms "
          f"-> {a.size / (busy / n / 1e6):,.0f} img/s if the GPU alone bound it")
    by_cat: dict[str, list[float]] = {}
    by_name: dict[str, list[float]] = {}
    for e in dev:
        by_cat.setdefault(e["cat"], []).append(e["dur"])
        by_name.setdefault(e["name"][:90], []).append(e["dur"])
    for cat, ds in sorted(by_cat.items()):
        print(f"  {cat:11s} {len(ds) / n:6.2f} a batch, {sum(ds) / n / 1e3:.3f} ms a batch")
    print("largest (name, count a batch, mean us, ms a batch):")
    for name, ds in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:12]:
        print(f"  {len(ds) / n:5.2f}  {statistics.mean(ds):9.1f}  {sum(ds) / n / 1e3:7.3f}  {name}")


if __name__ == "__main__":
    main()
