"""Shared benchmark machinery: timers, copy bandwidth and roofline, records, JSON, table, plot.

Protocol (PERFORMANCE.md): CPU contenders are timed with ``time.perf_counter`` after warm-up,
median of >= 5; GPU contenders with CUDA events (CuPy, else PyTorch) after warm-up, median of
>= 20. Every output is checked against the reference in the same run.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

CPU_REPEAT, CPU_WARMUP = 5, 1
GPU_REPEAT, GPU_WARMUP = 20, 3
RESULTS_DIR = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------- contenders and timing


@dataclass
class Runner:
    """One contender on one case.

    ``run`` is the timed call. ``setup`` (untimed) runs before every call, e.g. to clone an input
    that ``run`` mutates. ``result`` returns the host ndarray of the last call, for the check.
    ``sync`` (GPU only) runs inside the timed region after ``run``, for work that ``run`` may
    have queued on other streams or threads; without it the end event is recorded right after
    ``run`` on the current stream. ``gpu`` picks the timer.
    """

    run: Callable[[], object]
    result: Callable[[], np.ndarray]
    setup: Callable[[], object] | None = None
    sync: Callable[[], object] | None = None
    gpu: bool = False
    note: str = ""


def _budgeted(repeat: int, minimum: int, last_ms: float, budget_s: float | None) -> int:
    """Cut ``repeat`` to the protocol's minimum when it would overrun ``budget_s``."""
    if budget_s and last_ms * 1e-3 * repeat > budget_s:
        return minimum
    return repeat


def time_cpu(runner: Runner, repeat: int = CPU_REPEAT, warmup: int = CPU_WARMUP,
             budget_s: float | None = None) -> list[float]:
    """Wall times (ms) of ``runner.run`` with ``time.perf_counter``, after ``warmup`` calls.

    With ``budget_s``, a case whose last warm-up says ``repeat`` calls would take longer gets
    the minimum of 5 instead.
    """
    times: list[float] = []
    total = warmup + max(repeat, 5)
    i = 0
    while i < total:
        if runner.setup is not None:
            runner.setup()
        t0 = time.perf_counter()
        runner.run()
        ms = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            times.append(ms)
        elif i == warmup - 1:
            total = warmup + _budgeted(max(repeat, 5), 5, ms, budget_s)
        i += 1
    return times


_GPU_LIB: tuple[str, object] | None | bool = False  # False: not probed yet


def gpu_lib() -> tuple[str, object] | None:
    """``("cupy", cupy)`` or ``("torch", torch)`` when one sees a CUDA device, else None."""
    global _GPU_LIB
    if _GPU_LIB is False:
        _GPU_LIB = None
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                _GPU_LIB = ("cupy", cupy)
        except Exception:
            pass
        if _GPU_LIB is None:
            try:
                import torch

                if torch.cuda.is_available():
                    _GPU_LIB = ("torch", torch)
            except Exception:
                pass
    return _GPU_LIB


def gpu_available() -> bool:
    return gpu_lib() is not None


def device_synchronize() -> None:
    """Wait for all work on the current device (every stream of the process's context)."""
    lib = gpu_lib()
    if lib is None:
        if "numba.cuda" in sys.modules:
            sys.modules["numba.cuda"].synchronize()
        return
    name, mod = lib
    if name == "cupy":
        mod.cuda.runtime.deviceSynchronize()
    else:
        mod.cuda.synchronize()


def _event():
    name, mod = gpu_lib()
    return mod.cuda.Event() if name == "cupy" else mod.cuda.Event(enable_timing=True)


def _elapsed_ms(start, end) -> float:
    name, mod = gpu_lib()
    if name == "cupy":
        return float(mod.cuda.get_elapsed_time(start, end))
    return float(start.elapsed_time(end))


def time_gpu(runner: Runner, repeat: int = GPU_REPEAT, warmup: int = GPU_WARMUP,
             budget_s: float | None = None) -> list[float]:
    """Device times (ms) between CUDA events around ``run`` (+ ``sync``), after warm-up.

    Before each call the device is idle (``setup`` then a device synchronize, both untimed);
    events are recorded on the current stream (the legacy default stream unless changed), which
    also orders them after work on other blocking streams. Without CuPy or PyTorch the host
    clock around ``run`` + ``sync`` + device synchronize is used instead. ``budget_s`` as in
    ``time_cpu``, with a minimum of 20.
    """
    times: list[float] = []
    have_events = gpu_lib() is not None
    total = warmup + max(repeat, 20)
    i = 0
    while i < total:
        if runner.setup is not None:
            runner.setup()
        device_synchronize()
        if have_events:
            start, end = _event(), _event()
            start.record()
            runner.run()
            if runner.sync is not None:
                runner.sync()
            end.record()
            end.synchronize()
            ms = _elapsed_ms(start, end)
        else:
            t0 = time.perf_counter()
            runner.run()
            if runner.sync is not None:
                runner.sync()
            device_synchronize()
            ms = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            times.append(ms)
        elif i == warmup - 1:
            total = warmup + _budgeted(max(repeat, 20), 20, ms, budget_s)
        i += 1
    return times


