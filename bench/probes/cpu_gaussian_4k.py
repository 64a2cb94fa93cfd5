"""CPU backend vs scikit-image: Gaussian (sigma 2, truncate 8) on a 4000x5333 float64 image,
millipyde timed with its host copies (gpuimage construction and np.asarray), five runs in a row.
``python bench/probes/cpu_gaussian_4k.py mallopt`` first keeps large freed blocks in the heap
(glibc)."""

import ctypes
import sys
import time

import numpy as np
from skimage import filters

import millipyde as mp

if len(sys.argv) > 1:
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    print("mallopt", libc.mallopt(M_MMAP_THRESHOLD, 1 << 30),
          libc.mallopt(M_TRIM_THRESHOLD, 1 << 31))
g = np.random.default_rng(0).random((5333, 4000))
ts = []
for _ in range(5):
    t = time.perf_counter()
    x = mp.gpuimage(g)
    x.gaussian(2)
    out = np.asarray(x)
    ts.append(time.perf_counter() - t)
print("mp with copies ms", [round(v * 1e3) for v in ts])
t = time.perf_counter()
filters.gaussian(g, 2, mode="constant", cval=0, truncate=8, preserve_range=True)
print("skimage ms", round((time.perf_counter() - t) * 1e3))
