"""Decoded batches of a rank's outputs: read ahead, decoded ahead, bad samples refilled.

A :class:`Loader` serves one iterator of a Generator (a ``batches()`` stream, or ``next()``'s
outputs): ``plan(b)`` gives the output indices of its batch ``b`` (None past the end), the
sampler which sample each output shows. A :class:`~millipyde.data.readahead.ReadAhead` reads
the samples' bytes in that order; decode lanes (threads: :data:`DECODE_LANES` where the
decoder can make another of its kind, else one) decode whole batches (``decode.py``) up to
:data:`AHEAD` batches ahead of :meth:`Loader.get` (read when the Loader is made), each on its
own stream of the device, so decoding overlaps the augmentation of the batch before.

A sample that cannot be read or decoded is a bad sample: counted in :class:`BadSamples` (named
once in a warning, in the consumer's thread), remembered so it is not decoded again, and its
place is taken by the next sample of the same rank's share of the epoch that decodes
(``EpochSampler.refills``), keeping that output's random draws: every rank still makes exactly
its share, whatever files are bad, and the choice depends only on which files are bad, so a
resumed run refills alike. ``strict=True`` raises :class:`BadSampleError` instead. A refill tries
at most ``MAX_REFILLS`` samples that were not known to be bad; nothing is retried forever.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import ACTIVE as runtime
from . import region as region_mod
from .laps import Laps
from .readahead import READ_THREADS, WINDOW_BYTES, ReadAhead
from .region import crop_host

#: decoded batches kept ready ahead of the consumer (at least one per decode lane); read
#: when a Loader is made
AHEAD = 2
#: decode lanes of a Loader whose decoder can make another of its kind (``another()``:
#: nvImageCodec's C decoder): each lane a thread with its own decoder and stream, lane ``j``
#: decoding batches ``first + j``, ``first + j + lanes``, ...; lanes take their samples from
#: the read-ahead in batch order, one at a time, and decode concurrently, so one lane's
#: Python between calls (the take, the views, the refills) and its call's start and end
#: overlap the other's call. On one H200 (bench/RESULTS.md, "Datasets: decode lanes"), two
#: lanes fed the ImageNet recipe 1.34-1.61x one lane's rate in three alternated rounds in the
#: training process, 1.37x through a decode worker; three lanes less than two. Read when a
#: Loader is made.
DECODE_LANES = 2
#: samples tried (not known bad) to refill one bad sample
MAX_REFILLS = 64
#: the interpreter's thread switch interval (seconds) while a Loader runs. A C call that
#: releases the GIL (nvImageCodec releases it per image, twice, inside one batched decode)
#: waits up to the switch interval to take it back from the Python threads beside it (the
#: readers, the batch worker, the consumer); CPython's default of 5 ms stretched a 10.9 ms
#: decode of 256 images to 38 ms in the pipeline (bench/RESULTS.md, datasets). Restored when
#: the last Loader closes.
SWITCH_INTERVAL = 0.0002

#: nvImageCodec's code streams made and checked in the reader threads (files mapped by
#: nvImageCodec itself, ``decode.nvimgcodec_reader``) instead of in the decode thread before
#: its decode call. Off: on one H200 (bench/RESULTS.md, "the read path without Python per
#: file") it left the decode call inside the pipeline as slow (38-44 ms a batch of 256
#: against 8.6 alone) and shards 18% slower; kept to be measured again (bench_data.py gpu
#: --variants). Read when a Loader is made.
PARSE_IN_READERS = False

#: the read-ahead's threads start no new read while the decode thread is inside its decode
#: call (``ReadAhead.held_back``). nvImageCodec's batched call takes the GIL back many times
#: (about twice an image); each time another thread runs Python it waits up to the switch
#: interval. On one H200, 30 batches of 256 decoded alone took 12.2 ms a batch, 36.7 beside
#: 2 reading threads, 97 beside 8, 34.6 beside one thread running Python half the time
#: (bench/RESULTS.md, "the decode call inside the pipeline"); each batch taken frees room
#: for 256 samples, which the readers otherwise read during the call. Read per batch.
HOLD_READERS = True
#: batches of samples the readers still read ahead of the takes while they are held back
#: (``ReadAhead.held_back``'s ``stock``, in batches of the batch being taken). Two lanes hold
#: the readers back nearly all the time, so with none each take found its samples unread,
#: ended the hold and waited for them: on one H200 inside the folder -> ImageNet recipe ->
#: torch pipeline the take was 1.4-2.3 ms a batch of 256, 0.31-0.34 of it the lane's CPU
#: (bench/RESULTS.md, "a lane call's segments inside the data pipeline"). 0: none. Read per
#: batch.
HOLD_STOCK_BATCHES = 2

#: the decode thread's stream does not wait for the legacy default stream (where the batch
#: engine's kernels and torch's work go) nor makes it wait: nvImageCodec's work on it is
#: otherwise ordered behind every kernel queued there before it. Read when a Loader starts.
NONBLOCKING_STREAM = False

#: while a Loader runs, its device's stream-ordered memory pool (nvImageCodec's decoded
#: images come from ``cudaMallocAsync`` on the decode stream) keeps up to this many bytes of
#: free memory across synchronisations instead of the driver's 0 (which gives it all back at
#: each one, to be mapped again for the next batch); restored when the device's last Loader
#: closes. 0: left as it is. Read when a Loader starts.
POOL_KEEP_BYTES = 0

#: time each decode lane call by its segments (``data.laps``: taking the samples, the
#: decoder's parse, region boxes, allocation, decode and views, the refills, ...) into
#: :attr:`Loader.stats` (``seg_<name>_s`` wall, ``seg_<name>_cpu_s`` the lane thread's CPU,
#: ``seg_regains`` / ``seg_regain_s`` the waits for the GIL after GIL-free passes). Off: no
#: timing beyond the stats' four sums. Read when a Loader is made; a decode worker process
#: gets this process's value.
SEGMENTS = False

_switch_lock = threading.Lock()
_switch: dict[str, Any] = {"loaders": 0, "saved": None, "pools": {}}


def _enter_streaming() -> None:
    with _switch_lock:
        if _switch["loaders"] == 0:
            saved = sys.getswitchinterval()
            if saved > SWITCH_INTERVAL:
                _switch["saved"] = saved
                sys.setswitchinterval(SWITCH_INTERVAL)
        _switch["loaders"] += 1


def _leave_streaming() -> None:
    with _switch_lock:
        _switch["loaders"] -= 1
        if _switch["loaders"] == 0 and _switch["saved"] is not None:
            sys.setswitchinterval(_switch["saved"])
            _switch["saved"] = None


def _keep_pool(device: int) -> bool:
    """Raise ``device``'s pool release threshold to :data:`POOL_KEEP_BYTES` (counted per
    device); whether this Loader holds a count to give back."""
    if POOL_KEEP_BYTES <= 0:
        return False
    with _switch_lock:
        held = _switch["pools"].get(device)
        if held is None:
            old = runtime.pool_release_threshold(device)
            if old is None:
                return False
            if old < POOL_KEEP_BYTES:
                runtime.pool_release_threshold(device, POOL_KEEP_BYTES)
            held = _switch["pools"][device] = [0, old]
        held[0] += 1
    return True


def _release_pool(device: int) -> None:
    with _switch_lock:
        held = _switch["pools"].get(device)
        if held is None:
            return
        held[0] -= 1
        if held[0] == 0:
            del _switch["pools"][device]
            runtime.pool_release_threshold(device, held[1])


class BadSampleError(ValueError):
    """A sample could not be read or decoded (``strict=True``), or no sample of the rank's
    share could take a bad one's place; the message names the file(s)."""


