"""The cuda backend's host path of a recorded batch, on a machine without a GPU (driver faked).

    MILLIPYDE_BACKEND=cpu python bench/probes/batch_host_gpu.py [--size 256] [--batches 20]
        [--repeat 5] [--profile] [--sort tottime] [--fresh]

``batch_host.py --full`` runs ``Batches._write_recorded`` on the cpu backend, whose arrays,
views and launches are not the cuda backend's: on an H200 the same batch makes about twice its
Python calls (bench/RESULTS.md). Here the active backend object becomes a ``CudaBackend`` whose
driver-facing ends are stand-ins: CuPy's pool hands out addresses (``_FakeCupy``), the pinned
pack ring copies into host memory, a kernel's first launch builds its driver template from the
argument types instead of compiling it (``rawlaunch.build``), and ``cuLaunchKernel`` /
``cuLaunchKernelEx`` return at once. Everything between (``upload_parts``' views, ``reshape``,
``empty``, the cached launch path, ``launch_args``, the fused writer, ``_finish``) is the cuda
backend's own code, so the call counts and their shares are what the GPU's host runs; the
times are this machine's and miss the driver's own (~4-6 us per launch on an H200).
Figure-5.1 operations on six 512x512 RGB inputs, batches of ``--size``, one Generator: batch 0
records the templates ahead (untimed), batches 1 .. ``--batches`` are timed.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import pstats
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


class _Ctx:
    """A context manager that does nothing (CuPy's device and stream scopes)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


class _Block:
    """A CuPy pool block: an address."""

    _next = itertools.count(1 << 32, 1 << 20)

    def __init__(self, nbytes: int) -> None:
        self.ptr = next(self._next)


class _FakeCupy:
    """What ``pool.CupyPool`` calls of CuPy."""

    class cuda:  # noqa: N801 - CuPy's module name
        _null = _Ctx()

        class Stream:
            null = None

        @staticmethod
        def Device(device: int) -> _Ctx:  # noqa: N802 - CuPy's name
            return _Ctx()

        @staticmethod
        def ExternalStream(handle: int) -> _Ctx:  # noqa: N802 - CuPy's name
            return _Ctx()

        @staticmethod
        def alloc(nbytes: int) -> _Block:
            return _Block(nbytes)

        @staticmethod
        def get_current_stream() -> Any:
            return _FakeCupy.cuda.Stream.null


_FakeCupy.cuda.Stream.null = _Ctx()


class _Lib:
    """The driver library: launches return at once."""

    @staticmethod
    def cuLaunchKernel(*args: Any) -> int:  # noqa: N802 - the driver's name
        # function, grid (3), block (3), shared bytes, stream, parameters, extra: as ctypes
        # checks the real one's arity (a 2-D block passed through once failed only on a GPU)
        if len(args) != 11:
            raise TypeError(f"cuLaunchKernel takes 11 arguments ({len(args)} given)")
        return 0

    @staticmethod
    def cuLaunchKernelEx(*args: Any) -> int:  # noqa: N802 - the driver's name
        return 0

    @staticmethod
    def cuCtxGetCurrent(ref: Any) -> int:  # noqa: N802 - the driver's name
        return 0


class _Ring:
    """The pinned pack ring: the host copy into its slot, no driver copy."""

    def __init__(self, slot_bytes: int) -> None:
        self.slot_bytes = slot_bytes
        self._host = np.empty(slot_bytes, dtype=np.uint8)

    def copy_parts(self, dst: Any, parts: list, nbytes: int, stream: Any) -> None:
        from millipyde.backend.staging import put

        for at, a in parts:
            put(self._host, at, a)


class _Stream:
    handle = None

    def synchronize(self) -> None:
        return None


class _Event:
    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None


def _fake_cuda(runtime: Any) -> None:
    """Turn the active backend object into a ``CudaBackend`` with faked driver ends."""
    from numba import typeof

    from millipyde.backend import launcher, rawlaunch
    from millipyde.backend.cuda import CudaBackend
    from millipyde.backend.pool import CupyPool

    class FakeCuda(CudaBackend):
        name = "cuda"
        simulated = False

        def _context(self, device: int) -> Any:
            return None

        def _is_current(self, device: int) -> bool:
            return True

        def from_host(self, array: np.ndarray, device: int) -> Any:
            return self.empty(np.shape(array), np.asarray(array).dtype, device)

        def to_host(self, buffer: Any) -> np.ndarray:
            return np.zeros(buffer.shape, buffer.dtype)

        def synchronize(self, device: int | None = None) -> None:
            return None

        def current_stream(self) -> Any:
            if getattr(self._tls, "device", None) is None and \
                    getattr(self._tls, "stream", None) is None:
                return self._default_streams[0]  # (numba-cuda's default stream object)
            return super().current_stream()

        def record_event(self, stream: Any = None) -> Any:
            return _Event()

        def new_stream(self, device: int) -> Any:
            return self._default_streams[device]

        def shared_limit(self, device: int) -> int:
            return 227 * 1024

        def _pack_ring(self, device: int, nbytes: int) -> Any:
            ring = self.__dict__.get("_fake_ring")
            if ring is None or ring.slot_bytes < nbytes:
                ring = self.__dict__["_fake_ring"] = _Ring(max(nbytes, 1 << 20))
            return ring

        def _launch(self, kernel: Any, device: int, args: tuple, *config: Any) -> None:
            if self._recorded(kernel, device, args):
                return
            shared = config[3] if len(config) > 3 else 0
            if launcher.launch(kernel, device, args, *config[:3], shared):
                return
            # first launch: the driver template from the argument types, nothing compiled
            kinds = launcher.kind_key(args)
            types = tuple(getattr(a, "_numba_type_", None) or typeof(a) for a in args)
            entry = (None, (), 227 * 1024, rawlaunch.build(1, types))
            launcher._entries[(id(kernel), device, kinds)] = (weakref.ref(kernel), entry)
            launcher.launch(kernel, device, args, *config[:3], shared)

    fresh = CudaBackend.__new__(FakeCuda)
    CudaBackend.__init__(fresh)
    runtime.__class__ = FakeCuda
    runtime.__dict__.update(fresh.__dict__)
    runtime._pool = CupyPool(_FakeCupy)
    runtime._default_streams[0] = _Stream()
    runtime._tls = threading.local()
    rawlaunch._libcuda = _Lib()


def _fresh(batch: Any, args: argparse.Namespace) -> int:
    """``--fresh``: batches 1 .. repeat x batches, each once; per batch its thread CPU."""
    from millipyde.backend import pool

    n, times = args.batches * args.repeat, []
    layouts = len(pool.LAYOUTS._protos)
    for b in range(1, 1 + n):
        c0 = time.thread_time()
        batch(b)
        times.append(time.thread_time() - c0)
    layouts = len(pool.LAYOUTS._protos) - layouts
    prof = cProfile.Profile()
    prof.enable()
    for b in range(1 + n, 1 + n + args.batches):
        batch(b)
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"cuda host path (driver faked), fresh batches of {args.size}: thread CPU median "
          f"{np.median(times) * 1e3:.3f} ms, quartiles {np.percentile(times, 25) * 1e3:.3f} / "
          f"{np.percentile(times, 75) * 1e3:.3f} ms over {n} batches; new layouts per batch "
          f"{layouts / n:.2f}; python calls per batch {stats.total_calls / args.batches:,.0f}")
    if args.profile:
        stats.sort_stats(args.sort).print_stats(args.lines)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--px", type=int, default=512)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--fresh", action="store_true",
                    help="every timed batch new outputs (as bench_batches and "
                         "generator_breakdown make them: new group sizes, new layouts); "
                         "the median batch's thread CPU")
    ap.add_argument("--lines", type=int, default=40)
    args = ap.parse_args(argv)

    import millipyde as mp
    from millipyde.backend import ACTIVE as runtime

    if mp.backend() != "cpu":
        raise SystemExit("run with MILLIPYDE_BACKEND=cpu: the probe fakes the cuda backend")
    _fake_cuda(runtime)
    from bench.bench_batches import operations
    from millipyde.training import batches
    from millipyde.training.batch_convert import BatchSpec

    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, (args.px, args.px, 3), dtype=np.uint8))
            for _ in range(6)]
    gen = mp.Generator(imgs, operations(), seed=0)
    st = gen._state
    nodes = [x._node for x in st.inputs]
    for x in st.inputs:
        x._materialize()
    stack = runtime.empty((len(nodes), *nodes[0].shape), nodes[0].dtype, 0)
    st.stacks[0] = {n.id: (stack, i) for i, n in enumerate(nodes)}
    st.stacked_nodes[0] = nodes
    spec = BatchSpec.check(args.size, None, "NCHW", "float32", None, None, 3, False, False)
    runner = batches.Batches(gen, spec, [0])
    rec = batches.recorder(st)
    stream = runtime._default_streams[0]
    n = args.size

    def batch(b: int) -> None:  # as generator_breakdown --recorded calls it
        runner._write_recorded(rec, list(range(b * n, (b + 1) * n)), 0, stream)

    t0 = time.perf_counter()
    batch(0)
    print(f"batch 0 (templates ahead): {(time.perf_counter() - t0) * 1e3:.1f} ms")
    if args.fresh:
        return _fresh(batch, args)
    best = cpu = float("inf")
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.thread_time()
        for b in range(1, 1 + args.batches):
            batch(b)
        best = min(best, (time.perf_counter() - t0) / args.batches)
        # this thread's CPU time: what the batch costs, whatever else runs on the machine
        cpu = min(cpu, (time.thread_time() - c0) / args.batches)
    prof = cProfile.Profile()
    prof.enable()
    for b in range(1, 1 + args.batches):
        batch(b)
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"cuda host path (driver faked), batch of {n}: {best * 1e3:.3f} ms per batch, "
          f"thread CPU {cpu * 1e3:.3f} ms (best of {args.repeat} x {args.batches}); python "
          f"calls per batch "
          f"{stats.total_calls / args.batches:,.0f}")
    if args.profile:
        stats.sort_stats(args.sort).print_stats(args.lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
