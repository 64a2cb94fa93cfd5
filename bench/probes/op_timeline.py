"""What runs between the call and the result in ``bench ops``'s timed region, per op (GPU).

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/op_timeline.py \\
        [--widths 512] [--ops gamma fliplr ...] [--contenders millipyde cucim] \\
        [--trace $OUT/tl.json] [--detail 5]

Runs exactly ``bench ops``'s loop for each op and contender (the runner from
``bench_ops._mp_run`` / ``ops_gpu_libs.cucim_run``; per call ``setup`` (millipyde: the resident
clone) and a device synchronize untimed, then the CUDA events around ``run``; ``--quick``'s 1
warm-up and 20 timed calls) under CUPTI (``torch.profiler``; it sees every CUDA runtime and
driver call of the process, CuPy's and numba-cuda's and the ctypes ``cuLaunchKernelEx`` too).
Each timed call is an annotation ``timed <contender> <op> <width> #<i>`` and, for millipyde,
its method and ``_materialize`` are annotated inside it (``method``, ``materialize``; one
Python frame each).

Printed: per case, the median event time (what ``bench ops`` reports) and host time of
``run``; then from the trace, per case, medians over the timed calls, in us from the start of
the timed annotation (the start event's ``cudaEventRecord`` is its first call): the
annotations, the first GPU work's start and the last one's end, every CUDA API call name
(calls per timed call, median start, median duration) and every GPU work item they queued
(kernels with grid and block, copies, memsets; matched by correlation id). ``--detail N``
prints the whole timeline of the N-th timed call of each case. ``--trace F`` keeps the Chrome
trace (``--analyze F`` reads a kept one again without a GPU).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATS = ("cuda_runtime", "cuda_driver")
MARKS = ("method", "materialize")


# ---------------------------------------------------------------- the run


def _mark_millipyde(method: str, mark) -> None:
    """Annotate the image class's ``method`` and ``_materialize`` (one frame each)."""
    import numpy as np

    import millipyde as mp

    cls = type(mp.gpuimage(np.zeros((2, 2, 4), np.uint8)))
    for name, label in ((method, "method"), ("_materialize", "materialize")):
        plain = getattr(cls, name)
        if getattr(plain, "_op_timeline", False):
            continue

        def marked(self, *a, _plain=plain, _label=label, **k):
            with mark(_label):
                return _plain(self, *a, **k)

        marked._op_timeline = True
        setattr(cls, name, marked)


def time_case(runner, label: str, repeat: int, warmup: int, mark,
              prof=None) -> tuple[list, list]:
    """``common.time_gpu``'s loop, annotated: (event ms, host ms of ``run``) per timed call.

    ``prof``: a ``cProfile.Profile`` enabled around each timed ``run`` only.
    """
    from bench.common import _elapsed_ms, _event, device_synchronize

    ev_ms, host_ms = [], []
    for i in range(warmup + repeat):
        with mark("setup"):
            if runner.setup is not None:
                runner.setup()
            device_synchronize()
        start, end = _event(), _event()
        with mark(f"timed {label} #{i - warmup}"):
            start.record()
            t0 = time.perf_counter()
            if prof is not None and i >= warmup:
                prof.runcall(runner.run)
            else:
                runner.run()
            if runner.sync is not None:
                runner.sync()
            t1 = time.perf_counter()
            end.record()
        end.synchronize()
        if i >= warmup:
            ev_ms.append(_elapsed_ms(start, end))
            host_ms.append((t1 - t0) * 1e3)
    return ev_ms, host_ms


def run_cases(args, mark) -> None:
    """Every (width, op, contender) case in ``bench ops``'s order, timed and annotated."""
    from bench.bench_ops import _inputs, _mp_run
    from bench.common import gpu_copy_bandwidth
    from bench.ops_gpu_libs import cucim_run
    from bench.ops_spec import OPS

    gpu_copy_bandwidth()  # bench ops does this first (its 2 GB stay in CuPy's pool)
    builders = {"millipyde": _mp_run, "cucim": cucim_run}
    for w in args.widths:
        h = w * 4 // 3
        rgba, grey = _inputs(w, h, args.seed)
        for name in args.ops:
            op = OPS[name]
            for who in args.contenders:
                if who == "millipyde" and args.marks:
                    _mark_millipyde(op.method, mark)
                runner = builders[who](op, grey if op.grey_input else rgba)
                before = _replay_state()
                prof = cProfile.Profile() if args.pyprofile and who == "millipyde" else None
                ev, host = time_case(runner, f"{who} {name} {w}", args.repeat, args.warmup,
                                     mark, prof)
                print(f"{name:<10} {w:>5} {who:<10} event {statistics.median(ev) * 1e3:8.1f} us"
                      f"  host(run) {statistics.median(host) * 1e3:7.1f} us"
                      f"  (min {min(ev) * 1e3:.1f} / {min(host) * 1e3:.1f})", flush=True)
                print(f"{'':>17} event us per call: {' '.join(f'{x * 1e3:.0f}' for x in ev)}")
                if who == "millipyde":
                    _replay_report(before)
                if prof is not None:
                    pstats.Stats(prof).sort_stats("tottime").print_stats(args.pyprofile)


