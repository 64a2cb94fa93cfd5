"""Figure-5.1 augmentation over image files on a Dask cluster: 1, 2 (, 4) workers.

What ``millipyde augment --cluster`` does (``distributed.run_files``: read + decode on the
workers, the figure-5.1 Operations, uint8 PNGs written atomically), timed for several cluster
sizes with the same threads per worker. Each task reports the wall-clock span of its three
stages; a stage's rate is, per worker, its images over the time at least one of its tasks was
in that stage (the union of the spans), summed over the workers: the rate the cluster would
reach if that stage alone bounded it. Also measured: one thread's codec costs (decode, PNG and
npy encode) and the scheduler's cost per task (no-op tasks), the inputs of the scale model in
docs/DISTRIBUTED.md.

GPU (one worker process per GPU: dask-cuda's LocalCUDACluster, else
``distributed.pinned_cluster``): ``MILLIPYDE_BACKEND=cuda python3 -m bench.bench_distributed
--workers 1 2 --threads 8``. CPU: ``MILLIPYDE_BACKEND=cpu python -m bench.bench_distributed
--workers 1 2 4 --size 256 --files 256`` (workers get ``NUMBA_NUM_THREADS=--numba-threads``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import millipyde as mp
from millipyde import distributed as md
from millipyde.cli import figure_5_1_operations

STAGES = ("read", "compute", "write")


def make_inputs(d: Path, files: int, size: int) -> list[Path]:
    """``files`` PNG copies of six scikit-image photographs at ``size`` x ``size`` RGB."""
    from PIL import Image

    from bench.bench_augment import _inputs

    d.mkdir(parents=True, exist_ok=True)
    firsts = []
    for i, host in enumerate(_inputs(6, size)):
        firsts.append(d / f"{i:05d}.png")
        Image.fromarray(host).save(firsts[-1])
    paths = []
    for i in range(files):
        p = d / f"{i:05d}.png"
        if not p.exists():
            shutil.copyfile(firsts[i % len(firsts)], p)
        paths.append(p)
    return paths


def _median_ms(fn, repeat: int = 15) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def codec_costs(path: Path) -> dict[str, float]:
    """One thread's ms per image: decode the PNG, encode PNG, encode npy."""
    from millipyde.distributed.tasks import encode
    from millipyde.io import load_array

    arr = load_array(path)
    return {"decode_png_ms": _median_ms(lambda: load_array(path)),
            "encode_png_ms": _median_ms(lambda: encode(arr, "png", io.BytesIO())),
            "encode_npy_ms": _median_ms(lambda: encode(arr, "npy", io.BytesIO())),
            "png_bytes": path.stat().st_size, "raw_bytes": arr.nbytes}


def _noop(i: int) -> int:
    return i


def scheduler_cost(client, tasks: int = 2000) -> dict[str, float]:
    """Scheduler throughput on no-op tasks and one task's round trip."""
    t0 = time.perf_counter()
    client.gather(client.map(_noop, range(tasks), pure=False))
    per = (time.perf_counter() - t0) / tasks
    trips = []
    for i in range(20):
        t = time.perf_counter()
        client.submit(_noop, i, pure=False).result()
        trips.append(time.perf_counter() - t)
    return {"per_task_ms": 1e3 * per, "tasks_per_s": 1.0 / per,
            "round_trip_ms": 1e3 * statistics.median(trips)}


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, -np.inf
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def stage_rates(reports: list[dict]) -> dict[str, float]:
    """Per stage: sum over workers of (images / union of that worker's stage spans)."""
    by_worker: dict[str, list[dict]] = {}
    for r in reports:
        by_worker.setdefault(r["worker"], []).append(r)
    rates = {}
    for s in STAGES:
        rate = 0.0
        for rs in by_worker.values():
            busy = _union([tuple(r["stages"][s]) for r in rs])
            rate += sum(r["computed"] for r in rs) / busy if busy > 0 else 0.0
        rates[s] = rate
    return rates


def cpu_ms(reports: list[dict]) -> dict[str, float]:
    """Per stage: the task threads' CPU milliseconds per image (contention does not inflate it;
    on the cpu backend the compute stage's Numba threads are not counted)."""
    items = sum(r["computed"] for r in reports) or 1
    return {s: 1e3 * sum(r["cpu"][s] for r in reports) / items for s in STAGES}


def _warm(paths: list[str], fmt: str, backend: str) -> str:
    """Load (compile) this worker's kernels: one batch of outputs, and two alone."""
    from millipyde.distributed.tasks import process_chunk

    d = tempfile.mkdtemp(prefix="mp-warm-")
    try:
        items = [(i, i, p, f"{i}.{fmt}") for i, p in enumerate(paths)]
        process_chunk(items, figure_5_1_operations(), 1, d, fmt, backend, True, len(items))
        process_chunk(items[:2], figure_5_1_operations(), 2, d, fmt, backend, True, 1)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return "ok"


