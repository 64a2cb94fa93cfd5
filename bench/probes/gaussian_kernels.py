"""The GPU Gaussian stencil kernels alone: batched as the Generator runs it, and per image.

    source bench/gpu_env.sh; MILLIPYDE_BACKEND=cuda python -m bench.probes.gaussian_kernels
    MILLIPYDE_BACKEND=cpu python -m bench.probes.gaussian_kernels --smoke  # tiny, any backend
    MILLIPYDE_BACKEND=cudasim NUMBA_ENABLE_CUDASIM=1 python -m bench.probes.gaussian_kernels --smoke

One JSON line per row:

- ``batch``: a stack of 256 512x512x3 uint8 images, every member its own sigma drawn uniform
  in (0, 2] (taps ``gaussian(sigma, reach)``, as ``random_gaussian`` records them: truncate 8,
  radius up to 16), through ``graph.exec.batch._stencil_gpu``: the call a Generator batch makes
  for its stencil (one one-pass tile launch where the tile fits). ``batch base-tile``: the
  same with the tile forced to the base geometry (``tile_geometry(sim)``, what batches took
  before they took the taller tile where it fits, as per-image launches do).
  ``batch base-tile regs=N``: that, with the kernel capped at N registers per thread
  (``tile2d.BATCH_MAX_REGISTERS``; ``--regs``): more blocks per SM where registers bound them.
  ``batch geometry=BX,BY,PX,PY,M[:REGS]`` (``--geometries``): the tile forced to that geometry
  (shared memory past 48 KB opted in by the launch), capped at REGS registers where given.
- ``kernel rgba`` / ``kernel grey``: ``stencil.run_stencil_2d`` (the per-image one-pass tile
  launch ``gaussian`` takes) on 682x512 RGBA uint8 and 8000x6000 float64 grey, sigma 2.
- ``op rgba`` / ``op grey``: ``img.gaussian(2)`` then ``_materialize()`` and a synchronize on a
  resident clone (made untimed), as ``bench ops`` times millipyde: host time included.

``kernel``/``batch`` rows on a GPU: each repetition first queues a kernel that sleeps ~20 ms,
records an event, launches, records another: the launch is queued while the GPU sleeps, so
the events time the GPU work alone, not the host's. ``queued`` is the fraction of repetitions
where the GPU was still asleep when the host had queued everything (1.0: no host time in the
median). ``op`` rows, and every row on the cpu or the simulator, take wall-clock time around the
call and a synchronize. Median of ``--reps`` (20) after one warm-up call. ``digest`` is the
output's sha256 prefix: runs of two branches compare bit for bit.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import statistics
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import gpu as codegen_gpu
from millipyde.graph.exec import batch as exec_batch
from millipyde.graph.exec import stencil, variants
from millipyde.graph.plan.schedule import full_range
from millipyde.kernels import REGISTRY

SIZES = {  # (batch members, batch h, w; RGBA h, w; grey h, w)
    "full": (256, 512, 512, (682, 512), (8000, 6000)),
    "smoke": (3, 9, 11, (7, 13), (10, 6)),
}
# sleep queued ahead of each timed launch: ~20 ms whatever the host does meanwhile
SPIN_STEPS, SPIN_NS = 200, 100_000


def _digest(buffer: Any) -> str:
    return hashlib.sha256(np.ascontiguousarray(runtime.to_host(buffer)).tobytes()).hexdigest()[:16]


class _Clock:
    """Times one call: CUDA events behind a queued sleep on ``cuda``, else the wall clock."""

    def __init__(self) -> None:
        self.gpu = mp.backend() == "cuda"
        if self.gpu:
            from numba import cuda

            @cuda.jit
            def spin(steps, ns):
                for _ in range(steps):
                    cuda.nanosleep(ns)

            self.cuda, self.spin = cuda, spin

    def __call__(self, fn: Callable[[], None]) -> tuple[float, bool]:
        """Milliseconds of ``fn`` and whether its launches were all queued before they ran."""
        if not self.gpu:
            mp.synchronize()
            t = time.perf_counter()
            fn()
            mp.synchronize()
            return (time.perf_counter() - t) * 1e3, False
        stream = runtime.current_stream()
        a, b = self.cuda.event(), self.cuda.event()
        self.spin[1, 1, stream](SPIN_STEPS, SPIN_NS)
        a.record(stream)
        fn()
        b.record(stream)
        queued = not a.query()
        b.synchronize()
        return self.cuda.event_elapsed_time(a, b), queued


def _row(name: str, clock: _Clock, fn: Callable[[], None], out: Any, reps: int,
         **extra: Any) -> None:
    fn()  # warm-up: compiles, fills the upload cache
    mp.synchronize()
    times, queued = [], 0
    for _ in range(reps):
        ms, q = clock(fn)
        times.append(ms)
        queued += q
    row = {"row": name, "backend": mp.backend(), "ms": round(statistics.median(times), 4),
           "ms_min": round(min(times), 4), "reps": reps,
           "timing": "events" if clock.gpu else "wall",
           "queued": round(queued / reps, 2) if clock.gpu else None,
           "digest": _digest(out), **extra}
    print(json.dumps(row), flush=True)


def batch_row(clock: _Clock, nb: int, h: int, w: int, reps: int,
              caps: tuple[int, ...] = (), geometries: tuple[str, ...] = ()) -> None:
    """The Generator's batched stencil: per-member sigma in (0, 2] over an (nb, h, w, 3) stack."""
    rng = np.random.default_rng(14)
    host = rng.integers(0, 256, (nb, h, w, 3), dtype=np.uint8)
    sigmas = 2.0 * (1.0 - rng.random(nb))  # uniform in (0, 2]
    taps = [REGISTRY["gaussian"].fn(s, max(h, w) - 1) for s in sigmas]
    width = max(len(t) for t in taps)
    packed = np.zeros((nb, width), dtype=np.float64)
    for j, t in enumerate(taps):
        packed[j, :len(t)] = t
    rad = np.array([len(t) // 2 for t in taps], dtype=np.int64)
    src = runtime.from_host(host, 0)
    dst = runtime.empty(host.shape, host.dtype, 0)
    args = (src, runtime.from_host(np.arange(nb, dtype=np.int64), 0), dst,
            runtime.from_host(packed, 0), runtime.from_host(rad, 0), int(rad.max()), 0)
    node = types.SimpleNamespace(dtype=np.dtype(np.uint8))  # _stencil_gpu reads its dtype

    def go() -> None:
        exec_batch._stencil_gpu(node, *args)

    extra = {"shape": list(host.shape), "max_radius": int(rad.max()),
             "one_pass": variants.stencil_2d_fits(int(rad.max()))}
    _row("batch", clock, go, dst, reps, **extra)
    # the same with the tile forced to the base geometry (as before batches took the taller
    # tile where it fits): tells the tile's share of a change from the kernel's own
    choose = codegen_gpu.tile_geometry
    with _forced(lambda sim, *_, **__: choose(sim)):
        _row("batch base-tile", clock, go, dst, reps, **extra)
    for regs in caps:
        with _forced(lambda sim, *_, **__: choose(sim), regs):
            _row(f"batch base-tile regs={regs}", clock, go, dst, reps, **extra)
    for spec in geometries:
        # ``BX,BY,PX,PY,M[:REGS]`` (shared memory past 48 KB is opted in by the launch)
        shape, _, regs = spec.partition(":")
        geometry = tuple(int(v) for v in shape.split(","))
        with _forced(lambda sim, *_, g=geometry, **__: g, int(regs) if regs else None):
            _row(f"batch geometry={spec}", clock, go, dst, reps, **extra)


@contextlib.contextmanager
def _forced(geometry: Callable[..., tuple], regs: int | None = None) -> Iterator[None]:
    """The batched tile's geometry chosen by ``geometry`` and its kernel capped at ``regs``
    registers (None: no cap) inside; the stencil's cached plans and kernels dropped on the
    way in and out (a plan keeps its geometry and kernel: ``batch_stencil._plan_2d``)."""
    from millipyde.graph.codegen import tile2d
    from millipyde.graph.exec import batch_stencil

    def drop() -> None:
        batch_stencil._plan_2d.cache_clear()
        batch_stencil._stencil_2d_fn.cache_clear()

    choose = codegen_gpu.tile_geometry
    codegen_gpu.tile_geometry = geometry
    tile2d.BATCH_MAX_REGISTERS = regs
    drop()
    try:
        yield
    finally:
        codegen_gpu.tile_geometry = choose
        tile2d.BATCH_MAX_REGISTERS = None
        drop()


def image_rows(clock: _Clock, kind: str, shape: tuple[int, ...], reps: int) -> None:
    """``run_stencil_2d`` alone, then ``gaussian(2)`` through the public API, on one image."""
    rng = np.random.default_rng(13)
    host = (rng.integers(0, 256, shape, dtype=np.uint8) if kind == "rgba"
            else rng.random(shape))
    taps = REGISTRY["gaussian"].fn(2.0, max(shape[:2]) - 1)
    radius = len(taps) // 2
    src3 = runtime.as_3d(runtime.from_host(host, 0))
    if variants.stencil_2d_fits(radius):
        dst = runtime.empty(host.shape, host.dtype, 0)
        dst3, taps_d = runtime.as_3d(dst), runtime.upload_small(taps, 0)
        is_int = host.dtype.kind in "ui"

        def kernel() -> None:
            stencil.run_stencil_2d(src3, dst3, taps_d, radius, is_int,
                                   full_range(host.dtype), 0)

        _row(f"kernel {kind}", clock, kernel, dst, reps, shape=list(shape), radius=radius,
             packed=variants.stencil_2d_packs(src3, dst3, radius))
    else:
        print(json.dumps({"row": f"kernel {kind}", "backend": mp.backend(),
                          "skipped": "no one-pass tile kernel on this backend"}), flush=True)
    base = mp.gpuimage(host)
    base._materialize()
    made: list[Any] = []

    def op() -> None:
        x = base.clone()
        x._materialize()
        mp.synchronize()
        t = time.perf_counter()
        x.gaussian(2)
        x._materialize()
        mp.synchronize()
        made[:] = [x, (time.perf_counter() - t) * 1e3]

    op()
    times = []
    for _ in range(reps):
        op()
        times.append(made[1])
    print(json.dumps({"row": f"op {kind}", "backend": mp.backend(),
                      "ms": round(statistics.median(times), 4), "ms_min": round(min(times), 4),
                      "reps": reps, "timing": "wall", "queued": None,
                      "digest": hashlib.sha256(np.asarray(made[0]).tobytes()).hexdigest()[:16],
                      "shape": list(shape)}), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (cpu, cudasim: a check)")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions (20; smoke 2)")
    ap.add_argument("--only", choices=("batch", "rgba", "grey"), action="append",
                    help="rows to run (repeatable; default all)")
    ap.add_argument("--regs", type=int, nargs="*", default=[],
                    help="register caps of extra 'batch base-tile regs=N' rows")
    ap.add_argument("--geometries", nargs="*", default=[],
                    help="extra 'batch geometry=BX,BY,PX,PY,M[:REGS]' rows: the tile forced")
    args = ap.parse_args(argv)
    nb, h, w, rgba, grey = SIZES["smoke" if args.smoke else "full"]
    reps = args.reps or (2 if args.smoke else 20)
    only = set(args.only or ("batch", "rgba", "grey"))
    clock = _Clock()
    if args.smoke and mp.backend() == "cudasim":
        # the simulator runs the GPU variants only when told (tests do the same): the smoke
        # then takes the tile kernels' launch paths, and its digests must equal the cpu's
        variants.gpu_variants_enabled = lambda: True
    if "batch" in only:
        batch_row(clock, nb, h, w, reps, tuple(args.regs), tuple(args.geometries))
    if "rgba" in only:
        image_rows(clock, "rgba", (*rgba, 4), reps)
    if "grey" in only:
        image_rows(clock, "grey", grey, reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
