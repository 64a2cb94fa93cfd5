"""Training batches: ``Generator.batches(256, float32, NCHW)`` consumed as torch tensors (GPU).

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/bench_batches.py [--batches 40] [--cold] [--ranks 2]

Figure-5.1 operations (``random_colorize`` as a method: the inputs are all colour) on six
512x512 RGB inputs. Rows, one run:

- ``drop``: each batch taken as a torch tensor (``torch.as_tensor``, zero-copy through
  ``__cuda_array_interface__``) and dropped; ``hold16``: the last 16 batches kept alive.
- ``kornia``: ``AugmentationSequential`` of the nearest equivalent ops on float32 batches of
  the same size, where kornia imports (``bench_augment._kornia``).
- ``floor``: the memory floor, device copy bandwidth (torch, 1 GiB) over the bytes a sample
  must move at least (its float32 output written, its uint8 input read), and each rate's
  fraction of it.
- ``--cold``: a child process with an empty kernel cache: seconds to the first batch, kernel
  files written and kernels compiled (in this process), then a second Generator with another
  seed: the same (0 files, 0 compiles when it compiles nothing); ``batches`` compiles the
  chain ahead in worker processes (``millipyde.training.precompile``, its numbers as ``precompile``)
  unless ``--no-precompile``; with ``--warm-processes N`` also a child
  that first runs ``millipyde.training.warmup`` in N processes (its time reported).
- ``--ranks N``: one rank process alone (``Generator(rank=0, world_size=1)``), then N
  processes at once, one per GPU (``CUDA_VISIBLE_DEVICES``), each ``Generator(rank=r,
  world_size=N)``, their timed windows started together (a file barrier); the summed rate
  against the one alone and against this process's ``drop``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import millipyde as mp  # noqa: E402


def operations() -> list:
    """Figure 5.1 with ``random_colorize`` as a method (every input is colour)."""
    return [
        mp.Operation("transpose", probability=0.2),
        mp.Operation("fliplr", probability=0.2),
        mp.Operation("random_brightness", -0.2, 1),
        mp.Operation("random_gaussian", 0, 2),
        mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5], probability=0.3),
        mp.Operation("rgb2grey", probability=0.3),
        mp.Operation("random_rotate", 0, 120, probability=0.5),
    ]


def _images(size: int) -> list:
    from bench.bench_augment import _inputs

    return [mp.gpuimage(h) for h in _inputs(size=size)]


def _tensor(batch: object) -> object:
    """The batch as a torch tensor, zero-copy (NumPy through DLPack on the cpu backend)."""
    if mp.backend() == "cpu":
        import numpy as np

        return np.from_dlpack(batch)
    import torch

    return torch.as_tensor(batch, device="cuda")


def _sync() -> None:
    mp.synchronize()
    if mp.backend() != "cpu":
        import torch

        torch.cuda.synchronize()


def _steady(bs: object) -> None:
    """Take the batches made ahead while the consumer was away (a sync, a barrier), untimed:
    the timed window then starts as it ends, with the workers as far ahead as they keep up
    (two batches of 256 on a GPU; at most four, for the small batches of a cpu smoke run)."""
    for _ in range(min(bs._ahead, 4)):
        _tensor(next(bs))


def rate(imgs: list, size: int, batches: int, hold: int, seed: int = 0) -> float:
    """img/s of ``batches`` batches taken as torch tensors, keeping the last ``hold``."""
    kept: collections.deque = collections.deque(maxlen=max(hold, 1))
    gen = mp.Generator(imgs, operations(), seed=seed)
    with gen.batches(size) as bs:
        next(bs)  # workers started, first batch made
        _sync()
        _steady(bs)
        t0 = time.perf_counter()
        for _ in range(batches):
            t = _tensor(next(bs))
            if hold:
                kept.append(t)
        _sync()
        dt = time.perf_counter() - t0
    return batches * size / dt


def copy_bandwidth() -> float:
    """Device copy bandwidth in bytes/s (read + write), torch, 1 GiB, best of 10."""
    if mp.backend() == "cpu":
        import numpy as np

        a = np.ones(1 << 26, dtype=np.float32)
        t0 = time.perf_counter()
        a.copy()
        return 2 * a.nbytes / (time.perf_counter() - t0)
    import torch

    a = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * a.numel() * 4 / best


def _files(d: Path) -> int:
    return sum(1 for p in d.rglob("*") if p.is_file())


def cold_child(size: int, px: int, warm_processes: int, precompile: bool = True) -> dict:
    """In a fresh process with an empty cache: first batch, then another seed's (after
    ``millipyde.training.warmup`` in ``warm_processes`` processes, if > 0). ``batches`` compiles the
    chain ahead in worker processes (``millipyde.training.precompile``) unless ``precompile`` is
    False; what that took is reported as ``precompile``."""
    from millipyde.training import precompile as ahead
    from millipyde.training import warmup

    ahead.ENABLED = precompile
    cache = Path(os.environ["MILLIPYDE_CACHE_DIR"])
    imgs = _images(px)
    out = {}
    if warm_processes:
        got = warmup.warmup(operations(), (px, px, 3), size=size, processes=warm_processes)
        out["warmup"] = got
    before_compiles = warmup.compiled_count()
    for seed in (0, 1):
        before = _files(cache) if cache.exists() else 0
        t0 = time.perf_counter()
        with mp.Generator(imgs, operations(), seed=seed).batches(size) as bs:
            next(bs)
            mp.synchronize()
        out[f"seed{seed}_first_batch_s"] = time.perf_counter() - t0
        out[f"seed{seed}_cache_files_written"] = _files(cache) - before
        out[f"seed{seed}_compiled_total"] = warmup.compiled_count() - before_compiles
        if seed == 0 and ahead.last:
            out["precompile"] = dict(ahead.last)
    return out


def _barrier(directory: str | None, rank: int, world: int) -> None:
    """Wait until every rank has written its file in ``directory`` (no-op without one)."""
    if not directory:
        return
    Path(directory, f"ready{rank}").touch()
    deadline = time.monotonic() + 600
    while sum(Path(directory, f"ready{r}").exists() for r in range(world)) < world:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the other ranks never got ready in {directory}")
        time.sleep(0.001)


def ranks_child(rank: int, world: int, size: int, batches: int, px: int,
                barrier: str | None = None) -> dict:
    """img/s of one data-parallel process (its GPU only: ``CUDA_VISIBLE_DEVICES``), timed
    from the moment every rank is ready (``barrier``, a directory) so the windows overlap."""
    from millipyde.training import warmup

    imgs = _images(px)
    # every kernel of the chain loaded in this process (from the warm disk cache): none loads
    # inside the timed window
    warmup.warmup(operations(), (px, px, 3), size=size, processes=1)
    gen = mp.Generator(imgs, operations(), seed=0, rank=rank, world_size=world)
    with gen.batches(size) as bs:
        for _ in range(2):
            next(bs)
        _sync()
        _barrier(barrier, rank, world)
        _steady(bs)
        start = time.time()
        t0 = time.perf_counter()
        for _ in range(batches):
            _tensor(next(bs))
        _sync()
        dt = time.perf_counter() - t0
        return {"rate": batches * size / dt, "start": start, "end": start + dt}


def run_ranks(n: int, size: int, batches: int, px: int) -> list[dict]:
    """Run ``n`` rank processes at once, one GPU each, their timed windows started together."""
    with tempfile.TemporaryDirectory() as d:
        procs = [subprocess.Popen([sys.executable, __file__, "--child", f"rank{r}/{n}",
                                   "--size", str(size), "--batches", str(batches),
                                   "--px", str(px), "--barrier", d],
                                  env={**os.environ, "CUDA_VISIBLE_DEVICES": str(r)},
                                  stdout=subprocess.PIPE, text=True)
                 for r in range(n)]
        got = []
        for r, p in enumerate(procs):
            out, _ = p.communicate(timeout=900)
            if p.returncode:
                raise RuntimeError(f"rank {r} of {n} failed (exit {p.returncode})")
            got.append(json.loads(out.strip().splitlines()[-1]))
    return got


def _spawn(args: list[str], env: dict) -> dict:
    r = subprocess.run([sys.executable, __file__, *args], env={**os.environ, **env},
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise RuntimeError(f"child failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Run the rows of the module doc and write bench/results/batches_<backend>.json."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=256, help="samples per batch")
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--px", type=int, default=512)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--ranks", type=int, default=0)
    ap.add_argument("--warm-processes", type=int, default=0,
                    help="with --cold: also time a cold start after `warmup` in N processes")
    ap.add_argument("--no-precompile", action="store_true",
                    help="with --cold: batches() compiles as it goes (no worker processes)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child == "cold":
        print(json.dumps(cold_child(args.size, args.px, args.warm_processes,
                                    not args.no_precompile)))
        return 0
    if args.child and args.child.startswith("rank"):
        r, w = (int(v) for v in args.child[4:].split("/"))
        print(json.dumps(ranks_child(r, w, args.size, args.batches, args.px, args.barrier)))
        return 0
    rows: dict = {}
    if args.cold:
        for warm in sorted({0, args.warm_processes}):
            with tempfile.TemporaryDirectory() as d:
                name = "cold" if not warm else f"cold_after_warmup_{warm}"
                rows[name] = _spawn(["--child", "cold", "--size", str(args.size),
                                     "--px", str(args.px), "--warm-processes", str(warm)]
                                    + (["--no-precompile"] if args.no_precompile else []),
                                    {"MILLIPYDE_CACHE_DIR": d})
            print(f"{name}:", rows[name])
    imgs = _images(args.px)
    from millipyde.training import warmup

    # every kernel the chain needs (clipped rotations included), in this process: nothing
    # compiles while rates are measured
    warmup.warmup(operations(), (args.px, args.px, 3), size=args.size, processes=1)
    rate(imgs, args.size, 4, 0, seed=1)
    rows["drop"] = rate(imgs, args.size, args.batches, 0)
    rows["hold16"] = rate(imgs, args.size, args.batches, 16)
    try:
        from bench.bench_augment import _inputs, _kornia

        rows["kornia"] = _kornia(_inputs(size=args.px), args.batches * args.size, args.size)
    except Exception as exc:
        print(f"kornia: skipped ({type(exc).__name__}: {exc})")
    bw = copy_bandwidth()
    per = args.px * args.px * 3 * (4 + 1)
    floor = bw / per
    print(f"backend {mp.backend()}, {args.px}x{args.px} RGB -> float32 NCHW, batches of "
          f"{args.size}, {args.batches} batches")
    print(f"memory floor: {bw / 1e12:.2f} TB/s copy / {per / 1e6:.2f} MB per sample = "
          f"{floor:,.0f} img/s")
    for name in ("drop", "hold16", "kornia"):
        if name in rows:
            print(f"{name:8s} {rows[name]:12,.0f} img/s  {rows[name] / floor:7.2%} of floor"
                  + (f"  {rows[name] / rows['kornia']:6.2f}x kornia" if "kornia" in rows
                     else ""))
    print(f"hold16 vs drop: {rows['hold16'] / rows['drop'] - 1:+.1%}")
    if args.ranks:
        # one rank process alone, then all of them at once: the same code on each side
        alone = run_ranks(1, args.size, args.batches, args.px)[0]["rate"]
        got = run_ranks(args.ranks, args.size, args.batches, args.px)
        rates = [g["rate"] for g in got]
        overlap = min(g["end"] for g in got) - max(g["start"] for g in got)
        span = max(g["end"] for g in got) - min(g["start"] for g in got)
        rows["rank_alone"] = alone
        rows["ranks"] = rates
        rows["ranks_overlap"] = overlap / span
        print(f"1 process alone: {alone:,.0f} img/s")
        print(f"{args.ranks} processes at once: {sum(rates):,.0f} img/s "
              f"({', '.join(f'{r:,.0f}' for r in rates)}; timed windows overlap "
              f"{overlap / span:.0%}), {sum(rates) / alone:.2f}x one process alone, "
              f"{sum(rates) / rows['drop']:.2f}x this process's drop")
    rows["floor"] = floor
    out = Path(f"bench/results/batches_{mp.backend()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "date": time.strftime("%Y-%m-%d")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
