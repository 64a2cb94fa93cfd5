"""A/B of the figure-5.1 batch kernels across two source trees: per-kernel GPU time and digests.

Run it from the root of each tree (it imports the ``millipyde`` of the working directory, not
its own), e.g. base = main and branch = this tree:

    git -C /work/main worktree add /tmp/ab-base <base commit>   # or git archive | tar -x
    cd /tmp/ab-base && python3 /path/to/branch/bench/probes/batch_kernels.py --label base
    cd /path/to/branch && python3 bench/probes/batch_kernels.py --label branch

Per tree: ``Generator.batches(256)`` of the figure-5.1 Operations (``random_colorize`` as a
method, as ``bench/bench_batches.py``) on six 512x512 RGB inputs, float32 NCHW, seed 0. It
prints the SHA-256 of the first ``--digest`` batches' bytes (equal lines between trees: the
batches are bit-identical), then CUPTI kernel time (torch.profiler) per batch, summed and per
kernel (mangled names differ between trees: compare by order and launches), over
``--batches`` batches after ``--warmup`` (which compile every coin pattern's kernels).
``--repeat`` runs the timed part again (the spread says how far to trust a difference).

``--rows G,W[,GW] [G,W ...]`` (this branch only): one process, one fresh Generator per setting
of ``codegen.batch_gather.ROWS_PER_TRIP`` (rows per trip of the gathers without a sampler, of
the batch writers, of the one-channel writers), each with its digest and kernel times: an
A/B of that knob in one process.
``--caps G,W [G,W ...]``: the same for ``target.MAX_REGISTERS`` (registers per thread of
the gathers and of the writers; 0: no cap). ``--words 0 1``: the same for
``batch_writer.WORD_TAPS`` (the colour writer's taps as bytes, as words). ``--writer NAME=0|1,...
[...]``: the same for ``batch_writer``'s text flags (``all=1``: every one). ``--axis K,R
[K,R ...]``: the same for the axis-map gathers' ``batch_perm.WORDS_PER_TRIP`` and register cap
``MAX_REGISTERS['axis']``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.getcwd())  # the tree under test, not this file's

import numpy as np  # noqa: E402

import millipyde as mp  # noqa: E402
from bench.bench_batches import operations  # noqa: E402  (the tree under test's)


def _short(name: str) -> str:
    for key in ("tile2d", "kernel", "convert", "cast"):
        if key in name:
            return f"{key}:{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    return name[:60]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--label", default="")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--px", type=int, default=512)
    ap.add_argument("--warmup", type=int, default=6)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--digest", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rows", nargs="*", default=[],
                    help="settings 'G,W[,GW]' of batch_gather.ROWS_PER_TRIP to compare")
    ap.add_argument("--caps", nargs="*", default=[],
                    help="settings 'G,W' of target.MAX_REGISTERS to compare (0: none)")
    ap.add_argument("--words", nargs="*", default=[],
                    help="settings 0/1 of batch_writer.WORD_TAPS to compare")
    ap.add_argument("--writer", nargs="*", default=[],
                    help="settings 'NAME=0|1,...' of batch_writer's text flags (INT_INDEX, "
                         "UNIT_DIVISIONS, INT32_TAPS; 'all=0|1' for every one)")
    ap.add_argument("--axis", nargs="*", default=[],
                    help="settings 'K,R' of codegen.batch_perm.WORDS_PER_TRIP and "
                         "target.MAX_REGISTERS['axis'] (0: none) to compare")
    args = ap.parse_args(argv)
    print(f"[{args.label}] millipyde from {os.path.dirname(mp.__file__)}, backend "
          f"{mp.backend()}")
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (args.px, args.px, 3), dtype=np.uint8))
            for _ in range(6)]
    if not args.rows and not args.caps and not args.words and not args.axis \
            and not args.writer:
        _run(imgs, args, args.label)
    for setting in args.writer:
        from millipyde.graph.codegen import batch_writer
        from millipyde.training import batch_convert

        flags = ("INT_INDEX", "UNIT_DIVISIONS", "INT32_TAPS")
        for item in setting.split(","):
            name, value = item.split("=")
            for flag in flags if name == "all" else (name,):
                if flag not in flags:
                    raise SystemExit(f"--writer: no flag {flag} (one of {flags})")
                setattr(batch_writer, flag, bool(int(value)))
        batch_convert.fused_writer.cache_clear()
        _run(imgs, args, f"{args.label} writer {setting}")
    for setting in args.words:
        from millipyde.graph.codegen import batch_writer
        from millipyde.training import batch_convert

        batch_writer.WORD_TAPS = bool(int(setting))
        batch_convert.fused_writer.cache_clear()
        _run(imgs, args, f"{args.label} words={setting}")
    for setting in args.axis:
        from millipyde.graph.codegen import batch_perm, target
        from millipyde.graph.exec import batch_group

        k, r = (int(v) for v in setting.split(","))
        batch_perm.WORDS_PER_TRIP = k
        target.MAX_REGISTERS["axis"] = r or None
        batch_group._axis_fn.cache_clear()
        _run(imgs, args, f"{args.label} axis={setting}")
    for setting in args.caps:
        from millipyde.graph.codegen import target
        from millipyde.graph.exec import batch as exec_batch
        from millipyde.training import batch_convert

        g, w = (int(v) or None for v in setting.split(","))
        target.MAX_REGISTERS.update(gather=g, writer=w)
        exec_batch.gather_fn.cache_clear()
        batch_convert.fused_writer.cache_clear()
        _run(imgs, args, f"{args.label} caps={setting}")
    for setting in args.rows:
        from millipyde.graph.codegen import batch_gather
        from millipyde.graph.exec import batch as exec_batch
        from millipyde.training import batch_convert

        g, w, *grey = (int(v) for v in setting.split(","))
        batch_gather.ROWS_PER_TRIP.update(gather=g, writer=w)
        if grey:
            batch_gather.ROWS_PER_TRIP["grey writer"] = grey[0]
        exec_batch.gather_fn.cache_clear()
        batch_convert.fused_writer.cache_clear()
        _run(imgs, args, f"{args.label} rows={g},{w}")
    return 0


def _run(imgs: list, args: argparse.Namespace, label: str) -> None:
    with mp.Generator(imgs, operations(), seed=0).batches(args.size) as bs:
        _timed(iter(bs), args, label)


def _timed(it: Any, args: argparse.Namespace, label: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    h = hashlib.sha256()
    for _ in range(args.digest):
        h.update(torch.as_tensor(next(it), device="cuda").cpu().numpy().tobytes())
    print(f"[{label}] digest of batches 0..{args.digest - 1}: {h.hexdigest()}")
    for _ in range(args.warmup):
        next(it)
    torch.cuda.synchronize()
    for rep in range(args.repeat):
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.batches):
                torch.as_tensor(next(it), device="cuda")
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        per: dict[str, list[float]] = collections.defaultdict(list)
        for ev in prof.events():
            if ev.device_type.name == "CUDA":
                per[ev.name].append(ev.device_time_total / 1e3)
        total = sum(sum(v) for v in per.values()) / args.batches
        print(f"[{label}] run {rep}: kernels {total:.3f} ms per batch of {args.size} "
              f"({args.size / total * 1e3:,.0f} img/s if the kernels bound it); wall "
              f"{args.size * args.batches / wall:,.0f} img/s (profiled)")
        for name, ds in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:12]:
            print(f"[{label}]   {sum(ds) / args.batches:8.3f} ms  "
                  f"{len(ds) / args.batches:4.1f} launches  {_short(name)}  {name[:70]}")


if __name__ == "__main__":
    raise SystemExit(main())
