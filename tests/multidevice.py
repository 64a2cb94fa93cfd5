"""Helpers for the execution-construct tests: small images, references, and a subprocess runner
for scripts that need ``MILLIPYDE_CPU_DEVICES=N`` (the device count is fixed at import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.dirname(os.path.abspath(__file__))


def crops(n: int, h: int = 24, w: int = 32) -> list[np.ndarray]:
    """``n`` distinct small RGB crops of skimage's astronaut (uint8, h x w x 3)."""
    from skimage import data

    a = data.astronaut()
    return [np.ascontiguousarray(a[(13 * i) % 400:(13 * i) % 400 + h,
                                   (29 * i) % 400:(29 * i) % 400 + w]) for i in range(n)]


def standard_ops():
    """Random, probabilistic and fused operations used by the determinism tests."""
    import millipyde as mp

    return [mp.Operation("random_rotate", -20, 20),
            mp.Operation("fliplr", probability=0.5),
            mp.Operation("random_brightness", -0.1, 0.1),
            mp.Operation("gaussian", 1.0, probability=0.5)]


def reference(host: np.ndarray, ops, seed: int, sample: int) -> np.ndarray:
    """What an executor must produce for ``host`` as sample ``sample``: ops applied in order."""
    import millipyde as mp

    x = mp.gpuimage(host)
    for j, op in enumerate(ops):
        op.apply(x, seed, sample, j)
    return np.asarray(x)


def assert_same(got: np.ndarray, want: np.ndarray, err_msg: str = "") -> None:
    """Equal bit for bit; on a real GPU float results within 2 ulp (API.md: batched and
    per-image kernels may contract multiply-adds differently there), uint8 ones exactly."""
    from millipyde.backend import ACTIVE

    if ACTIVE.caps.launches_on_streams and not ACTIVE.simulated and \
            np.asarray(want).dtype.kind == "f":
        np.testing.assert_array_max_ulp(got, want, maxulp=2)
        return
    np.testing.assert_array_equal(got, want, err_msg=err_msg)


#: threads that live as long as the process by design: the cpu backend's pool that runs a
#: large launch's parts (``CpuBackend._parts_pool``), made by the first such launch; Pipeline
#: worker threads idle between runs (``workers.IDLE_NAME``)
PERSISTENT = ("millipyde-cpu-part", "millipyde-idle-worker")


def running_threads() -> int:
    """Threads alive, Pipeline worker threads idle between runs aside (``workers``: a run's
    workers are idle again when it returns; at most ``workers.MAX_IDLE`` are kept)."""
    from millipyde.workers import IDLE_NAME

    return sum(t.name != IDLE_NAME for t in threading.enumerate())


def wait_for_workers(timeout: float = 10.0) -> None:
    """Wait until no millipyde worker thread is alive (abandoned ones included), the
    persistent pools' aside (:data:`PERSISTENT`: else every wait after a test that ran a
    large cpu launch lasted the whole timeout)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not [t for t in threading.enumerate()
                if t.name.startswith("millipyde-") and not t.name.startswith(PERSISTENT)]:
            return
        time.sleep(0.02)


def run_with_devices(code: str, n_devices: int, tmp_path, timeout: float = 300) -> dict:
    """Run ``code`` with ``n_devices`` virtual cpu devices; return the JSON it prints last.

    The script sees ``OUT`` (a str path: ``tmp_path``) and can ``import multidevice``.
    """
    env = dict(os.environ)
    env.update(MILLIPYDE_BACKEND="cpu", MILLIPYDE_CPU_DEVICES=str(n_devices),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, TESTS, env.get("PYTHONPATH")) if p))
    prelude = f"import sys\nOUT = {str(tmp_path)!r}\n"
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
