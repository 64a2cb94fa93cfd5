"""The kernels a cold ``millipyde augment`` compiles on a GPU, and where each one's time goes.

    python -m bench.probes.cold_start_kernels [--recipes imagenet thesis detection] [-n 48]
        [--processes 1] [--json FILE]              # no GPU: list in the simulator, PTX here
    python -m bench.probes.cold_start_kernels --gpu [--no-precompile] [--recipes ...]  # a GPU

Without a GPU (what CI's PTX tests do), per recipe:

1. ``record``: a child process runs ``millipyde augment -o OUT -n N --seed 0 --recipe R -q``
   on numba-cuda's simulator with the cuda backend's routing (``simulated`` off, tuned kernels
   on, an H200's shared memory opt-in limit) and every kernel launch recorded instead of run
   (its outputs are garbage; the host path is the GPU's). It writes each distinct (generated
   module, function, argument types) launched, how many launches each had, and the host
   functions (numba ``njit``) compiled on the way with their CPU seconds: a GPU process
   compiles those too.
2. ``ptx``: ``--processes`` children (no simulator) compile the kernels to PTX for sm_90 as a
   GPU process would (``graph.codegen.ptx``), then link each PTX to a cubin (ptxas through
   numba-cuda's linker; no device needed), and report per kernel the CPU seconds of numba's
   untyped passes, typing (device functions it compiles on the way included), lowering, NVVM
   and ptxas.

``--gpu`` (a machine with a GPU, ``MILLIPYDE_BACKEND=cuda``): per recipe, a fresh process with
an empty ``MILLIPYDE_CACHE_DIR`` runs the same ``augment`` for real with the same stage timers
(plus the module load), per kernel compiled in that process; the compile workers' CPU is
reported in total only (other processes): ``--no-precompile`` compiles every kernel in the
process, for its per-kernel rows.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: H100/H200 (sm_90): ``MAX_SHARED_MEMORY_PER_BLOCK_OPTIN``
SHARED_OPTIN = 232448


# -- stage timers (one process) -----------------------------------------------------------
class StageTimes:
    """Per kernel compile, process CPU seconds by stage: ``ir`` (numba's untyped passes),
    ``typing``, ``lowering`` (``*lowering*``, ``*backend*``, ``create_library``; each pass's
    own time, nested compiles of device functions subtracted and counted in their own stages),
    ``nvvm`` (LLVM IR to PTX), ``ptxas`` (PTX to cubin), ``load`` (module load on a device)."""

    def __init__(self) -> None:
        self.stack: list[list[float]] = []
        self.now: dict[str, float] = defaultdict(float)

    # numba-cuda's ``numba-cuda:run_pass`` events
    def on_start(self, event: Any) -> None:
        self.stack.append([time.process_time(), 0.0])

    def on_end(self, event: Any) -> None:
        t0, nested = self.stack.pop()
        spent = time.process_time() - t0
        if self.stack:
            self.stack[-1][1] += spent
        name = str(event.data.get("name", "")).split(" [")[0].lower()
        self.now[_stage(name)] += spent - nested

    def timed(self, stage: str, fn: Any) -> Any:
        """``fn`` wrapped: its CPU seconds go to ``stage`` (and out of an enclosing pass)."""
        def wrapper(*args: Any, **kw: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*args, **kw)
            finally:
                spent = time.process_time() - t0
                if self.stack:
                    self.stack[-1][1] += spent
                self.now[stage] += spent
        return wrapper

    def take(self) -> dict[str, float]:
        got = {k: round(v, 3) for k, v in self.now.items()}
        self.now.clear()
        return got


def _stage(name: str) -> str:
    if "type_inference" in name:
        return "typing"
    if "lowering" in name or "backend" in name or name == "create_library":
        return "lowering"
    return "ir"


def install_timers() -> StageTimes:
    """Stage timers on numba-cuda's passes, NVVM, its linker and module loads."""
    from numba.cuda import codegen
    from numba.cuda.core import event as cev

    st = type("Timers", (StageTimes, cev.Listener), {})()
    cev.register("numba-cuda:run_pass", st)
    lib = codegen.CUDACodeLibrary
    lib.get_asm_strs = st.timed("nvvm", lib.get_asm_strs)
    real_cubin = lib.get_cubin

    def get_cubin(self: Any, cc: Any = None) -> Any:
        # (its PTX first, timed as nvvm, so ``ptxas`` is the link alone)
        self.get_asm_strs(cc=cc)
        return st.timed("ptxas", real_cubin)(self, cc)

    lib.get_cubin = get_cubin
    try:
        from numba.cuda.cudadrv import driver

        ctx = driver.Context
        ctx.create_module_image = st.timed("load", ctx.create_module_image)
    except Exception:
        pass
    return st


# -- 1. record (simulator, cuda routing) --------------------------------------------------
def _count_host_compiles(host: list[tuple[str, float]], qualified: bool) -> None:
    """Append (function, process CPU seconds) to ``host`` for every outermost Numba compile
    from now on (its module too where ``qualified``)."""
    import numba.core.event as ev

    class HostCompiles(ev.Listener):
        def __init__(self) -> None:
            self.stack: list[float] = []

        def on_start(self, event: Any) -> None:
            self.stack.append(time.process_time())

        def on_end(self, event: Any) -> None:
            t0 = self.stack.pop()
            if not self.stack:
                fn = getattr(event.data.get("dispatcher"), "py_func", None)
                name = getattr(fn, "__qualname__", "?")
                if qualified:
                    name = f"{getattr(fn, '__module__', '?')}.{name}"
                host.append((name, round(time.process_time() - t0, 3)))

    ev.register("numba:compile", HostCompiles())


def record(recipe: str, n: int, out: Path, with_precompile: bool = False) -> None:
    """Child: run ``augment`` with every launch recorded; write the kernels to ``out``."""
    import numba
    import numpy as np

    host: list[tuple[str, float]] = []

    _count_host_compiles(host, qualified=True)
    from dataclasses import replace

    from millipyde.backend import ACTIVE as rt
    from millipyde.cli import main
    from millipyde.graph.codegen import loader
    from millipyde.training import precompile

    if rt.name != "cudasim":
        raise SystemExit("record runs on the simulator (NUMBA_ENABLE_CUDASIM=1)")
    # the cuda backend's routing: real kernel variants, tuned kernels, its shared memory
    rt.simulated = False
    rt.caps = replace(rt.caps, tuned_kernels=True)
    rt.shared_limit = lambda device: SHARED_OPTIN
    precompile.ENABLED = False  # the list of kernels, not the workers' run of them
    launches: dict[tuple, int] = defaultdict(int)

    def argtype(a: Any) -> Any:
        host_array = getattr(a, "_ary", None)
        return numba.typeof(host_array if isinstance(host_array, np.ndarray) else a)

    def recorded(kernel: Any, device: int, args: tuple) -> bool:
        fn = getattr(kernel, "fn", None) or getattr(kernel, "py_func", None)
        mod = loader.LOADED.get(getattr(fn, "__module__", None))
        path = getattr(mod, "__file__", None) or "?"
        launches[(path, getattr(fn, "__name__", "?"),
                  tuple(argtype(a) for a in args))] += 1
        return True

    rt._recorded = recorded
    jobs: dict[tuple, int] = defaultdict(int)
    if with_precompile:
        # ``Generator.batches`` compiles ahead as on a GPU: its jobs are kept, not run (what
        # its own recording launches goes to its sink, not to the list above)
        precompile.ENABLED = True

        def job(kernel: Any, args: tuple) -> tuple | None:
            fn = getattr(kernel, "fn", None) or getattr(kernel, "py_func", None)
            mod = loader.LOADED.get(getattr(fn, "__module__", None))
            if mod is None:
                return None
            return (mod.__file__, fn.__name__, tuple(argtype(a) for a in args))

        class Workers:
            def __init__(self, n: int, warm: str | None = None) -> None:
                self.n = n
                self.results: list = []
                self.timed: list = []
                self.starts: list = []
                self.here: list = []

            def submit(self, got: tuple) -> None:
                jobs[got] += 1
                self.results.append((True, 0.0))

            def compile_here(self) -> None:
                pass

            def recorded(self) -> None:
                pass

            def close(self) -> None:
                pass

            def stop(self) -> None:
                pass

        precompile.job = job
        precompile.CompileWorkers = Workers

        def recorded_or_sink(kernel: Any, device: int, args: tuple) -> bool:
            sink = getattr(rt._tls, "recording", None)
            if sink is not None:
                sink(kernel, device, args)
                return True
            return recorded(kernel, device, args)

        rt._recorded = recorded_or_sink
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        rc = main(["augment", "-o", tmp, "-n", str(n), "--seed", "0", "--recipe", recipe,
                   "-q"])
        cpu = time.process_time() - t0
    with open(out, "wb") as f:
        pickle.dump({"rc": rc, "kernels": [(k, v) for k, v in launches.items()],
                     "jobs": [(k, v) for k, v in jobs.items()],
                     "host": host, "cpu": cpu}, f)


# -- 2. PTX and cubin for each kernel (no GPU) --------------------------------------------
def ptx_child(todo: Path, out: Path) -> None:
    """Child: compile every kernel of ``todo`` to PTX and cubin; write its rows to ``out``."""
    from numba.cuda.cudadrv import driver

    import millipyde.training.recipes  # noqa: F401  (registers the recipes' user ops)
    from millipyde.graph.codegen import loader
    from millipyde.graph.codegen.ptx import CC, device_compute_capability

    st = install_timers()
    kernels = pickle.loads(todo.read_bytes())
    rows = []
    for path, name, argtypes in kernels:
        mod = loader.load(Path(path).read_text(), "cuda")
        fn = getattr(mod, name).py_func
        st.take()
        t0 = time.perf_counter()
        from numba.cuda.compiler import _compile_pyfunc_with_fixup

        with device_compute_capability(CC):
            lib, _ = _compile_pyfunc_with_fixup(fn, tuple(argtypes), device=False, cc=CC,
                                                abi="numba")
            ptx = lib.get_asm_strs(cc=CC)
        linker = driver._Linker(cc=CC)
        for p in ptx:
            linker.add_ptx(p.encode())
        t1 = time.process_time()
        linker.complete()
        stages = st.take()
        stages["ptxas"] = round(time.process_time() - t1, 3)
        rows.append({"module": _first_line(path), "path": path, "function": name,
                     "argtypes": [str(a) for a in argtypes], "wall": time.perf_counter() - t0,
                     "ptx_kb": round(sum(len(p) for p in ptx) / 1024, 1), **stages})
    out.write_text(json.dumps(rows))


def _first_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().strip()[:100]
    except OSError:
        return Path(path).name


def _child(args: list[str], env: dict) -> None:
    subprocess.run([sys.executable, "-m", "bench.probes.cold_start_kernels", *args],
                   env=env, check=True, cwd=ROOT)


def local(recipe: str, n: int, processes: int, work: Path) -> dict:
    """Record ``recipe``'s kernels on the simulator, then compile them here; the rows."""
    work.mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    base.update(MILLIPYDE_CACHE_DIR=str(work / "cache"), PYTHONPATH=str(ROOT))
    rec = work / "record.pkl"
    _child(["--child", "record", "--recipes", recipe, "-n", str(n), "--out", str(rec)],
           dict(base, NUMBA_ENABLE_CUDASIM="1", MILLIPYDE_BACKEND="cudasim"))
    got = pickle.loads(rec.read_bytes())
    kernels = sorted(got["kernels"], key=lambda kv: -os.path.getsize(kv[0][0]))
    shares: list[list] = [[] for _ in range(processes)]
    for i, (k, _) in enumerate(kernels):
        shares[i % processes].append(k)
    env = dict(base, MILLIPYDE_BACKEND="cpu")
    t0 = time.perf_counter()
    procs = []
    for i, share in enumerate(shares):
        (work / f"todo{i}.pkl").write_bytes(pickle.dumps(share))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench.probes.cold_start_kernels", "--child", "ptx",
             "--todo", str(work / f"todo{i}.pkl"), "--out", str(work / f"ptx{i}.json")],
            env=env, cwd=ROOT))
    for p in procs:
        if p.wait():
            raise RuntimeError(f"a ptx child failed ({p.returncode})")
    wall = time.perf_counter() - t0
    rows = [r for i in range(processes)
            for r in json.loads((work / f"ptx{i}.json").read_text())]
    counts = {(k[0], k[1], tuple(str(a) for a in k[2])): v for k, v in got["kernels"]}
    for r in rows:
        r["launches"] = counts.get((r["path"], r["function"], tuple(r["argtypes"])), 0)
    return {"recipe": recipe, "rows": rows, "host": got["host"], "ptx_wall": wall,
            "record_cpu": got["cpu"]}