def run_one(workers: int, args: argparse.Namespace, paths: list[Path], root: Path,
            gpu: bool) -> dict:
    from distributed import Client

    env = None if gpu else {"NUMBA_NUM_THREADS": str(args.numba_threads)}
    with md.local_cluster(workers, args.threads, env) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(workers)
        warm = [str(p) for p in paths[:args.warm]]
        client.gather([client.submit(_warm, warm, args.fmt, mp.backend(), workers=[w],
                                     allow_other_workers=False, pure=False)
                       for w in client.scheduler_info()["workers"]])
        sched = scheduler_cost(client)
        out = root / f"out-{workers}"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        done, reports = md.run_files([str(p) for p in paths], figure_5_1_operations(), out,
                                     outputs=args.outputs, seed=0, client=client,
                                     fmt=args.fmt, to_uint8=True)
        wall = time.perf_counter() - t0
    n = len(done)
    row = {"cluster": type(cluster).__name__, "workers": workers, "threads": args.threads,
           "images": n, "wall_s": wall, "img_per_s": n / wall, "tasks": len(reports),
           "rates": stage_rates(reports), "cpu_ms": cpu_ms(reports), "scheduler": sched}
    shutil.rmtree(out, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads", type=int, default=None,
                        help="threads per worker (default 4 on GPUs, 1 on the cpu backend)")
    parser.add_argument("--numba-threads", type=int, default=1,
                        help="NUMBA_NUM_THREADS of cpu-backend workers (default 1)")
    parser.add_argument("--files", type=int, default=2048)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--outputs", type=int, default=None,
                        help="Generator semantics: outputs made from the files (default: as "
                             "many as files)")
    parser.add_argument("--pipeline", action="store_true",
                        help="Pipeline semantics instead (one output per file, per output)")
    parser.add_argument("--fmt", default="png", choices=("png", "jpg", "tiff", "npy"))
    parser.add_argument("--chunk", type=int, default=None, help="files per task (default auto)")
    parser.add_argument("--warm", type=int, default=64, help="files of the per-worker warm-up")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--json", default=None, help="write the results here too")
    args = parser.parse_args(argv)
    gpu = mp.backend() == "cuda"
    if args.outputs is None and not args.pipeline:
        args.outputs = args.files
    if args.threads is None:
        args.threads = 4 if gpu else 1
    if args.chunk is not None:
        os.environ["MILLIPYDE_DASK_CHUNK"] = str(args.chunk)
    root = Path(args.dir or tempfile.mkdtemp(prefix="mp-bench-dist-"))
    paths = make_inputs(root / "src", args.files, args.size)
    codec = codec_costs(paths[0])
    rows = [run_one(w, args, paths, root, gpu) for w in args.workers]
    print(f"# bench_distributed {dt.datetime.now().isoformat(timespec='seconds')}, backend "
          f"{mp.backend()}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"{', '.join(d.name for d in mp.devices.DEVICES)}")
    print(f"# {args.files} files {args.size}x{args.size} RGB PNG ({codec['png_bytes']} bytes), "
          f"outputs={args.outputs}, fmt={args.fmt}, chunk={args.chunk or 'auto'}")
    print(f"# one thread: decode PNG {codec['decode_png_ms']:.2f} ms, encode PNG "
          f"{codec['encode_png_ms']:.2f} ms, encode npy {codec['encode_npy_ms']:.2f} ms")
    print(f"# clusters: {', '.join(sorted({r['cluster'] for r in rows}))}")
    print("| workers x threads | tasks | wall s | img/s | speed-up | read+decode img/s | "
          "compute img/s | compute speed-up | encode+write img/s | scheduler ms/task |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    base = rows[0]
    for r in rows:
        rt = r["rates"]
        print(f"| {r['workers']} x {r['threads']} | {r['tasks']} | {r['wall_s']:.2f} | "
              f"{r['img_per_s']:.1f} | {r['img_per_s'] / base['img_per_s']:.2f}x | "
              f"{rt['read']:.1f} | {rt['compute']:.1f} | "
              f"{rt['compute'] / base['rates']['compute']:.2f}x | {rt['write']:.1f} | "
              f"{r['scheduler']['per_task_ms']:.3f} |")
    print("| workers | CPU ms/img read+decode | compute (host thread) | encode+write |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        c = r["cpu_ms"]
        print(f"| {r['workers']} | {c['read']:.2f} | {c['compute']:.2f} | {c['write']:.2f} |")
    trips = ", ".join(f"{r['scheduler']['round_trip_ms']:.2f}" for r in rows)
    print(f"# scheduler round trip of one task: {trips} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"codec": codec, "rows": rows,
                                               "args": vars(args)}, indent=1))
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
