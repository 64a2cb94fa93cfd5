"""A cold ``millipyde augment``: what importing costs, and the compile workers started first.

``import millipyde`` chooses the backend only (the API is imported on first use), importing
the command compiles nothing, and ``augment`` on a cold cache starts its compile workers
before the framework's imports (``precompile.start_workers``); the next compiling ahead takes
them, its in-process compiler starting with the largest job once all are queued.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from argparse import Namespace
from pathlib import Path

import pytest

import millipyde as mp


def test_importing_the_command_compiles_nothing_and_leaves_the_framework_for_later():
    code = textwrap.dedent('''
        import json, sys
        import numba.core.event as ev
        compiles = []

        class Listen(ev.Listener):
            def on_start(self, event):
                compiles.append(1)

            def on_end(self, event):
                pass

        ev.register("numba:compile", Listen())
        from millipyde import cli
        from millipyde.training import precompile  # what augment imports before its workers
        first = sorted(m for m in ("networkx", "scipy.special", "millipyde.graph.exec",
                                   "millipyde.training.recipes", "millipyde.image",
                                   "millipyde.devices")
                       if m in sys.modules)
        from millipyde.training import recipes
        import millipyde as mp
        ops = recipes.operations("imagenet")
        after = sorted(m for m in ("networkx", "scipy.special") if m in sys.modules)
        print(json.dumps([first, after, len(compiles), mp.Generator.__name__,
                          cli.figure_5_1_operations is recipes.figure_5_1_operations]))
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    first, after, compiles, name, same = json.loads(r.stdout.splitlines()[-1])
    assert first == [], first  # the command's import: the backend, not the framework
    assert after == [] and compiles == 0  # the recipes built: no compile, no networkx/scipy
    assert name == "Generator" and same


def test_the_package_gives_every_public_name_on_first_use():
    for name in mp.__all__:
        assert getattr(mp, name) is not None, name
    assert mp.devices.DEVICES and mp.data.Folder  # submodules too
    with pytest.raises(AttributeError, match="no_such_name"):
        mp.no_such_name  # noqa: B018
    ns: dict = {}
    exec("from millipyde import *", ns)
    assert {"gpuimage", "Generator", "backend"} <= set(ns)


def test_the_recipes_op_compiles_as_a_users_would():
    """Registered without the decoration-time check (``check=False``): checked here."""
    from millipyde import user_functions
    from millipyde.training import recipes

    op = recipes.scale_brightness
    assert op.check is False and op.kind == "elementwise"
    user_functions.check_compiles(user_functions.resolve(op.fn, "elementwise"), "elementwise",
                                  "elementwise")
    # a user's op is still checked when decorated: one that cannot compile fails there
    with pytest.raises(user_functions.UserFunctionError, match="cannot be compiled"):
        @mp.elementwise
        def broken(v, c):
            return v + not_defined_anywhere  # noqa: F821


@pytest.fixture
def wanted(monkeypatch):
    """Compiling ahead wanted here (the cpu backend compiles in place by default), one
    worker; nothing left started after the test."""
    from millipyde.training import precompile

    monkeypatch.setattr(precompile, "wanted", lambda: True)
    yield precompile
    precompile.stop_workers()


def _ended(workers) -> bool:
    return (not any(t.is_alive() for t in workers.threads)
            and all(p.poll() is not None for p in workers.procs))


def test_workers_started_ahead_are_killed_when_no_compiling_ahead_takes_them(wanted):
    precompile = wanted
    assert precompile.start_workers(processes=1)
    assert not precompile.start_workers(processes=1)  # one pool waits at most
    workers = precompile._ahead[0][0]
    assert len(workers.procs) == 1
    precompile.stop_workers()
    assert precompile._ahead == [] and _ended(workers)


def test_a_compiled_chain_kills_the_workers_started_ahead(wanted, tmp_path, monkeypatch):
    precompile = wanted
    monkeypatch.setattr(precompile, "_marker", lambda key: tmp_path / "marker")
    (tmp_path / "marker").write_text("done")
    precompile.start_workers(processes=1)
    workers = precompile._ahead[0][0]
    got = precompile._compile_ahead(("a chain compiled before", tmp_path), lambda jobs: None, 1)
    assert got["jobs"] == 0 and precompile._ahead == [] and _ended(workers)


def test_compiling_ahead_takes_the_workers_started_ahead(wanted, tmp_path, monkeypatch):
    precompile = wanted
    monkeypatch.setattr(precompile, "_marker", lambda key: tmp_path / "marker")
    monkeypatch.setattr(precompile, "IN_PROCESS", False)
    precompile.start_workers(processes=1)
    workers = precompile._ahead[0][0]
    seen = []

    def record(jobs):
        seen.append(jobs.workers)
        jobs.submit(("/nonexistent/millipyde_gen_cpu_0.py", "cpu", "kernel", (), ()))

    got = precompile._compile_ahead(("a chain", tmp_path), record, 1)
    assert seen == [workers] and precompile._ahead == []
    assert got["jobs"] == 1 and got["failed"] == 1 and got["workers_ahead_seconds"] > 0
    assert "FileNotFoundError" in got["errors"][0]  # the started worker answered it
    assert _ended(workers) and not (tmp_path / "marker").exists()


def test_the_in_process_compiler_starts_with_the_largest_job_once_all_are_queued(
        tmp_path, monkeypatch):
    from millipyde.graph.codegen import compile_worker
    from millipyde.training import precompile_workers

    taken: list[str] = []
    first = threading.Event()

    def fake_compile(path, *args):
        taken.append(Path(path).name)
        first.set()
        return 0.0

    monkeypatch.setattr(compile_worker, "compile_job", fake_compile)
    paths = {}
    for name, n in {"small": 10, "large": 1000, "middle": 100}.items():
        paths[name] = tmp_path / name
        paths[name].write_text("#" * n)
    workers = precompile_workers.CompileWorkers(0)
    workers.compile_here()
    workers.submit((str(paths["small"]), "cpu", "kernel", ()))
    # queued while the chain is still recorded: left for the workers (none here) until then
    assert not first.wait(0.5) and taken == []
    workers.submit((str(paths["large"]), "cpu", "kernel", ()))
    workers.submit((str(paths["middle"]), "cpu", "kernel", ()))
    workers.recorded()
    workers.close(timeout=60)
    assert taken == ["large", "middle", "small"] and _ended(workers)


def test_augment_starts_the_workers_first_on_a_cold_cache_only(tmp_path, monkeypatch):
    from millipyde import cli
    from millipyde.training import precompile

    calls: list[str] = []
    monkeypatch.setattr(precompile, "start_workers", lambda: calls.append("start"))
    monkeypatch.setattr(precompile, "stop_workers", lambda: calls.append("stop"))

    def run(args):
        calls.append("run")
        raise RuntimeError("the job failed")

    monkeypatch.setattr(cli, "_augment", run)
    monkeypatch.setenv("MILLIPYDE_CACHE_DIR", str(tmp_path))
    args = Namespace(n=4, batch=8, writers=1, quality=90, cluster=None, recipe="thesis",
                     input=None)
    with pytest.raises(RuntimeError, match="the job failed"):
        cli.augment(args)
    assert calls == ["start", "run", "stop"]  # a pool nothing took is killed, even on failure
    marker = cli._done_marker("thesis")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()  # a run of this recipe filled the cache: nothing will compile
    calls.clear()
    with pytest.raises(RuntimeError):
        cli.augment(args)
    assert calls == ["run", "stop"]
    # a folder to decode: its decoder is made ahead, before the job's own imports
    from millipyde.data import decode

    monkeypatch.setattr(decode, "prepare_decoder", lambda device: calls.append("decoder"))
    calls.clear()
    args.input = str(tmp_path)
    with pytest.raises(RuntimeError):
        cli.augment(args)
    assert calls == ["decoder", "run", "stop"]


@pytest.mark.ptx
def test_a_cuda_worker_makes_its_context_beside_its_first_compile():
    """``compile_worker._context_beside_compiler``: the context in another thread while the
    first kernel compiles to PTX for the device's compute capability (no GPU: a stand-in for
    numba-cuda's device list and context, the PTX compile real); a context that fails is
    raised."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
    import types

    import numpy as np
    from numba import typeof

    from millipyde.graph.codegen import compile_worker, loader
    from millipyde.graph.codegen.target import HEADER

    loop = "    i = cuda.grid(1)\n    if i < src.size:\n"
    mod = loader.load(HEADER["cuda"] + "\n# (the overlap test's)\n"
                      + compile_worker._PREPARE.format(jit="cuda.jit", loop=loop), "cuda")
    sig = tuple(typeof(np.zeros(1, t)) for t in (np.uint8, np.float64))
    made: list[int] = []

    def context():
        made.append(threading.get_ident())

    fake = types.SimpleNamespace(gpus=[types.SimpleNamespace(compute_capability=(9, 0))],
                                 current_context=context)
    times: dict = {}
    compile_worker._context_beside_compiler(fake, mod.kernel.py_func, sig, times)
    assert made and made[0] != threading.get_ident() and "context" in times

    def broken():
        raise RuntimeError("no context for you")

    fake.current_context = broken
    with pytest.raises(RuntimeError, match="no context for you"):
        compile_worker._context_beside_compiler(fake, mod.kernel.py_func, sig, {})