# -- --gpu: the real thing ----------------------------------------------------------------
GPU_CHILD = r"""
import os, sys
sys.path.insert(0, os.environ["PROBE_ROOT"])
from bench.probes.cold_start_kernels import gpu_child
gpu_child(sys.argv[1], int(sys.argv[2]), sys.argv[3])
"""


def gpu_child(recipe: str, n: int, out: str) -> None:
    """Child: a real cold ``augment`` with the stage timers; its kernels' rows to ``out``."""
    import resource


    t_start = time.perf_counter()
    st = install_timers()
    rows: list[dict] = []
    host: list[tuple[str, float]] = []

    _count_host_compiles(host, qualified=False)
    # a kernel's compile is its ``_Kernel``: typing, lowering and NVVM in its constructor;
    # ptxas and the module load follow in ``bind`` (counted in ``stages_total``)
    from numba.cuda import dispatcher as cuda_dispatcher

    real_init = cuda_dispatcher._Kernel.__init__

    def init(self: Any, py_func: Any, argtypes: Any, **kw: Any) -> None:
        base = dict(st.now)
        t0 = time.process_time()
        real_init(self, py_func, argtypes, **kw)
        mod = sys.modules.get(getattr(py_func, "__module__", ""))
        rows.append({"function": getattr(py_func, "__qualname__", "?"),
                     "module": _first_line(getattr(mod, "__file__", None) or "?"),
                     "cpu": round(time.process_time() - t0, 3),
                     **{k: round(v - base.get(k, 0.0), 3) for k, v in st.now.items()}})

    cuda_dispatcher._Kernel.__init__ = init
    from millipyde.cli import main
    from millipyde.training import precompile

    precompile.ENABLED = os.environ.get("PROBE_PRECOMPILE", "1") == "1"
    with tempfile.TemporaryDirectory() as tmp:
        rc = main(["augment", "-o", tmp, "-n", str(n), "--seed", "0", "--recipe", recipe, "-q"])
    ru = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    # every stage's total in the process (ptxas and loads come after a kernel's constructor)
    leftover = st.take()
    Path(out).write_text(json.dumps({
        "rc": rc, "wall": time.perf_counter() - t_start, "cpu": ru.ru_utime + ru.ru_stime,
        "children_cpu": kids.ru_utime + kids.ru_stime, "rows": rows, "host": host,
        "stages_total": leftover,
        "precompile": {k: v for k, v in precompile.last.items()
                       if k in ("jobs", "failed", "processes", "compile_seconds", "seconds",
                                "record_seconds", "slowest", "worker_start")}}, default=str))


