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
import os
import statistics
import subprocess
import sys
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ENGINE_COMMANDS:
        return ENGINE_COMMANDS[argv[0]](argv[1:])
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


# ------------------------------------------------------------------------------------------
# One engine (issue 29): Pipelines recorded as batches, over one and several GPUs, and the
# Generator with a callable, each beside a baseline source tree in the same run.
#
#   source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
#   python3 bench/bench_pipeline.py engine --tree new=. --tree base=../base --out OUT
#
# ``engine`` runs ``engine-child`` once per tree (its own process: PYTHONPATH and kernel cache
# of that tree) and prints one table. Workloads, each timed until every output is computed on
# its device (materialized and synchronized), outputs checked against plain method calls on
# copies:
# - A: the 5-op chain over 2000 512x512 RGB inputs (astronaut resized), made before timing,
#   best of 3: one GPU (``device=0``), every GPU with the inputs made on GPU 0, every GPU with
#   the inputs spread when made (``with mp.Device(i % n)``);
# - B: the chain over 100 3500x4666 RGBA inputs: (1) spread when made, on 1, 2 (a child with
#   two visible GPUs) and all GPUs; (2) all made on GPU 0, on all GPUs, with its copy bound
#   (the bytes that must leave GPU 0 over the measured peer bandwidth);
# - C: ``recipes.figure_5_1_operations()`` (its colorize an opaque callable) over six 512x512
#   RGB photographs: ``batches(256)`` float32 NCHW taken by torch, and ``next()`` per output;
# - D (``--parts D``, the cpu backend's case): the chain over 1000 32x32 inputs, a Pipeline and
#   plain method calls one input after another.
# Each row also gives the process's CPU seconds per wall second during the timed runs (about
# 1.0 where one thread's host work under the GIL bounds the run). C's next() row also gives
# the garbage collector's passes by generation and their time within its timed run (a full
# collection in a process holding torch's and numba-cuda's objects can take longer than the
# run); ``BENCH_ENGINE_GC=collect`` runs a full collection before it, in every tree, and
# ``BENCH_ENGINE_GROWN`` sets ``generator_state.GROWN`` (a callable Generator's claims' cap)
# in trees that have it.
# ------------------------------------------------------------------------------------------

FIVE = [("gaussian", (2,)), ("adjust_gamma", (2,)), ("fliplr", ()), ("rotate", (45,)),
        ("rgb2grey", ())]


def _five_ops() -> list:
    return [mp.Operation(name, *args) for name, args in FIVE]


def _methods(x) -> None:
    for name, args in FIVE:
        getattr(x, name)(*args)


