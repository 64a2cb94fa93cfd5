"""Pipelines on 1 and N devices, chunks in this process's threads or in a worker process per
device (``Pipeline(processes=True)``), cold and warm, outputs checked equal.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python3 bench/probes/pipeline_processes.py

Part A: the thesis 5-op chain (``bench_pipeline.FIVE``) over ``--inputs-a`` copies of a
``--size-a`` RGB image; part B: over ``--inputs-b`` ``--size-b`` RGBA images. Cases: one
device (``device=0``); every device with the inputs spread when made (``with mp.Device(i %
n)``); every device with the inputs made on device 0 (A only, or B with ``--b-on0``). Each
timed run is the Pipeline's ``run`` and a synchronize of every device, on fresh inputs made
before it (untimed); threads and processes alternate run by run (best of ``--repeat`` each).

Cold start, per case's device set, before its timed runs: the workers are stopped
(``pipeline.close_processes``), then started alone (``start``: an interpreter, millipyde's
import, the backend and a CUDA context per device), then the first run (``first``: the workers'
first chunks load their kernels and record their templates); a thread run is made first in
the same way (its ``first`` too). Outputs: a sample of inputs (first, middle, last and five
between) of the processes' last run against the threads' last run, byte for byte. Each mode
also gives this process's CPU time an input in its least run (every thread of it, not the
workers': the host work left under the one GIL; 3.6x on four GPUs needs <= 5.3 us).

The workers stack each chunk from its inputs' own memory (``processes.STACK_IN_WORKER``, the
default on GPUs; ``--stack-in-worker`` on any backend); ``--stack-here``: this process
stacks it and sends the stack. ``--window N``: chunks
a device may have in flight (``processes.WINDOW``). Each case prints the messages a chunk
(sent and received by this process, over its process runs). ``--cpu-check`` makes
everything small (the cpu backend's test of this script).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_pipeline import FIVE, spread_inputs  # noqa: E402
from millipyde.pipeline import processes  # noqa: E402


def _run(xs: list, ops: list, device: int | None, procs: bool,
         cpu: list | None = None) -> float:
    """Seconds of one run (and its synchronize); ``cpu`` gets this process's CPU seconds in
    it (every thread; not the workers')."""
    c0, t0 = time.process_time(), time.perf_counter()
    mp.Pipeline(xs, ops, device=device, processes=procs).run()
    mp.synchronize()
    t = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(time.process_time() - c0)
    return t


def _sample(n: int) -> list[int]:
    return sorted({0, n // 2, n - 1, *np.linspace(0, n - 1, 7).astype(int).tolist()})


def case(part: str, tag: str, host: np.ndarray, n: int, spread: bool, ndev: int,
         device: int | None, repeat: int, rows: list, over: bool = False) -> None:
    ops = [mp.Operation(name, *args) for name, args in FIVE]
    bases = []
    for d in range(mp.get_device_count()):
        with mp.Device(d):
            b = mp.gpuimage(host)
            b._materialize()
            bases.append(b)
    devs = [device] if device is not None else list(range(ndev))
    processes.close()
    first = {}
    xs = spread_inputs(bases, n, spread, ndev)
    first["threads"] = _run(xs, ops, device, False)
    del xs
    t0 = time.perf_counter()
    started = processes.start(devs)
    start_s = time.perf_counter() - t0
    xs = spread_inputs(bases, n, spread, ndev)
    first["processes"] = _run(xs, ops, device, True)
    del xs
    times: dict[str, list[float]] = {"threads": [], "processes": []}
    cpus: dict[str, list[float]] = {"threads": [], "processes": []}
    last: dict[str, list] = {}
    counts = getattr(processes, "messages", dict)  # (absent before 2026-11-29's protocol)
    m0 = counts()
    for _ in range(repeat):
        for mode in ("threads", "processes"):
            last[mode] = None
            xs = spread_inputs(bases, n, spread, ndev)
            if over:  # the timed run's inputs: an untimed run's outputs (batch members)
                _run(xs, ops, device, mode == "processes")
            times[mode].append(_run(xs, ops, device, mode == "processes", cpus[mode]))
            last[mode] = xs
    m1 = counts()
    sent, got, chunks = (sum(m1[d][i] - m0.get(d, (0, 0, 0))[i] for d in m1) for i in range(3))
    same = all(np.asarray(last["threads"][i]).tobytes() == np.asarray(last["processes"][i])
               .tobytes() for i in _sample(n))
    devices_out = sorted({x.device for x in last["processes"]})
    last.clear()
    tag += ", over outputs" if over else ""
    row = {"part": part, "case": tag, "inputs": n, "start_s": start_s,
           "start_per_device_s": started, "first_s": first,
           "best_s": {m: min(t) for m, t in times.items()},
           "img_s": {m: n / min(t) for m, t in times.items()}, "runs": times,
           "driver_cpu_us": {m: min(c) / n * 1e6 for m, c in cpus.items()},
           "outputs_equal": same, "output_devices": devices_out,
           "messages": {"sent": sent, "received": got, "chunks": chunks}}
    rows.append(row)
    b = row["best_s"]
    print(f"{part} {tag}: threads {b['threads']:.4f} s ({row['img_s']['threads']:,.0f} img/s), "
          f"processes {b['processes']:.4f} s ({row['img_s']['processes']:,.0f} img/s) = "
          f"{b['threads'] / b['processes']:.2f}x; this process's CPU an input: threads "
          f"{row['driver_cpu_us']['threads']:.1f} / processes "
          f"{row['driver_cpu_us']['processes']:.1f} us; cold: workers' start {start_s:.2f} s, "
          f"first "
          f"run threads {first['threads']:.3f} / processes {first['processes']:.3f} s; "
          f"messages a chunk: {sent / max(chunks, 1):.2f} sent, {got / max(chunks, 1):.2f} "
          f"received ({chunks} chunks); outputs equal: {same}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="A,B")
    ap.add_argument("--inputs-a", type=int, default=2000)
    ap.add_argument("--size-a", type=int, default=512)
    ap.add_argument("--inputs-b", type=int, default=100)
    ap.add_argument("--size-b", default="3500x4666", help="HxW")
    ap.add_argument("--b-on0", action="store_true", help="B also with every input on device 0")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--cpu-check", action="store_true", help="tiny sizes (cpu backend)")
    ap.add_argument("--over-outputs", action="store_true",
                    help="each timed run's inputs are an untimed run's outputs (members of "
                         "its chunks' buffers: no stack, no export an input)")
    ap.add_argument("--stack-in-worker", action="store_true",
                    help="processes: each input's memory sent, the worker stacks the chunk "
                         "(the default on GPUs)")
    ap.add_argument("--stack-here", action="store_true",
                    help="processes: this process stacks each chunk and sends the stack")
    ap.add_argument("--window", type=int, default=getattr(processes, "WINDOW", 1),
                    help="processes: chunks a device may have in flight")
    args = ap.parse_args()
    processes.STACK_IN_WORKER = False if args.stack_here else \
        (True if args.stack_in_worker else None)
    if hasattr(processes, "WINDOW"):  # (absent before 2026-11-29's protocol)
        processes.WINDOW = args.window
    over = args.over_outputs
    if args.cpu_check:
        args.inputs_a, args.size_a, args.inputs_b, args.size_b = 40, 48, 6, "120x90"
        args.repeat = 1
    rng = np.random.default_rng(0)
    ngpu = mp.get_device_count()
    rows: list = []
    parts = args.parts.split(",")
    if "A" in parts:
        host = rng.integers(0, 256, (args.size_a, args.size_a, 3), dtype=np.uint8)
        case("A", "1 device", host, args.inputs_a, False, 1, 0, args.repeat, rows, over)
        if ngpu > 1:
            case("A", f"{ngpu} devices, inputs spread", host, args.inputs_a, True, ngpu, None,
                 args.repeat, rows, over)
            case("A", f"{ngpu} devices, inputs made on 0", host, args.inputs_a, False, ngpu,
                 None, args.repeat, rows, over)
    if "B" in parts:
        h, w = (int(v) for v in args.size_b.split("x"))
        host = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
        case("B", "1 device", host, args.inputs_b, True, 1, 0, args.repeat, rows, over)
        if ngpu > 1:
            case("B", f"{ngpu} devices, inputs spread", host, args.inputs_b, True, ngpu, None,
                 args.repeat, rows, over)
            if args.b_on0:
                case("B", f"{ngpu} devices, inputs made on 0", host, args.inputs_b, False,
                     ngpu, None, args.repeat, rows, over)
    processes.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
