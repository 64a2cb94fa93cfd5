"""Host time of ``random_resized_crop``'s window draw (``resized_crop.random_windows``): one
image's, as a method call draws it, and a batch of 256 members', as ``Generator.batches``
draws it (``batch_ops.Ctx``). No kernel runs; any backend (meant for the cpu backend).

    MILLIPYDE_BACKEND=cpu python3 bench/probes/window_draws.py

Run it on two trees (``PYTHONPATH`` to the other tree's root) to compare them.
"""

from __future__ import annotations

import timeit

import numpy as np

from millipyde import random as mprandom
from millipyde.image import _OneImage
from millipyde.ops.geometry import resized_crop
from millipyde.training import batch_ops

SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)


def main() -> None:
    one = np.array([[480, 640]], dtype=np.int64)
    draws = iter([_OneImage(mprandom.StreamKey(3, k, 0)) for k in range(1000)] * 100)
    resized_crop.random_windows(one, SCALE, RATIO, next(draws), False)
    t = min(timeit.repeat(lambda: resized_crop.random_windows(one, SCALE, RATIO, next(draws),
                                                              False), number=1000, repeat=5))
    print(f"one image (480x640, RandomResizedCrop's defaults): {t / 1000 * 1e6:.1f} us per call")
    ks = np.arange(256, dtype=np.int64)
    hw = np.repeat(one, 256, axis=0)
    c = batch_ops.Ctx(3, ks, 0)
    resized_crop.random_windows(hw, SCALE, RATIO, c, False)
    t = min(timeit.repeat(lambda: resized_crop.random_windows(hw, SCALE, RATIO, c, False),
                          number=500, repeat=5))
    print(f"batch of 256 members (Ctx): {t / 500 * 1e6:.1f} us per call")


if __name__ == "__main__":
    main()