def gpu(recipe: str, n: int, work: Path, ahead: bool = True) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MILLIPYDE_CACHE_DIR=str(work / "cache"), PROBE_ROOT=str(ROOT),
               PROBE_PRECOMPILE="1" if ahead else "0")
    out = work / "gpu.json"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", GPU_CHILD, recipe, str(n), str(out)], env=env,
                   check=True, cwd=work)
    got = json.loads(out.read_text())
    got["outer_wall"] = time.perf_counter() - t0
    got["recipe"] = recipe
    return got


# -- report -------------------------------------------------------------------------------
STAGES = ("ir", "typing", "lowering", "nvvm", "ptxas")


def report_local(got: dict, verbose: bool) -> None:
    rows = got["rows"]
    tot = {s: sum(r.get(s, 0.0) for r in rows) for s in STAGES}
    host = sum(c for _, c in got["host"])
    by_fn: dict[str, int] = defaultdict(int)
    for r in rows:
        by_fn[f"{r['module'][:60]} :: {r['function']}"] += 1
    print(f"\n== {got['recipe']}: {len(rows)} distinct kernels ({sum(r['launches'] for r in rows)}"
          f" launches), {sum(tot.values()):.1f} CPU-s to PTX+cubin "
          f"({', '.join(f'{s} {v:.1f}' for s, v in tot.items())}); ptx wall "
          f"{got['ptx_wall']:.1f} s; host njit compiles {len(got['host'])}, {host:.1f} CPU-s")
    if verbose:
        for r in sorted(rows, key=lambda r: -sum(r.get(s, 0.0) for s in STAGES)):
            cost = sum(r.get(s, 0.0) for s in STAGES)
            print(f"  {cost:6.2f}  " + " ".join(f"{r.get(s, 0.0):5.2f}" for s in STAGES)
                  + f"  x{r['launches']:<4d} {r['ptx_kb']:6.1f}kB  {r['function']:28s} "
                  f"{r['module'][:70]}  {','.join(r['argtypes'])[:90]}")
        for name, c in got["host"]:
            print(f"  host {c:6.2f}  {name}")
        rep = {k: v for k, v in by_fn.items() if v > 1}
        if rep:
            print("  same function, several argument types: "
                  + "; ".join(f"{k} x{v}" for k, v in rep.items()))


