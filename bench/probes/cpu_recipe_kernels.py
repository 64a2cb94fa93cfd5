"""Thread CPU of each kernel of the ImageNet recipe streamed on the cpu backend (bench_data's
``cpu`` row: 2,000 JPEGs, batches of 256, float32 NCHW normalized), per image.

    NUMBA_NUM_THREADS=1 MILLIPYDE_BACKEND=cpu python bench/probes/cpu_recipe_kernels.py \
        --work /tmp/cpuw

Each launch's thread CPU is taken around ``CpuBackend._run_cpu`` in the thread that calls it:
with ``NUMBA_NUM_THREADS=1`` a launch is one part, run in that thread, so the figure is the
kernel's whole cost. Epoch 0 compiles; the warm epochs after it are reported (the least CPU
per kernel). ``--sources`` prints the generated module of each kernel (to read its loops). Run
it in any tree (it imports ``millipyde`` and ``bench`` from the working directory).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

import millipyde as mp  # noqa: E402
from millipyde.backend import ACTIVE  # noqa: E402


def main() -> None:
    from bench.bench_data import MEAN, STD, make_dataset
    from millipyde.training.recipes import operations

    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/mpdata-cpu")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--sources", action="store_true")
    ap.add_argument("--capture", default=None, metavar="DIR",
                    help="pickle each kernel's first warm launch (path, arguments) there")
    args = ap.parse_args()
    info = make_dataset(Path(args.work), args.files, args.classes)
    acc: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    files: dict[str, str] = {}
    run_cpu = type(ACTIVE)._run_cpu

    captured: set[str] = set()

    def timed(self, kernel, kargs, items):
        if args.capture and warm[0] and kernel.py_func.__code__.co_filename not in captured:
            import pickle

            captured.add(kernel.py_func.__code__.co_filename)
            path = Path(args.capture) / f"{Path(kernel.py_func.__code__.co_filename).stem}.pkl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                pickle.dump((kernel.py_func.__code__.co_filename, kargs, items), f)
        c0 = time.thread_time()
        try:
            return run_cpu(self, kernel, kargs, items)
        finally:
            path = kernel.py_func.__code__.co_filename
            name = Path(path).stem[-8:] + "." + kernel.__name__
            files[name] = path
            a = acc[name]
            a[0] += time.thread_time() - c0
            a[1] += 1

    type(ACTIVE)._run_cpu = timed
    gen = mp.Generator(info["folder"], operations("imagenet"), shuffle=True, seed=0)
    best: dict[str, tuple[float, int]] = {}
    warm = [False]
    for epoch in range(args.epochs + 1):
        warm[0] = epoch > 0
        gen.set_epoch(epoch)
        acc.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        n = 0
        with gen.batches(args.size, with_labels=True, mean=MEAN, std=STD, epochs=1) as bs:
            for x, _ in bs:
                n += x.shape[0]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"epoch {epoch}: {n / wall:.1f} img/s, process CPU {cpu / n * 1e3:.2f} ms an "
              f"image", flush=True)
        if epoch:
            for k, (t, calls) in acc.items():
                if k not in best or t / n < best[k][0]:
                    best[k] = (t / n, calls)
    gen.close()
    total = 0.0
    for name, (t, calls) in sorted(best.items(), key=lambda kv: -kv[1][0]):
        total += t
        print(f"  kernel {name:40s} {calls:4d} launches: thread CPU {t * 1e3:.3f} ms an image")
    print(f"  kernels together: {total * 1e3:.3f} ms an image")
    if args.sources:
        for name, path in files.items():
            print(f"# {name}: {path}")


if __name__ == "__main__":
    main()
