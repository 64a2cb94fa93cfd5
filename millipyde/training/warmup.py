"""Compile ahead of a training run: every kernel a chain of Operations needs, in parallel.

The kernels of a Generator depend on the structure its coins give an output (which gated
Operations ran, where that changes the plan), never on the seed or the drawn values. Warming
up finds, with the vectorised draws, one output index per coin pattern and makes those
outputs once: through ``Generator.batches`` (recorded at once, the fused batch writer) and
through the Generator's own batched path. Worker processes each take a share of the patterns;
they share the disk cache (``MILLIPYDE_CACHE_DIR``: generated sources, Numba's cache files),
so a later process, or a second Generator with another seed, compiles nothing.

A pattern whose batches fall back to one output at a time (a rotation needing scikit-image's
data-dependent clip, about one output in a thousand on 512x512) is not warmed: its first
output compiles the per-image kernels then.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import random as mprandom

#: Output indices searched for one representative of each coin pattern.
SEARCH = 1 << 16


def compiled_count() -> int:
    """Kernels compiled in this process (Numba's cache misses of every generated kernel;
    loading from the disk cache is no compile). Dispatchers without cache statistics count
    their specializations."""
    from numba.core.caching import NullCache

    from ..graph.codegen import loader

    n = 0
    for mod in list(loader.LOADED.values()):
        for value in vars(mod).values():
            if isinstance(getattr(value, "_cache", None), NullCache):
                # a device function (``_dev``, uncached): compiled only with a kernel that calls
                # it, which counts
                continue
            misses = getattr(value, "_cache_misses", None)
            if misses is not None:
                n += sum(misses.values())
                continue
            overloads = getattr(value, "overloads", None)
            if isinstance(overloads, dict):
                n += len(overloads)
    return n


def representatives(operations: list, seed: int = 0, search: int = SEARCH,
                    shape: tuple[int, ...] | None = None) -> list[int]:
    """One output index per coin pattern of ``operations`` (zero sigmas included).

    With the input ``shape``, also one per pattern and random rotation whose angle needs
    scikit-image's data-dependent clip (their batches' clipped groups plan other kernels), for
    the input's orientation and its transpose.
    """
    from ..kernels import REGISTRY
    from ..ops import FORMS
    from . import batch_math, batch_ops

    ks = np.arange(search, dtype=np.int64)
    coins = np.stack([mprandom.gate_array(seed, ks, j, op.probability)
                      for j, op in enumerate(operations)], axis=1) if operations else \
        np.ones((search, 0), dtype=bool)
    bits = [coins]
    for j, op in enumerate(operations):
        form = FORMS.get(op.method)
        if form is not None and form.template and form.skips:
            (lo, hi) = _parse(form, op)[0]
            s = lo + (hi - lo) * mprandom.uniform01_array(seed, ks, j, 0) if lo != hi else \
                np.full(search, lo)
            bits.append(((s > 0) & coins[:, j])[:, None])
    from ..augmix import AugMix
    from ..policies import Policy

    for j, op in enumerate(operations):
        if isinstance(op, Policy):  # one output per batch structure of the policy
            bits.append(op.geometric_count(
                lambda t, j=j: mprandom.uniform01_array(seed, ks, j, t), search)[:, None])
            # (and per member drawing a neighbourhood entry or not, where it splits them)
            bits.append(batch_ops.PolicyStep(op).apart(batch_ops.Ctx(seed, ks, j))[:, None])
        elif isinstance(op, AugMix):
            # one output per set of structures its chains draw (a batch forks into one gather
            # per structure, ``batch_augmix``): chain i's draw t is the op's draw base_i + t
            drawn = np.zeros(search, dtype=np.int64)
            for i in range(op.mixture_width):
                base = op.chain.chain_base(i)
                drawn |= 1 << op.chain.geometric_count(
                    lambda t, j=j, base=base: mprandom.uniform01_array(seed, ks, j, base + t),
                    search)
            bits.append(drawn[:, None])
    pats = np.concatenate(bits, axis=1)
    _, first = np.unique(pats, axis=0, return_index=True)
    found = set(first.tolist())
    for j, op in enumerate(operations if shape is not None else ()):
        form = FORMS.get(op.method)
        spec = None if form is None else REGISTRY[form.kernel]
        if not (form is not None and form.template and form.random and spec.kind == "sampler"
                and spec.mode == "constant"):
            continue
        (lo, hi) = _parse(form, op)[0]
        angle = lo + (hi - lo) * mprandom.uniform01_array(seed, ks, j, 0) if lo != hi else \
            np.full(search, lo)
        for h, w in {tuple(shape[:2]), tuple(shape[1::-1])}:
            maps = batch_math.sampler_maps(spec, h, w, angle[:, None])
            clip = coins[:, j] & batch_math.warp_clips(maps, (h, w), (h, w))
            rows = np.flatnonzero(clip)
            if len(rows):
                _, f = np.unique(pats[rows], axis=0, return_index=True)
                found.update(rows[f].tolist())
    return sorted(found)


def _parse(form: Any, op: Any) -> Any:
    """A template form's parsed arguments (its draw ranges; the image kind does not enter a
    random template form's ranges)."""
    from ..ops.base import kind_for

    return form.parse(kind_for(3, np.uint8), *op.args, **op.kwargs)


