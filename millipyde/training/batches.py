"""``Generator.batches``: stacked, converted training batches.

A :class:`Batches` iterator runs one worker per device. Worker claims are whole batches, made
in order of batch index within a window bounded in bytes; batch ``b`` of ``size`` is made from
this rank's outputs ``b * size ..`` by the Generator's own machinery (so sample ``i`` equals
that output), and written, converted, into one (n, C, H, W) / (n, H, W, C) float32 buffer by a
generated kernel (``graph.codegen.convert``) on the device that made it.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import numpy as np

from ..array import gpuarray
from ..backend import ACTIVE as runtime  # the active backend
from ..graph.codegen import batch_tables, batch_writer, heap
from ..graph.codegen.batch_gather import launch_args
from ..graph.exec import batch, batch_prefix
from ..graph.exec.batch import launch
from ..graph.ir.node import leaf
from ..graph.plan.schedule import full_range
from ..pipeline import PipelineError
from ..workers import Cancelled, WorkerGroup
from .batch_convert import (  # noqa: F401  (BatchSpec, convert_reference: public here)
    BatchSpec,
    cast_batch,
    convert_reference,
    fused_writer,
    sample_channels,
    write_sample,
)
from .batch_mix import check_mix_labels
from .batch_record import RecordError

#: Bound on the bytes of the batches made ahead of the consumer (at least one per worker).
AHEAD_BYTES = 1 << 30
#: Batches kept alive after they were handed out (GPUs): their memory is reused only after the
#: consumer took this many more (see ``__next__``).
QUARANTINE = 3


class Batches:
    """Iterator of converted batches of a Generator's outputs (``Generator.batches``).

    One worker thread per device claims batch indices in order; batches are handed out in
    order, each on the device that made it. ``close()`` (or leaving a ``with`` block) stops
    the workers and drops the batches made ahead.
    """

    def __init__(self, generator: Any, spec: BatchSpec, devices: list[int],
                 with_targets: bool = False, *, with_labels: bool = False,
                 epochs: int | None = None, epoch: int = 0, mix: Any = None) -> None:
        self._gen = generator  # kept alive: its state stops when it is collected
        self._mix = mix
        self._mix_labels_ok: bool | None = None  # (``_labels_in_range``)
        state = self._st = generator._state
        self.spec = spec
        self._with_targets = with_targets
        self._with_labels = with_labels
        self.devices = list(devices)
        self._sampler = state.sampler
        self._epochs, self._epoch0 = epochs, int(epoch)
        # the output index of this rank's first output (the start of epoch `epoch`)
        self._start = state.rank if self._sampler is None else self._sampler.start(epoch)
        n = state.outputs
        if epochs is not None:
            self._count: int | None = epochs * self._sampler.batches_per_epoch(
                spec.size, spec.drop_last)
        elif n is None:
            self._count = None
        else:
            self._count = n // spec.size if spec.drop_last else -(-n // spec.size)
        # samples in the largest batch: a finite Generator's whole share at most, whatever
        # ``size`` asks (``Generator.batches`` checked that it fits)
        self._largest = spec.size if n is None else max(1, min(spec.size, n))
        self._stream = getattr(generator, "_stream", None)
        self._loader: Any = None
        #: seconds the consumer waited for batches, and the workers spent making streamed
        #: ones (bench/bench_data.py says where time goes)
        self.stats = {"wait_s": 0.0, "make_s": 0.0}
        if state.inputs:
            x = max(state.inputs, key=lambda a: a.size)
            hw = spec.shape or x.shape[:2]
        else:  # a streamed source: its samples' size is not known before they are read
            hw = spec.shape or (512, 512)
        per = spec.size * spec.channels * hw[0] * hw[1] * 4
        self._ahead = len(self.devices) + max(1, AHEAD_BYTES // max(per, 1))
        self._cond = threading.Condition()
        self._claimed = 0
        self._next = 0
        self._results: dict[int, tuple[Any, BaseException | None, int, int]] = {}
        self._stopped = False
        self._group: WorkerGroup | None = None
        self._consts: dict[int, tuple[Any, Any, Any]] = {}
        self._inflight: dict[int, int] = {}  # device -> batch index its worker makes
        self._handed: collections.deque = collections.deque(maxlen=QUARANTINE)

    # -- consumer ------------------------------------------------------------------------
    def __iter__(self) -> Batches:
        return self

    def __next__(self) -> Any:
        if self._group is None and not self._stopped:
            if self._stream is not None:
                self._loader = self._stream.loader(self._ks, self.devices[0], self._next)
            self._group = WorkerGroup("batches", self._worker, self._crash)
            self._group.start(self.devices, 1)
        try:
            out = self._take()
        finally:
            if self._stream is not None:
                self._stream.bad.warn_pending(stacklevel=3)
        if heap.owed():  # this batch's making compiled: collect now, not mid-training
            heap.settle()
        return out

    def _take(self) -> Any:
        with self._cond:
            if self._stopped or (self._count is not None and self._next >= self._count):
                raise StopIteration
            b = self._next
            self._next += 1
            self._cond.notify_all()
            t0 = time.perf_counter()
            while b not in self._results:
                if self._stopped:
                    raise StopIteration
                if not self._group.alive():
                    if self._st.stopped:  # the Generator was closed
                        raise StopIteration
                    self._results[b] = (None, RuntimeError("batch workers exited"), -1, 0)
                    break
                self._cond.wait(0.5)
            value, err, device, k = self._results.pop(b)
            self.stats["wait_s"] += time.perf_counter() - t0
        if err is None:
            value, ready = value
            if ready is not None:
                ready.synchronize()  # the batch's kernels are done: any stream may read it
                # The pooled memory of a dropped batch goes back to the worker's stream, which
                # may reuse it while the consumer's stream (torch's) still reads it: keep the
                # last QUARANTINE batches alive, so the consumer's queued work has moved on.
                self._handed.append(value)
            return value
        self.close()
        if isinstance(err, (ValueError, PipelineError)):
            raise err
        if self._stream is not None:
            raise PipelineError(f"Generator batches: batch {b} failed on device {device}: "
                                f"{type(err).__name__}: {err}") from err
        raise self._st.failure(k, err, device)

    def close(self) -> None:
        """Stop the workers and drop batches made ahead; ``next()`` then raises StopIteration."""
        with self._cond:
            self._stopped = True
            self._results.clear()
            self._handed.clear()
            self._cond.notify_all()
        if self._group is not None and threading.current_thread() not in self._group.threads:
            self._group.join(time.monotonic() + 30.0)
        if self._loader is not None:
            self._loader.close()

    def __enter__(self) -> Batches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        loader = getattr(self, "_loader", None)
        if loader is not None:
            loader.close(join=False)

    # -- resuming --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this stream is: the batches handed out and what they were drawn from.

        :meth:`load_state_dict` on a new stream of the same Generator settings (source,
        seed, ranks, shuffle, ``batches`` arguments) resumes it: it yields exactly the batches
        the uninterrupted stream would have yielded next.
        """
        return {"version": 1, "batch": self._next, "epoch": self._epoch0,
                "epochs": self._epochs, "start": self._start, "size": self.spec.size,
                "drop_last": self.spec.drop_last, "outputs": self._st.outputs,
                "seed": self._st.seed, "rank": self._st.rank, "world": self._st.world,
                "sampler": None if self._sampler is None else self._sampler.state()}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s ``state`` (before the first ``next()``).

        Raises
        ------
        ValueError
            This stream has started, or ``state`` was taken from a stream with other
            settings (naming the first that differs).
        """
        if self._group is not None or self._next:
            raise ValueError("load_state_dict: this stream has started already")
        if not isinstance(state, dict) or state.get("version") != 1:
            raise ValueError("load_state_dict: not a state_dict() of Generator batches")
        mine = self.state_dict()
        for key in ("epoch", "epochs", "start", "size", "drop_last", "outputs", "seed", "rank",
                    "world", "sampler"):
            if state.get(key) != mine[key]:
                raise ValueError(f"load_state_dict: {key} differs (saved {state.get(key)!r}, "
                                 f"this stream {mine[key]!r})")
        b = int(state["batch"])
        if b < 0 or (self._count is not None and b > self._count):
            raise ValueError(f"load_state_dict: batch {b} is out of range")
        self._next = self._claimed = b

    # -- workers -------------------------------------------------------------------------
    def _crash(self, err: BaseException, device: int) -> None:
        with self._cond:
            b = self._inflight.get(device, self._next)
            self._results.setdefault(b, (None, err, device, self._st.global_index(
                b * self.spec.size)))
            self._cond.notify_all()

    def _worker(self, device: int, stream: Any) -> None:
        while True:
            with self._cond:
                while not self._stopped and self._claimed >= self._next + self._ahead and (
                        self._count is None or self._claimed < self._count):
                    self._cond.wait()
                if self._stopped or (self._count is not None and self._claimed >= self._count):
                    return
                b = self._claimed
                self._claimed += 1
                self._inflight[device] = b
            try:
                value, err, k = self._make(b, device, stream), None, 0
            except Cancelled:
                return
            except (_SampleError, RecordError) as e:
                value, err, k = None, e.err, e.k
            except BaseException as e:  # reported by next() for batch b
                value, err, k = None, e, self._st.global_index(b * self.spec.size)
            with self._cond:
                if not self._stopped:
                    self._results[b] = (value, err, device, k)
                self._cond.notify_all()
            if err is not None:
                return

    def _ks(self, b: int) -> np.ndarray | None:
        """Output indices of batch ``b`` (None past the last batch)."""
        if self._count is not None and b >= self._count:
            return None
        size = self.spec.size
        if self._epochs is not None:
            return self._sampler.epoch_batch(self._epoch0, b, size, self.spec.drop_last)
        j0 = b * size
        outputs = self._st.outputs
        n = size if outputs is None else min(size, outputs - j0)
        return self._start + self._st.world * (j0 + np.arange(max(n, 0), dtype=np.int64))

    def _make(self, b: int, device: int, stream: Any) -> Any:
        st = self._st
        if self._loader is not None:
            return self._make_streamed(b, device, stream)
        # (the indices as an array and a list, each made once: a conversion of a batch's
        # list to an array costs ~10 us, and the worker made three)
        k_arr = np.asarray(self._ks(b), dtype=np.int64)
        ks = k_arr.tolist()
        value, ready = self._make_outputs(st, ks, device, stream, k_arr)
        inputs = np.atleast_1d(st.input_index(k_arr)) if len(ks) else k_arr
        labels = None
        if self._with_labels:
            labels = self._gen.labels[inputs]
        return self._extras(value, st, ks, inputs, labels, device, stream, ready,
                            k_arr), ready

    def _make_outputs(self, st: Any, ks: list[int], device: int, stream: Any,
                      k_arr: np.ndarray | None = None) -> Any:
        """Batch of outputs ``ks`` of state ``st`` (the Generator's, or a decoded batch's);
        ``k_arr``: ``ks`` as an int64 array, where the caller has one."""
        # chains batch_record takes (same-size inputs, thesis ops) keep it; the others, and
        # every chain over mixed sizes, go to arena gathers where their ops allow
        rec = recorder(st)
        arena = arena_recorder(st) if rec is None else None
        if arena is not None:
            return self._write_arena(arena, ks, device, stream, st, k_arr=k_arr)
        if rec is None:
            return self._write_outputs(ks, list(range(len(ks))), None, device, stream, st=st)
        return self._write_recorded(rec, ks, device, stream, st)

    def _extras(self, value: Any, st: Any, ks: list[int], inputs: np.ndarray,
                labels: np.ndarray | None, device: int, stream: Any, ready: Any,
                k_arr: np.ndarray | None = None) -> Any:
        """The batch with what ``batches`` was asked to yield beside it (the batch mixed
        where ``mix=`` asks: ``ready`` then marks the mix's end); ``k_arr``: ``ks`` as an
        int64 array, where the caller has one (the batch's own copy is yielded)."""
        spec = self.spec
        extra: tuple = ()
        if spec.with_indices:
            extra = (np.array(ks if k_arr is None else k_arr, dtype=np.int64),
                     np.asarray(inputs, dtype=np.int64))
        if self._with_labels:
            host = np.ascontiguousarray(labels, dtype=np.int64)
            mix = self._mix
            if mix is not None and not (self._stream is None and self._labels_in_range()):
                check_mix_labels(mix, host)
            # (a pinned asynchronous copy on the worker's stream: a copy from pageable memory
            # would wait for the batch's kernels queued before it)
            with runtime.on_device(device):
                buf = runtime.upload_parts([(0, host)], host.nbytes, device)[0]
                if mix is not None:  # the soft labels, mixed on the same stream
                    lab = mix.queue_classes(value, buf, int(ks[0]) if len(ks) else 0)
            if mix is None:
                lab = gpuarray.from_buffer(buf, device)
            elif ready is not None:  # the class indices live until the mix has read them
                ready.event = runtime.record_event(stream)
                ready.keep = (ready.keep, buf)
            extra += (lab,)
        if self._with_targets:
            from .batch_targets import sample_targets

            hw = value.shape[2:4] if spec.layout == "NCHW" else value.shape[1:3]
            extra += (sample_targets(st, ks, device, tuple(hw)),)
        return (value, *extra) if extra else value

    def _labels_in_range(self) -> bool:
        """Whether every label of the Generator lies in the mix's classes (checked once: a
        batch's labels are some of them, so its own check is left to the batches of a
        Generator where one does not; a streamed source's labels are checked per batch)."""
        ok = self._mix_labels_ok
        if ok is None:
            labels = self._gen.labels
            try:
                if labels is not None:
                    check_mix_labels(self._mix, np.ascontiguousarray(labels, dtype=np.int64))
                ok = labels is not None
            except ValueError:
                ok = False
            self._mix_labels_ok = ok
        return ok

    def _make_streamed(self, b: int, device: int, stream: Any) -> Any:
        """Batch ``b`` of a streamed source, from its decoded samples (``batch_stream``)."""
        from ..data.loader import wait_ready
        from .batch_stream import images_of

        db = self._loader.get(b)
        if db is None:
            raise Cancelled()
        t0 = time.perf_counter()
        wait_ready(db, stream)
        ks = db.ks.tolist()
        got = None if self._with_targets else self._stream.arena(db, device)
        whole = None
        if got is None:
            whole = self._st.for_batch(images_of(db, list(range(len(ks))), device), ks)
            value, ready = self._make_outputs(whole, ks, device, stream)
        else:
            rec, unclean = got
            value, ready = self._write_arena(rec, ks, device, stream, None, db, unclean)
        if ready is not None:
            # the decoded images are read by the batch's kernels (and copies): they live until
            # its event has fired, as its temporaries do
            ready.keep = (ready.keep, db, whole)
        got = self._extras(value, whole, ks, db.samples, db.labels, device, stream,
                           ready), ready
        self.stats["make_s"] += time.perf_counter() - t0
        return got

    def _check_shapes(self, parts: list[tuple[Any, tuple[int, ...]]], ks: list[int]) -> tuple:
        """(H, W) of the batch from ``parts`` (batch positions, their outputs' shape);
        ValueError naming the first output (by position) that does not fit."""
        spec = self.spec
        # a few distinct shapes (a recorded batch's groups: colour and grey samples), all
        # fitting: checked once each; anything else is found and reported below
        shapes = {tuple(shape) for _, shape in parts}
        hws = {shape[:2] for shape in shapes}
        try:
            if shapes and (spec.shape is not None or len(hws) == 1):
                for shape in shapes:
                    sample_channels(shape, spec.channels, 0)
                return spec.shape or hws.pop()
        except ValueError:
            pass
        parts = [(np.asarray(rows).reshape(-1), tuple(shape)) for rows, shape in parts]
        parts = [(rows, shape) for rows, shape in parts if len(rows)]
        lead = min(int(rows.min()) for rows, _ in parts)
        first = next(shape for rows, shape in parts if int(rows.min()) == lead)
        bad = None
        for rows, shape in parts:
            try:
                sample_channels(shape, spec.channels, 0)
                fits = spec.shape is not None or shape[:2] == first[:2]
            except ValueError:
                fits = False
            if not fits:
                at = int(rows.min())
                bad = at if bad is None else min(bad, at)
        if bad is not None:
            shape = next(shape for rows, shape in parts if bad in rows)
            sample_channels(shape, spec.channels, ks[bad])
            raise ValueError(
                f"batches: output {ks[bad]} has shape {shape}, output "
                f"{ks[lead]} {first}: pass shape=(height, width) to resize samples")
        return spec.shape or tuple(first[:2])

    def _made(self, ks: list[int], device: int, stream: Any) -> list[gpuarray]:
        """Outputs ``ks`` by the Generator's own per-output machinery (errors raised)."""
        return self._made_in(self._st, ks, device, stream)

    def _made_by(self, st: Any, ks: list[int], device: int, stream: Any) -> list[gpuarray]:
        """:meth:`_made` by state ``st`` (None: the Generator's; else a streamed batch's)."""
        if st is None or st is self._st:
            return self._made(ks, device, stream)
        return self._made_in(st, ks, device, stream)

    def _made_in(self, st: Any, ks: list[int], device: int, stream: Any) -> list[gpuarray]:
        made = st.make_many(ks, device, stream, recorded=False)
        for k, (_, err) in zip(ks, made, strict=False):
            if err is not None:
                raise _SampleError(k, err)
        if self._stopped:
            raise Cancelled()
        return [y for y, _ in made]

    def _write_outputs(self, ks: list[int], rows: list[int], out: Any, device: int,
                       stream: Any, hw: tuple | None = None, st: Any = None) -> Any:
        """Make outputs ``ks[r]`` for ``rows`` per output and write them at ``rows``."""
        spec = self.spec
        ys = self._made_by(st, [ks[r] for r in rows], device, stream)
        if out is None:
            hw = self._check_shapes([([r], tuple(y.shape)) for r, y in zip(rows, ys,
                                                                           strict=True)], ks)
            out = runtime.empty(spec.batch_shape(len(ks), hw), np.float32, device)
        mean, std, pos = self._device_consts(device, len(ks))
        for r, y in zip(rows, ys, strict=True):
            buf = y._materialize()
            src = runtime.reshape(buf, (1, *buf.shape[:2], buf.shape[2] if buf.ndim == 3 else 1))
            write_sample(out, pos[r:r + 1], src, spec, (mean, std), hw, device)
        return self._finish(out, device, stream, ys)

    def _write_recorded(self, rec: Any, ks: list[int], device: int, stream: Any,
                        st: Any = None) -> Any:
        """Batch ``ks`` recorded at once (``batch_record``); the rest per output."""
        # (a worker is inside already; a caller that is not gets the device once per batch,
        # not once per launch)
        with runtime.on_device(device):
            return self._recorded_on(rec, ks, device, stream, st or self._st)

    def _recorded_on(self, rec: Any, ks: list[int], device: int, stream: Any,
                     st: Any) -> Any:
        spec = self.spec
        stacks = st.stacks_on(device, stream)
        groups, left = rec.groups(ks, device, stacks, ahead=st.plan_ahead)
        shapes = [(g.index, tuple(g.kernels()[-1].output.shape)) for g in groups]
        ys = self._made_by(st, [ks[r] for r in left], device, stream) if left else []
        shapes += [([r], tuple(y.shape)) for r, y in zip(left, ys, strict=True)]
        hw = self._check_shapes(shapes, ks)
        pk = batch.Pack(len(ks))
        heads = [batch_prefix.PrefixGroup(gs, k) for gs, k in batch_prefix.prefixes(groups)]
        # a group after a shared prefix uploads the arrays of its own kernels only
        start = {id(g): len(h.kernels()) for h in heads for g in h.groups}
        slots = []
        for g in groups:
            g.pack(pk, start.get(id(g), 0))
            slots.append(pk.add(np.asarray(g.index, dtype=np.int64)))
        for h in heads:
            h.pack(pk)
        pk.upload(device)
        out = getattr(runtime, "empty_batched", runtime.empty)(
            spec.batch_shape(len(ks), hw), np.float32, device)
        mean, std, pos = self._device_consts(device, len(ks))
        flat_out = runtime.flat(out)
        # a shared prefix's kernels once for its groups, which go on from its buffer
        after = {id(g): rest for h in heads for g, *rest in h.run_prefix(pk)}
        for g, slot in zip(groups, slots, strict=True):
            fused = self._fused(g, flat_out, pk.views[slot], mean, std, hw, device)
            buf = g.launch(pk, fused, *after.get(id(g), ()))
            if buf is not None:
                src = runtime.reshape(buf, (buf.shape[0], *buf.shape[1:3],
                                            buf.shape[3] if buf.ndim == 4 else 1))
                write_sample(out, pk.views[slot], src, spec, (mean, std), hw, device)
        for r, y in zip(left, ys, strict=True):
            b = y._materialize()
            src = runtime.reshape(b, (1, *b.shape[:2], b.shape[2] if b.ndim == 3 else 1))
            write_sample(out, pos[r:r + 1], src, spec, (mean, std), hw, device)
        return self._finish(out, device, stream, (pk, groups, ys))

    def _write_arena(self, rec: Any, ks: list[int], device: int, stream: Any,
                     st: Any = None, db: Any = None, unclean: list[int] | None = None,
                     k_arr: np.ndarray | None = None) -> Any:
        """Batch ``ks`` as arena gathers (``batch_arena``); the members it leaves per output.

        ``db``: a streamed batch's decoded samples, row ``r`` the recorder's input ``r``
        (except the ``unclean`` rows, made per output with the rest it leaves). ``k_arr``:
        ``ks`` as an int64 array, where the caller has one.
        """
        from .batch_arena import write

        spec = self.spec
        if db is None:
            launches, left = rec.record(ks if k_arr is None else k_arr)
        else:
            rows = np.setdiff1d(np.arange(len(ks)), np.asarray(unclean or [], dtype=np.int64))
            launches, kept_left = rec.record([ks[r] for r in rows.tolist()], rows)
            for L in launches:  # positions within the recorded rows -> batch rows
                L.pos = rows[L.pos]
            left = sorted({*(rows[kept_left].tolist() if kept_left else []), *(unclean or [])})
            if left:
                from .batch_stream import images_of

                st = self._st.for_batch(images_of(db, left, device), [ks[r] for r in left])
        shapes = [(L.pos, tuple(L.shape)) for L in launches]
        ys = self._made_by(st, [ks[r] for r in left], device, stream) if left else []
        shapes += [([r], tuple(y.shape)) for r, y in zip(left, ys, strict=True)]
        hw = self._check_shapes(shapes, ks)
        out = runtime.empty(spec.batch_shape(len(ks), hw), np.float32, device)
        mean, std, pos = self._device_consts(device, len(ks))
        keep = write(launches, rec.arena(device), out, spec, (mean, std), hw, device)
        for r, y in zip(left, ys, strict=True):
            b = y._materialize()
            src = runtime.reshape(b, (1, *b.shape[:2], b.shape[2] if b.ndim == 3 else 1))
            write_sample(out, pos[r:r + 1], src, spec, (mean, std), hw, device)
        return self._finish(out, device, stream, (keep, ys))

    def _fused(self, g: Any, flat_out: Any, pos: Any, mean: Any, std: Any, hw: tuple,
               device: int) -> Any:
        """The launch that writes ``g``'s samples (into the batch, ``flat_out`` its 1-D view)
        from its last gather (None: a separate conversion pass: resized samples, a stencil
        last, other stored dtypes)."""
        last = g.kernels()[-1].output
        if not FUSE or last.dtype not in (np.uint8, np.float64) or \
                tuple(last.shape[:2]) != tuple(hw):
            return None
        spec = self.spec
        cfull = full_range(last.dtype)
        nb = len(g.index)

        def fused(sig: Any, gated: bool, src: Any, sidx: Any, lut: Any, p: Any) -> None:
            args, wide = launch_args(sig, gated, src, sidx, lut, p, hw, runtime.flat,
                                     spec.channels, nb=nb)
            # the source's dtype picks the writer's loops (``gather_writer_source``'s u8),
            # and the stack's uint64 view (where it is whole aligned words) its word taps
            u8 = np.dtype(src.dtype) == np.uint8
            # (whether the signature has word taps: worked out once per key plan)
            tkey = ("word_taps", u8, batch_writer.WORD_TAPS, batch_tables.TABLED)
            taps = g.memo.get(tkey)
            if taps is None:
                taps = g.memo[tkey] = bool(batch_writer.WORD_TAPS and batch_writer.word_taps(
                    sig, runtime.codegen_target, u8))
            srcw = runtime.words(args[0]) if taps else None
            words = srcw is not None
            # the writer's text settings too (benchmarks flip them in one process)
            fn = g.cached(("fused", gated, spec.channels, spec.layout, wide, u8, words,
                           batch_writer.INT_INDEX, batch_writer.UNIT_DIVISIONS,
                           batch_writer.INT32_TAPS),
                          lambda: fused_writer(sig, gated, spec.channels, spec.layout, wide,
                                               u8, words))
            launch(fn, nb, hw[0], hw[1], device, *args, flat_out, pos, mean, std, cfull,
                   *((srcw,) if words else ()))

        return fused

    def _finish(self, out: Any, device: int, stream: Any, keep: Any) -> tuple[gpuarray, Any]:
        """The batch as a gpuarray, and an event (GPUs) that ``next()`` waits for.

        The worker does not wait for its kernels: it records the next batch while they run.
        ``keep`` (the batch's temporaries) lives until the event is recorded behind them.
        """
        spec = self.spec
        out = cast_batch(out, spec.dtype, device)
        ready = None
        if runtime.caps.launches_on_streams:
            # (a mixed batch's event is recorded behind its mix: ``_extras``)
            ready = _Ready(None if self._mix is not None else runtime.record_event(stream),
                           keep)
        value = gpuarray._wrap(leaf(out, tuple(out.shape), np.dtype(spec.dtype), device))
        return value, ready

    def _device_consts(self, device: int, n: int) -> tuple[Any, Any, Any]:
        got = self._consts.get(device)
        if got is None or got[2].shape[0] < n:
            got = (runtime.from_host(self.spec.mean, device),
                   runtime.from_host(self.spec.std, device),
                   runtime.from_host(np.arange(max(n, self._largest), dtype=np.int64), device))
            self._consts[device] = got
        return got

    def __len__(self) -> int:
        if self._count is None:
            raise TypeError("an infinite Generator has no number of batches")
        return self._count


class _Ready:
    """A batch's completion event, holding its temporaries until it has fired."""

    def __init__(self, event: Any, keep: Any) -> None:
        self.event, self.keep = event, keep

    def synchronize(self) -> None:
        """Wait for the batch's kernels; its temporaries may go."""
        self.event.synchronize()
        self.keep = None


class _SampleError(Exception):
    """Output ``k`` of a batch failed with ``err``."""

    def __init__(self, k: int, err: BaseException) -> None:
        super().__init__(k, err)
        self.k, self.err = k, err


#: Write samples from the last gather of a recorded batch (False: a separate pass; tests).
FUSE = True

#: Record batches at once where the Operations allow it (``batch_record``); False: always
#: per output (tests compare the two).
RECORD_AT_ONCE = True


def arena_recorder(state: Any) -> Any:
    """The Generator state's ``batch_arena.ArenaRecorder``, or None (no fault armed: only the
    per-output path counts fault points)."""
    from .. import faults

    if not RECORD_AT_ONCE or faults.ARMED:
        return None
    rec = getattr(state, "arena_recorder", False)
    if rec is False:
        from . import batch_arena

        rec = state.arena_recorder = batch_arena.make(state)
    return rec




def recorder(state: Any) -> Any:
    """The Generator state's ``batch_record.BatchRecorder``: the first of the kinds
    :func:`recorders` lists that takes the state, or None (per-output batches, or the arena
    recorder's: ``_make_outputs``)."""
    if not RECORD_AT_ONCE or state.batch <= 1:
        return None
    rec = getattr(state, "recorder", False)
    if rec is False:
        rec = state.recorder = next(
            (r for kind in recorders() if (r := kind.take(state)) is not None), None)
    return rec


def recorders() -> tuple[Any, ...]:
    """The ``batch_record.RecorderKind`` of batches recorded at once, in the order tried:
    recording methods of template ops over inputs of one size (``batch_record.Recorder``),
    then one plain callable among them (``generator_callables.CallableRecorder``). Each
    kind says itself which states it takes; what none takes goes to the arena recorder
    (``batch_arena``: mixed sizes, policies, AugMix, user kernel ops) or per output."""
    from . import batch_record, generator_callables

    kinds: tuple[batch_record.RecorderKind, ...] = (batch_record.Recorder,
                                                     generator_callables.CallableRecorder)
    return kinds
