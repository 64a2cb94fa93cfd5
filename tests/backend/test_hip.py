"""The hip backend without AMD hardware: its selection, the switch to numba-hip, its class
against the interface, and the kernels generated for it.

Nothing here runs on an AMD GPU (none was available): numba-hip is replaced by a stand-in.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from ptx_compile import ptx_of

from millipyde.backend import selection
from millipyde.backend.cuda import CudaBackend
from millipyde.backend.hip import HipBackend
from millipyde.graph.codegen.gather import gather_source
from millipyde.graph.codegen.gather_sig import GatherSig, gather_nparams
from millipyde.graph.codegen.loader import load


def _fake_hip(monkeypatch: pytest.MonkeyPatch, devices: int) -> list[str]:
    calls: list[str] = []
    numba_hip = types.ModuleType("numba_hip")
    numba_hip.pose_as_cuda = lambda: calls.append("pose_as_cuda")
    hip_pkg = types.ModuleType("hip")
    hip_pkg.hip = types.SimpleNamespace(hipGetDeviceCount=lambda: (0, devices))
    monkeypatch.setitem(sys.modules, "numba_hip", numba_hip)
    monkeypatch.setitem(sys.modules, "hip", hip_pkg)
    return calls


def test_activating_hip_makes_numba_hip_pose_as_cuda(monkeypatch) -> None:
    calls = _fake_hip(monkeypatch, 1)
    selection._activate("hip")
    assert calls == ["pose_as_cuda"]


@pytest.mark.parametrize("devices,usable", [(1, True), (0, False)])
def test_hip_is_usable_with_numba_hip_and_an_amd_gpu(monkeypatch, devices, usable) -> None:
    _fake_hip(monkeypatch, devices)
    monkeypatch.delitem(sys.modules, "numba.cuda", raising=False)
    assert selection._hip_usable() is usable


def test_hip_is_too_late_once_numba_cuda_is_imported(monkeypatch) -> None:
    _fake_hip(monkeypatch, 1)
    monkeypatch.setitem(sys.modules, "numba.cuda", types.ModuleType("numba.cuda"))
    assert selection._hip_usable() is False


def test_hip_is_picked_when_asked_and_usable(monkeypatch) -> None:
    _fake_hip(monkeypatch, 2)
    monkeypatch.delitem(sys.modules, "numba.cuda", raising=False)
    monkeypatch.setenv("MILLIPYDE_BACKEND", "hip")
    assert selection._probe_order() == "hip"


def test_hip_backend_switches_off_what_numba_hip_lacks() -> None:
    pytest.importorskip("numba.cuda")
    hip = HipBackend()
    assert hip.name == "hip" and isinstance(hip, CudaBackend)
    # numba-hip poses as numba.cuda: the same generated dialect, not the simulator
    assert (hip.codegen_target, hip.simulated) == ("cuda", False)
    assert hip.caps.grid_launches and hip.caps.shared_memory and hip.caps.device_memory
    assert hip.caps.kernel_language == "numba-cuda"
    assert hip.fast_launch is False  # the cached path drives numba-cuda internals
    assert hip._cupy_pool() is None  # a CUDA CuPy cannot allocate AMD memory


@pytest.mark.ptx
def test_kernels_generated_for_hip_are_the_cuda_dialect_and_compile(monkeypatch) -> None:
    pytest.importorskip("numba.cuda")
    from numba import types as nb
    from numba.np.numpy_support import from_dtype

    sig = GatherSig(3, "lut", True, True, "")
    source = gather_source(sig, HipBackend.codegen_target, HipBackend.simulated)
    assert source == gather_source(sig, "cuda", False)
    assert HipBackend.kernel_decorator in source
    kernel = load(source, HipBackend.codegen_target).kernel
    arr = nb.Array(from_dtype(np.dtype(np.uint8)), 3, "C")
    # numba-hip compiles this source to AMDGPU code; here PTX stands in for "it compiles"
    ptx = ptx_of(kernel.py_func, (arr, arr, arr)
                 + (nb.float64,) * gather_nparams(sig))
    assert ".entry" in ptx
