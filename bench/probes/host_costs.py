"""Microbenchmark of the host-side building blocks of one millipyde kernel call on a GPU.

Prints microseconds per call (median of 5 x 200) for: numba-cuda allocation, CuPy-pool
allocation + wrap, a small upload, a reshape view, an empty kernel launch with 4 array
arguments (through numba-cuda's dispatcher, and through ``runtime.launch_blocks`` with and
without the cached launch path of millipyde/backend/launcher.py, and that path through
``cuda.core`` instead of the driver-level ``rawlaunch``), an idle ``mp.synchronize``, and
millipyde's whole
gamma op on a 64x64 RGB image (both launch paths). Used to decide where the host time per op goes
(bench/RESULTS.md).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from numba import cuda

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.backend import launcher


def per_call(fn, n: int = 200) -> float:
    fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        cuda.synchronize()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(runs)


@cuda.jit
def _empty4(a, b, c, d):
    pass


def main() -> None:
    small = np.zeros(2048, np.uint8)
    a = cuda.device_array((64, 64, 3), np.uint8)
    s = cuda.default_stream()
    rows = {
        "cuda.device_array (64x64x3)": lambda: cuda.device_array((64, 64, 3), np.uint8),
        "runtime.empty (pool + wrap)": lambda: runtime.empty((64, 64, 3), np.uint8, 0),
        "cuda.to_device 2 KB": lambda: cuda.to_device(small, stream=s),
        "runtime.upload_small 2 KB (miss)": lambda: runtime.upload_small(
            np.random.randint(0, 255, 2048).astype(np.uint8), 0),
        "DeviceNDArray.reshape": lambda: a.reshape(64, 64 * 3),
        "empty kernel, 4 array args": lambda: _empty4[16, 128, s](a, a, a, a),
        "runtime.launch_blocks, same kernel": lambda: runtime.launch_blocks(
            _empty4, 16, 128, 0, a, a, a, a),
        "on_device (already current)": lambda: runtime.on_device(0).__enter__(),
        "mp.synchronize (idle)": mp.synchronize,
    }
    img = mp.gpuimage(np.zeros((64, 64, 3), np.uint8))
    img._materialize()

    def gamma():
        img.adjust_gamma(1.01)
        img._materialize()

    rows["millipyde gamma op 64x64 (record+plan+run)"] = gamma
    for name, fn in rows.items():
        print(f"{name:45s} {per_call(fn):9.1f} us", flush=True)
    launcher.DIRECT = False
    for name in ("runtime.launch_blocks, same kernel",
                 "millipyde gamma op 64x64 (record+plan+run)"):
        print(f"{name + ', cuda.core launch':45s} {per_call(rows[name]):9.1f} us", flush=True)
    launcher.DIRECT = True
    launcher.ENABLED = False
    for name in ("runtime.launch_blocks, same kernel",
                 "millipyde gamma op 64x64 (record+plan+run)"):
        print(f"{name + ', dispatcher only':45s} {per_call(rows[name]):9.1f} us", flush=True)
    launcher.ENABLED = True


if __name__ == "__main__":
    main()
