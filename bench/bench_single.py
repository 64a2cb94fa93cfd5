"""Single ops on a resident 512x512 RGB image: what a method call costs from the call to the
result on the device, beside cuCIM / CuPy in the same process.

    python3 bench/bench_single.py [--repeat 300] [--json out.json]

Ops: the thesis's five (``adjust_gamma(2)``, ``rgb2grey()``, ``gaussian(2)``, ``fliplr()``,
``rotate(45)``) on the astronaut photograph (512x512 RGB uint8). Timed: the method call and
``_materialize()`` then a device synchronize, on a clone made untimed (median of ``--repeat``
after a warm-up). cuCIM's equivalents (``exposure.adjust_gamma``, ``color.rgb2gray``,
``filters.gaussian(channel_axis=-1, preserve_range=True)``, ``cupy.fliplr(x).copy()``,
``transform.rotate(preserve_range=True)``) on a resident CuPy array, same timing. Uses only the
public API and ``_materialize``, so the same script times any tree of the project (put the tree
first on ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

OPS = {
    "adjust_gamma": ("adjust_gamma", (2.0,)),
    "rgb2grey": ("rgb2grey", ()),
    "gaussian": ("gaussian", (2.0,)),
    "fliplr": ("fliplr", ()),
    "rotate45": ("rotate", (45.0,)),
}


def millipyde_times(host: np.ndarray, repeat: int) -> dict[str, float]:
    import millipyde as mp

    src = mp.gpuimage(host)
    src._materialize()
    out = {}
    for label, (name, args) in OPS.items():
        times = []
        for _ in range(repeat + 5):
            g = src.clone()
            g._materialize()
            mp.synchronize()
            t0 = time.perf_counter()
            getattr(g, name)(*args)
            g._materialize()
            mp.synchronize()
            times.append(time.perf_counter() - t0)
        out[label] = statistics.median(times[5:]) * 1e3
    return out


def cucim_times(host: np.ndarray, repeat: int) -> dict[str, float] | None:
    try:
        import cupy as cp
        from cucim.skimage import color, exposure, filters, transform
    except Exception as err:  # noqa: BLE001 - a missing contender is reported, not fatal
        print(f"cuCIM not importable: {type(err).__name__}: {err}")
        return None
    x = cp.asarray(host)
    calls = {
        "adjust_gamma": lambda: exposure.adjust_gamma(x, 2.0),
        "rgb2grey": lambda: color.rgb2gray(x),
        "gaussian": lambda: filters.gaussian(x, 2.0, channel_axis=-1, preserve_range=True,
                                             truncate=8.0, mode="constant"),
        "fliplr": lambda: cp.fliplr(x).copy(),
        "rotate45": lambda: transform.rotate(x, 45.0, order=1, preserve_range=True),
    }
    out = {}
    for label, f in calls.items():
        times = []
        for _ in range(repeat + 5):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            f()
            cp.cuda.Device().synchronize()
            times.append(time.perf_counter() - t0)
        out[label] = statistics.median(times[5:]) * 1e3
    return out


def main() -> None:
    import skimage.data

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--no-cucim", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    host = np.ascontiguousarray(skimage.data.astronaut())
    mp_ms = millipyde_times(host, a.repeat)
    cu_ms = None if a.no_cucim else cucim_times(host, a.repeat)
    print(f"{'op':<14}{'millipyde ms':>14}{'cuCIM ms':>12}{'ratio':>8}")
    for k, v in mp_ms.items():
        c = None if cu_ms is None else cu_ms[k]
        ratio = "" if c is None else f"{c / v:.2f}x"
        print(f"{k:<14}{v:>14.4f}{'' if c is None else f'{c:.4f}':>12}{ratio:>8}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"millipyde_ms": mp_ms, "cucim_ms": cu_ms}, f, indent=1)


if __name__ == "__main__":
    main()