class BadSamples:
    """The bad samples one Generator met: each named once in a warning, all counted.

    Attributes
    ----------
    names : dict of str to str
        File (or ``shard:member``) to why it was skipped, in the order met.
    skipped : int
        Outputs whose sample was replaced (a file met twice counts twice).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: dict[str, str] = {}
        self.known: set[int] = set()
        self.skipped = 0
        self._warned = 0

    def add(self, sample: int, name: str, err: BaseException) -> None:
        """Record that ``sample`` (the file or ``shard:member`` ``name``) was skipped because
        of ``err`` (its reason: the exception's type and message; :meth:`add_reason`)."""
        self.add_reason(sample, name, f"{type(err).__name__}: {err}")

    def add_reason(self, sample: int, name: str, why: str) -> None:
        """:meth:`add` with the reason as text (a decode worker process reports it so)."""
        with self._lock:
            self.names.setdefault(name, why)
            self.known.add(int(sample))
            self.skipped += 1

    def warn_pending(self, stacklevel: int = 3) -> None:
        """One UserWarning per bad file not yet warned about (call from the consumer)."""
        with self._lock:
            items = list(self.names.items())[self._warned:]
            self._warned += len(items)
        for name, why in items:
            warnings.warn(f"skipped bad sample {name!r} (its place refilled from this rank's "
                          f"share): {why}", UserWarning, stacklevel=stacklevel)

    def __len__(self) -> int:
        return len(self.names)


@dataclass
class DecodedBatch:
    """One batch's decoded samples, in batch order."""

    ks: np.ndarray  # (n,) int64 output indices
    samples: np.ndarray  # (n,) int64 the sample each shows (refills included)
    #: per row its decoded device buffer, (H, W) or (H, W, C): a list, or where ``layout``
    #: is given a sequence making each row's image when read (``decode.LazyImages``)
    arrays: Any
    labels: np.ndarray | None  # (n,) int64, or None without labels
    targets: list | None  # per row a dict (boxes, labels, mask), or None
    ready: Any  # event: the decode is complete (GPUs), or None
    #: (n, 4) int64 per row the place of its decoded region in its sample (top, left, the
    #: sample's height and width: ``data.region``), or None: whole samples
    regions: np.ndarray | None = None
    #: the rows' one device allocation, byte offsets and (n, 3) shapes, where the decoder
    #: decoded them all into one (``decode.Decoded.layout``; no row refilled), else None
    layout: tuple | None = None


class Loader:
    """Decoded batches of ``plan`` (see the module doc).

    Parameters
    ----------
    source : Source
    sampler : EpochSampler
    plan : callable
        ``plan(b)``: int64 output indices of batch ``b``, or None past the last batch.
    decoder : PillowDecoder or NvImageCodecDecoder
        Closed with the Loader.
    device : int
    bad : BadSamples
    strict : bool
        Raise :class:`BadSampleError` at the first bad sample.
    ahead : int, optional
        Decoded batches kept ready ahead of :meth:`get` (default :data:`AHEAD` as it is when
        the Loader is made; at least one a lane).
    threads, window : int
        The read-ahead's reader threads and its bound in bytes (``readahead.ReadAhead``).
    first : int
        The first batch asked for (a resumed stream starts past 0).
    lanes : int, optional
        Decode lanes (default :data:`DECODE_LANES`); more than one only where ``decoder``
        has ``another()`` (each further lane's decoder is made in its own thread).
    region : training.region_plan.RegionPlan, optional
        Where the decoder decodes regions (``decodes_regions``), decode only the region of
        each sample that the first op's window reads (``data.region``); a decoder of whole
        samples hands them on whole unless ``data.region.CUT_WHOLE``.
    """

    def __init__(self, source: Any, sampler: Any, plan: Callable[[int], Any], decoder: Any,
                 device: int, bad: BadSamples, *, strict: bool = False, ahead: int | None = None,
                 threads: int = READ_THREADS, window: int = WINDOW_BYTES,
                 first: int = 0, lanes: int | None = None, region: Any = None) -> None:
        self.source, self.sampler, self.plan = source, sampler, plan
        self.region = region
        self.segments = bool(SEGMENTS)
        self.first = int(first)
        self.decoder, self.device, self.bad, self.strict = decoder, device, bad, strict
        lanes = DECODE_LANES if lanes is None else int(lanes)
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, got {lanes}")
        self.lanes = lanes if callable(getattr(decoder, "another", None)) else 1
        #: each lane's decoder (lane 0's is ``decoder``; the others' made by their lane)
        self.decoders: list[Any] = [decoder] + [None] * (self.lanes - 1)
        self.ahead = max(self.lanes, int(AHEAD if ahead is None else ahead))
        # PARSE_IN_READERS: a decoder that prepares samples itself (nvImageCodec parses
        # them) gives the readers what to do with each
        prepare = getattr(decoder, "reader", None) if PARSE_IN_READERS else None
        self.reader = ReadAhead(source, self._samples(), threads=threads, window=window,
                                read=prepare(source) if prepare is not None else None)
        self._cond = threading.Condition()
        self._ready: dict[int, Any] = {}
        self._want = self.first  # the batch the consumer asks for next
        self._end: int | None = None  # first batch index past the plan
        self._turn = self.first  # the batch whose lane takes its samples next
        self._stopped = False
        self._stats_lock = threading.Lock()
        #: seconds the decode thread spent waiting for read bytes, decoding, and on the rest
        #: (refills, labels), and the batches it made: where time goes (bench/bench_data.py)
        # (the first decode call, which starts the decoder, kept apart: reports of the steady
        # call time leave it out)
        # (``px_regions`` / ``px_whole``: pixels of the regions handed on and of their whole
        # samples, where ``region`` is given)
        self.stats = {"read_wait_s": 0.0, "decode_s": 0.0, "other_s": 0.0, "batches": 0,
                      "decode_first_s": 0.0, "px_regions": 0, "px_whole": 0}
        self._threads = [threading.Thread(target=self._run, args=(j,), daemon=True,
                                          name="millipyde-decode-batches"
                                          + (f"-{j}" if j else ""))
                         for j in range(self.lanes)]
        _enter_streaming()
        self._streaming = True
        for t in self._threads:
            t.start()

    def _samples(self) -> Iterator[int]:
        for b in itertools.count(self.first):
            ks = self.plan(b)
            if ks is None:
                return
            yield from np.atleast_1d(self.sampler.sample_of(ks)).tolist()

    # -- the decode lanes ---------------------------------------------------------------
    def _run(self, lane: int) -> None:
        with runtime.on_device(self.device):
            stream = None
            if runtime.caps.launches_on_streams:
                # never destroyed: the decoded images are freed on it whenever they go
                stream = runtime.take_stream(self.device, blocking=not NONBLOCKING_STREAM)
            kept = _keep_pool(self.device)
            try:
                if lane and not self._stopped:
                    try:
                        self.decoders[lane] = self.decoder.another()
                    except BaseException as err:  # the lane's batches carry the error
                        self._fail_lane(lane, err)
                        return
                with runtime.using_stream(stream):
                    self._loop(lane, stream)
            finally:
                if kept:
                    _release_pool(self.device)
                if stream is not None:
                    runtime.give_stream(stream)

    def _fail_lane(self, lane: int, err: BaseException) -> None:
        """Hand ``err`` to the consumer of the lane's next batch (its turn passed on)."""
        with self._cond:
            b = self.first + lane
            while b < self._turn:
                b += self.lanes
            self._ready[b] = err
            self._cond.notify_all()

    def _loop(self, lane: int, stream: Any) -> None:
        dec = self.decoders[lane]
        for b in itertools.count(self.first + lane, self.lanes):
            with self._cond:
                while not self._stopped and b >= self._want + self.ahead:
                    self._cond.wait()
                if self._stopped:
                    return
            try:
                ks = self.plan(b)
                made: Any = None if ks is None else self._make(
                    np.asarray(ks, np.int64), stream, dec, b)
            except BaseException as err:  # handed to the consumer of batch b
                made = err
                self._pass_turn(b)
                if isinstance(err, StopIteration) and self._end is not None \
                        and b >= self._end:
                    return  # past the plan's end, which another lane met
            with self._cond:
                if made is None:
                    self._end = b if self._end is None else min(self._end, b)
                else:
                    self._ready[b] = made
                self._cond.notify_all()
            if made is None or isinstance(made, BaseException):
                self._pass_turn(b)
                return

    def _wait_turn(self, b: int) -> None:
        """Wait until batch ``b``'s lane may take its samples (every batch before it took
        theirs: the read-ahead hands samples out in the plan's order)."""
        if self.lanes == 1:
            return
        with self._cond:
            while self._turn < b and not self._stopped:
                if self._end is not None and b >= self._end:
                    raise StopIteration
                self._cond.wait(0.5)
            if self._stopped:
                raise StopIteration

    def _pass_turn(self, b: int) -> None:
        if self.lanes == 1:
            return
        with self._cond:
            if self._turn <= b:
                self._turn = b + 1
                self._cond.notify_all()

    def _make(self, ks: np.ndarray, stream: Any, dec: Any, b: int) -> DecodedBatch:
        src = self.source
        n = len(ks)
        # (a decoder that times its own segments says so: ``takes_laps``)
        laps = Laps() if self.segments else None
        t0 = time.perf_counter()
        self._wait_turn(b)
        if laps is not None:
            laps.lap("turn")
        # held from before the take: the room it makes wakes no reader until the call is over
        # (a sample not read yet ends the hold, see ReadAhead.held_back)
        with self.reader.held_back(HOLD_STOCK_BATCHES * n) if HOLD_READERS else \
                contextlib.nullcontext():
            try:
                got_samples, datas, failed = self.reader.take_batch(n)
            finally:
                self._pass_turn(b)
            if laps is not None:
                laps.lap("take")
            samples = np.array(got_samples, dtype=np.int64).reshape(n)
            # the rows read (all of them but where a read failed)
            rows = range(n) if not failed else sorted(set(range(n)).difference(failed))
            t1 = time.perf_counter()
            plan = self.region
            if plan is not None and not (getattr(dec, "decodes_regions", False)
                                         or region_mod.CUT_WHOLE):
                plan = None  # a decoder of whole samples: its samples handed on whole
            kw: dict[str, Any] = {}
            rows_at = np.arange(n) if len(rows) == n else np.asarray(rows, dtype=np.int64)
            if plan is not None and getattr(dec, "decodes_regions", False):
                # the decoder draws each region from the header's size (rows of its list)
                kr = ks[rows_at]
                got_regions = np.full((len(rows), 4), -1, dtype=np.int64)
                kw = {"boxes": plan.rows(kr), "regions": got_regions}
            if laps is not None:
                laps.lap("lists")
                if getattr(dec, "takes_laps", False):
                    kw["laps"] = laps
            got = dec.decode(datas if len(rows) == n else [datas[r] for r in rows],
                             lambda j: src.name(int(samples[rows[j]])), stream, **kw)
        t2 = time.perf_counter()
        if len(got) != len(rows):
            raise RuntimeError(f"the decoder gave {len(got)} samples for {len(rows)}")
        layout = getattr(got, "layout", None) if len(rows) == n else None
        if layout is not None:  # every row decoded (its images made where read: LazyImages)
            arrays: Any = got
        elif len(rows) == n:
            arrays = list(got)
        else:
            arrays = [None] * n
            for r, a in zip(rows, got, strict=True):
                arrays[r] = a
        regions = None if plan is None else np.full((n, 4), -1, dtype=np.int64)
        if "boxes" in kw:  # rows the decoder gave no region to stay -1
            regions[rows_at] = got_regions
        # the rows to refill: not read, or not decoded (none where the decoder laid out all)
        for r in [] if layout is not None else \
                [r for r, a in enumerate(arrays) if a is None or isinstance(a, BaseException)]:
            layout = None
            err = datas[r] if arrays[r] is None else arrays[r]
            samples[r], arrays[r] = self._refill(int(ks[r]), int(samples[r]), err, stream, dec)
            if regions is not None:
                regions[r] = -1
        if laps is not None:
            laps.lap("refill")
        if regions is not None:
            self._cut(ks, arrays, regions, layout)
            if laps is not None:
                laps.lap("cut")
        ready = runtime.record_event(stream) if stream is not None else None
        labels = None if src.labels is None else src.labels[samples]
        targets = None
        if src.has_targets:
            targets = [src.targets(int(s), tuple(a.shape[:2]))
                       for s, a in zip(samples.tolist(), arrays, strict=True)]
        px = None
        if regions is not None:  # pixels handed on, of the whole samples
            if layout is not None:
                decoded = int((layout[2][:, 0] * layout[2][:, 1]).sum())
            else:
                decoded = sum(int(a.shape[0]) * int(a.shape[1]) for a in arrays)
            px = (decoded, int((regions[:, 2] * regions[:, 3]).sum()))
        if laps is not None:
            laps.lap("rest")
        with self._stats_lock:
            st = self.stats
            st["read_wait_s"] += t1 - t0
            st["decode_s"] += t2 - t1
            if not st["batches"]:
                st["decode_first_s"] = t2 - t1
            st["other_s"] += time.perf_counter() - t2
            st["batches"] += 1
            if px is not None:
                st["px_regions"] += px[0]
                st["px_whole"] += px[1]
            if laps is not None:
                laps.into(st)
        return DecodedBatch(ks, samples, arrays, labels, targets, ready, regions, layout)

    def _cut(self, ks: np.ndarray, arrays: Any, regions: np.ndarray,
             layout: tuple | None = None) -> None:
        """The rows the decoder decoded whole (``regions`` row -1): host arrays cut to their
        region (the decode is whole, what the batch carries and packs is not), device
        buffers kept whole; ``regions`` filled for every row. ``layout``: the batch's one
        device allocation (``DecodedBatch.layout``), the sizes read from it."""
        whole = np.flatnonzero(regions[:, 0] < 0)
        if not len(whole):
            return
        if layout is not None:  # device buffers, none cut: no row's image made here
            regions[whole, 0:2] = 0
            regions[whole, 2:4] = layout[2][whole, :2]
            return
        hw = np.array([arrays[r].shape[:2] for r in whole.tolist()], dtype=np.int64)
        host = np.array([isinstance(arrays[r], np.ndarray) for r in whole.tolist()])
        regions[whole, 0:2] = 0
        regions[whole, 2:4] = hw
        if not host.any():
            return
        cut = whole[host]
        boxes = self.region.boxes(ks[cut], hw[host])
        for r, box in zip(cut.tolist(), boxes, strict=True):
            arrays[r] = crop_host(arrays[r], box)
            regions[r, 0:2] = box[:2]

    def _refill(self, k: int, sample: int, err: BaseException, stream: Any,
                dec: Any) -> tuple[int, Any]:
        """The sample (and its decoded buffer) taking output ``k``'s place (see the module
        doc)."""
        src = self.source
        name = src.name(sample)
        if self.strict:
            raise BadSampleError(f"bad sample {name!r}: {type(err).__name__}: {err}") from err
        self.bad.add(sample, name, err)
        tried = 0
        for k2 in self.sampler.refills(k):
            s2 = int(self.sampler.sample_of(k2))
            if s2 in self.bad.known:
                continue
            tried += 1
            if tried > MAX_REFILLS:
                break
            try:
                data = src.read(s2)
            except (OSError, ValueError) as e:
                self.bad.add(s2, src.name(s2), e)
                continue
            name2 = src.name(s2)
            a = dec.decode([data], lambda _, n=name2: n, stream)[0]
            if isinstance(a, BaseException):
                self.bad.add(s2, src.name(s2), a)
                continue
            return s2, a
        raise BadSampleError(
            f"bad sample {name!r} and no sample of this rank's share could take its place "
            f"({tried} more tried; {len(self.bad)} bad files so far): {err}") from err

    def decoded(self) -> tuple[int | None, int | None]:
        """Samples decoded so far by the lanes' decoders on the GPU (nvImageCodec) and by
        Pillow, summed over the lanes (None where the decoder does not count them)."""
        decs = [d for d in self.decoders if d is not None]
        counts = [(getattr(d, "on_gpu", None), getattr(d, "on_host", None)) for d in decs]
        if any(g is None or h is None for g, h in counts):
            return None, None
        return sum(g for g, _ in counts), sum(h for _, h in counts)

    # -- the consumer --------------------------------------------------------------------
    def get(self, b: int) -> DecodedBatch | None:
        """Decoded batch ``b`` (asked in order), or None past the end of the plan.

        Raises
        ------
        BadSampleError
            ``strict`` and a bad sample, or a bad sample nothing could replace.
        """
        with self._cond:
            self._want = max(self._want, b)
            self._cond.notify_all()
            while b not in self._ready:
                if self._end is not None and b >= self._end:
                    return None
                if self._stopped:
                    raise RuntimeError("the loader was closed")
                if not self._threads[(b - self.first) % self.lanes].is_alive():
                    raise RuntimeError("the decode thread exited")
                self._cond.wait(0.5)
            got = self._ready.pop(b)
            self._want = max(self._want, b + 1)
            self._cond.notify_all()
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self, join: bool = True) -> None:
        """Stop the decode thread and the readers and release the decoder; ``join``: wait
        for the threads (else they exit on their own)."""
        with self._cond:
            if self._stopped and not join:
                return
            self._stopped = True
            self._ready.clear()
            self._cond.notify_all()
            leave, self._streaming = getattr(self, "_streaming", False), False
        if leave:
            _leave_streaming()
        self.reader.close(join)
        if not join:
            return
        deadline = time.monotonic() + 30.0
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
        for dec in self.decoders:
            if dec is not None:
                dec.close()

    def __del__(self) -> None:
        if hasattr(self, "_threads"):  # not where __init__ refused its arguments
            self.close(join=False)


def wait_ready(db: DecodedBatch, stream: Any) -> None:
    """Make later work on ``stream`` wait for the batch's decode (GPUs); else nothing."""
    if db.ready is not None:
        runtime.wait_event(db.ready, stream)

