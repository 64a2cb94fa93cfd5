"""``bench/gpu_suite.py``: the suite's shards and its report, and the deadline in conftest."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench import gpu_suite

ROOT = Path(__file__).resolve().parent.parent


def test_shards_are_disjoint_and_complete() -> None:
    files = gpu_suite.test_files()
    assert Path("tests/test_gpu_suite.py") in files
    parts = [gpu_suite.shard(files, k, 3) for k in (1, 2, 3)]
    assert sorted(f for p in parts for f in p) == sorted(files)
    assert all(parts)
    assert gpu_suite.shard(files, 2, 3) == parts[1]  # the same split each time
    sizes = [sum((ROOT / f).stat().st_size for f in p) for p in parts]
    biggest = max((ROOT / f).stat().st_size for f in files)
    assert max(sizes) - min(sizes) <= biggest  # (greedy by size: within one file)


def test_a_bad_shard_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="--shard 4/3"):
        gpu_suite.shard(gpu_suite.test_files(), 4, 3)


def test_the_summary_counts_failures_skips_and_tests_not_run(tmp_path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="tests.test_a" name="test_ok"/>'
        '<testcase classname="tests.test_a.TestK" name="test_bad">'
        '<failure message="AssertionError: 8 == 7&#10;more">tb</failure></testcase>'
        '<testcase classname="tests.sub.test_b" name="test_gpu">'
        '<skipped message="needs a real GPU"/></testcase>'
        '<testcase classname="tests.test_c" name="test_late">'
        '<skipped message="not run: the run\'s deadline (MILLIPYDE_TEST_DEADLINE) had passed"/>'
        '</testcase></testsuite></testsuites>')
    files = [Path("tests/test_a.py"), Path("tests/sub/test_b.py"), Path("tests/test_c.py")]
    text = gpu_suite.summarize(xml, files)
    first, *rest = text.splitlines()
    assert first == "1 failed, 1 not run, 1 passed, 1 skipped"
    assert "FAILED tests/test_a.py::TestK::test_bad" in text and "8 == 7" in text
    assert "skipped x1: needs a real GPU" in rest
    assert rest[-1] == "files with no test reached: tests/test_c.py"
    assert [(node, outcome) for node, _, outcome, _ in gpu_suite.outcomes(xml, files)] == [
        ("tests/test_a.py::test_ok", "passed"), ("tests/test_a.py::TestK::test_bad", "failed"),
        ("tests/sub/test_b.py::test_gpu", "skipped"), ("tests/test_c.py::test_late", "not run")]


def test_a_failed_test_is_run_again_alone(tmp_path) -> None:
    ids = ["tests/test_gpu_suite.py::test_a_bad_shard_is_refused",
           "tests/test_gpu_suite.py::test_no_such_test"]
    # (the first run's deadline, passed, is in the environment it hands on)
    env = dict(os.environ, MILLIPYDE_TEST_DEADLINE=str(time.time() - 1))
    text = gpu_suite.rerun_alone(ids, 120.0, tmp_path, "t", env)
    lines = text.splitlines()
    assert lines == ["re-run alone, each in its own process:", f"  passed: {ids[0]}",
                     f"  not collected: {ids[1]}"], text
    assert gpu_suite.rerun_alone(ids, -1.0, tmp_path, "u", dict(os.environ)).splitlines()[1:] \
        == [f"  not run: {ids[0]}", f"  not run: {ids[1]}"]  # (past its budget: none started)


def test_no_test_starts_after_the_deadline() -> None:
    env = dict(os.environ, MILLIPYDE_TEST_DEADLINE=str(time.time() - 1))
    got = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-rs",
         "tests/test_gpu_suite.py::test_a_bad_shard_is_refused"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "1 skipped" in got.stdout, got.stdout + got.stderr
    assert "MILLIPYDE_TEST_DEADLINE" in got.stdout


def test_each_worker_sees_the_gpus_from_another_first(monkeypatch) -> None:
    import conftest

    class Config:
        def __init__(self, worker: str) -> None:
            self.workerinput = {"workerid": worker}

    got = {}
    monkeypatch.setenv("MILLIPYDE_TEST_GPUS", "3")
    for worker in ("gw0", "gw1", "gw2", "gw4"):
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        conftest._rotate_gpus(Config(worker))
        got[worker] = os.environ["CUDA_VISIBLE_DEVICES"]
    assert got == {"gw0": "0,1,2", "gw1": "1,2,0", "gw2": "2,0,1", "gw4": "1,2,0"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # (the machine's own choice is kept)
    conftest._rotate_gpus(Config("gw2"))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    conftest._rotate_gpus(type("Main", (), {})())  # not a worker: nothing set
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
