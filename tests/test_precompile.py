"""Compiling a chain ahead in worker processes (``millipyde.training.precompile``): a Generator's
batches then compile nothing, for its seed or another (cpu backend, fresh processes and a
fresh kernel cache each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import millipyde as mp

pytestmark = pytest.mark.skipif(mp.backend() != "cpu",
                                reason="counts numba cpu compiles in fresh processes")

# Seeds 2 and 3 of this chain on 16x16 inputs: the first batch of 8 of seed 2 has no rotation
# that needs scikit-image's data-dependent clip, seed 3's has two (made one output at a time,
# by per-image kernels of their coin pattern): the second Generator needs kernels the first
# did not.
SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import millipyde as mp
    from millipyde.training import batches, precompile, warmup
    # one batch ahead of the consumer: the workers' run-ahead would otherwise make (and compile
    # for) a timing-dependent number of the first Generator's later batches
    batches.AHEAD_BYTES = 1
    ops = [mp.Operation("transpose", probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.2),
           mp.Operation("random_rotate", 0, 120, probability=0.5)]
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)) for _ in range(2)]
    out = {}
    if sys.argv[1] in ("ahead", "again"):
        precompile.wanted = lambda: True  # the cpu backend compiles in place by default
        precompile.MAX_PROCESSES = 2
        precompile.IN_PROCESS = False  # every job in a worker: what compiles here is counted
        real = precompile.precompile

        def misses():
            # every loaded function's cache misses, by its module's first line and name
            from millipyde.graph.codegen import loader
            return {(open(m.__file__).readline().strip(), name):
                    sum(getattr(fn, "_cache_misses", {}).values())
                    for m in list(loader.LOADED.values()) for name, fn in vars(m).items()
                    if hasattr(fn, "_cache_misses")}

        def counted(*a, **k):
            c, before = warmup.compiled_count(), misses()
            got = real(*a, **k)
            # host functions the recording itself calls compile in this process
            got["main"] = warmup.compiled_count() - c
            got["main_functions"] = sorted(
                [head, name] for (head, name), n in misses().items()
                if n > before.get((head, name), 0))
            out.setdefault("ahead", got)  # the first Generator's (the second's finds it done)
            return got

        precompile.precompile = counted
    for seed in (2, 3):
        c = warmup.compiled_count()
        with mp.Generator(imgs, ops, seed=seed).batches(8) as bs:
            next(bs)
        out[f"seed{seed}"] = warmup.compiled_count() - c
    print(json.dumps(out))
''')


# the generated host modules a recording compiles in its own process (their first lines)
RECORDING_HOST = ("# millipyde generated per-row affine maps",
                  "# millipyde generated warp-clip decisions")


def _run(mode: str, cache: Path) -> dict:
    # one device: with several, each Generator's batches ahead go to every device, and which
    # of seed 2's later batches (and their kernels) are made before seed 3 is timing's
    env = {**os.environ, "MILLIPYDE_BACKEND": "cpu", "MILLIPYDE_CACHE_DIR": str(cache),
           "MILLIPYDE_CPU_DEVICES": "1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True,
                       text=True, timeout=1200, cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_another_seed_compiles_nothing_after_compiling_ahead(tmp_path):
    got = _run("ahead", tmp_path / "cache")
    assert got["ahead"]["jobs"] > 0 and got["ahead"]["failed"] == 0, got
    slowest = got["ahead"]["slowest"]  # the report names the kernels that cost the most
    assert len(slowest) == min(4, got["ahead"]["jobs"]), got
    assert [s[0] for s in slowest] == sorted((s[0] for s in slowest), reverse=True), got
    assert all(s[1] and s[2].startswith("#") for s in slowest), got
    # the recording compiled no kernel here: kernels went out to the workers; what compiled
    # in this process are the host functions the recording needs before they answer (the
    # rotations' affine maps and their warp-clip decisions, which choose the kernels)
    assert all(head.startswith(RECORDING_HOST) for head, _ in got["ahead"]["main_functions"]), got
    # the first Generator's own batch loaded what the workers compiled
    assert got["seed2"] == got["ahead"]["main"], got
    assert got["seed3"] == 0, got
    # a later process on the same cache: no recording, no compile
    again = _run("again", tmp_path / "cache")
    assert again["ahead"]["jobs"] == 0 and again["ahead"]["record_seconds"] == 0.0, again
    assert again["seed2"] == again["seed3"] == 0, again


@pytest.mark.slow
def test_without_compiling_ahead_another_seed_compiles_its_coin_patterns(tmp_path):
    """What ``precompile`` removes: the per-image kernels of the second seed's clipped
    rotations (the first seed had none in its first batch)."""
    got = _run("plain", tmp_path / "cache")
    assert got["seed3"] > 0, got


def test_a_job_that_fails_in_its_worker_is_reported_and_nothing_is_left_running():
    from millipyde.training import precompile

    workers = precompile.CompileWorkers(1)
    workers.submit(("/nonexistent/millipyde_gen_cpu_0.py", "cpu", "kernel", ()))
    workers.close(timeout=120)
    assert len(workers.results) == 1 and workers.results[0][0] is False
    assert "FileNotFoundError" in workers.results[0][1]
    assert not any(t.is_alive() for t in workers.threads)
    assert all(p.poll() is not None for p in workers.procs)


def test_workers_start_with_their_first_job_only():
    from millipyde.training import precompile

    workers = precompile.CompileWorkers(2)
    workers.close(timeout=120)
    assert workers.results == [] and workers.procs == []  # a warm cache starts no process
    assert not any(t.is_alive() for t in workers.threads)


def test_warm_workers_start_at_once_prepare_and_serve():
    from millipyde.training import precompile

    workers = precompile.CompileWorkers(2, warm="cpu")
    assert len(workers.procs) == 2  # started before any job, preparing meanwhile
    workers.submit(("/nonexistent/millipyde_gen_cpu_0.py", "cpu", "kernel", ()))
    workers.close(timeout=120)
    assert len(workers.results) == 1 and "FileNotFoundError" in workers.results[0][1]
    assert not any(t.is_alive() for t in workers.threads)
    assert all(p.poll() is not None for p in workers.procs)  # the idle one killed too
    # the worker that took the job said when it finished each step of its start (the idle
    # one too if it got that far before it was killed)
    assert 1 <= len(workers.starts) <= 2
    order = ["spawned", "started", "imported", "prepared"]
    for steps in workers.starts:
        assert list(steps) == order and [steps[k] for k in order] == sorted(steps.values())
    summary = precompile.startup_summary(workers.starts)
    assert summary == {k: [min(s[k] for s in workers.starts), max(s[k] for s in workers.starts)]
                       for k in order}


def test_a_worker_imports_only_what_compiling_needs():
    """Not the framework (planner, networkx, backends) until a job names user-op modules,
    which then find the public API (``import millipyde as mp``)."""
    from millipyde.graph.codegen import compile_worker

    code = compile_worker.BOOTSTRAP + textwrap.dedent('''
        from millipyde.graph.codegen import compile_worker
        compile_worker.prepare("cpu")
        print(sorted(m for m in ("networkx", "millipyde.backend", "millipyde.array")
                     if m in sys.modules))
        compile_worker.complete_package()
        import millipyde.training.recipes
        print(sorted(m for m in ("millipyde.backend", "millipyde.array") if m in sys.modules),
              hasattr(sys.modules["millipyde"], "Generator"))
    ''')
    env = {**os.environ, "MILLIPYDE_BACKEND": "cpu",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == ["[]", "['millipyde.array', 'millipyde.backend'] True"]


def test_a_worker_prepares_with_a_kernel_in_the_generated_dialect():
    from millipyde.training import precompile

    precompile._prepare("cpu")  # in a worker a failure is only reported on stderr


def test_queued_jobs_go_out_largest_module_first(tmp_path):
    from millipyde.training import precompile

    sizes = {"small": 10, "large": 1000, "middle": 100}
    for name, n in sizes.items():
        (tmp_path / name).write_text("#" * n)
    workers = precompile.CompileWorkers(0)  # no worker takes them: the queue's order is seen
    for name in sizes:
        workers.submit((str(tmp_path / name), "cpu", "kernel", ()))
    order = [workers.jobs.get()[3][0] for _ in sizes]
    assert order == [str(tmp_path / n) for n in ("large", "middle", "small")]


def test_the_hook_is_off_where_compiles_are_cheap_or_absent():
    from millipyde.backend import ACTIVE
    from millipyde.training import precompile

    assert precompile.wanted() == (precompile.ENABLED and ACTIVE.caps.tuned_kernels)
    assert not precompile.wanted()  # cpu and cudasim: Generator.batches compiles in place


def test_no_compiling_ahead_while_a_fault_is_armed(monkeypatch):
    # the outputs recorded to compile ahead pass the fault points too: they would take the
    # armed fault's count and swallow its firing (tests/test_generator.py
    # test_kernel_fault_in_generator raised nothing on a GPU)
    import dataclasses

    from millipyde import faults
    from millipyde.backend import ACTIVE
    from millipyde.training import precompile

    monkeypatch.setattr(precompile, "ENABLED", True)
    monkeypatch.setattr(ACTIVE, "caps", dataclasses.replace(ACTIVE.caps, tuned_kernels=True))
    assert precompile.wanted()  # as on a GPU
    faults.inject("op:fliplr", "raise", at_call=3)
    try:
        assert not precompile.wanted()
    finally:
        faults.clear()
    assert precompile.wanted()


def test_a_job_names_the_modules_of_its_user_ops(tmp_path) -> None:
    """A worker imports them before loading the generated module (else KeyError on _R[...])."""
    import types

    from millipyde.training import precompile, recipes

    f = tmp_path / "gen.py"
    f.write_text(f"a = _R[{recipes.scale_brightness.name!r}].fn\nb = _R['user_unknown_0'].fn\n")
    mod = types.SimpleNamespace(__file__=str(f))
    assert precompile._user_op_modules(mod) == ("millipyde.training.recipes",)


def test_a_deferred_host_function_runs_with_compiled_arithmetic() -> None:
    """While a chain is recorded ahead, a host function without a compiled version runs as
    Python; the random streams' uint64 rounds overflow by design, which NumPy scalars warn
    about: under an error filter that failed every Generator's batches on GPUs."""
    import warnings

    import numpy as np

    from millipyde.backend import ACTIVE
    from millipyde.graph.codegen.loader import load
    from millipyde.training import batch_math, precompile

    # a text of its own: no compiled version in memory or on disk, so the call is deferred
    mod = load(batch_math._MIX_SOURCE + "\n# (a copy run as Python by the deferred test)\n",
               "cpu")
    submitted: list = []

    class Jobs:
        def submit(self, got):
            submitted.append(got)

    jobs = Jobs()
    z = np.array([2**64 - 1, 12345], dtype=np.uint64)
    ts = np.array([0, 2**63 + 7], dtype=np.uint64)
    out = np.empty((2, 2), dtype=np.uint64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ACTIVE.recording(jobs), precompile._host_functions_deferred(jobs):
            mod.rounds(z, ts, out)
    assert submitted, "the host function went to the workers as a job"
    assert mod.rounds.signatures == [], "it was not compiled here"
    np.testing.assert_array_equal(out, batch_math.mix_rounds(z, ts))


def test_a_deferred_host_function_given_garbage_runs_compiled() -> None:
    """A recording reads buffers of kernels it skipped; Python refuses ``int(inf)`` where the
    compiled function goes on (a statistic's table pass failed every Generator of equalize
    after adjust_contrast on an H200): the function is then compiled and run as compiled."""
    import numpy as np

    from millipyde.backend import ACTIVE
    from millipyde.graph.codegen.loader import load
    from millipyde.training import precompile

    mod = load("from numba import njit\n\n\n@njit(cache=True)\n"
               "def top(st, out):\n    out[0] = int(st[0]) + 1\n", "cpu")

    class Jobs:
        def submit(self, got):
            pass

    jobs = Jobs()
    out = np.zeros(1, dtype=np.int64)
    with ACTIVE.recording(jobs), precompile._host_functions_deferred(jobs):
        mod.top(np.array([np.inf]), out)  # no OverflowError
    assert len(mod.top.signatures) == 1, "compiled here, as it was given garbage"
    mod.top(np.array([41.0]), out)
    assert out[0] == 42


# Inputs of two sizes (the arena route: one kernel per channel count for every coin pattern)
# through next() and through batches of 8x8 crops, each compiled ahead (cpu backend, forced).
MIXED = textwrap.dedent('''
    import json, sys
    import numpy as np
    import millipyde as mp
    from millipyde.training import precompile, warmup
    ops = [mp.Operation("random_resized_crop", 8, 8), mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.2, probability=0.5)]
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, s, dtype=np.uint8))
            for s in ((16, 16, 3), (12, 20, 3), (16, 16, 3))]
    if sys.argv[1] == "ahead":
        precompile.wanted = lambda: True  # the cpu backend compiles in place by default
        precompile.MAX_PROCESSES = 2
    out = {}
    c = warmup.compiled_count()
    outs = [np.asarray(y) for y in mp.Generator(imgs, ops, outputs=6, seed=1,
                                                return_to_host=True)]
    out["next"] = {"report": dict(precompile.last), "compiled": warmup.compiled_count() - c}
    c = warmup.compiled_count()
    with mp.Generator(imgs, ops, seed=2).batches(6, layout="NHWC") as bs:
        batch = np.asarray(next(bs))
    out["batches"] = {"report": dict(precompile.last), "compiled": warmup.compiled_count() - c}
    out["digest"] = [int(x.astype(np.int64).sum()) for x in outs] + [float(batch.sum())]
    print(json.dumps(out, default=str))
''')


@pytest.mark.slow
def test_next_and_mixed_size_batches_compile_their_own_route_ahead(tmp_path):
    """``next()`` compiles its first outputs' kernels ahead, and ``batches`` over inputs of
    several sizes compiles the arena gathers it launches (it compiled per-output kernels it
    never launched before); a later process finds the marker and records nothing; the
    outputs are those made without compiling ahead."""
    def run(mode: str, cache: Path) -> dict:
        # one device: which batches several devices make ahead (and compile for) is timing's
        env = {**os.environ, "MILLIPYDE_BACKEND": "cpu", "MILLIPYDE_CACHE_DIR": str(cache),
               "MILLIPYDE_CPU_DEVICES": "1"}
        r = subprocess.run([sys.executable, "-c", MIXED, mode], env=env, capture_output=True,
                           text=True, timeout=1200,
                           cwd=Path(__file__).resolve().parent.parent)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    got = run("ahead", tmp_path / "cache")
    for part in ("next", "batches"):
        rep = got[part]["report"]
        assert rep["jobs"] > 0 and rep["failed"] == 0, got
    # what the workers compiled, the consumer loaded: next()'s outputs and the batch compiled
    # nothing here but the jobs this process took while its workers started (the batches'
    # compiling ahead recorded per-output kernels they never launch, and the batch compiled
    # its arena writer itself)
    for part in ("next", "batches"):
        assert got[part]["compiled"] <= got[part]["report"]["in_process"], got
    again = run("ahead", tmp_path / "cache")
    for part in ("next", "batches"):
        assert again[part]["report"]["jobs"] == 0, again
        assert again[part]["report"]["record_seconds"] == 0.0, again
        assert again[part]["compiled"] == 0, again
    plain = run("plain", tmp_path / "plain")
    assert plain["digest"] == got["digest"] == again["digest"], (plain, got)


@pytest.mark.parametrize("route", ["batches", "next"])
def test_an_operation_that_fails_is_raised_by_the_chain_not_warned_by_compiling_ahead(
        monkeypatch, route) -> None:
    # recording the launches ahead runs the chain's host work, where an Operation may fail:
    # the batches / outputs raise it themselves, naming the operation and the output (the
    # suite turns a warning into an error)
    import numpy as np

    from millipyde.pipeline import PipelineError
    from millipyde.training import precompile

    monkeypatch.setattr(precompile, "wanted", lambda: True)
    rng = np.random.default_rng(0)
    greys = [mp.gpuimage(rng.random((8, 8))) for _ in range(2)]
    ops = [mp.Operation("fliplr"), mp.Operation("random_colorize", [1, 2], [1, 2], [1, 2])]
    gen = mp.Generator(greys, ops, outputs=4, seed=0)
    with pytest.raises(PipelineError, match=r"operation 1 \('random_colorize'\).*output 0"):
        if route == "batches":
            with gen.batches(2) as bs:
                next(bs)
        else:
            next(gen)


def test_next_compiles_ahead_once_per_chain_and_shape_not_per_seed(monkeypatch) -> None:
    """``next()``'s compiling ahead over same-size inputs records one output of every coin
    pattern under one key for every seed (a second seed's Generator starts no worker
    processes, records nothing), and a Generator of a few outputs keeps its seed's first
    ones. The workers are left out: the recording's launches are only collected."""
    import numpy as np

    from millipyde.training import generator_state, precompile, warmup

    class Workers:
        def __init__(self):
            self.jobs = []

        def submit(self, got):
            self.jobs.append(got)

    keys, made = [], []

    def ahead(key, record, processes):
        keys.append(key)
        if key in precompile._done:
            return {}
        precompile._done.add(key)
        record(precompile._Jobs(Workers()))
        return {}

    monkeypatch.setattr(precompile, "wanted", lambda: True)
    monkeypatch.setattr(precompile, "_compile_ahead", ahead)
    monkeypatch.setattr(precompile, "_done", set())
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(2)]
    ops = [mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.2),
           mp.Operation("random_rotate", 0, 120, probability=0.5)]
    real = generator_state.GeneratorState.make_many

    def spy(self, ks, *args, **kwargs):
        made.append(list(ks))
        return real(self, ks, *args, **kwargs)

    monkeypatch.setattr(generator_state.GeneratorState, "make_many", spy)
    for seed in (1, 2):
        with mp.Generator(imgs, ops, seed=seed) as gen:
            next(gen)
    assert keys[0] == keys[1], keys
    recorded = {k for ks in made for k in ks}
    assert set(warmup.representatives(ops, seed=1, shape=(8, 8, 3))) <= recorded
    keys.clear()
    for seed in (1, 2):
        with mp.Generator(imgs, ops, seed=seed, outputs=8) as gen:
            next(gen)
    assert [k[2] for k in keys] == [1, 2], keys  # (chain, "next", seed, ...)
