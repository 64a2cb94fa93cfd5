"""A streamed Generator's batches through the batch engine (sources of ``millipyde.data``).

A :class:`Stream` is what a Generator over a folder, paths, shards or a COCO source keeps: its
source and sampler, the decode choice, the bad samples met, and what it works out once for the
batch engine. Each iterator of the Generator (``batches()``, ``next()``) gets its own
:class:`~millipyde.data.loader.Loader`, which reads and decodes its batches ahead.

A decoded batch's samples are, for that batch, the inputs of the engine's arena gathers
(``batch_arena``): :meth:`Stream.arena` packs them into one flat buffer per dtype (one batched
device copy, no host copy; none where the decoder left the whole batch in one allocation,
which is then the arena) and returns a recorder over them, so a batch of mixed-size
photographs is one launch per kernel of the chain, as for resident inputs. Samples whose input
kind fails to record the chain cleanly, and chains the arena does not take, go the per-output
way (:func:`images_of` wraps decoded buffers as gpuimages, without a copy).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..data import process
from ..data.decode import as_buffer, make_decoder, one_allocation
from ..data.loader import BadSamples, DecodedBatch, Loader
from ..data.process import ProcessLoader
from ..data.readahead import READ_THREADS, WINDOW_BYTES
from ..image import gpuimage
from . import batch_arena, region_plan

#: a batch decoded whole into one allocation (``data.decode.one_allocation``) is the arena of
#: its gathers as it lies, instead of being packed into a new one (one batched copy and a
#: Python pass per sample); False: always packed (the bench's A/B). Read per batch.
ARENA_IN_PLACE = True


class Stream:
    """A Generator's streamed source and what its iterators share (see the module doc).

    Parameters
    ----------
    source : millipyde.data.Source
    sampler : millipyde.data.EpochSampler
    operations : list of Operation
    seed : int
    decoder : str
        ``"auto"``, ``"pillow"`` or ``"nvimgcodec"`` (``data.decode.make_decoder``).
    strict : bool
        A bad sample raises instead of being skipped.
    read_threads, window : int
        The read-ahead's threads and bound in bytes.
    decode_process : bool or None
        Read and decode in a worker process (``data.process``); None: the environment's or
        the default choice (``data.process.use_process``).
    """

    def __init__(self, source: Any, sampler: Any, operations: list, seed: int,
                 decoder: str = "auto", strict: bool = False, read_threads: int = READ_THREADS,
                 window: int = WINDOW_BYTES, decode_process: bool | None = None) -> None:
        self.source, self.sampler = source, sampler
        self.operations, self.seed = operations, seed
        self.decoder, self.strict = decoder, strict
        self.read_threads, self.window = read_threads, window
        self.decode_process = process.use_process(decode_process)
        self.bad = BadSamples()
        self.steps = batch_arena.arena_steps(operations) if not source.has_targets else None
        #: the first op's regions (``region_plan``): decoded (or kept) instead of whole samples
        self.region = region_plan.plan_of(operations, seed, source.has_targets)
        self._clean: dict[tuple, bool] = {}
        self._one_gather: bool | None = None
        self._lock = threading.Lock()

    def loader(self, plan: Any, device: int, first: int = 0) -> Loader | ProcessLoader:
        """A Loader of ``plan``'s batches from batch ``first`` on, decoding on ``device`` (in a
        worker process where ``decode_process``)."""
        if self.decode_process:
            s = self.sampler
            return ProcessLoader(self.source, s, plan, self.decoder, device, self.bad,
                                 strict=self.strict, threads=self.read_threads,
                                 window=self.window, first=first,
                                 name=f"{self.source!r} (rank {s.rank} of {s.world})",
                                 region=self.region)
        return Loader(self.source, self.sampler, plan,
                      make_decoder(self.decoder, device),
                      device, self.bad, strict=self.strict, threads=self.read_threads,
                      window=self.window, first=first, region=self.region)

    def arena(self, db: DecodedBatch, device: int) -> tuple[Any, list[int]] | None:
        """A recorder over ``db``'s samples, with their arena packed on ``device``, and the
        batch rows it leaves (their kind does not record the chain cleanly); None where the
        chain needs the per-output path."""
        if self.steps is None:
            return None
        arrays = db.arrays
        regions = db.regions
        keys, firsts, inverse = kinds_of(db)
        ok_of = []
        for key, r in zip(keys, firsts, strict=True):
            ok = self._clean.get(key)
            if ok is None:
                a = arrays[r]
                x = gpuimage.from_buffer(as_buffer(a), device)
                if regions is not None:
                    x._region = regions[r].copy()
                ok = a.ndim in (2, 3) and batch_arena.records_cleanly(x, self.operations,
                                                                      self.seed)
                with self._lock:
                    self._clean[key] = ok
            ok_of.append(ok)
        left = np.flatnonzero(~np.asarray(ok_of, dtype=bool)[inverse]).tolist()
        # a batch the C decoder decoded whole is laid out in one allocation already: that
        # allocation is the arena (no copy, no per-sample layout in Python)
        shared = one_allocation(arrays, db.layout) if ARENA_IN_PLACE else None
        layout = None if shared is None else (shared[2], "|u1", shared[1],
                                              int(shared[0].size))
        rec = batch_arena.ArenaRecorder(SimpleNamespace(inputs=arrays, seed=self.seed,
                                                        region=db.regions),
                                        self.steps, layout)
        if self._one_gather is None:
            k = db.ks[:1]
            self._one_gather = plans_ok = batch_arena.plans_one_gather(rec, k, np.zeros(1, int))
            if not plans_ok:
                self.steps = None
                return None
        if shared is not None:
            batch_arena.given_arena(rec, shared[0], device)
        else:
            batch_arena.pack(rec, arrays, device)
        return rec, left


def kinds_of(db: DecodedBatch) -> tuple[list[tuple], list[int], np.ndarray]:
    """The kinds of ``db``'s rows that say whether a row records the chain cleanly: its
    sample's whole shape (a region's first op is drawn on its whole sample, so regions of
    one sample size share the answer) and dtype. Returns the distinct kinds ``(shape,
    dtype str)`` in the order first met, the row each is first met at, and per row the
    index of its kind. A batch with the C decoder's layout (``db.layout``: every row an
    (h, w, 3) uint8 image of one allocation) is read from its arrays, no pass over the
    images."""
    n = len(db.arrays)
    if db.layout is not None and n:
        hw = db.layout[2][:, :2] if db.regions is None else db.regions[:, 2:4]
        _, firsts, inverse = np.unique(np.asarray(hw, np.int64), axis=0, return_index=True,
                                       return_inverse=True)
        order = np.argsort(firsts, kind="stable")  # the kinds in the order first met
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order))
        firsts = firsts[order].tolist()
        keys = [((int(hw[r, 0]), int(hw[r, 1]), 3), "|u1") for r in firsts]
        return keys, firsts, rank[inverse.reshape(-1)]
    index: dict[tuple, int] = {}
    firsts: list[int] = []
    inverse = [0] * n
    hw = None if db.regions is None else db.regions[:, 2:4].tolist()
    for r, a in enumerate(db.arrays):
        whole = tuple(a.shape) if hw is None else (*hw[r], *a.shape[2:])
        key = (whole, np.dtype(a.dtype).str)
        u = index.get(key)
        if u is None:
            u = index[key] = len(firsts)
            firsts.append(r)
        inverse[r] = u
    return list(index), firsts, np.asarray(inverse, dtype=np.int64)


def images_of(db: DecodedBatch, rows: list[int], device: int) -> list[gpuimage]:
    """The decoded samples at ``rows`` as gpuimages over their buffers (no copy), with their
    detection targets attached where the source has them."""
    out = []
    for r in rows:
        img = gpuimage.from_buffer(as_buffer(db.arrays[r]), device)
        if db.regions is not None:  # its first op drawn on the whole sample (image.py)
            img._region = db.regions[r].copy()
        if db.targets is not None and db.targets[r] is not None:
            t = db.targets[r]
            img.set_targets(boxes=t["boxes"], labels=t["labels"], mask=t["mask"])
        out.append(img)
    return out