def _replay_state() -> tuple[dict, set]:
    from millipyde.graph.exec import replay

    return dict(replay.stats), set(replay._cache)


def _replay_report(before: tuple[dict, set]) -> None:
    """The replay cache's hits and misses in the case, and its new plans' replay launches."""
    from millipyde.graph.exec import replay

    stats, keys = before
    delta = {k: v - stats.get(k, 0) for k, v in replay.stats.items()}
    plans = []
    for key, entry in replay._cache.items():
        if key in keys:
            continue
        kinds = [shell.kind for shell, _, _ in entry.kernels]
        fast = entry.fast
        bound = getattr(fast, "bound", None)
        plans.append(f"kernels {kinds}, replay launch {type(fast).__name__}"
                     f" / {type(bound).__name__}")
    print(f"{'':>17} replay {delta}; new plans: {plans or 'none'}")


def profile_run(args) -> list[dict]:
    """``run_cases`` under torch.profiler (CUPTI); the Chrome trace's events."""
    if args.no_profile:
        run_cases(args, lambda label: contextlib.nullcontext())
        return []
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_cases(args, record_function)
    path = args.trace or "/tmp/op_timeline.json"
    prof.export_chrome_trace(path)
    print(f"trace: {path}")
    return load(path)


# ---------------------------------------------------------------- the analysis


def load(path: str) -> list[dict]:
    """The complete ("X") events of a Chrome trace."""
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X"]


def timelines(events: list[dict]) -> dict[str, list[dict]]:
    """case label -> one dict per timed call: start, end, marks, API calls and their GPU work.

    GPU work is the API calls' (by correlation id) and, marked ``(uncorrelated)``, any other
    that starts after the timed region's start and before the next ``setup``.
    """
    spans = sorted(((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e)
                    for e in events), key=lambda x: (x[0], x[1]))
    starts = [s for s, _, _ in spans]
    gpu_all = [(s, t, _gpu_name(e), int(e.get("args", {}).get("correlation", -1)))
               for s, t, e in spans if e.get("cat") in GPU_CATS]
    gpu_starts = [g[0] for g in gpu_all]
    setups = [s for s, _, e in spans
              if e.get("cat") == "user_annotation" and e.get("name") == "setup"]
    cases: dict[str, list[dict]] = collections.defaultdict(list)
    for s, t, e in spans:
        name = e.get("name", "")
        if e.get("cat") != "user_annotation" or not name.startswith("timed ") or " #-" in name:
            continue
        inside = [x for x in spans[bisect.bisect_left(starts, s):bisect.bisect_right(starts, t)]
                  if x[1] <= t and x[2] is not e]
        api = [(a, b, x["name"], int(x.get("args", {}).get("correlation", -1)))
               for a, b, x in inside if x.get("cat") in API_CATS]
        marks = [(a, b, x["name"]) for a, b, x in inside
                 if x.get("cat") == "user_annotation" and x["name"] in MARKS]
        ours = {c for *_, c in api}
        k = bisect.bisect_right(setups, t)
        bound = setups[k] if k < len(setups) else t + 5000.0
        gpu = [(a, b, n if c in ours else f"(uncorrelated) {n}")
               for a, b, n, c in gpu_all[bisect.bisect_left(gpu_starts, s):
                                         bisect.bisect_right(gpu_starts, bound)]]
        cases[name.rsplit(" #", 1)[0]].append(
            {"start": s, "end": t, "api": [a[:3] for a in api], "marks": marks, "gpu": gpu})
    return cases


