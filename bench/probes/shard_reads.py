"""Reads of the same samples from a folder and from its tar shards, one thread, in runs of 32
random samples: per sample the wall time, the thread's user CPU (Python's share, the GIL
held, plus the native loop's few instructions) and system CPU (the reads, the GIL released
where they run natively), each file or member read by Python (``Source.read``: one GIL
hand-over a sample at least) or a run read in one native call that holds no GIL
(``read_run``: ``fileread.read_run`` for files, ``fileread.read_spans`` for members);
paths alternated per round. Then the same reads in a thread of their own, looping, beside
this thread timing blocks of 512 GIL hand-overs (a NumPy add of 20,000 float64 each, which
releases the GIL for its work and takes it back, as nvImageCodec's decode call does about
twice an image): how much the reads delay a thread that needs the GIL back, against the
blocks alone, and the samples read meanwhile.

    MILLIPYDE_BACKEND=cpu python3 bench/probes/shard_reads.py --work /tmp/mpdata-cpu

The dataset is ``bench_data.py``'s (made there when missing: ``--files`` JPEGs of ~38 KB, the
same samples in tar shards of 1000).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _time(read, runs: list) -> dict:
    read(runs[0])
    r0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
    for r in runs:
        read(r)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    n = sum(len(r) for r in runs)
    return {"wall_us": 1e6 * dt / n, "user_us": 1e6 * (r1.ru_utime - r0.ru_utime) / n,
            "sys_us": 1e6 * (r1.ru_stime - r0.ru_stime) / n}


def _blocks(count: int = 512, elems: int = 20_000, blocks: int = 40) -> float:
    """Median ms of blocks of ``count`` GIL hand-overs."""
    a, b = np.zeros(elems), np.ones(elems)
    times = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(count):
            np.add(a, b, out=a)
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))


def _beside(read, runs: list) -> dict:
    """Blocks of hand-overs timed here while a thread reads ``runs`` over and over."""
    import threading

    stop, box = threading.Event(), {"n": 0}

    def reader() -> None:
        while not stop.is_set():
            for r in runs:
                read(r)
                box["n"] += len(r)
                if stop.is_set():
                    break

    th = threading.Thread(target=reader)
    th.start()
    t = time.perf_counter()
    ms = _blocks()
    dt = time.perf_counter() - t
    stop.set()
    th.join()
    return {"handovers_ms": ms, "read_per_s": box["n"] / dt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", default="/tmp/mpdata-cpu")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--runs", type=int, default=2000, help="runs of 32 samples a row")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import millipyde.data as md
    from bench.bench_data import make_dataset
    from millipyde.data import fileread

    info = make_dataset(Path(args.work), args.files, args.classes)
    srcs = {"folder": md.Folder(info["folder"]), "shards": md.Shards(info["shards_glob"])}
    assert fileread.available(), fileread.why_not()
    rng = np.random.default_rng(0)
    runs = [rng.integers(0, len(srcs["folder"]), 32).tolist() for _ in range(args.runs)]
    rows: dict = {}
    for rnd in range(args.rounds):
        order = [(s, p) for s in srcs for p in ("python", "native")]
        for name, path in order if rnd % 2 == 0 else order[::-1]:
            src = srcs[name]
            if path == "native" and not hasattr(src, "read_run"):
                continue  # a tree before runs of this source
            read = src.read_run if path == "native" else \
                (lambda r, src=src: [src.read(i) for i in r])
            row = _time(read, runs)
            rows.setdefault(f"{name} {path}", []).append(row)
            print(f"round {rnd} {name:6s} {path:6s}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in row.items()) + f"; load {os.getloadavg()[0]:.1f}",
                flush=True)
    saved = sys.getswitchinterval()
    from millipyde.data import loader

    sys.setswitchinterval(loader.SWITCH_INTERVAL)  # the interval a Loader runs under
    alone = []
    for rnd in range(args.rounds):
        alone.append(_blocks())
        order = [(s, p) for s in srcs for p in ("python", "native")]
        for name, path in order if rnd % 2 == 0 else order[::-1]:
            src = srcs[name]
            if path == "native" and not hasattr(src, "read_run"):
                continue
            read = src.read_run if path == "native" else \
                (lambda r, src=src: [src.read(i) for i in r])
            row = _beside(read, runs)
            rows.setdefault(f"{name} {path} beside", []).append(row)
            print(f"round {rnd} {name:6s} {path:6s} beside 512 hand-overs: " + ", ".join(
                f"{k} {v:.2f}" for k, v in row.items()) + f" (alone {alone[-1]:.2f}); load "
                f"{os.getloadavg()[0]:.1f}", flush=True)
    sys.setswitchinterval(saved)
    print(f"512 hand-overs alone: median {np.median(alone):.2f} ms")
    for key, rs in rows.items():
        print(f"{key:14s} median: " + ", ".join(
            f"{k} {np.median([r[k] for r in rs]):.2f}" for k in rs[0]))
    print("millipyde from", md.__file__)


if __name__ == "__main__":
    main()
