"""Compile the kernels a chain needs in parallel worker processes, before its first batch.

A cold start compiled a Generator's kernels one after another in the consuming process: on an
H100 the first batch of the figure-5.1 chain waited 67 s for 20 compiles (bench_batches --cold).
Here the chain's outputs for every coin pattern (``warmup.representatives``) are made once
with the backend *recording* launches instead of running them (``Backend.recording``: nothing
compiles, buffers are allocated, values are not computed). Each kernel launched that is not
compiled yet, in memory or in the disk cache, becomes one job: a worker process imports
the same generated module from the cache directory and compiles it for the recorded argument
types, which numba saves to the disk cache. Jobs go out while the recording goes on, to
worker processes started with it (``precompile_workers``; each imports only what compiling
needs, ``graph.codegen.compile_worker``), so the wait is about a worker's start and the
slowest compile, not the sum of the compiles. A command that knows it will compile (``millipyde
augment`` on a cold cache) starts the workers before its own imports (``start_workers``); the
next compiling ahead takes them. The real first batch
then loads every kernel from the disk cache; a second Generator of the same chain (another
seed) finds all of them, every coin pattern included, and compiles nothing.

Host functions the recording calls itself (the table and matrix builders) run as plain Python
while it records (``_host_functions_deferred``) and compile in the workers too. Jobs that fail
in a worker (a user op the worker's registry lacks, a kernel numba keeps per launch
configuration) are left to the consuming process, which compiles them on first launch as it
always did.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import faults
from ..backend import ACTIVE as runtime
from ..graph.codegen.compile_worker import compile_job as _compile  # noqa: F401
from ..graph.codegen.compile_worker import prepare as _prepare  # noqa: F401
from ..graph.codegen.compile_worker import serve  # noqa: F401  (the worker's loop)
from .precompile_workers import CompileWorkers, module_line, startup_summary

#: ``Generator.batches`` precompiles on backends whose compiles take seconds (real GPUs);
#: False turns it off (benchmarks compare).
ENABLED = True
#: The consuming process compiles jobs too, while its worker processes start
#: (``CompileWorkers.compile_here``); False: only the workers (tests count what each compiled).
IN_PROCESS = True
#: At most this many worker processes. Each creates a GPU context, which the driver makes one
#: at a time, and compiles beside the others: more processes start later and compile slower
#: (the figure-5.1 chain's 17 jobs were done sooner in 8 than in 16 on a 16-core host).
MAX_PROCESSES = 8
_done: set[tuple] = set()
_lock = threading.Lock()
#: the pool ``start_workers`` started, until a compiling ahead takes it (at most one)
_ahead: list[tuple[CompileWorkers, float]] = []
_exit_hook: list[bool] = []
#: the thread ``start_workers`` opened this process's device contexts in
_opening: list[threading.Thread] = []
#: what the last ``precompile`` of this process returned (benchmarks report it)
last: dict = {}


def wanted() -> bool:
    """Whether ``Generator.batches`` precompiles here (``ENABLED`` on a real GPU backend, no
    fault armed: an armed fault counts its checks, and the outputs recorded to compile ahead
    would take them, and swallow the one that fires, before the real outputs are made)."""
    return ENABLED and runtime.caps.tuned_kernels and not faults.ARMED


def _processes(processes: int | None) -> int:
    return processes or max(1, min(os.cpu_count() or 1, MAX_PROCESSES))


def start_workers(processes: int | None = None) -> bool:
    """Start the compile workers of this process's next compiling ahead now, where it is
    ``wanted``: their start-up (an interpreter, imports, a GPU context each, a first compile:
    2-3 s on an H200) then overlaps what this process does before it records the chain
    (imports, reading inputs). ``millipyde augment`` calls it first thing on a cold cache.

    The next ``precompile`` or ``precompile_outputs`` that has jobs takes the pool (with
    ``processes`` workers, default as theirs); one that finds its chain compiled, or
    ``stop_workers``, or the process's exit, kills them. Returns whether a pool was started
    (False: not wanted here, or one is waiting already).
    """
    if not wanted():
        return False
    with _lock:
        if _ahead:
            return False
        # this process's device contexts first: the driver makes contexts one at a time,
        # and this process's own (its imports then read the devices) would otherwise queue
        # behind its workers' (they reach theirs ~1 s after they start)
        contexts = threading.Thread(target=_open_devices, daemon=True,
                                    name="millipyde-open-devices")
        contexts.start()
        _opening.append(contexts)
        workers = CompileWorkers(_processes(processes), warm=runtime.codegen_target)
        _ahead.append((workers, time.perf_counter()))
        if not _exit_hook:
            atexit.register(stop_workers)
            _exit_hook.append(True)
    return True


def _open_devices() -> None:
    """Make this process's device contexts (``runtime.device_infos`` visits every device);
    a failure is left to the framework's own first use of the devices, which reports it."""
    with contextlib.suppress(Exception):
        runtime.device_infos()