def time_runner(runner: Runner, cpu_repeat: int, gpu_repeat: int, warmup: int,
                budget_s: float | None = None) -> list[float]:
    if runner.gpu:
        return time_gpu(runner, gpu_repeat, max(warmup, 1), budget_s)
    return time_cpu(runner, cpu_repeat, max(warmup, 1), budget_s)


# ---------------------------------------------------------------- bandwidth and roofline

_BANDWIDTH: dict[str, float | None] = {}


def gpu_copy_bandwidth(nbytes: int = 1 << 30, repeat: int = 20) -> float | None:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read + written (cached)."""
    if "gpu" in _BANDWIDTH:
        return _BANDWIDTH["gpu"]
    lib = gpu_lib()
    bw = None
    if lib is not None:
        name, mod = lib
        if name == "cupy":
            src = mod.arange(nbytes // 4, dtype=mod.uint32)
            dst = mod.empty_like(src)
            copy = lambda: dst.data.copy_from_device_async(src.data, src.nbytes)
        else:
            src = mod.arange(nbytes // 4, dtype=mod.int32, device="cuda")
            dst = mod.empty_like(src)
            copy = lambda: dst.copy_(src)
        ms = statistics.median(time_gpu(Runner(run=copy, result=lambda: None, gpu=True), repeat))
        bw = 2 * src.nbytes / (ms * 1e-3)
        del src, dst
    _BANDWIDTH["gpu"] = bw
    return bw


def cpu_copy_bandwidth(nbytes: int = 1 << 28) -> float:
    """Host copy bandwidth in bytes/s (read + written), all cores through Numba if importable,
    else one core through NumPy (cached)."""
    if "cpu" in _BANDWIDTH:
        return _BANDWIDTH["cpu"]
    src = np.arange(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    copy = lambda: np.copyto(dst, src)
    try:
        import numba

        @numba.njit(parallel=True, cache=False)
        def _pcopy(a, b):
            for i in numba.prange(a.size):
                b[i] = a[i]

        copy = lambda: _pcopy(src, dst)
        _BANDWIDTH["cpu_how"] = "numba prange copy"
    except Exception:
        _BANDWIDTH["cpu_how"] = "numpy copyto (one core)"
    ms = statistics.median(time_cpu(Runner(run=copy, result=lambda: None), 7, 2))
    _BANDWIDTH["cpu"] = 2 * src.nbytes / (ms * 1e-3)
    return _BANDWIDTH["cpu"]


def roofline_pct(bytes_moved: int | None, ms: float | None, bandwidth: float | None):
    """% of the copy roofline: bytes that must move / (time x measured copy bandwidth)."""
    if not bytes_moved or not ms or not bandwidth:
        return None
    return 100.0 * bytes_moved / (ms * 1e-3 * bandwidth)


# ---------------------------------------------------------------- checks


def check(out, ref: np.ndarray, border: int = 0, channels=None) -> tuple[bool, float, str]:
    """Compare with the reference: uint8 max |diff| <= 1, float max abs diff < 1e-4.

    ``border`` drops that many pixels on each side of both spatial axes (interior only);
    ``channels`` selects the last-axis channels compared (e.g. ``slice(0, 3)``).
    """
    out = np.asarray(out)
    if out.shape != ref.shape:
        return False, float("nan"), f"shape {out.shape} != {ref.shape}"
    if border:
        out, ref = out[border:-border, border:-border], ref[border:-border, border:-border]
    if channels is not None:
        out, ref = out[..., channels], ref[..., channels]
    diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    if not np.all(np.isfinite(diff)):
        return False, float("nan"), "non-finite values"
    err = float(diff.max()) if diff.size else 0.0
    per_channel = ""
    if diff.ndim == 3 and diff.size:
        per_channel = " per channel " + str([float(f"{v:.3g}") for v in diff.max(axis=(0, 1))])
    if ref.dtype == np.uint8:
        ok = err <= 1.0
        return ok, err, f"max|d|={err:g}" + ("" if ok else per_channel) + " (uint8, tol 1)"
    ok = err < 1e-4
    return ok, err, f"max|d|={err:.2e}" + ("" if ok else per_channel) + " (tol 1e-4)"


# ---------------------------------------------------------------- records and output


@dataclass
class Record:
    """One contender on one case. ``ok``: True/False, or None when not comparable/not run."""

    bench: str
    case: str
    contender: str
    params: dict = field(default_factory=dict)
    times_ms: list[float] = field(default_factory=list)
    median_ms: float | None = None
    ok: bool | None = None
    max_abs_err: float | None = None
    check: str = ""
    bytes_moved: int | None = None
    roofline_pct: float | None = None
    device: str = "cpu"
    note: str = ""
    skipped: str = ""


def _version(module: str, dist: str) -> str | None:
    mod = sys.modules.get(module)
    if mod is not None and getattr(mod, "__version__", None):
        return str(mod.__version__)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """Machine, package versions, GPU and copy bandwidths, for the JSON's ``meta``."""
    names = {
        "numpy": "numpy", "skimage": "scikit-image", "scipy": "scipy", "numba": "numba",
        "numba_cuda": "numba-cuda", "cupy": "cupy-cuda13x", "torch": "torch",
        "torchvision": "torchvision", "cucim": "cucim-cu13", "kornia": "kornia",
        "millipyde": "millipyde",
    }
    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": {m: _version(m, d) for m, d in names.items()},
        "millipyde_backend": None,
        "gpu": None,
    }
    if hasattr(sys.modules.get("millipyde"), "backend"):
        env["millipyde_backend"] = sys.modules["millipyde"].backend()
    lib = gpu_lib()
    if lib is not None:
        name, mod = lib
        if name == "cupy":
            props = mod.cuda.runtime.getDeviceProperties(mod.cuda.Device().id)
            gpu_name = props["name"]
            env["gpu"] = gpu_name.decode() if isinstance(gpu_name, bytes) else gpu_name
            env["gpu_count"] = mod.cuda.runtime.getDeviceCount()
        else:
            env["gpu"] = mod.cuda.get_device_name()
            env["gpu_count"] = mod.cuda.device_count()
    env["copy_bandwidth_gpu_Bps"] = _BANDWIDTH.get("gpu")
    env["copy_bandwidth_cpu_Bps"] = _BANDWIDTH.get("cpu")
    env["copy_bandwidth_cpu_how"] = _BANDWIDTH.get("cpu_how")
    return env