def report_gpu(got: dict, verbose: bool) -> None:
    rows = got["rows"]
    tot = {s: sum(r.get(s, 0.0) for r in rows) for s in (*STAGES, "load")}
    print(f"\n== {got['recipe']} (GPU): wall {got['outer_wall']:.1f} s, CPU {got['cpu']:.1f} s "
          f"(+ children {got['children_cpu']:.1f}), {len(rows)} kernel compiles here, their stages "
          f"{', '.join(f'{s} {v:.1f}' for s, v in tot.items())}; every stage in the process: "
          f"{got['stages_total']}"
          f"; host njit {len(got['host'])}, {sum(c for _, c in got['host']):.1f} CPU-s; "
          f"precompile {got['precompile']}")
    if verbose:
        for r in sorted(rows, key=lambda r: -r["cpu"]):
            print(f"  {r['cpu']:6.2f}  " + " ".join(f"{r.get(s, 0.0):5.2f}" for s in STAGES)
                  + f"  {r['function']:28s} {r['module'][:70]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", nargs="+", default=["imagenet", "thesis", "detection"])
    ap.add_argument("-n", type=int, default=48)
    ap.add_argument("--processes", type=int, default=1, help="PTX compile processes")
    ap.add_argument("--gpu", action="store_true", help="a real cold augment on this GPU")
    ap.add_argument("--json", help="write every row here")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per kernel")
    ap.add_argument("--precompile", action="store_true",
                    help="keep Generator.batches' compiling ahead (its jobs listed apart)")
    ap.add_argument("--no-precompile", action="store_true",
                    help="--gpu: every kernel compiled in the process (per-kernel rows)")
    ap.add_argument("--child", choices=("record", "ptx"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--todo", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "record":
        return record(args.recipes[0], args.n, Path(args.out), args.precompile)
    if args.child == "ptx":
        return ptx_child(Path(args.todo), Path(args.out))
    results = []
    with tempfile.TemporaryDirectory(prefix="cold-kernels-") as tmp:
        for recipe in args.recipes:
            if args.gpu:
                got = gpu(recipe, args.n, Path(tmp) / recipe, not args.no_precompile)
                report_gpu(got, args.verbose)
            else:
                got = local(recipe, args.n, args.processes, Path(tmp) / recipe)
                report_local(got, args.verbose)
            results.append(got)
    if args.json:
        Path(args.json).write_text(json.dumps(results, default=str))


if __name__ == "__main__":
    main()
