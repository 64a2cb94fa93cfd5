"""The backend interface: every backend class implements it, the active one behaves as it says,
and nothing above ``millipyde/backend/`` asks which backend is active."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE, BACKENDS, Backend, DeviceMemoryError, backend_class
from millipyde.graph.codegen.target import HEADER, jit_decorator

# cheap enough for the simulator: there it checks SimBackend, on the cpu run CpuBackend
pytestmark = pytest.mark.cudasim_ok

ROOT = Path(__file__).resolve().parents[2] / "millipyde"
CLASSES = {name: backend_class(name) for name in BACKENDS}


def _required() -> list[str]:
    """The methods of the interface that have no default."""
    return [name for name, fn in vars(Backend).items() if inspect.isfunction(fn)
            and "raise NotImplementedError" in inspect.getsource(fn)]


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_implements_the_interface(name: str) -> None:
    cls = CLASSES[name]
    assert issubclass(cls, Backend) and cls.name == name
    assert len(_required()) >= 9  # empty, from_host, to_host, copy, upload_small, launches...
    missing = [m for m in _required() if getattr(cls, m) is getattr(Backend, m)]
    assert missing == []


@pytest.mark.parametrize("name", BACKENDS)
def test_generated_code_carries_the_backends_decorators(name: str) -> None:
    cls = CLASSES[name]
    assert jit_decorator(cls.codegen_target, cls.simulated) == cls.kernel_decorator
    assert f"_dev = {cls.device_decorator}\n" in HEADER[cls.codegen_target]


def test_the_active_backend_is_the_reported_one() -> None:
    assert type(ACTIVE) is CLASSES[mp.backend()]
    assert ACTIVE.caps.kernel_language == (
        "numba-cpu" if ACTIVE.codegen_target == "cpu" else "numba-cuda")
    assert mp.synchronize() is None


def test_buffers_round_trip_through_the_active_backend() -> None:
    host = np.arange(2 * 3 * 4, dtype=np.uint16).reshape(2, 3, 4)
    buf = ACTIVE.from_host(host, 0)
    host[0, 0, 0] = 99  # the backend keeps no reference to the host array
    np.testing.assert_array_equal(ACTIVE.to_host(buf)[0, 0, 0], 0)
    copied = ACTIVE.copy(buf, 0, 0)
    np.testing.assert_array_equal(ACTIVE.to_host(copied), ACTIVE.to_host(buf))
    assert [ACTIVE.to_host(m).tolist() for m in ACTIVE.members(buf)] == \
        ACTIVE.to_host(buf).tolist()
    empty = ACTIVE.empty((5, 0), np.float32, 0)
    assert tuple(empty.shape) == (5, 0) and empty.dtype == np.float32
    small = ACTIVE.upload_small(np.array([1.5, 2.5]), 0)
    np.testing.assert_array_equal(ACTIVE.to_host(small), [1.5, 2.5])


def test_part_views_bytes_of_a_flat_buffer() -> None:
    raw = np.zeros(64, np.uint8)
    raw[16:24] = np.frombuffer(np.array([7.25], np.float64).tobytes(), np.uint8)
    buf = ACTIVE.from_host(raw, 0)
    view = ACTIVE.part(buf, 16, np.float64, (1,))
    assert ACTIVE.to_host(view).tolist() == [7.25]


def test_events_order_work_without_blocking() -> None:
    stream = ACTIVE.new_stream(0)
    assert (stream is None) == (not ACTIVE.caps.launches_on_streams)
    with ACTIVE.on_device(0), ACTIVE.using_stream(stream):
        assert ACTIVE.current_stream() is stream
        event = ACTIVE.record_event()
        ACTIVE.wait_event(event, ACTIVE.new_stream(0))
    assert (event is None) == (not ACTIVE.caps.launches_on_streams)
    ACTIVE.synchronize(0)


def test_limits() -> None:
    assert ACTIVE.shared_limit(0) >= Backend.SHARED_DEFAULT == 48 * 1024
    if not ACTIVE.caps.grid_launches:
        with pytest.raises(RuntimeError, match="thread blocks"):
            ACTIVE.launch_grid(None, (1,), (1,), 0)


def test_allocation_failures_name_device_backend_and_bytes() -> None:
    err = ACTIVE._oom((1000, 1000), np.float64, 3, MemoryError("no room"))
    assert isinstance(err, DeviceMemoryError)
    assert f"device 3 ({mp.backend()}): could not allocate 8000000 bytes" in str(err)


_BACKEND_FLAGS = {"GPU", "SIM", "TARGET", "BACKEND", "is_gpu_like"}


def test_nothing_above_the_backend_asks_which_backend_is_active() -> None:
    asked = []
    for path in ROOT.rglob("*.py"):
        if "backend" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in _BACKEND_FLAGS | {"name"} and \
                    isinstance(node.value, ast.Name) and node.value.id in ("runtime", "ACTIVE"):
                if node.attr != "name" or _compared(node, path):
                    asked.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
            # ``backend() == "cuda"`` branches on a named backend; comparing with another
            # process's backend() (a consistency check) does not
            sides = [node.left, *node.comparators] if isinstance(node, ast.Compare) else []
            if any(isinstance(s, ast.Call) and getattr(s.func, "attr", getattr(s.func, "id", ""))
                   == "backend" for s in sides) and any(
                    isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides):
                asked.append(f"{path.name}:{node.lineno} backend() compared")
    assert asked == []


def _compared(attr: ast.Attribute, path: Path) -> bool:
    """Whether ``attr`` (``ACTIVE.name``) is compared rather than only printed."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(
                isinstance(s, ast.Attribute) and s.lineno == attr.lineno and s.attr == "name"
                for s in [node.left, *node.comparators]):
            return True
    return False


def test_launch_shapes_of_the_grid_backends() -> None:
    from millipyde.backend.cuda import CudaBackend
    from millipyde.backend.sim import SimBackend

    gpu, sim = object.__new__(CudaBackend), object.__new__(SimBackend)  # no device needed
    # 32x8 blocks; the grid is capped at 65535 per axis (kernels loop grid-stride past it)
    assert gpu._grid_2d(1000, 33) == ((2, 125), (32, 8))
    assert gpu._grid_2d(8 * 70000, 32 * 70000) == ((65535, 65535), (32, 8))
    # every simulated thread is a Python thread: small blocks, never wider than the image
    assert sim._grid_2d(3, 5) == ((1, 1), (5, 3))
    assert sim._grid_2d(9, 40) == ((3, 3), (16, 4))
    assert (CudaBackend.BLOCK_1D, SimBackend.BLOCK_1D) == (256, 64)


def test_words_view_whole_aligned_word_buffers_only() -> None:
    from millipyde.backend import ACTIVE

    dev = ACTIVE.from_host(np.arange(64, dtype=np.uint8), 0)
    flat = ACTIVE.flat(dev)
    got = ACTIVE.words(flat)
    assert got is not None and got.dtype == np.uint64 and got.shape == (8,)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np.arange(64, dtype=np.uint8))
    if hasattr(flat, "__dict__"):  # (device arrays; a NumPy array keeps no attributes)
        assert ACTIVE.words(flat) is got
    assert ACTIVE.words(flat[:60]) is None  # not a whole number of words
    assert ACTIVE.words(flat[1:57]) is None  # whole words, but not 8-byte aligned