def stop_workers() -> None:
    """Kill the workers ``start_workers`` started that no compiling ahead took (none: a
    no-op)."""
    with _lock:
        got = _ahead.pop() if _ahead else None
        opening = list(_opening)
        _opening.clear()
    if got is not None:
        got[0].stop()
    for t in opening:
        t.join(60)


def _take_workers(n: int) -> tuple[CompileWorkers, float] | None:
    """The pool started ahead, if any and of ``n`` workers (another size: killed)."""
    with _lock:
        got = _ahead.pop() if _ahead else None
    if got is not None and got[0].n != n:
        got[0].stop()
        return None
    return got


def _in_disk_cache(kernel: Any, argtypes: tuple) -> bool:
    """Whether numba's disk cache holds ``kernel`` for ``argtypes`` (False when unsure)."""
    cache = getattr(kernel, "_cache", None)
    try:
        key = cache._index_key(argtypes, kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:
        return False


def _generated(kernel: Any) -> Any:
    """The generated module (``loader.load``) that defines ``kernel``, or None."""
    from ..graph.codegen import loader

    fn = getattr(kernel, "py_func", None)
    mod = loader.LOADED.get(getattr(fn, "__module__", None))
    if mod is None or getattr(mod, fn.__name__, None) is not kernel:
        return None
    return mod


def job(kernel: Any, args: tuple) -> tuple[str, str, str, tuple, tuple] | None:
    """(module path, target, function name, argument types, user-op modules) of a launch of
    a generated kernel that is compiled neither in memory nor on disk, else None."""
    mod = _generated(kernel)
    if mod is None:
        return None  # not a generated kernel: the consuming process compiles it
    fn = kernel.py_func
    try:
        argtypes = tuple(kernel.typeof_pyval(a) for a in args)
    except Exception:
        return None
    if argtypes in kernel.overloads or _in_disk_cache(kernel, argtypes):
        return None
    target = "cpu" if mod.__name__.startswith("millipyde_gen_cpu_") else "cuda"
    return str(mod.__file__), target, fn.__name__, argtypes, _user_op_modules(mod)


def _user_op_modules(mod: Any) -> tuple[str, ...]:
    """The importable modules that define the user ops generated module ``mod`` reads (a
    ``__main__`` op cannot be imported by a worker: its job fails and is compiled here)."""
    import re

    from ..kernels import REGISTRY

    names = set(re.findall(r"_R\['(user_[A-Za-z0-9_]+)'\]", Path(mod.__file__).read_text()))
    found = {getattr(REGISTRY[n].fn, "__module__", None) for n in names if n in REGISTRY}
    return tuple(sorted(m for m in found if m and m != "__main__"))


class _Jobs:
    """The recording sink: each new job handed to the workers as soon as it is seen."""

    def __init__(self, workers: CompileWorkers) -> None:
        self.workers = workers
        self.seen: set[tuple] = set()
        #: what the recording makes now (``warmup.make_patterns``' phases), per job the
        #: phase that first launched it
        self.phase = ""
        self.phases: dict[tuple, str] = {}

    def enter(self, phase: str) -> None:
        """The recording goes on with ``phase``."""
        self.phase = phase

    def __call__(self, kernel: Any, device: int, args: tuple) -> None:
        self.submit(job(kernel, args))

    def submit(self, got: tuple | None) -> None:
        """Hand ``got`` (a ``job``) to the workers, once."""
        if got is None or got in self.seen:
            return
        self.seen.add(got)
        self.phases[got] = self.phase
        self.workers.submit(got)


def _as_numba_would(fn: Any, compiled: Any, *args: Any) -> Any:
    """``fn`` run as Python with compiled code's arithmetic: integers wrap and floats reach
    inf or NaN silently (NumPy scalars warn on both; the random streams' uint64 rounds
    overflow by design, and a warning filter set to raise made that a failure).

    A recording reads buffers whose kernels it skipped (a statistic's, say): garbage, which
    Python refuses where compiled code goes on (``int(inf)``: OverflowError). Then the function
    is compiled here (``compiled(*args)`` returns numba's entry point) and run as compiled.
    """
    import numpy as np

    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except (ArithmeticError, ValueError):
        return compiled(*args)(*args)


@contextlib.contextmanager
def _host_functions_deferred(jobs: _Jobs) -> Iterator[None]:
    """While this thread records into ``jobs``, a numba host function called without a
    compiled version for its arguments runs as plain Python instead of compiling (the
    recording needs its effects, not its speed); a generated one becomes a job as well.

    numba's dispatcher calls whatever ``_compile_for_args`` returns with the arguments, so
    returning the Python function runs it. Other threads, and this one outside the
    recording, compile as usual.
    """
    from numba.core.dispatcher import Dispatcher

    real = Dispatcher._compile_for_args
    # per dispatcher: whether its compiles can be jobs (a generated module's, disk-cached);
    # the device functions a Python run calls per pixel are not, and cost a dict lookup
    jobbable: dict[int, bool] = {}
    seen: set[tuple] = set()

    def deferred(self: Any, *args: Any, **kws: Any) -> Any:
        if kws or getattr(runtime._tls, "recording", None) is not jobs:
            return real(self, *args, **kws)
        ok = jobbable.get(id(self))
        if ok is None:
            ok = jobbable[id(self)] = (_generated(self) is not None
                                       and hasattr(self._cache, "_cache_file"))
        if ok:
            kinds = (id(self), *((type(a), getattr(a, "dtype", None), getattr(a, "ndim", 0))
                                 for a in args))
            if kinds not in seen:
                seen.add(kinds)
                jobs.submit(job(self, args))
        return functools.partial(_as_numba_would, self.py_func,
                                 functools.partial(real, self))

    Dispatcher._compile_for_args = deferred
    try:
        yield
    finally:
        Dispatcher._compile_for_args = real


def _named(fn: Any) -> Any:
    """An Operation's method name, or its callable by module and name: the same text in
    every process (a function's ``repr`` holds its address, which made the marker of a chain
    with a callable differ in every process, so a warm cache recorded it again)."""
    if isinstance(fn, str) or not callable(fn):
        return fn
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def _key(operations: list, inputs: list, size: int, channels: int, layout: str,
         spec: Any, outputs: bool = True) -> tuple:
    ops = tuple(repr((_named(op.method or op.function), op.args, op.kwargs, op.probability))
                for op in operations)
    shapes = tuple(sorted({(tuple(x.shape), str(x.dtype)) for x in inputs}))
    return ops, shapes, size, channels, layout, repr(spec), runtime.name, outputs


def _marker(key: tuple) -> Path:
    """The file saying this chain was compiled ahead into the current kernel cache."""
    import hashlib

    from ..graph.codegen import loader

    digest = hashlib.sha1((repr(key) + loader.KERNEL_DIGEST).encode()).hexdigest()[:20]
    return loader.cache_dir() / f"precompiled-{digest}"


def precompile(operations: list, inputs: list, *, size: int = 256, channels: int = 3,
               layout: str = "NCHW", spec: Any = None, processes: int | None = None,
               outputs: bool = True) -> dict:
    """Compile every kernel a Generator of ``operations`` on ``inputs`` may launch, in
    ``processes`` worker processes (default: CPU count, at most ``MAX_PROCESSES``).

    ``spec``: the ``BatchSpec`` of the batches to come (else float32 batches of ``size``,
    ``channels``, ``layout``). ``outputs=False``: only what the batches launch, not the
    Generator's ``next()`` outputs. Once per chain, input shapes, batch spec and ``outputs``
    in a process.
    Returns ``jobs`` (kernels compiled ahead, ``in_process`` of them by this process while
    its workers started), ``failed`` (left to this process),
    ``processes``, ``record_seconds`` (making every pattern's outputs, launches recorded),
    ``compile_seconds`` (the slowest job, in its worker), ``slowest``, ``last_job`` and
    ``ready_seconds`` (``_timeline``), ``worker_start`` (per start-up step of the workers,
    ``precompile_workers.startup_summary``), ``workers_ahead_seconds`` (how long before this
    call ``start_workers`` started them; 0: started here; the timeline's times count from
    their start) and ``seconds``.
    """
    from . import warmup

    key = _key(operations, inputs, size, channels, layout, spec, outputs)

    def record(jobs: _Jobs) -> None:
        by_shape: dict[tuple, list] = {}
        for x in inputs:
            by_shape.setdefault(tuple(x.shape), []).append(x)
        # (outside the recording: the search maps 65536 draws through a host function, which
        # compiles here once rather than run as Python)
        ks = {shape: warmup.representatives(operations, shape=shape) for shape in by_shape}
        # two distinct inputs per shape (a Generator refuses one object twice)
        pairs = {shape: xs[:2] if len(xs) > 1 else [xs[0], xs[0].clone()]
                 for shape, xs in by_shape.items()}
        with runtime.recording(jobs), _host_functions_deferred(jobs):
            for shape, pair in pairs.items():
                warmup.make_patterns(pair, operations, ks[shape], size, channels,
                                     layout, spec, jobs.enter, outputs)

    return _compile_ahead(key, record, processes)


def _compile_ahead(key: tuple, record: Any, processes: int | None) -> dict:
    """Once per ``key`` in a process and kernel cache: start the workers, run ``record(jobs)``
    (it makes outputs with launches recorded into ``jobs``), wait for the jobs; the report
    ``precompile`` returns."""
    marker = _marker(key)
    with _lock:
        if key in _done or marker.exists():
            _done.add(key)
            last.clear()
            last.update({"jobs": 0, "failed": 0, "processes": 0, "in_process": 0,
                         "record_seconds": 0.0, "workers_ahead_seconds": 0.0,
                         "compile_seconds": 0.0, "slowest": [], "last_job": None,
                         "ready_seconds": {}, "worker_start": {}, "seconds": 0.0})
            early = True
        else:
            _done.add(key)
            early = False
    if early:
        stop_workers()  # nothing to compile: a pool started ahead is not needed
        return dict(last)
    t0 = time.perf_counter()
    n = _processes(processes)
    # workers started ahead (``start_workers``), else now: they prepare while the outputs
    # are recorded
    got = _take_workers(n)
    if got is None:
        workers, ahead = CompileWorkers(n, warm=runtime.codegen_target), 0.0
    else:
        workers, ahead = got[0], t0 - got[1]
    if IN_PROCESS:
        workers.compile_here()
    jobs = _Jobs(workers)
    try:
        record(jobs)
        recorded = time.perf_counter() - t0
        workers.recorded()
    finally:
        workers.close()
    ok = [r[1] for r in workers.results if r[0]]
    last.clear()
    if len(ok) == len(jobs.seen):
        # every kernel of the chain is in this cache directory: later processes skip the
        # recording too (the marker goes with the cache when it is cleared)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(repr(key))
    last.update({"jobs": len(jobs.seen), "failed": len(jobs.seen) - len(ok), "processes": n,
                 "in_process": len(workers.here),
                 "errors": sorted({str(r[1])[:200] for r in workers.results if not r[0]}),
                 "record_seconds": recorded, "workers_ahead_seconds": ahead,
                 "compile_seconds": max(ok, default=0.0),
                 **_timeline(workers, jobs), "worker_start": startup_summary(workers.starts),
                 "seconds": time.perf_counter() - t0})
    return dict(last)


#: ``next()``'s compiling ahead records this many of a Generator's first outputs (all of them
#: when it makes fewer)
AHEAD_OUTPUTS = 64


def precompile_outputs(state: Any, count: int = AHEAD_OUTPUTS,
                       processes: int | None = None) -> dict:
    """Compile, in worker processes, every kernel the first ``count`` outputs of a
    Generator's ``next()`` launch (``state``: its ``generator_state.GeneratorState``).

    The outputs are made by a fresh state over the same inputs, Operations, seed and sampler
    (so the same route: per output, recorded batches or arena gathers, in the chunks the
    workers take), with launches recorded instead of run; nothing of ``state`` is touched.
    Where its outputs are recorded batches of same-size inputs (``every_pattern``), one
    output of every coin pattern is recorded too (``warmup.representatives``): the kernels a
    recorded group launches depend on its key alone, not on the seed, so the work is done
    once per chain and input shape, and a Generator of another seed compiles nothing and
    records nothing here (it started a pool of worker processes per seed, seconds of GPU
    contexts inside a timed ``next()`` run). Returns what ``precompile`` returns.
    """
    n = count if state.outputs is None else min(count, state.outputs)
    every = every_pattern(state, count)
    sampler = None if state.sampler is None else (type(state.sampler).__qualname__, tuple(sorted(
        (k, v) for k, v in vars(state.sampler).items() if isinstance(v, (bool, int, str)))))
    chain = _key(state.operations, state.inputs, 0, 0, "", None, True)[:2]
    key = (chain, "next", "every pattern", runtime.name) if every else \
        (chain, "next", state.seed, state.start_k, state.world, n, sampler, runtime.name)

    def record(jobs: _Jobs) -> None:
        from . import warmup

        twin = state.twin()
        device = state.device
        stream = runtime.new_stream(device)
        # the first outputs in the chunks the workers take; then, where ``every``, one output
        # of every coin pattern (and warp-clip variant) of this seed, a batch at a time
        chunks: list[tuple[int, int, list[int] | None]] = []
        j = 0
        while j < n:
            m = min(twin.batch, n - j) if twin.batch > 1 else 1
            chunks.append((j, m, None))
            j += m
        if every:
            ks = warmup.representatives(state.operations, seed=state.seed,
                                        shape=tuple(state.inputs[0].shape))
            chunks += [(0, 0, ks[i:i + twin.batch]) for i in range(0, len(ks), twin.batch)]
        jobs.enter("outputs")
        try:
            with runtime.on_device(device), runtime.using_stream(stream), \
                    runtime.recording(jobs), _host_functions_deferred(jobs):
                for j, m, ks in chunks:
                    try:
                        if ks is not None:
                            twin.make_many(ks, device, stream)
                        elif twin.batch > 1:
                            twin._make_batch(j, m, device, stream)
                        else:
                            twin._make(j, device, stream)
                    except Exception:
                        # (a recording reads garbage: an output may fail where the real one
                        # does not; its kernels then compile when it is made)
                        pass
        finally:
            twin.stop(join=False)

    return _compile_ahead(key, record, processes)


def every_pattern(state: Any, count: int = AHEAD_OUTPUTS) -> bool:
    """Whether ``next()``'s compiling ahead records one output of every coin pattern (once per
    chain and input shape) rather than a seed's first outputs: outputs recorded at once
    (``batches.recorder``: a group launches its key's kernels, whatever patterns it holds)
    over inputs of one shape and dtype, and a Generator that makes at least ``count``. The
    batches of per-output recordings (``batch.materialize_batch``) choose a gather's gated
    form by the members of each batch: they keep the seed's first outputs."""
    from .batches import recorder

    xs = state.inputs
    return state.batch > 1 and not state.mixed and bool(xs) and \
        (state.outputs is None or state.outputs >= count) and \
        all(x.shape == xs[0].shape and x.dtype == xs[0].dtype for x in xs) and \
        recorder(state) is not None


def _chain_failed(err: BaseException) -> bool:
    """Whether ``err`` is an Operation of the chain failing on the inputs while its launches
    were recorded: the batches or outputs raise it themselves, naming the operation and the
    output, so compiling ahead stops without a warning of its own."""
    # (here: ``workers`` imports the framework, which ``start_workers`` runs ahead of)
    from ..workers import StepError

    return isinstance(err, StepError) or isinstance(getattr(err, "err", None), StepError)


def before_outputs(state: Any) -> None:
    """``Generator.__next__``'s hook (its first call): ``precompile_outputs`` where
    ``wanted`` and the outputs come from in-memory inputs; a failure here only warns (the
    outputs then compile their kernels as they are made)."""
    if not wanted() or not state.compiles_ahead or not state.inputs:
        return
    try:
        precompile_outputs(state)
    except Exception as err:
        if _chain_failed(err):
            return
        warnings.warn(f"millipyde: compiling ahead in worker processes failed ({err!r}); "
                      "kernels compile on first use", RuntimeWarning, stacklevel=3)


def _timeline(workers: CompileWorkers, jobs: _Jobs) -> dict:
    """``slowest``: the four slowest jobs (seconds, function, the generated module's first
    line, the phase that launched it); ``last_job``: the job answered last (queued, sent and
    answered, in seconds since the workers started; its seconds, function, module line);
    ``ready_seconds``: per phase, when its last job was answered (what waiting for that
    phase's kernels alone would have cost)."""
    phase = {(path, fn): p for (path, _, fn, *_), p in jobs.phases.items()}
    slowest = [(round(sec, 2), fn, module_line(path), phase.get((path, fn), ""))
               for sec, path, fn, *_ in sorted(workers.timed, reverse=True)[:4]]
    ready: dict[str, float] = {}
    for _, path, fn, _, _, done in workers.timed:
        p = phase.get((path, fn), "")
        ready[p] = round(max(ready.get(p, 0.0), done), 2)
    end = max(workers.timed, key=lambda t: t[5], default=None)
    last_job = None if end is None else {
        "queued": round(end[3], 2), "sent": round(end[4], 2), "answered": round(end[5], 2),
        "seconds": round(end[0], 2), "function": end[2], "module": module_line(end[1])}
    return {"slowest": slowest, "last_job": last_job, "ready_seconds": ready}


def before_batches(generator: Any, spec: Any) -> None:
    """``Generator.batches``' hook: precompile its chain for batches of ``spec`` where
    ``wanted``; a failure here only warns (the batches then compile as they go, and report
    their own errors)."""
    if not wanted():
        return
    st = generator._state
    if not st.inputs:  # a streamed source: its samples' shapes are known once decoded
        return
    try:
        # the batches' kernels only: the first batch waits for no kernel of next()'s own
        # outputs (on the H200 those were the critical path, 10.4 s against 7.8 s,
        # bench/RESULTS.md, 2026-11-23)
        precompile(list(st.operations), list(st.inputs), spec=spec, outputs=False)
    except Exception as err:
        if _chain_failed(err):
            return
        warnings.warn(f"millipyde: compiling ahead in worker processes failed ({err!r}); "
                      "kernels compile on first use", RuntimeWarning, stacklevel=3)