def default_out(bench: str, tag: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return RESULTS_DIR / f"{bench}_{tag}_{stamp}.json"


def write_json(path: str | Path, meta: dict, records: Sequence[Record]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "results": [asdict(r) for r in records]}
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return path


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "", left=(0, -1)
) -> None:
    """Plain-text table; columns in ``left`` left-aligned, the rest right; ``None`` is '-'."""
    left = {i % len(headers) for i in left}
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    if title:
        print(f"\n{title}")
    print(line)
    print("-" * len(line))
    for r in cells:
        pairs = enumerate(zip(r, widths, strict=True))
        parts = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in pairs]
        print("  ".join(parts).rstrip())


def fmt_ms(ms: float | None) -> str | None:
    if ms is None:
        return None
    return f"{ms:.4g}" if ms < 1000 else f"{ms:.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str | None:
    if not a or not b:
        return None
    r = a / b
    return f"{r:.3g}x" if r < 1000 else f"{r:.0f}x"


@dataclass
class Panel:
    """One subplot: ``kind="line"`` (log-log, series of (x, y)) or ``"bar"`` (categories)."""

    title: str
    series: dict[str, tuple[list, list]]
    kind: str = "line"
    xlabel: str = ""
    ylabel: str = "time (ms)"


def save_plot(path: str | Path, panels: Sequence[Panel], title: str = "") -> Path | None:
    """Write a PNG of the panels; prints a note and returns None if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not importable; PNG plot skipped")
        return None
    panels = [p for p in panels if any(len(xs) for xs, _ in p.series.values())]
    if not panels:
        return None
    cols = min(2, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.5 * rows), squeeze=False)
    for ax, p in zip(axes.flat, panels, strict=False):
        if p.kind == "bar":
            cats = list(dict.fromkeys(c for xs, _ in p.series.values() for c in xs))
            step = 0.8 / max(1, len(p.series))
            for k, (name, (xs, ys)) in enumerate(p.series.items()):
                pos = [cats.index(x) + k * step for x in xs]
                ax.bar(pos, ys, width=step, label=name)
            ax.set_xticks([i + 0.4 - step / 2 for i in range(len(cats))], cats)
            ax.set_yscale("log")
        else:
            for name, (xs, ys) in p.series.items():
                ax.loglog(xs, ys, marker="o", label=name)
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(p.title)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def try_import(name: str):
    """(module, None) or (None, reason)."""
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # ImportError, or a broken install raising something else
        return None, f"import {name} failed: {type(exc).__name__}: {exc}"
