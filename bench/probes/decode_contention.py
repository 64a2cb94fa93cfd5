"""The C decoder alone in lanes, beside a GPU load of another process: does the augmentation's
GPU work slow a Loader's decode call, and do high-priority decode streams take that back?

In the folder -> ImageNet recipe -> torch pipeline a lane's decode call takes 28-30 ms a batch
of 256, against ~15.5 ms for the same decoder alone in two lanes (bench/RESULTS.md). This probe
times ``bench_data.decode_alone_lanes`` (bytes in memory, the recipe's regions) in rows:

- ``alone``;
- ``load R``: beside a second process that runs the ImageNet recipe of the six photographs
  into ``batches(256)`` at about R img/s (no shared GIL: only the GPU and the host's cores);
- ``load R prio``: the same with the lanes' streams made at the device's greatest priority
  (``cuStreamCreateWithPriority``).

Run on a GPU machine from the repository root::

    python3 bench/probes/decode_contention.py --work /tmp/mpdata --files 8000 --rates 20000,0

(rate 0: the load as fast as it goes).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def load(rate: float) -> None:
    """The load process: ImageNet-recipe batches of 256 at about ``rate`` img/s (0: unpaced)
    until its stdin closes; prints ``ready`` after its warm-up and its rate at the end."""
    import threading

    import millipyde as mp
    from bench.bench_batches import _sync, _tensor
    from bench.bench_recipes import MEAN, STD, _photos
    from millipyde.training.recipes import operations

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    gen = mp.Generator([mp.gpuimage(h) for h in _photos()], operations("imagenet"), seed=0)
    n = 0
    with gen.batches(256, dtype="float32", layout="NCHW", mean=MEAN, std=STD) as bs:
        for _ in range(3):
            _tensor(next(bs))
        _sync()
        print("ready", flush=True)
        t0 = time.perf_counter()
        while not stop.is_set():
            _tensor(next(bs))
            n += 256
            if rate:
                ahead = t0 + n / rate - time.perf_counter()
                if ahead > 0:
                    time.sleep(ahead)
        _sync()
    print(f"load: {n / (time.perf_counter() - t0):,.0f} img/s", flush=True)


def priority_streams() -> int:
    """Make ``ACTIVE.take_stream`` hand out new streams at the device's greatest priority;
    returns that priority."""
    from numba.cuda.cudadrv import driver as drv

    from millipyde.backend import ACTIVE as runtime

    with runtime.on_device(0):
        runtime.cuda.current_context()
        _least, greatest = drv.driver.cuCtxGetStreamPriorityRange()

    def take(device: int, blocking: bool = True) -> object:
        with runtime.on_device(device):
            return drv.Stream(drv.driver.cuStreamCreateWithPriority(0, greatest))

    runtime.take_stream = take
    runtime.give_stream = lambda stream: None
    return int(greatest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default="/tmp/mpdata")
    ap.add_argument("--files", type=int, default=8000)
    ap.add_argument("--classes", type=int, default=80)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--rates", default="20000,0", help="load rates, img/s (0: unpaced)")
    a = ap.parse_args()
    if a.load is not None:
        load(a.load)
        return
    from bench.bench_data import decode_alone_lanes, make_dataset

    folder = make_dataset(Path(a.work), a.files, a.classes)["folder"]

    def row(name: str) -> None:
        r = decode_alone_lanes(folder, a.batches, a.lanes, region=True)
        print(f"{name:<28} {r['rate']:>9,.0f} img/s  "
              f"({256 * a.lanes / r['rate'] * 1e3:.1f} ms a lane's call)", flush=True)

    row("alone")
    prio = None
    for rate in [float(x) for x in a.rates.split(",")]:
        p = subprocess.Popen([sys.executable, __file__, "--load", str(rate)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("the load process did not start")
            row(f"load {rate:,.0f}")
            if prio is None:
                prio = priority_streams()
            row(f"load {rate:,.0f} prio {prio}")
        finally:
            p.stdin.close()
            print("  " + p.stdout.read().strip(), flush=True)
            p.wait(60)
    row("alone, prio" if prio is not None else "alone")


if __name__ == "__main__":
    main()
