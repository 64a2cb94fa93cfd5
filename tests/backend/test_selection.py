"""Backend selection (``backend.selection.choose``), tested with fake probes: no GPU needed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import millipyde as mp
from millipyde.backend import selection
from millipyde.backend.selection import BackendError, choose

YES, NO = (lambda: True), (lambda: False)


@pytest.mark.parametrize(
    ("env", "cuda", "hip", "expected"),
    [
        ({}, YES, YES, "cuda"),
        ({}, NO, YES, "hip"),
        ({}, NO, NO, "cpu"),
        ({"NUMBA_ENABLE_CUDASIM": "1"}, YES, YES, "cudasim"),
        ({"MILLIPYDE_BACKEND": "cpu"}, YES, YES, "cpu"),
        ({"MILLIPYDE_BACKEND": "CudaSim"}, NO, NO, "cudasim"),
        ({"MILLIPYDE_BACKEND": "hip"}, YES, YES, "hip"),
        ({"MILLIPYDE_BACKEND": "cuda"}, YES, NO, "cuda"),
        ({"MILLIPYDE_BACKEND": "cpu", "NUMBA_ENABLE_CUDASIM": "1"}, NO, NO, "cpu"),
    ],
)
def test_choose(env, cuda, hip, expected) -> None:
    assert choose(env, cuda, hip) == expected


def test_unknown_backend_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="opencl"):
        choose({"MILLIPYDE_BACKEND": "opencl"}, YES, YES)


@pytest.mark.parametrize("name", ["cuda", "hip"])
def test_asking_for_a_missing_gpu_backend_fails_loudly(name) -> None:
    with pytest.raises(BackendError, match=name):
        choose({"MILLIPYDE_BACKEND": name}, NO, NO)


def test_active_backend_is_reported() -> None:
    assert mp.backend() in ("cuda", "hip", "cpu", "cudasim")
    assert mp.backend() == os.environ.get("MILLIPYDE_BACKEND", mp.backend())


def test_cudasim_is_chosen_in_a_fresh_process() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MILLIPYDE_BACKEND"}
    env["NUMBA_ENABLE_CUDASIM"] = "1"
    out = subprocess.run([sys.executable, "-c", "import millipyde as mp; print(mp.backend())"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "cudasim"


@pytest.mark.parametrize(
    ("name", "env", "expected"),
    [
        ("cpu", {"MILLIPYDE_BACKEND": "cpu"}, "MILLIPYDE_BACKEND=cpu"),
        ("cuda", {}, "a usable CUDA GPU was found (numba-cuda)"),
        ("cudasim", {"NUMBA_ENABLE_CUDASIM": "1"}, "NUMBA_ENABLE_CUDASIM=1: the CUDA simulator"),
        ("hip", {}, "no usable CUDA GPU; numba-hip found an AMD GPU"),
        ("cpu", {}, "no usable GPU (no driver); set MILLIPYDE_BACKEND to choose"),
    ],
)
def test_why(name, env, expected) -> None:
    assert selection.why(name, env, lambda: "no driver") == expected


def test_gpu_missing_names_both_gpu_backends() -> None:
    text = selection.gpu_missing()
    assert "numba-cuda" in text and "numba-hip" in text
