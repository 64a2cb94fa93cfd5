"""The host's record of one training batch of the policy recipes, no kernel run (any backend;
meant for the cpu backend of a machine without a GPU).

    MILLIPYDE_BACKEND=cpu python3 bench/bench_policies_host.py [--size 256] [--batches 10]
        [--repeat 3] [--profile NAME] [--json out.json] [--gpu-record]

Rows (each a Generator as ``bench_policies`` makes it: the six scikit-image photographs in
memory at their own sizes, ``random_resized_crop(224)``, ``fliplr(p=0.5)``, the policy):

- ``RandAugment(2, 9)``, ``TrivialAugmentWide``, ``AutoAugment``: the arena recorder's
  ``record`` of a batch (draws, structures, every member's parameter rows and gates) and the
  pack of its per-member arrays (``batch_arena._upload``; on the cpu backend the "upload" is a
  host copy);
- ``RandAugment(2, 9) (worker)``, ``TrivialAugmentWide (worker)``: the batch worker's whole
  host path of a batch (``Batches._make``: record, pack, the output's allocation, every
  launch's arguments and call, the conversion), no kernel run;
- ``rrc + flip``: the same recipe with no policy (the arena's floor);
- ``figure 5.1``: ``bench_batches.operations()`` on six 512x512 RGB inputs (the chain that
  makes ~100k img/s on an H100/H200): ``batch_record.Recorder.groups`` and the groups' pack;
- ``MixUp`` / ``CutMix``: one mixer call (``num_classes=1000``, int64 class labels on the
  host, as ``bench_policies`` passes them) on a float32 NCHW batch of 224x224, its two kernel
  launches replaced by no-ops: the mixer's own host work per batch ("record" is the whole
  call, "pack" 0);
- ``labels (worker)``, ``MixUp (worker)``, ``CutMix (worker)``: a batch worker's labels work
  (``Batches._extras``: int64 class indices uploaded, wrapped) alone and with the mix
  (``queue_classes`` on the uploaded indices), kernels replaced by no-ops: what a mix adds to
  the worker is the difference.

On the cpu backend the device's work is left out as a GPU would take it off the host: the
pack's "upload" is zero-copy (views of the host buffer the parts were written into: a GPU
backend writes the parts into a pinned buffer and queues one asynchronous copy, so the host's
share is the parts' writes, which stay in the time), device-to-device copies (the statistic
rows' starting values) are not run, and device buffers come from a pool (as the GPU
backends' pools reuse them: no page faults per batch).

Per row: ms per batch (best of ``--repeat`` runs of ``--batches`` batches, after warm-up
batches that record every structure's template), the thread's CPU ms per batch (what the
batch costs this thread whatever else runs on the machine) and Python function calls per
batch (cProfile; machine-independent). ``--profile NAME`` prints the cProfile listing of row
NAME. At 100k img/s a batch of 256 has 2.56 ms. ``--gpu-record``: the arena rows recorded as
a GPU backend's batch worker records them (the cpu backend ends a gather before each
statistic op that follows a sampler, ``ArenaRecorder.stat_cut``; a GPU does not: fewer stages,
another record).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import millipyde as mp  # noqa: E402
from bench.bench_policies import _recipe  # noqa: E402
from bench.bench_recipes import _photos  # noqa: E402
from millipyde.training import batches  # noqa: E402


def _host_only() -> None:
    """On the cpu backend: what a GPU does, not its host, left out (see the module doc)."""
    from millipyde.backend import ACTIVE as runtime

    if mp.backend() != "cpu":
        return

    def upload_pack(host: np.ndarray, parts: list, device: int) -> list:
        return [runtime.part(host, off, dtype, shape) if 0 not in shape
                else runtime.empty(shape, dtype, device) for off, dtype, shape in parts]

    pool: dict = {}
    empty = runtime.empty

    def pooled(shape: tuple, dtype: object, device: int) -> object:
        key = (tuple(shape), np.dtype(dtype))
        got = pool.get(key)
        if got is None:
            got = pool[key] = empty(shape, dtype, device)
        return got

    runtime.upload_pack = upload_pack
    runtime.empty = pooled
    runtime.copy_into = lambda dst, offset, src, n: None


def _arena_host(hosts: list, policy: object | None, hw: int, n: int,
                gpu_record: bool = False) -> Callable:
    """One batch's host work of the arena recipe with ``policy`` (None: rrc + flip only);
    ``gpu_record``: recorded as a GPU backend records it (no gather ended before a
    statistic op: ``ArenaRecorder.stat_cut``)."""
    from millipyde.training.batch_arena import _upload

    ops = _recipe(policy, hw)[:2 if policy is None else 3]
    st = mp.Generator([mp.gpuimage(h) for h in hosts], ops, seed=0)._state
    rec = batches.arena_recorder(st)
    if rec is None:
        raise SystemExit(f"{ops} is not recorded as arena batches")
    if gpu_record:
        rec.stat_cut = False

    def host(b: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        launches, left = rec.record(list(range(b * n, b * n + n)))
        t1 = time.perf_counter()
        _upload(launches, 0)
        if left:
            raise SystemExit(f"{len(left)} outputs left per output")
        return t1 - t0, time.perf_counter() - t1

    return host


def _worker_host(hosts: list, policy: object, hw: int, n: int,
                 gpu_record: bool = False) -> Callable:
    """The batch worker's whole host path of one batch (``Batches._make``: the record, the
    pack, the output's allocation, every launch's arguments and call, the conversion, the
    indices), every kernel's run skipped (the cpu backend's ``_run_cpu`` a no-op: on a GPU the
    kernels run off the host)."""
    from bench.bench_recipes import MEAN, STD
    from millipyde.backend import ACTIVE as runtime

    gen = mp.Generator([mp.gpuimage(h) for h in hosts], _recipe(policy, hw), seed=0)
    bs = gen.batches(n, dtype="float32", layout="NCHW", mean=MEAN, std=STD,
                     with_indices=True)
    rec = batches.arena_recorder(gen._state)
    if rec is None:
        raise SystemExit("the recipe is not recorded as arena batches")
    if gpu_record:
        rec.stat_cut = False
    if mp.backend() == "cpu":
        runtime._run_cpu = lambda kernel, args, items: None

    from millipyde import devices
    from millipyde.workers import STREAMS

    stream, _ = STREAMS.acquire(0)  # (a worker's own stream, as ``WorkerGroup`` gives it)

    def host(b: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        # (the device, stream and target a batch worker runs with: entered per batch here,
        # once per thread there)
        with runtime.on_device(0), runtime.using_stream(stream), devices.targeting(0):
            bs._make(b, 0, stream)
        return time.perf_counter() - t0, 0.0

    host.keep = (gen, bs, stream)  # (alive while timed)
    return host


def _mix_batch(n: int, hw: int) -> tuple:
    """A float32 NCHW batch of ``n`` and its int64 class labels on the host; every kernel
    launch of this process a no-op from here (the mix rows time the host alone)."""
    from millipyde.backend import ACTIVE as runtime

    runtime.launch_blocks = runtime.launch_1d = runtime.launch_grid = \
        lambda *a, **k: None  # (this process times no kernel after this row)
    return (mp.gpuarray(np.zeros((n, 3, hw, hw), dtype=np.float32)),
            np.arange(n, dtype=np.int64) % 6)


def _mix_worker_host(mixer: object | None, n: int, hw: int) -> Callable:
    """What ``Batches._extras`` does for a batch's labels (int64 class indices, uploaded) and,
    with ``mixer``, the mix queued from the uploaded indices (``queue_classes``; the
    Generator's labels were checked in range once, not per batch), its kernel not run: the
    host time a mix adds to a batch worker is this row's against the labels-only row's."""
    from millipyde.backend import ACTIVE as runtime

    batch, labels = _mix_batch(n, hw)

    def host(b: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        host_labels = np.ascontiguousarray(labels, dtype=np.int64)
        with runtime.on_device(0):
            buf = runtime.upload_parts([(0, host_labels)], host_labels.nbytes, 0)[0]
            if mixer is not None:
                mixer.queue_classes(batch, buf, b * n)
        if mixer is None:
            mp.gpuarray.from_buffer(buf, 0)
        return time.perf_counter() - t0, 0.0

    return host


def _thesis_host(n: int) -> Callable:
    """One batch's host work of figure 5.1 on six 512x512 RGB inputs (``batch_record``)."""
    from bench.bench_batches import _images, operations
    from millipyde.graph.exec import batch

    st = mp.Generator(_images(512), operations(), seed=0)._state
    rec = batches.recorder(st)
    stacks = st.stacks_on(0, None)

    def host(b: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        groups, _ = rec.groups(list(range(b * n, b * n + n)), 0, stacks, ahead=True)
        t1 = time.perf_counter()
        pk = batch.Pack()
        for g in groups:
            g.pack(pk)
        pk.upload(0)
        return t1 - t0, time.perf_counter() - t1

    return host


def _mix_host(mixer: object, n: int, hw: int) -> Callable:
    """One call of ``mixer`` on a float32 NCHW batch, its kernels not run."""
    batch, labels = _mix_batch(n, hw)

    def host(b: int) -> tuple[float, float]:
        t0 = time.perf_counter()
        mixer(batch, labels, step=b)
        return time.perf_counter() - t0, 0.0

    return host


def measure(host: Callable, batches_: int, repeat: int, warm: int,
            profile: bool = False) -> dict:
    """ms per batch (record, pack, both; best of ``repeat``), thread CPU ms and Python calls
    per batch, after ``warm`` batches."""
    for b in range(warm):
        host(b)
    best = {"record_ms": np.inf, "pack_ms": np.inf, "total_ms": np.inf, "cpu_ms": np.inf}
    b0 = warm
    for _ in range(repeat):
        rec_t = pack_t = 0.0
        t0, c0 = time.perf_counter(), time.thread_time()
        for b in range(b0, b0 + batches_):
            r, p = host(b)
            rec_t, pack_t = rec_t + r, pack_t + p
        total, cpu = time.perf_counter() - t0, time.thread_time() - c0
        b0 += batches_
        for key, v in (("record_ms", rec_t), ("pack_ms", pack_t), ("total_ms", total),
                       ("cpu_ms", cpu)):
            best[key] = min(best[key], 1e3 * v / batches_)
    prof = cProfile.Profile()
    prof.enable()
    for b in range(b0, b0 + batches_):
        host(b)
    prof.disable()
    stats = pstats.Stats(prof)
    best["calls"] = stats.total_calls / batches_
    if profile:
        stats.sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(30)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", type=int, default=8)
    ap.add_argument("--hw", type=int, default=224)
    ap.add_argument("--only", default="", help="row names separated by ; (default: all)")
    ap.add_argument("--profile", default="", help="print the cProfile listing of this row")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--gpu-record", action="store_true",
                    help="record the arena rows as a GPU backend does (the cpu backend ends "
                         "a gather before each statistic op after a sampler; a GPU does not)")
    args = ap.parse_args(argv)
    hosts = _photos()
    _host_only()
    rows: dict[str, Callable[[], Callable]] = {
        "RandAugment(2, 9)": lambda: _arena_host(hosts, mp.RandAugment(2, 9), args.hw,
                                                 args.size, args.gpu_record),
        "TrivialAugmentWide": lambda: _arena_host(hosts, mp.TrivialAugmentWide(), args.hw,
                                                  args.size, args.gpu_record),
        "RandAugment(2, 9) (worker)": lambda: _worker_host(
            hosts, mp.RandAugment(2, 9), args.hw, args.size, args.gpu_record),
        "TrivialAugmentWide (worker)": lambda: _worker_host(
            hosts, mp.TrivialAugmentWide(), args.hw, args.size, args.gpu_record),
        "AutoAugment": lambda: _arena_host(hosts, mp.AutoAugment(), args.hw, args.size,
                                           args.gpu_record),
        "rrc + flip": lambda: _arena_host(hosts, None, args.hw, args.size,
                                          args.gpu_record),
        "figure 5.1": lambda: _thesis_host(args.size),
        "MixUp": lambda: _mix_host(mp.MixUp(num_classes=1000, seed=0), args.size, args.hw),
        "CutMix": lambda: _mix_host(mp.CutMix(num_classes=1000, seed=0), args.size, args.hw),
        "labels (worker)": lambda: _mix_worker_host(None, args.size, args.hw),
        "MixUp (worker)": lambda: _mix_worker_host(mp.MixUp(num_classes=1000, seed=0),
                                                   args.size, args.hw),
        "CutMix (worker)": lambda: _mix_worker_host(mp.CutMix(num_classes=1000, seed=0),
                                                    args.size, args.hw),
    }
    only = [s.strip() for s in args.only.split(";") if s.strip()]
    res: dict = {"backend": mp.backend(), "size": args.size, "batches": args.batches}
    for name, make in rows.items():
        if only and name not in only:
            continue
        res[name] = measure(make(), args.batches, args.repeat, args.warm,
                            profile=name == args.profile)
        print(name, json.dumps({k: round(v, 3) for k, v in res[name].items()}), flush=True)
    print(f"\n{'row':22s} {'record ms':>10s} {'pack ms':>8s} {'total ms':>9s} {'cpu ms':>8s} "
          f"{'calls':>8s}")
    for name in rows:
        r = res.get(name)
        if r is not None:
            print(f"{name:22s} {r['record_ms']:10.2f} {r['pack_ms']:8.2f} {r['total_ms']:9.2f} "
                  f"{r['cpu_ms']:8.2f} {r['calls']:8,.0f}")
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