def _gpu_name(e: dict) -> str:
    args = e.get("args", {})
    if e.get("cat") == "kernel":
        return (f"kernel {e['name'][:70]} grid {args.get('grid')} block {args.get('block')} "
                f"stream {args.get('stream')}")
    return f"{e['cat']} {e['name'][:40]} {args.get('bytes', '?')} B stream {args.get('stream')}"


def summarize(label: str, calls: list[dict]) -> None:
    """Medians over a case's timed calls (us from the timed annotation's start)."""
    med = statistics.median
    print(f"\n== {label}: {len(calls)} timed calls; us from the timed region's start (median)")
    print(f"   region (host) {med(c['end'] - c['start'] for c in calls):8.1f}")
    for mark in MARKS:
        got = [(m[0] - c["start"], m[1] - m[0]) for c in calls for m in c["marks"]
               if m[2] == mark]
        if got:
            print(f"   {mark:<12} at {med(a for a, _ in got):8.1f} "
                  f"for {med(d for _, d in got):8.1f}")
    busy = [c for c in calls if c["gpu"]]
    if busy:
        print(f"   GPU work from {med(c['gpu'][0][0] - c['start'] for c in busy):8.1f} to "
              f"{med(max(g[1] for g in c['gpu']) - c['start'] for c in busy):8.1f}; busy "
              f"{med(sum(g[1] - g[0] for g in c['gpu']) for c in busy):8.1f}")
    _per_name(calls, "api", "API")
    _per_name(calls, "gpu", "GPU")


def _per_name(calls: list[dict], key: str, title: str) -> None:
    """Each distinct name in ``key``: times per call, median start offset, median duration."""
    seen: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for c in calls:
        nth: dict[str, int] = collections.Counter()
        for a, b, name in c[key]:
            nth[name] += 1
            seen[f"{name} [{nth[name]}]"].append((a - c["start"], b - a))
    for name, got in sorted(seen.items(), key=lambda kv: statistics.median(a for a, _ in kv[1])):
        print(f"   {title} {len(got) / len(calls):5.2f}x at "
              f"{statistics.median(a for a, _ in got):8.1f} for "
              f"{statistics.median(d for _, d in got):8.1f}  {name}")


def detail(label: str, call: dict) -> None:
    """One timed call in order: marks, API calls and GPU work, us from its start."""
    t0 = call["start"]
    rows = ([(a, b, f"MARK {n}") for a, b, n in call["marks"]]
            + [(a, b, f"API  {n}") for a, b, n in call["api"]]
            + [(a, b, f"GPU  {n}") for a, b, n in call["gpu"]])
    print(f"\n-- {label}, one timed call (region {call['end'] - t0:.1f} us): start, duration")
    for a, b, what in sorted(rows):
        print(f"   {a - t0:8.1f} {b - a:8.1f}  {what}")


def analyze(events: list[dict], detail_at: int | None) -> int:
    """Print the summary (and ``detail``) of every case in the trace."""
    cases = timelines(events)
    if not cases:
        print("no 'timed ...' annotations in the trace")
        return 1
    for label, calls in cases.items():
        summarize(label, calls)
        if detail_at is not None and calls:
            detail(label, calls[min(detail_at, len(calls) - 1)])
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run (or ``--analyze`` a kept trace) and print the timelines."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", type=int, nargs="+", default=[512])
    ap.add_argument("--ops", nargs="+",
                    default=["gamma", "greyscale", "fliplr", "rotate45", "gaussian"])
    ap.add_argument("--contenders", nargs="+", default=["millipyde", "cucim"])
    ap.add_argument("--repeat", type=int, default=20, help="timed calls (bench ops --quick: 20)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed first calls (--quick: 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-marks", dest="marks", action="store_false",
                    help="no annotations around millipyde's method and _materialize")
    ap.add_argument("--no-profile", action="store_true",
                    help="only the event and host times, no profiler (its overhead gone)")
    ap.add_argument("--pyprofile", type=int, default=0, metavar="N",
                    help="cProfile millipyde's timed calls; print the top N by own time")
    ap.add_argument("--trace", help="where to write the Chrome trace")
    ap.add_argument("--analyze", help="read this kept trace instead of running")
    ap.add_argument("--detail", type=int, default=None,
                    help="also the whole timeline of this timed call of each case")
    args = ap.parse_args(argv)
    events = load(args.analyze) if args.analyze else profile_run(args)
    return analyze(events, args.detail) if events else 0


if __name__ == "__main__":
    sys.exit(main())