def _max_ulp(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference of two float arrays in units of the larger's spacing (0: equal)."""
    if a.shape != b.shape:
        return float("inf")
    a, b = a.astype(np.float64), b.astype(np.float64)
    d = np.abs(a - b)
    return float((d / np.spacing(np.maximum(np.abs(a), np.abs(b)))).max()) if d.any() else 0.0


def _sync_all() -> None:
    mp.synchronize()


def _timed(fn, reps: int) -> tuple[float, float, list[float]]:
    """Best wall seconds of ``fn(rep)`` (each returns after synchronizing), the CPU seconds per
    wall second of that best run, and every run's seconds; ``fn(rep, prepare=True)`` first
    makes that run's inputs, untimed."""
    times, best_cpu = [], 0.0
    for r in range(reps):
        fn(r, prepare=True)
        c0, t0 = time.process_time(), time.perf_counter()
        fn(r)
        t = time.perf_counter() - t0
        c = time.process_time() - c0
        if not times or t < min(times):
            best_cpu = c / t
        times.append(t)
    return min(times), best_cpu, times


def _part_a(res: dict, n_inputs: int, reps: int) -> None:
    from skimage import data, transform

    host = np.clip(np.rint(transform.resize(data.astronaut(), (512, 512, 3),
                                            preserve_range=True)), 0, 255).astype(np.uint8)
    ngpu = mp.get_device_count()
    bases = []
    for d in range(ngpu):
        with mp.Device(d):
            b = mp.gpuimage(host)
            b._materialize()
            bases.append(b)
    ref = bases[0].clone()
    _methods(ref)
    want = np.asarray(ref)
    ops = _five_ops()
    state: dict = {}

    def make(spread: bool) -> list:
        xs = []
        for i in range(n_inputs):
            d = i % ngpu if spread else 0
            with mp.Device(d):
                x = bases[d].clone()
            xs.append(x)
        for x in xs:
            x._materialize()
        _sync_all()
        return xs

    def case(tag: str, spread: bool, device):
        def fn(r, prepare=False):
            if prepare:
                state["xs"] = None
                state["xs"] = make(spread)
                return
            mp.Pipeline(state["xs"], ops, device=device).run()
            for x in state["xs"]:
                x._materialize()
            _sync_all()

        warm = make(spread)[:max(16, 4 * ngpu)]
        mp.Pipeline(warm, ops, device=device).run()  # compile, record
        _sync_all()
        best, cpu, times = _timed(fn, reps)
        xs = state["xs"]
        picks = sorted({0, len(xs) - 1, *range(0, len(xs), max(1, len(xs) // 7))})
        ulps = max(_max_ulp(np.asarray(xs[i]), want) for i in picks)
        res["rows"].append({"part": "A", "case": tag, "inputs": n_inputs, "seconds": best,
                            "img_s": n_inputs / best, "cpu_per_wall": cpu,
                            "runs": times, "max_ulp": ulps, "ok": ulps <= 2,
                            "output_devices": sorted({x.device for x in xs})})
        print(f"A {tag}: {n_inputs / best:,.0f} img/s (best {best:.4f} s of {times}), "
              f"cpu/wall {cpu:.2f}, max ulp {ulps}", flush=True)
        state["xs"] = None

    case("1 GPU", False, 0)
    if ngpu > 1:
        case(f"{ngpu} GPUs, inputs made on GPU 0", False, None)
        case(f"{ngpu} GPUs, inputs spread", True, None)


def spread_inputs(bases: list, n: int, spread: bool, ndev: int) -> list:
    """``n`` stored copies of ``bases[d]`` made on device ``d``: ``i % ndev`` for input ``i``
    where ``spread``, else 0; every device synchronized."""
    xs = []
    for i in range(n):
        d = i % ndev if spread else 0
        with mp.Device(d):
            xs.append(bases[d].clone())
    for x in xs:
        x._materialize()
    _sync_all()
    return xs


def _part_b(res: dict, n_inputs: int, reps: int, which: str,
            size: tuple[int, int] = (H, W)) -> None:
    host = np.random.default_rng(0).integers(0, 256, (*size, 4), dtype=np.uint8)
    ngpu = mp.get_device_count()
    bases = []
    for d in range(ngpu):
        with mp.Device(d):
            b = mp.gpuimage(host)
            b._materialize()
            bases.append(b)
    ops = _five_ops()
    want = None
    state: dict = {}

    def make(spread: bool, ndev: int) -> list:
        return spread_inputs(bases, n_inputs, spread, ndev)

    def case(tag: str, spread: bool, ndev: int, device):
        nonlocal want

        def fn(r, prepare=False):
            if prepare:
                state["xs"] = None
                state["xs"] = make(spread, ndev)
                return
            mp.Pipeline(state["xs"], ops, device=device).run()
            for x in state["xs"]:
                x._materialize()
            _sync_all()

        warm = make(spread, ndev)[:2 * ndev]
        mp.Pipeline(warm, ops, device=device).run()
        _sync_all()
        del warm
        best, cpu, times = _timed(fn, reps)
        xs = state["xs"]
        if want is None:
            ref = bases[0].clone()
            _methods(ref)
            want = np.asarray(ref)
        ulps = max(_max_ulp(np.asarray(xs[i]), want) for i in (0, len(xs) - 1))
        res["rows"].append({"part": "B", "case": tag, "inputs": n_inputs, "seconds": best,
                            "img_s": n_inputs / best, "cpu_per_wall": cpu, "runs": times,
                            "max_ulp": ulps, "ok": ulps <= 2,
                            "output_devices": sorted({x.device for x in xs})})
        print(f"B {tag}: {best:.4f} s (runs {times}), cpu/wall {cpu:.2f}, max ulp {ulps}",
              flush=True)
        state["xs"] = None

    if which in ("1", "all"):
        case("(1) 1 GPU", True, 1, 0)
    if which == "2":
        case("(1) 2 GPUs, spread", True, 2, None)
    if which == "all" and ngpu > 1:
        case(f"(1) {ngpu} GPUs, spread", True, ngpu, None)
        case(f"(2) {ngpu} GPUs, all made on GPU 0", False, ngpu, None)
        if mp.backend() != "cuda":
            return
        res["peer"] = _peer_bandwidth(ngpu)
        nbytes = host.nbytes * n_inputs * (ngpu - 1) / ngpu
        res["rows"].append({"part": "B", "case": f"(2) copy bound, {ngpu} GPUs",
                            "inputs": n_inputs, "bytes_out_of_gpu0": nbytes,
                            "seconds": nbytes / res["peer"]["out_of_gpu0_bytes_s"],
                            "ok": True})


def _peer_bandwidth(ngpu: int) -> dict:
    """GPU 0 to every other GPU at once (1 GiB each, CuPy peer copies on one stream a GPU)."""
    import cupy

    n = 1 << 30
    with cupy.cuda.Device(0):
        src = cupy.zeros(n, dtype=cupy.uint8)
    dsts, streams = [], []
    for d in range(1, ngpu):
        with cupy.cuda.Device(d):
            dsts.append(cupy.empty(n, dtype=cupy.uint8))
            streams.append(cupy.cuda.Stream(non_blocking=True))
    best = None
    for _ in range(3):
        for d in range(ngpu):
            cupy.cuda.Device(d).synchronize()
        t0 = time.perf_counter()
        for d, (dst, st) in enumerate(zip(dsts, streams, strict=True), start=1):
            with cupy.cuda.Device(d):
                cupy.cuda.runtime.memcpyPeerAsync(dst.data.ptr, d, src.data.ptr, 0, n, st.ptr)
        for d, st in enumerate(streams, start=1):
            with cupy.cuda.Device(d):
                st.synchronize()
        t = time.perf_counter() - t0
        best = t if best is None else min(best, t)
    return {"out_of_gpu0_bytes_s": n * (ngpu - 1) / best, "each_bytes_s": n / best}


def part_c_photos(side: int) -> list[np.ndarray]:
    """Part C's inputs: bench_augment's six photographs resized to side x side RGB uint8."""
    from skimage import data, transform

    hosts = []
    for name in ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
                 "immunohistochemistry"):
        img = transform.resize(getattr(data, name)(), (side, side, 3), preserve_range=True,
                               anti_aliasing=False)
        hosts.append(np.clip(np.rint(img), 0, 255).astype(np.uint8))
    return hosts


def _part_c(res: dict, batches: int, outputs: int) -> None:
    if (Path(mp.__file__).parent / "training").is_dir():
        import millipyde.training.batches as mb
        from millipyde.training import recipes
    else:  # the baseline tree (7c57e62) keeps them at the top level (asked by the package's
        # folder: with an editable install of another tree, ``millipyde.training`` would be
        # imported from that tree over this one's package)
        import millipyde.batches as mb

        from millipyde import recipes
    if os.environ.get("BENCH_ENGINE_COMPILE_AHEAD") == "1":
        # the cpu backend compiles in place; this compiles ahead in worker processes as a GPU
        # does (``precompile.wanted``), so its cost per Generator is seen here too
        import importlib

        pre = importlib.import_module(mb.__name__.rsplit(".", 1)[0] + ".precompile")
        pre.wanted = lambda: True

    try:
        import torch

        def take(x):
            return torch.as_tensor(x, device="cuda")

        def sync():
            torch.cuda.synchronize()
    except ImportError:  # (a check of the bench on the cpu backend)
        def take(x):
            return np.asarray(x)

        def sync():
            pass

    # bench_augment's six photographs, 512x512 RGB (BENCH_ENGINE_SIDE: another side, for the
    # cpu backend)
    hosts = part_c_photos(int(os.environ.get("BENCH_ENGINE_SIDE", "512")))
    ops = recipes.figure_5_1_operations()
    size = int(os.environ.get("BENCH_ENGINE_BATCH", "256"))

    def gen(seed: int, n: int):
        return mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=seed,
                            device=0)

    # batches(256), float32 NCHW, each taken by torch
    with gen(1, size * 2) as g, g.batches(size) as it:
        for b in it:
            take(b)  # warm-up: compile
    sync()
    n = 0
    with gen(2, size * batches) as g, g.batches(size) as it:
        c0, t0 = time.process_time(), time.perf_counter()
        for b in it:
            n += take(b).shape[0]
        sync()
        t = time.perf_counter() - t0
    cpu = (time.process_time() - c0) / t
    # check: batch 0 against the same Generator made per output (the documented fallback)
    def first_batch() -> np.ndarray:
        with gen(2, size) as g, g.batches(size) as it:
            return np.asarray(next(it))

    g0 = first_batch()
    keep = mb.RECORD_AT_ONCE
    mb.RECORD_AT_ONCE = False
    try:
        g1 = first_batch()
    finally:
        mb.RECORD_AT_ONCE = keep
    ulps = _max_ulp(g0, g1)
    res["rows"].append({"part": "C", "case": f"batches({size}) to torch", "inputs": n,
                        "seconds": t, "img_s": n / t, "cpu_per_wall": cpu, "max_ulp": ulps,
                        "ok": ulps <= 2})
    print(f"C batches: {n / t:,.0f} img/s, cpu/wall {cpu:.2f}, max ulp vs per output {ulps}",
          flush=True)
    # next() per output, each taken by torch as it comes (warmed up with as many outputs of
    # another seed: the coin patterns a run meets compile their kernels on first sight)
    with gen(3, outputs) as g:
        for x in g:
            take(x)
    got = []
    # what the timed run compiled in this process, and what its compiling ahead (before the
    # first output, on GPUs) cost: the kernels a new seed may need
    import importlib

    pkg = mb.__name__.rsplit(".", 1)[0]
    pre, warm = (importlib.import_module(f"{pkg}.{m}") for m in ("precompile", "warmup"))
    pre.last.clear()
    compiled = warm.compiled_count()
    # the templates the timed run records (``batch_record``; trees without it: None)
    try:
        rec_mod = importlib.import_module(f"{pkg}.batch_record")
    except ImportError:
        rec_mod = None
    recorded = [0]
    if rec_mod is not None:
        plain = rec_mod.record_template

        def counted(*a, **k):
            recorded[0] += 1
            return plain(*a, **k)

        rec_mod.record_template = counted
    # the garbage collector's passes by generation and their time in the timed run (its
    # outputs kept as they come: a process holding torch's and a GPU's objects pays for a
    # full collection in proportion to all of them)
    import gc

    passes, spent, began = [0, 0, 0], [0.0, 0.0, 0.0], [0.0]

    def collected(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            passes[info["generation"]] += 1
            spent[info["generation"]] += time.perf_counter() - began[0]

    grown = os.environ.get("BENCH_ENGINE_GROWN")  # claims' cap of a tree that has one
    try:
        gs = importlib.import_module(f"{pkg}.generator_state")
    except ImportError:
        gs = None
    if grown and hasattr(gs, "GROWN"):
        gs.GROWN = int(grown)
    if os.environ.get("BENCH_ENGINE_GC") == "collect":
        # every tree's timed run starts from a full collection: one the run before it made
        # due (the outputs kept by the parts above) then does not land in its window
        gc.collect()
    tracked = len(gc.get_objects())
    try:
        with gen(4, outputs) as g:
            gc.callbacks.append(collected)
            c0, t0 = time.process_time(), time.perf_counter()
            for x in g:
                got.append(take(x))
            sync()
            t = time.perf_counter() - t0
            gc.callbacks.remove(collected)
    finally:
        if collected in gc.callbacks:
            gc.callbacks.remove(collected)
        if rec_mod is not None:
            rec_mod.record_template = plain
    cpu = (time.process_time() - c0) / t
    compiled = warm.compiled_count() - compiled
    ahead = {k: pre.last.get(k) for k in ("jobs", "processes", "seconds")}
    first = [np.asarray(v.cpu()) if hasattr(v, "cpu") else v for v in got[:16]]
    del got
    keep = mb.RECORD_AT_ONCE
    mb.RECORD_AT_ONCE = False
    try:
        with gen(4, 16) as g:
            want = [np.asarray(x) for x in g]
    finally:
        mb.RECORD_AT_ONCE = keep
    ulps = max(_max_ulp(a, b) for a, b in zip(first, want, strict=True))
    res["rows"].append({"part": "C", "case": "next() per output to torch", "inputs": outputs,
                        "seconds": t, "img_s": outputs / t, "cpu_per_wall": cpu,
                        "max_ulp": ulps, "ok": ulps <= 2, "compiled": compiled,
                        "compile_ahead": ahead,
                        "templates_recorded": recorded[0] if rec_mod is not None else None,
                        "gc_passes": passes, "gc_ms": [round(s * 1e3, 2) for s in spent],
                        "gc_tracked": tracked,
                        "grown": getattr(gs, "GROWN", None) if gs is not None else None})
    print(f"C next(): {outputs / t:,.0f} img/s, cpu/wall {cpu:.2f}, max ulp {ulps}, compiled "
          f"in the timed run {compiled}, its compiling ahead {ahead}, templates recorded "
          f"{recorded[0] if rec_mod is not None else '-'}; garbage collection in it: passes "
          f"by generation {passes}, ms {[round(s * 1e3, 1) for s in spent]} ({tracked:,} "
          f"objects tracked before it); claims' cap "
          f"{getattr(gs, 'GROWN', '-') if gs is not None else '-'}", flush=True)


def _part_d(res: dict, n_inputs: int, reps: int) -> None:
    """The 5-op chain over ``n_inputs`` 32x32 RGB inputs (the cpu backend's case): a Pipeline,
    and plain method calls one input after another (each materialized), best of ``reps``."""
    from skimage import data, transform

    host = np.clip(np.rint(transform.resize(data.astronaut(), (32, 32, 3),
                                            preserve_range=True)), 0, 255).astype(np.uint8)
    ops = _five_ops()
    state: dict = {}

    def make() -> list:
        xs = [mp.gpuimage(host) for _ in range(n_inputs)]
        for x in xs:
            x._materialize()
        _sync_all()
        return xs

    def pipeline(r, prepare=False):
        if prepare:
            state["xs"] = make()
            return
        mp.Pipeline(state["xs"], ops).run()
        for x in state["xs"]:
            x._materialize()
        _sync_all()

    def methods(r, prepare=False):
        if prepare:
            state["xs"] = make()
            return
        for x in state["xs"]:
            _methods(x)
            x._materialize()
        _sync_all()

    ref = mp.gpuimage(host)
    _methods(ref)
    want = np.asarray(ref)
    for tag, fn in (("Pipeline", pipeline), ("method calls", methods)):
        fn(0, prepare=True)
        fn(0)  # warm-up
        best, cpu, times = _timed(fn, reps)
        ulps = max(_max_ulp(np.asarray(x), want) for x in state["xs"][::max(1, n_inputs // 8)])
        res["rows"].append({"part": "D", "case": f"{n_inputs} x 32x32, {tag}", "inputs": n_inputs,
                            "seconds": best, "img_s": n_inputs / best, "us_per_input":
                            best / n_inputs * 1e6, "cpu_per_wall": cpu, "runs": times,
                            "cpu_us_per_input": best * cpu / n_inputs * 1e6,
                            "max_ulp": ulps, "ok": ulps <= 2})
        # (process CPU an input: on a shared machine the wall follows the other jobs' load)
        print(f"D {tag}: {best / n_inputs * 1e6:.1f} us per input (runs {times}), cpu/wall "
              f"{cpu:.2f} = {best * cpu / n_inputs * 1e6:.1f} us of process CPU an input, "
              f"load average {os.getloadavg()[0]:.1f}, max ulp {ulps}", flush=True)


def _host_breakdown(res: dict, n_inputs: int) -> None:
    """Where a chunked Pipeline's host time goes (new tree only): per phase of the workers,
    thread CPU seconds, for A on one GPU and on every GPU (inputs on GPU 0)."""
    try:
        from millipyde.pipeline import chunks as pipeline_chunks
        from millipyde.pipeline import run as pipeline_run
    except ImportError:  # trees before millipyde.pipeline was a package
        try:
            from millipyde import pipeline_chunks, pipeline_run
        except ImportError:  # trees before chunks
            return
    import threading
    from collections import defaultdict

    from skimage import data, transform

    host = np.clip(np.rint(transform.resize(data.astronaut(), (512, 512, 3),
                                            preserve_range=True)), 0, 255).astype(np.uint8)
    acc: dict = defaultdict(float)
    lock = threading.Lock()

    def wrap(cls, name, label):
        orig = getattr(cls, name)

        def timed(*a, **k):
            c0 = time.thread_time()
            try:
                return orig(*a, **k)
            finally:
                with lock:
                    acc[label] += time.thread_time() - c0
        setattr(cls, name, timed)
        return orig

    saved = [(pipeline_chunks.StageChunks, "launch",
              wrap(pipeline_chunks.StageChunks, "launch", "record+launch")),
             (pipeline_run.Run, "_finish", wrap(pipeline_run.Run, "_finish", "wait+commit"))]
    try:
        for tag, device in (("1 GPU", 0), ("all GPUs", None)):
            base = mp.gpuimage(host)
            xs = [base.clone() for _ in range(n_inputs)]
            for x in xs:
                x._materialize()
            _sync_all()
            acc.clear()
            c0, t0 = time.process_time(), time.perf_counter()
            mp.Pipeline(xs, _five_ops(), device=device).run()
            _sync_all()
            wall = time.perf_counter() - t0
            res["breakdown"][tag] = {"wall": wall, "process_cpu": time.process_time() - c0,
                                     **{k: v for k, v in acc.items()}}
            print(f"host breakdown, A {tag}: wall {wall:.4f} s, process CPU "
                  f"{time.process_time() - c0:.4f} s, " +
                  ", ".join(f"{k} {v:.4f} s" for k, v in acc.items()), flush=True)
    finally:
        for cls, name, orig in saved:
            setattr(cls, name, orig)


def engine_child(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench_pipeline.py engine-child")
    ap.add_argument("--tree", required=True)
    ap.add_argument("--parts", default="A,B,C")
    ap.add_argument("--b-gpus", default="all", choices=["1", "2", "all"])
    ap.add_argument("--a-inputs", type=int, default=2000)
    ap.add_argument("--b-inputs", type=int, default=100)
    ap.add_argument("--b-size", type=int, nargs=2, default=[H, W], metavar=("H", "W"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--c-batches", type=int, default=20)
    ap.add_argument("--c-outputs", type=int, default=1024)
    ap.add_argument("--d-inputs", type=int, default=1000)
    ap.add_argument("--json", required=True)
    args = ap.parse_args(argv)
    res = {"tree": args.tree, "millipyde": mp.__file__, "backend": mp.backend(),
           "devices": [d.name for d in mp.devices.DEVICES], "rows": [], "errors": [],
           "breakdown": {}}
    print(f"[{args.tree}] millipyde from {mp.__file__}; {res['devices']}", flush=True)
    if not Path(mp.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise SystemExit(f"[{args.tree}] imported millipyde from {mp.__file__}, not from the "
                         f"tree {Path.cwd()}: a PYTHONPATH entry or an installed copy shadows it")

    def save() -> None:
        Path(args.json).write_text(json.dumps(res, indent=1))

    for part in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            if part == "A":
                _part_a(res, args.a_inputs, args.reps)
            elif part == "B":
                _part_b(res, args.b_inputs, args.reps, args.b_gpus, tuple(args.b_size))
            elif part == "C":
                _part_c(res, args.c_batches, args.c_outputs)
            elif part == "H":
                _host_breakdown(res, args.a_inputs)
            elif part == "D":
                _part_d(res, args.d_inputs, args.reps)
        except Exception as exc:  # reported in the table; the other parts still run
            import traceback

            traceback.print_exc()
            res["errors"].append(f"{part}: {type(exc).__name__}: {exc}")
        print(f"[{args.tree}] part {part}: {time.perf_counter() - t0:.1f} s", flush=True)
        save()
    return 0


def _child(tree: str, path: str, parts: str, out: Path, timeout: float,
           extra: list[str], visible: str | None = None) -> dict:
    env = dict(os.environ)
    # Any other tree on PYTHONPATH (the repository gpu_env.sh puts there, whatever the cwd)
    # would shadow this one: keep only entries without a millipyde package.
    site = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and
            not (Path(p) / "millipyde" / "__init__.py").exists()]
    env["PYTHONPATH"] = os.pathsep.join([*site, str(Path(path).resolve())])
    env["MILLIPYDE_CACHE_DIR"] = f"/tmp/kernel-cache-{tree}"
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    tag = tree if visible is None else f"{tree}-gpus{visible.replace(',', '')}"
    js = out / f"engine_{tag}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "engine-child", "--tree", tree,
           "--parts", parts, "--json", str(js), *extra]
    try:
        subprocess.run(cmd, env=env, cwd=path, timeout=max(10.0, timeout))
    except subprocess.TimeoutExpired:
        print(f"[{tag}] stopped after {timeout:.0f} s", flush=True)
    try:
        return json.loads(js.read_text())
    except (OSError, ValueError):
        return {"tree": tree, "rows": [], "errors": [f"{tag}: no result"], "breakdown": {}}


def engine_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench_pipeline.py engine")
    ap.add_argument("--tree", action="append", required=True, help="LABEL=PATH, in order")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for every child")
    ap.add_argument("--parts", default="A,B,C")
    ap.add_argument("--quick", action="store_true", help="small sizes (a check of the bench)")
    args, extra = ap.parse_known_args(argv)
    # absolute: each child runs in its own tree and writes its json here
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.quick:
        extra += ["--a-inputs", "64", "--b-inputs", "4", "--b-size", "233", "175", "--reps",
                  "2", "--c-batches", "2", "--c-outputs", "64"]
    trees = [t.split("=", 1) for t in args.tree]
    t_end = time.monotonic() + args.budget
    results: dict[str, list[dict]] = {}
    ngpu = mp.get_device_count()
    for i, (label, path) in enumerate(trees):
        share = (t_end - time.monotonic()) / (len(trees) - i)
        t_tree = time.monotonic() + share
        parts = args.parts + (",H" if i == 0 and "A" in args.parts else "")
        got = [_child(label, path, parts, out, share * 0.8, extra)]
        if "B" in args.parts and ngpu > 2:
            got.append(_child(label, path, "B", out, t_tree - time.monotonic(),
                              [*extra, "--b-gpus", "2"], visible="0,1"))
        results[label] = got
        (out / "engine.json").write_text(json.dumps(results, indent=1))
    engine_table(results)
    return 0


def engine_table(results: dict[str, list[dict]]) -> None:
    """One table: each row's rate per tree and the ratio of the first tree to the last."""
    labels = list(results)
    rows: dict[tuple, dict] = {}
    for label, parts in results.items():
        for res in parts:
            for r in res["rows"]:
                rows.setdefault((r["part"], r["case"]), {})[label] = r
    print("\n| part | case | " + " | ".join(labels) + " | ratio | checks |")
    print("| --- | --- | " + " | ".join("---" for _ in labels) + " | --- | --- |")
    for (part, case), by in rows.items():
        cells = []
        for label in labels:
            r = by.get(label)
            if r is None:
                cells.append("-")
            elif "img_s" in r:
                cells.append(f"{r['img_s']:,.0f} img/s ({r['seconds']:.4f} s, cpu/wall "
                             f"{r.get('cpu_per_wall', 0):.2f})")
            else:
                cells.append(f"{r['seconds']:.4f} s")
        first, last = by.get(labels[0]), by.get(labels[-1])
        ratio = "-"
        if first and last and len(labels) > 1 and first.get("seconds") and last.get("seconds"):
            ratio = f"{last['seconds'] / first['seconds']:.2f}x"
        checks = ", ".join(f"{lab}: ulp {by[lab].get('max_ulp', '-')}, out on "
                           f"{by[lab].get('output_devices', '-')}" for lab in labels if lab in by
                           and "max_ulp" in by[lab])
        print(f"| {part} | {case} | " + " | ".join(cells) + f" | {ratio} | {checks} |")
    for label, parts in results.items():
        for res in parts:
            for e in res.get("errors", []):
                print(f"ERROR [{label}] {e}")
            for tag, b in res.get("breakdown", {}).items():
                print(f"[{label}] host breakdown A {tag}: " +
                      ", ".join(f"{k} {v:.4f} s" for k, v in b.items()))


def _engine_table_cmd(argv: list[str]) -> int:
    """``engine-table DIR``: the table of the children's results in DIR (what a stopped run
    left), trees in the order given after DIR (default: as found)."""
    where = Path(argv[0])
    results: dict[str, list[dict]] = {label: [] for label in argv[1:]}
    for f in sorted(where.glob("engine_*.json")):
        res = json.loads(f.read_text())
        results.setdefault(res["tree"], []).append(res)
    engine_table({k: v for k, v in results.items() if v})
    return 0


ENGINE_COMMANDS = {"engine": engine_main, "engine-child": engine_child,
                   "engine-table": _engine_table_cmd}


if __name__ == "__main__":
    sys.exit(main())