def _spec(op: Any) -> Any:
    """What a warmup worker rebuilds ``op`` from. An Operation that is its own function (a
    policy, AugMix, ``compose``'s choices; each pickles by its arguments) travels as itself:
    rebuilt as an Operation calling it, it would be warmed as a plain callable (another
    recorder, other kernels)."""
    if op.function is op:
        return op
    return (op.method or op.function, op.args, op.kwargs, op.probability)


def _operations(specs: list) -> list:
    from ..operation import Operation

    return [s if isinstance(s, Operation) else Operation.rebuild(*s) for s in specs]


def warm(specs: list[tuple], shape: tuple[int, ...], share: tuple[int, int] = (0, 1),
         size: int = 256, channels: int = 3, layout: str = "NCHW") -> dict:
    """In this process: make the outputs of this ``share`` of the patterns (see module doc).

    Returns the patterns warmed, the compilations and the seconds it took.
    """
    import millipyde as mp

    t0 = time.perf_counter()
    before = compiled_count()
    ops = _operations(specs)
    rng = np.random.default_rng(0)
    imgs = [mp.gpuimage(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in range(2)]
    ks = representatives(ops, shape=shape)[share[0]::share[1]]
    make_patterns(imgs, ops, ks, size, channels, layout)
    return {"patterns": len(ks), "compiled": compiled_count() - before,
            "seconds": time.perf_counter() - t0}


def make_patterns(imgs: list, ops: list, ks: list[int], size: int, channels: int,
                  layout: str, spec: Any = None,
                  phase: Callable[[str], None] | None = None, outputs: bool = True) -> None:
    """Outputs ``ks`` of a seed-0 Generator of ``ops`` on ``imgs``, through ``batches``' fused
    writer and the Generator's own batched path (every kernel either may launch).

    ``spec``: the ``BatchSpec`` of the batches to come (its size capped at ``len(ks)``);
    default float32 batches of ``size``, ``channels`` and ``layout``. ``phase`` is told
    ``"batches"`` before the fused writer's work and ``"outputs"`` before the Generator's
    own (``precompile`` reports when each one's kernels were ready). ``outputs=False`` makes
    only the batches (what ``Generator.batches`` launches: the samples its recorder leaves
    go through the per-output path inside them), not ``next()``'s own outputs.
    """
    import dataclasses

    import millipyde as mp

    from ..backend import ACTIVE
    from ..workers import sync
    from . import batches
    from .batches import BatchSpec

    tell = phase or (lambda name: None)
    gen = mp.Generator(imgs, ops, seed=0)
    st = gen._state
    device = gen.device
    n = max(1, min(size if spec is None else spec.size, len(ks) or 1))
    if spec is None:
        spec = BatchSpec.check(n, None, layout, "float32", None, None, channels, False, False)
    else:
        spec = dataclasses.replace(spec, size=n)
    stream = ACTIVE.new_stream(device)
    runner = batches.Batches(gen, spec, [device])
    try:
        for i in range(0, len(ks), spec.size):
            chunk = ks[i:i + spec.size]
            tell("batches")
            try:
                # the route the batches take (recorded at once, arena gathers, per output)
                value, ready = runner._make_outputs(st, chunk, device, stream)
                if ready is not None:
                    ready.synchronize()
            except ValueError:
                pass  # samples of several shapes: batches need shape=, the kernels are made
            if not outputs:
                continue
            tell("outputs")
            for _, err in st.make_many(chunk, device, stream):
                if err is not None:
                    raise err
            sync(stream)
    finally:
        gen.close()


def warmup(operations: list, shape: tuple[int, ...] = (512, 512, 3), *, size: int = 256,
           channels: int = 3, layout: str = "NCHW", processes: int | None = None) -> dict:
    """Compile every kernel ``operations`` need on ``shape`` uint8 inputs into the disk cache.

    Parameters
    ----------
    operations : list of Operation
    shape : tuple of int
        Input shape (h, w) or (h, w, 3|4).
    size, channels, layout
        As in ``Generator.batches`` (the fused batch writer depends on them).
    processes : int, optional
        Worker processes (spawned; default: CPU count, at most one per 4 patterns). Callable
        Operations that cannot be pickled warm in this process.

    Returns
    -------
    dict
        ``patterns``, ``compiled`` (summed over processes), ``processes``, ``seconds``.
    """
    import pickle

    t0 = time.perf_counter()
    specs = [_spec(op) for op in operations]
    n = len(representatives(operations, shape=tuple(int(v) for v in shape)))
    if processes is None:
        processes = max(1, min(os.cpu_count() or 1, -(-n // 4)))
    try:
        pickle.dumps(specs)
    except Exception:
        processes = 1
    shape = tuple(int(v) for v in shape)
    if processes <= 1:
        got = [warm(specs, shape, (0, 1), size, channels, layout)]
    else:
        got = _in_workers(specs, shape, processes, size, channels, layout)
    return {"patterns": sum(g["patterns"] for g in got),
            "compiled": sum(g["compiled"] for g in got), "processes": processes,
            "seconds": time.perf_counter() - t0}


def _in_workers(specs: list, shape: tuple[int, ...], processes: int, size: int, channels: int,
                layout: str) -> list[dict]:
    """:func:`warm`'s shares in ``processes`` spawned workers. A worker that dies (a crash in
    a compiler or a driver, killed for memory) does not end the warm-up: a warning names it,
    and the shares it left are warmed in this process (the kernels the others compiled are in
    the shared disk cache)."""
    import warnings

    ctx = multiprocessing.get_context("spawn")
    got: list[dict | None] = [None] * processes
    with cf.ProcessPoolExecutor(processes, mp_context=ctx) as pool:
        futs = [pool.submit(warm, specs, shape, (i, processes), size, channels, layout)
                for i in range(processes)]
        broken = None
        for i, f in enumerate(futs):
            try:
                got[i] = f.result()
            except cf.process.BrokenProcessPool as err:
                broken = err
    if broken is not None:
        left = sum(g is None for g in got)
        warnings.warn(f"warmup: a worker process died ({broken}); warming the {left} "
                      f"share(s) of {processes} it left in this process", RuntimeWarning,
                      stacklevel=3)
    for j in range(processes):
        if got[j] is None:
            got[j] = warm(specs, shape, (j, processes), size, channels, layout)
    return got  # type: ignore[return-value]
