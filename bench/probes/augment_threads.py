"""Where a warm ``millipyde augment`` spends its loop: every thread's stack, sampled.

    source bench/gpu_env.sh
    python3 bench/probes/augment_threads.py [--folder DIR] [-n 1000] [--every 0.002]
        [--top 25] [--json OUT.json]

A folder of ImageNet-like JPEGs (``--folder``; default: ``bench_data.make_dataset``'s 1000-file
set under /tmp/mpdata) is augmented once by ``millipyde augment -n 64`` in a child process (its
kernels in the disk cache, as a user's second run finds them), then by ``cli.main`` in this
process while a sampling thread records every thread's stack each ``--every`` seconds
(``sys._current_frames``). Printed: the command's own line (its rate), the wall time split by
what the main thread was doing, and per thread the frames seen in most samples (inclusive:
a frame counts once a sample however deep), so the fixed cost of a short run can be located
without a profiler on the device.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: frames every worker thread has (left out of the per-thread counts)
#: a thread waiting (its innermost frame)
IDLE = ("python3.11/threading.py", "python3.12/threading.py", "tqdm/_monitor.py",
        "futures/thread.py:_worker", "python3.11/queue.py", "python3.12/queue.py")
SKIP = ("python3.11/threading.py", "python3.12/threading.py", "futures/thread.py",
        "futures/_base.py")


def frames_of(frame) -> list[str]:
    """A stack, innermost first, as ``file:function`` (files shortened to their last two
    parts)."""
    out = []
    while frame is not None:
        code = frame.f_code
        parts = code.co_filename.rsplit("/", 2)
        out.append(f"{'/'.join(parts[-2:])}:{getattr(code, 'co_qualname', code.co_name)}")
        frame = frame.f_back
    return out


class Sampler(threading.Thread):
    """Records every other thread's stack each ``every`` seconds until stopped."""

    def __init__(self, every: float) -> None:
        super().__init__(daemon=True, name="sampler")
        self.every = every
        self.samples: list[tuple[float, str, list[str]]] = []
        self.halt = threading.Event()
        self.t0 = time.perf_counter()

    def run(self) -> None:
        me = threading.get_ident()
        while not self.halt.wait(self.every):
            t = time.perf_counter() - self.t0
            names = {th.ident: th.name for th in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    self.samples.append((t, names.get(ident, str(ident)), frames_of(frame)))


def main_phase(stack: list[str]) -> str:
    """What the main thread does in one sample: the outermost frame of interest."""
    keys = (("EncoderPool.close", "writing (waiting for the encoders)"),
            ("Batches.__next__", "waiting for a batch"),
            ("Generator.batches", "starting batches"),
            ("Generator.__init__", "making the Generator"),
            ("contact_sheet", "contact sheet"),
            ("EncoderPool.submit", "handing to the encoders"))
    for frame in reversed(stack):  # outermost first
        for key, label in keys:
            if frame.endswith(":" + key):
                return label
    return stack[0] if stack else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", default=None)
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--every", type=float, default=0.002)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    folder = args.folder
    if folder is None:
        sys.path.insert(0, str(HERE.parent))
        from bench_data import make_dataset

        folder = make_dataset(Path("/tmp/mpdata"), 2000, 20)["aug1000"]
    out = Path("/tmp/augment_threads")
    warm = subprocess.run([sys.executable, "-m", "millipyde", "augment", folder, "-o",
                           str(out / "warm"), "-n", "64", "--recipe", "imagenet", "-q"],
                          capture_output=True, text=True, env=os.environ)
    print("warm-up run:", warm.stdout.strip().splitlines()[-1:] or warm.stderr[-500:],
          flush=True)
    t_import = time.perf_counter()
    from millipyde import cli

    import_s = time.perf_counter() - t_import
    sampler = Sampler(args.every)
    sampler.start()
    t = time.perf_counter()
    rc = cli.main(["augment", folder, "-o", str(out / "timed"), "-n", str(args.n),
                   "--recipe", "imagenet", "-q"])
    wall = time.perf_counter() - t
    sampler.halt.set()
    sampler.join()
    print(f"import {import_s:.2f} s; cli.main {wall:.2f} s (rc {rc}); "
          f"{len(sampler.samples)} samples every {args.every * 1e3:.1f} ms")
    per_thread: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    seen: collections.Counter = collections.Counter()
    phases: collections.Counter = collections.Counter()
    timeline: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for ts, name, stack in sampler.samples:
        label = "main" if name == "MainThread" else name.rstrip("0123456789_-")
        seen[label] += 1
        for frame in set(stack):
            if not frame.startswith(SKIP):
                per_thread[label][frame] += 1
        if name == "MainThread":
            ph = main_phase(stack)
            phases[ph] += 1
            timeline[int(ts / 0.25)][ph] += 1
    total_main = sum(phases.values()) or 1
    print("\nmain thread, share of samples:")
    for ph, c in phases.most_common(12):
        print(f"  {100 * c / total_main:5.1f}%  {ph}")
    print("\nmain thread by 250 ms bin (most common phase):")
    for b in sorted(timeline):
        ph, c = timeline[b].most_common(1)[0]
        print(f"  {b * 0.25:5.2f} s  {ph} ({c} of {sum(timeline[b].values())})")
    # the GIL held in one stretch: no sample for a while (the sampler needs it too); the
    # stacks just after say who held it
    stamps = sorted({ts for ts, _, _ in sampler.samples})
    gaps = [(a, b) for a, b in zip(stamps, stamps[1:], strict=False) if b - a > 0.05]
    print(f"\nstretches of {len(gaps)} with no sample over 50 ms (GIL held), "
          f"{sum(b - a for a, b in gaps):.2f} s in all:")
    for a, b in sorted(gaps, key=lambda g: g[0] - g[1])[:8]:
        print(f"  {a:6.2f} s + {b - a:.3f} s; then:")
        for ts, name, stack in sampler.samples:
            if ts == b and not any(f.startswith(IDLE) for f in stack[:2]):
                ours = [f for f in stack if "millipyde/" in f or "/data/" in f or
                        "/training/" in f][:2]
                print(f"      {name}: {' < '.join(stack[:4])} ... {' < '.join(ours)}")
    print("\nbusy threads by 250 ms bin (innermost millipyde frame, most common):")
    bins: dict[int, dict[str, collections.Counter]] = collections.defaultdict(
        lambda: collections.defaultdict(collections.Counter))
    for ts, name, stack in sampler.samples:
        if name == "MainThread" or not stack or stack[0].startswith(IDLE):
            continue
        own = next((f for f in stack if "millipyde/" in f or "/training/" in f or
                    "/data/" in f or "/exec/" in f or "/backend/" in f), stack[0])
        bins[int(ts / 0.25)][name.rstrip("0123456789_-")][own] += 1
    for b in sorted(bins):
        parts = [f"{lb}: {c.most_common(1)[0][0]} ({sum(c.values())})"
                 for lb, c in sorted(bins[b].items())]
        print(f"  {b * 0.25:5.2f} s  " + "; ".join(parts))
    for label, c in seen.most_common():
        print(f"\nthread {label} ({c} samples, all threads of this name together):")
        for frame, k in per_thread[label].most_common(args.top):
            print(f"  {k:6d}  {frame}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "import_s": import_s, "wall_s": wall, "phases": dict(phases),
            "threads": {lb: dict(per_thread[lb].most_common(60)) for lb in per_thread}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
