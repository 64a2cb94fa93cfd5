"""Single ops: thesis tables 6.1-6.3, plus flip, transpose, rotate, brightness, colorize.

``python -m bench ops [--widths 500 1000 ...] [--quick] [--skimage-max-width N] [--out F.json]``

gamma (RGBA uint8, gamma 2, gain 1), greyscale (RGBA uint8 -> float64), Gaussian (float64
greyscale, sigma 2, truncate 8, mode constant) at every width (height = width * 4 / 3); fliplr,
transpose, rotate 45, brightness and colorize (RGBA uint8) at the largest width. Contenders:
scikit-image (CPU, also the reference), millipyde on its active backend, and on a GPU machine
cuCIM and torchvision v2. Each output is checked against the reference in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from bench.common import (
    Panel,
    Record,
    Runner,
    check,
    cpu_copy_bandwidth,
    default_out,
    device_synchronize,
    environment,
    fmt_ms,
    fmt_ratio,
    gpu_available,
    gpu_copy_bandwidth,
    print_table,
    roofline_pct,
    save_plot,
    time_runner,
    try_import,
    write_json,
)
from bench.ops_gpu_libs import cucim_run, torchvision_run
from bench.ops_spec import CONTENDERS, OPS, RADIUS, WIDTHS, Op, reference

# ---------------------------------------------------------------- millipyde: the one adapter

MP_ROWS = ("millipyde", "mp-kernel")  # mp-kernel: CPU backend, kernel only (no host copies)


def _mp_run(op: Op, host_img: np.ndarray, kernel_only: bool = False) -> Runner:
    """How millipyde is driven and timed; the one place to adjust when its API moves.

    GPU backends: the input is uploaded once; before each timed call (untimed) a ``clone()`` is
    made resident; the timed region is the method call + ``_materialize()`` (no host copy),
    between CUDA events on the stream the other libraries are timed on: where millipyde
    launches on another stream, ``mp.synchronize()`` is timed too (``_mp_sync``). CPU backend:
    ``gpuimage(host)``, the method and ``np.asarray`` are all timed: the figure includes the
    copies in and out. With ``kernel_only`` (the ``mp-kernel`` row, CPU backend): as on a
    GPU, a resident clone made untimed, and only the method + ``_materialize()`` timed, so the
    kernel shows apart from the host copies that the ``millipyde`` row also pays.
    """
    import millipyde as mp

    state: dict = {}
    method, args = op.method, op.args
    if mp.backend() in ("cuda", "hip") or kernel_only:
        base = mp.gpuimage(host_img)
        materialize = getattr(base, "_materialize", None)
        force = (lambda im: im._materialize()) if materialize else np.asarray
        force(base)
        sync = _mp_sync(mp)
        settle = getattr(mp, "synchronize", None) or device_synchronize

        def setup():
            state["img"] = base.clone()
            force(state["img"])
            settle()

        def run():
            getattr(state["img"], method)(*args)
            force(state["img"])

        note = ("device-resident input, clone untimed; method + _materialize"
                + (" + synchronize" if sync is not None else ", same stream as the events"))
        if not materialize:
            note = "NO _materialize: timed np.asarray (includes device->host copy)"
        if kernel_only and mp.backend() not in ("cuda", "hip"):
            return Runner(run=run, result=lambda: np.asarray(state["img"]), setup=setup,
                          note=f"{mp.backend()} backend, kernel only: resident clone untimed; "
                               "method + _materialize timed, no host copies")
        return Runner(run=run, result=lambda: np.asarray(state["img"]), setup=setup, sync=sync,
                      gpu=True, note=note)

    def run_cpu():
        img = mp.gpuimage(host_img)
        getattr(img, method)(*args)
        state["out"] = np.asarray(img)

    return Runner(run=run_cpu, result=lambda: state["out"],
                  note=f"{mp.backend()} backend: includes gpuimage() and np.asarray copies")


def _mp_sync(mp) -> Callable[[], object] | None:
    """What the timed region waits for after millipyde's call, beyond the end event.

    The events of every GPU contender are recorded on CuPy's (or torch's) current stream: the
    legacy default stream unless a per-thread default stream is configured. When millipyde
    launches on that same stream (handle 0, and CuPy's current stream is 0 too), the end event
    is already ordered after its kernel, as it is after cuCIM's: no synchronize, whose host
    round trip cuCIM's figure does not pay either. Otherwise ``mp.synchronize()`` (or a device
    synchronize) is timed so that the end event follows millipyde's work.
    """
    fallback = getattr(mp, "synchronize", None) or device_synchronize
    try:
        import cupy

        from millipyde.backend import ACTIVE
        from millipyde.backend.pool import stream_handle

        ours = stream_handle(ACTIVE.current_stream())
        theirs = int(cupy.cuda.get_current_stream().ptr)
    except Exception:  # another layout of the package, or no CuPy: keep the synchronize
        return fallback
    return None if ours == 0 and theirs == 0 else fallback


def _mp_kernel_run(op: Op, host_img: np.ndarray) -> Runner:
    """The ``mp-kernel`` row (CPU backend only): ``_mp_run`` timing the op + materialize."""
    return _mp_run(op, host_img, kernel_only=True)


# ---------------------------------------------------------------- the run


@dataclass
class Case:
    op: Op
    width: int
    height: int
    records: dict[str, Record] = field(default_factory=dict)


def _inputs(width: int, height: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + width)
    rgba = rng.integers(0, 256, size=(height, width, 4), dtype=np.uint8)
    grey = rng.random((height, width))
    return rgba, grey


def _skimage_run(op: Op, host: np.ndarray) -> Runner:
    state: dict = {}

    def run():
        state["out"] = op.reference(host)

    return Runner(run=run, result=lambda: state["out"])


def _check_for(name: str, op: Op, out, ref) -> tuple[bool | None, float, str]:
    border = RADIUS if (name == "torchvision" and op.name == "gaussian") else 0
    channels = slice(0, 3) if (op.alpha_kept and name not in MP_ROWS) else None
    ok, err, text = check(out, ref, border=border, channels=channels)
    if name == "torchvision" and op.name == "greyscale":
        return None, err, "n/a (different function): " + text
    if channels is not None:
        text += "; RGB only (this library changes alpha too)"
    return ok, err, text


def _run_case(case: Case, host: np.ndarray, builders: dict, args, bw: dict) -> None:
    op, h, w = case.op, case.height, case.width
    params = {"width": w, "height": h, "args": list(op.args)}
    nbytes = op.bytes_per_px * h * w
    ref = None
    order = ["skimage"] + [c for c in builders if c != "skimage"]
    for name in order:
        rec = Record("ops", op.name, name, params=params, bytes_moved=nbytes)
        case.records[name] = rec
        if name == "skimage":
            if "skimage" not in builders or (args.skimage_max_width
                                             and w > args.skimage_max_width):
                rec.skipped = ("not asked for" if "skimage" not in builders else
                               f"width > --skimage-max-width {args.skimage_max_width}")
                ref = reference(op, host, op.reference(host))  # untimed, for the checks
                continue
            runner = _skimage_run(op, host)
        elif name not in builders or builders[name] is None:
            continue
        else:
            try:
                runner = builders[name](op, host)
            except NotImplementedError as exc:
                rec.skipped = str(exc)
                continue
            except Exception as exc:
                rec.skipped = f"setup failed: {type(exc).__name__}: {exc}"
                print(f"  {op.name:<10} {w:>5} {name:<11} {rec.skipped}", flush=True)
                continue
        rec.device = "gpu" if runner.gpu else "cpu"
        rec.note = runner.note
        try:
            rec.times_ms = time_runner(runner, args.cpu_repeat, args.gpu_repeat, args.warmup,
                                       args.case_budget)
            out = runner.result()
        except Exception as exc:
            rec.skipped = f"run failed: {type(exc).__name__}: {exc}"
            print(f"  {op.name:<10} {w:>5} {name:<11} {rec.skipped}", flush=True)
            continue
        rec.median_ms = statistics.median(rec.times_ms)
        if name == "skimage":
            ref = reference(op, host, out)
        elif ref is None:
            ref = reference(op, host, op.reference(host))
        rec.ok, rec.max_abs_err, rec.check = _check_for(name, op, out, ref)
        rec.roofline_pct = roofline_pct(nbytes, rec.median_ms, bw[rec.device])
        flag = {True: "ok", False: "WRONG", None: "n/a"}[rec.ok]
        print(f"  {op.name:<10} {w:>5} {name:<11} {fmt_ms(rec.median_ms):>9} ms  {flag:<5} "
              f"{rec.check}", flush=True)
        del out


def _contenders(wanted: list[str]) -> tuple[dict, list[str]]:
    """name -> builder (None for the reference), and printed reasons for those skipped."""
    builders: dict = {"skimage": None}
    notes = []
    if "millipyde" in wanted:
        mp, why = try_import("millipyde")
        missing = [n for n in ("gpuimage", "backend") if mp is not None and not hasattr(mp, n)]
        if mp is None:
            notes.append(f"millipyde skipped: {why}")
        elif missing:
            notes.append(f"millipyde skipped: it has no {', '.join(missing)} yet")
        elif mp.backend() == "cudasim":
            notes.append("millipyde skipped: cudasim backend is not for timing")
        else:
            builders["millipyde"] = _mp_run
            if mp.backend() not in ("cuda", "hip"):
                builders["mp-kernel"] = _mp_kernel_run
    gpu_wanted = [c for c in ("cucim", "torchvision") if c in wanted]
    if gpu_wanted and not gpu_available():
        notes.append(f"{', '.join(gpu_wanted)} skipped: no CUDA GPU (CuPy/PyTorch see none)")
        gpu_wanted = []
    if "cucim" in gpu_wanted:
        mod, why = try_import("cucim.skimage.filters")
        if mod is not None:
            try:  # lazy_loader: the attribute access does the real import
                _ = mod.gaussian, mod.__name__
            except Exception as exc:
                mod, why = None, f"cucim.skimage.filters.gaussian: {type(exc).__name__}: {exc}"
        if mod is None:
            notes.append(f"cucim skipped: {why}")
        else:
            builders["cucim"] = cucim_run
    if "torchvision" in gpu_wanted:
        mod, why = try_import("torchvision.transforms.v2.functional")
        torch, why2 = try_import("torch")
        if mod is None or torch is None or not torch.cuda.is_available():
            notes.append(f"torchvision skipped: {why or why2 or 'torch sees no CUDA device'}")
        else:
            builders["torchvision"] = torchvision_run
    return {k: v for k, v in builders.items() if k in wanted or k == "mp-kernel"}, notes


def _print_results(cases: list[Case], names: list[str]) -> None:
    short = {"skimage": "skimage", "millipyde": "mp", "cucim": "cucim", "torchvision": "tv",
             "mp-kernel": "mp-kernel"}
    kernel_row = "mp-kernel" in names
    headers = ["op", "size"] + [f"{short[n]} ms" for n in names]
    headers += ["sk/mp"] + (["sk/mp-kernel"] if kernel_row else [])
    headers += ["cucim/mp", "mp %roof", "ok"]
    rows = []
    for c in cases:
        r = c.records

        def good(n, r=r):
            return r[n].median_ms if n in r and r[n].ok is not False else None

        cells = []
        for n in names:
            rec = r.get(n)
            cell = fmt_ms(rec.median_ms) if rec else None
            if rec and rec.ok is False:
                cell = f"{cell}!"
            elif rec and rec.ok is None and rec.median_ms is not None:
                cell = f"{cell}*"
            cells.append(cell)
        mp = good("millipyde")
        roof = r["millipyde"].roofline_pct if "millipyde" in r else None
        bad = [f"{n} {r[n].check}" for n in names if n in r and r[n].ok is False]
        ok = "WRONG: " + "; ".join(bad) if bad else "ok"
        kernel = [fmt_ratio(good("skimage"), good("mp-kernel"))] if kernel_row else []
        rows.append([c.op.name, f"{c.width}x{c.height}", *cells, fmt_ratio(good("skimage"), mp),
                     *kernel, fmt_ratio(good("cucim"), mp),
                     None if roof is None else f"{roof:.0f}%", ok])
    print_table(headers, rows, title="ops: median ms ('!' wrong result, '*' not the same "
                                     "function); ratios only between correct results")


def _label(name: str, cases: list[Case]) -> str:
    """Legend label; flags contenders with a wrong or not-comparable result among ``cases``."""
    oks = [c.records[name].ok for c in cases if name in c.records and c.records[name].median_ms]
    if False in oks:
        return f"{name} (WRONG result at some points)"
    return f"{name} (not the same function at some points)" if None in oks else name


def _plot(path, cases: list[Case], names: list[str], title: str) -> None:
    panels = []
    for op in OPS.values():
        if not op.sweep:
            continue
        series = {}
        for n in names:
            pts = [(c.width * c.height / 1e6, c.records[n].median_ms) for c in cases
                   if c.op is op and n in c.records and c.records[n].median_ms]
            if pts:
                series[_label(n, [c for c in cases if c.op is op])] = (
                    [p[0] for p in pts], [p[1] for p in pts])
        panels.append(Panel(op.name, series, xlabel="megapixels"))
    extra = [c for c in cases if not c.op.sweep]
    series = {}
    for n in names:
        pts = [(c.op.name, c.records[n].median_ms) for c in extra
               if n in c.records and c.records[n].median_ms]
        if pts:
            series[_label(n, extra)] = ([p[0] for p in pts], [p[1] for p in pts])
    if extra:
        panels.append(Panel(f"other ops at {extra[0].width}x{extra[0].height}", series,
                            kind="bar"))
    out = save_plot(path, panels, title=title)
    if out:
        print(f"plot: {out}")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench ops", description=__doc__.split("\n")[0])
    p.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    p.add_argument("--ops", nargs="+", choices=list(OPS), default=list(OPS))
    p.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    p.add_argument("--quick", action="store_true",
                   help="fewest repetitions the protocol allows (CPU 5, GPU 20; 1 warm-up)")
    p.add_argument("--skimage-max-width", type=int, default=None,
                   help="don't time scikit-image above this width (it still gives the reference)")
    p.add_argument("--cpu-repeat", type=int, default=None)
    p.add_argument("--gpu-repeat", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--case-budget", type=float, default=30.0, metavar="SECONDS",
                   help="a contender whose repetitions would take longer gets the protocol's "
                        "minimum (CPU 5, GPU 20); 0: no limit (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="JSON path (PNG beside it)")
    p.add_argument("--no-plot", action="store_true")
    a = p.parse_args(argv)
    a.cpu_repeat = max(5, a.cpu_repeat or (5 if a.quick else 7))
    a.gpu_repeat = max(20, a.gpu_repeat or (20 if a.quick else 50))
    a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 2)
    a.warmup = max(1, a.warmup)
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    builders, notes = _contenders(args.contenders)
    for n in notes:
        print(n)
    if "millipyde" in builders:
        import millipyde as mp

        print(f"millipyde {getattr(mp, '__version__', '?')} from {mp.__file__}, "
              f"backend {mp.backend()}")
    names = [n for n in CONTENDERS if n in builders]
    if "mp-kernel" in builders:
        names.insert(names.index("millipyde") + 1, "mp-kernel")
    bw = {"cpu": cpu_copy_bandwidth(), "gpu": gpu_copy_bandwidth() if gpu_available() else None}
    print(f"copy bandwidth: cpu {bw['cpu'] / 1e9:.1f} GB/s"
          + (f", gpu {bw['gpu'] / 1e12:.2f} TB/s" if bw["gpu"] else "") + " (read + written)")
    widths = sorted(set(args.widths))
    cases = []
    for w in widths:
        h = w * 4 // 3
        rgba, grey = _inputs(w, h, args.seed)
        for op in OPS.values():
            if op.name not in args.ops or (not op.sweep and w != widths[-1]):
                continue
            case = Case(op, w, h)
            _run_case(case, grey if op.grey_input else rgba, builders, args, bw)
            cases.append(case)
        del rgba, grey
    meta = environment()
    meta["args"] = vars(args)
    meta["skipped_contenders"] = notes
    backend = meta["millipyde_backend"] or ("gpu" if gpu_available() else "cpu")
    out = default_out("ops", backend) if args.out is None else args.out
    records = [r for c in cases for r in c.records.values()]
    path = write_json(out, meta, records)
    print(f"json: {path}")
    if not args.no_plot:
        title = f"millipyde ops ({backend}; {meta.get('gpu') or meta['platform']})"
        _plot(path.with_suffix(".png"), cases, names, title)
    for n in notes:
        print(n)
    _print_results(cases, names)
    wrong = [r for r in records if r.ok is False]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
