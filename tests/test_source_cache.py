"""``source_cache``: sources written to the cache directory and imported from there."""

from __future__ import annotations

import sys

import pytest

from millipyde import source_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MILLIPYDE_CACHE_DIR", str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("millipyde_test_sc_")]:
        del sys.modules[name]


def test_a_source_is_written_once_and_imported_from_the_cache_dir(cache) -> None:
    mod = source_cache.import_source("millipyde_test_sc_a", "VALUE = 41 + 1\n")
    assert mod.VALUE == 42
    path = source_cache.cache_dir() / "millipyde_test_sc_a.py"
    assert path.is_relative_to(cache) and path.read_text() == "VALUE = 41 + 1\n"
    assert mod.__file__ == str(path)
    # a second import is the same module object, not a second execution
    assert source_cache.import_source("millipyde_test_sc_a", "VALUE = 41 + 1\n") is mod
    assert not list(path.parent.glob("*.tmp"))


def test_a_source_that_fails_leaves_no_module_and_raises(cache) -> None:
    with pytest.raises(ZeroDivisionError):
        source_cache.import_source("millipyde_test_sc_b", "VALUE = 1 / 0\n")
    assert "millipyde_test_sc_b" not in sys.modules
    # the name is usable again once its source is fixed
    assert source_cache.import_source("millipyde_test_sc_b", "VALUE = 1\n").VALUE == 1


def test_the_generated_kernel_loader_uses_the_same_directory(cache) -> None:
    from millipyde.graph.codegen import loader

    assert loader.cache_dir() == source_cache.cache_dir()
    assert source_cache.cache_dir().parent == cache


# A disk-cached function, compiled in two processes at once (about a CPU-second each).
_TWO_PROCESS_SOURCE = '''
import math
from numba import njit


@njit(cache=True, nogil=True)
def work(x, n):
    s = 0.0
    for i in range(n):
        s += math.sin(x * i) * math.cos(x + i) / (1.0 + i)
        if s > 1e9:
            s = math.sqrt(s)
    return s
'''

_TWO_PROCESS_CHILD = '''
import os, sys, time
from millipyde import source_cache

mod = source_cache.import_source(sys.argv[1], sys.argv[2])
open(sys.argv[3] + "." + str(os.getpid()), "w").close()
deadline = time.monotonic() + 60
while len([p for p in os.listdir(os.path.dirname(sys.argv[3]))
           if p.startswith(os.path.basename(sys.argv[3]))]) < 2:
    if time.monotonic() > deadline:
        raise SystemExit("the other process never started")
    time.sleep(0.001)
mod.work(0.5, 10)
print(sum(mod.work.stats.cache_misses.values()), sum(mod.work.stats.cache_hits.values()))
'''


def test_two_processes_compile_a_cached_function_once(cache) -> None:
    """Two processes asking for the same disk-cached function at once: one compiles it, the
    other waits on its lock file and loads the compile from the disk cache."""
    import os
    import subprocess

    env = dict(os.environ, MILLIPYDE_CACHE_DIR=str(cache))
    args = [sys.executable, "-c", _TWO_PROCESS_CHILD, "millipyde_test_sc_two",
            _TWO_PROCESS_SOURCE, str(cache / "ready")]
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    counts = sorted(tuple(int(v) for v in out.split()) for out, _ in outs)
    assert counts == [(0, 1), (1, 0)], counts  # (compiles, disk-cache loads) of each
