"""A Pipeline stage's inputs recorded as batches, by the engine of ``Generator.batches``.

A stage groups its inputs by (type, device, shape, dtype) (:func:`group_key`) and cuts each
group into chunks (:func:`chunk_sizes`). A chunk is recorded at once by
``batch_record.Recorder``, exactly as a Generator's batch is: the chunk's output ``k`` is the
stage's input at position ``k``, every coin and parameter of the chunk is drawn in one call from
the counter-based streams ``(seed, position, operation index)`` that the per-input path draws
from (so the values are the same), one template is recorded per coin pattern, and each kernel
runs once for the whole chunk. The chunk's inputs are first copied into one stack on the
worker's device (``Backend.stack_into``; inputs that live on another device come by peer
copies on the worker's copy stream, which the kernels' stream waits for); each output is a
member of the chunk's batch buffer (``graph.ir.member``: its view and node made only when the
value is read). ``pipeline.run`` binds the outputs to their inputs once the chunk's kernels
are done. A chain that draws nothing (no coin, no range) records and uploads the first chunk
of each size on a stream only; the next ones on that stream, of this run or a later one of the
same chain, take its groups and pack (``StageChunks._reuse``).

What a chunk cannot record is left to the per-input path: a callable Operation or a method
that is not a recording one (:func:`batchable`), an input with pending work (it would fuse with
the Operations per input) or with targets, a coin pattern whose plan does not batch.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import devices, faults, targets
from ..array import gpuarray
from ..backend import ACTIVE as runtime  # the active backend
from ..graph.exec import batch
from ..graph.ir.member import Batch, Member
from ..graph.ir.node import Node, stored
from ..image import RECORDING_METHODS, gpuimage
from ..operation import Operation
from ..training import template_share
from ..training.batch_record import Recorder, RecordError, draws_nothing, rule_key, rules_for
from ..workers import Cancelled, StepError, kernels_failed

#: Most inputs one chunk records at once.
CHUNK = 256
#: Bound on a chunk's working set, its inputs counted at 8 bytes a value (float64: what a
#: stencil's temporaries hold at most). Two chunks a device may be in flight.
CHUNK_BYTES = 4 << 30
#: Chunks per device a group on one device is cut into at least, when other devices may take
#: some (balance and overlap of one chunk's copies with another's kernels).
CHUNKS_PER_DEVICE = 3
#: Largest input (bytes) a chunk on another device stacks by reading it through peer access
#: in the stack kernel (larger ones: the copy engines, beside the kernels of the chunk before).
PEER_READ_BYTES = 4 << 20
#: Record Pipeline inputs as chunks (False: every input per input, as before; tests and
#: benchmarks compare the two).
ENABLED = True
#: A chunk of a fixed chain (no coin, nothing drawn) reuses the groups and the uploaded pack
#: of the last chunk of its size recorded on its stream (:meth:`StageChunks.record`; False:
#: every chunk recorded and uploaded, as before; tests and benchmarks compare the two).
REUSE_FIXED = True
#: Chunk sizes whose groups and pack an entry keeps (per group key, device and stream; a
#: group's chunks are of one or two sizes: :func:`chunk_sizes`).
REUSE_SIZES = 4
#: (group key, device, stream) entries a template store keeps of its fixed chunks
#: (``TemplateStore.reused``; all dropped when a new one would pass it).
REUSE_ENTRIES = 64


def batchable(operations: Sequence[Operation]) -> bool:
    """Whether a stage with these Operations may record chunks (its inputs permitting)."""
    return ENABLED and bool(operations) and all(op.method in RECORDING_METHODS
                                                for op in operations)


def group_key(x: gpuarray, value: Node | Member | None = None) -> tuple | None:
    """The group ``x`` (its value ``value``, else its current one) records in: (type, device,
    shape, dtype); None where it must go per input (not a gpuimage, pending work, targets).

    ``value`` may be a :class:`Member` (``gpuarray._value``: an input bound to an unread
    member), keyed by its batch's member shape, dtype and device without making its node: the
    key its node would give (a stored leaf, no targets: targets are attached through a read).
    """
    value = x._node if value is None else value
    if not isinstance(x, gpuimage) or value is None:
        return None
    if type(value) is Member:
        b = value.batch
        return (type(x), b.device, b.shape, b.dtype) if len(b.shape) in (2, 3) else None
    if value.buffer is None or len(value.shape) not in (2, 3):
        return None
    if targets.ANY and targets.of(value) is not None:
        return None
    return (type(x), value.device, value.shape, value.dtype)


def _probe(x: gpuarray, key: tuple) -> gpuarray:
    """``x``, or where it is bound to an unread member a stand-in of its type holding a
    value of the key's shape and dtype (no buffer): ``rules_for`` reads an input's type,
    shape and dtype alone, and a read of ``x``'s shape would make its member's node."""
    if "_member" not in x.__dict__:
        return x
    y = type(x).__new__(type(x))
    y._node, y._pinned, y._sample, y._opcount = None, None, x._sample, 0
    y._bind(stored(None, key[2], key[3], key[1]))
    return y


def chunk_sizes(n: int, shape: tuple[int, ...], spread: int) -> list[int]:
    """Sizes of the chunks a group of ``n`` inputs of ``shape`` is cut into: at most
    :data:`CHUNK` and :data:`CHUNK_BYTES` each, and at least ``CHUNKS_PER_DEVICE * spread``
    chunks (``spread``: devices that may share the group) where there are inputs enough."""
    per = 8 * max(1, math.prod(shape))
    cap = max(1, min(CHUNK, CHUNK_BYTES // per))
    parts = max(-(-n // cap), min(n, CHUNKS_PER_DEVICE * spread if spread > 1 else 1))
    base, extra = divmod(n, max(parts, 1))
    return [base + (i < extra) for i in range(parts)]


_UNSET = object()


class ChunkFailure(Exception):
    """A chunk failed: ``err`` (a ``workers.StepError``) at the input at ``position``; ``span``
    (first, last, count) where the failure is the whole chunk's, not one input's."""

    def __init__(self, position: int, err: BaseException,
                 span: tuple[int, int, int] | None = None) -> None:
        super().__init__(position, err)
        self.position, self.err, self.span = position, err, span


class _ChunkState:
    """What ``batch_record.Recorder`` reads of a Generator's state, for the chunk being
    recorded: its inputs in position order, their stacked values and positions."""

    rank, world, outputs = 0, 1, None
    #: each input's stack row where known (every input's value its own row: 0 .. n - 1)
    stack_rows: np.ndarray | None = None

    def __init__(self, operations: list[Operation], seed: int) -> None:
        self.operations = operations
        self.seed = seed
        self.inputs: list[gpuarray] = []
        self.stacked_nodes: dict[int, list[Node | Member]] = {}  # (a member: unread input)
        self.positions = np.zeros(0, dtype=np.int64)

    def global_index(self, j: int) -> int:
        return j

    def input_index(self, k: Any) -> Any:
        """Per position in ``k`` (an int or an int64 array) its input's index in the chunk
        (the Generator states' ``input_index``, which the recorder reads)."""
        at = np.searchsorted(self.positions, k)
        return int(at) if np.ndim(at) == 0 else at


@dataclass
class Launched:
    """A chunk whose kernels are queued: per input its output value, a member of its group's
    batch buffer (None: left to the per-input path, ``left``), and what must live until they
    are done."""

    values: list[Member | None]
    left: list[int]
    event: Any
    keep: tuple
    nodes: list[Node | Member]  # the inputs' values the chunk read (a commit checks them)

    def wait(self) -> None:
        """Wait for the chunk's kernels (nothing to wait for on the cpu backend)."""
        if self.event is not None:
            self.event.synchronize()
        self.keep = ()


@dataclass
class Recorded:
    """A chunk recorded and its arguments uploaded, its kernels not launched yet
    (:meth:`StageChunks.record`)."""

    groups: list
    left: list[int]
    pk: Any
    stack: Any
    nodes: list[Node | Member]
    span: tuple[int, int, int]  # first and last position, inputs
    device: int

    def layout(self) -> list[tuple[list[int], tuple[int, ...], np.dtype]]:
        """Per group, the chunk's rows it makes, and one output's shape and dtype."""
        out = []
        for g in self.groups:
            node = g.kernels()[-1].output
            out.append((g.index.tolist(), tuple(node.shape), np.dtype(node.dtype)))
        return out


class StageChunks:
    """The recorders of one stage's Operations: per group key its draw rules (None: the group
    goes per input), per group key, device and worker one ``batch_record.Recorder``, its
    templates kept for every chunk of the run."""

    def __init__(self, operations: list[Operation], seed: int) -> None:
        self.operations = operations
        self.seed = seed
        self.enabled = batchable(operations)
        self._rules: dict[tuple, Any] = {}
        self._recorders: dict[tuple, Recorder] = {}
        self._stores: dict[tuple, template_share.TemplateStore] = {}  # per group key
        # per group key: whether its rules draw nothing (no coin, no range): every chunk of
        # one size and stack layout then records the same groups and pack (:meth:`record`)
        self._fixed: dict[tuple, bool] = {}
        self._lock = threading.Lock()

    def takes(self, key: tuple | None, x: gpuarray) -> bool:
        """Whether the group ``key`` (of input ``x``) records chunks."""
        if not self.enabled or key is None:
            return False
        got = self._rules.get(key, _UNSET)  # (decided once per group: no lock per input)
        if got is _UNSET:
            with self._lock:
                got = self._rules.get(key, _UNSET)
                if got is _UNSET:
                    probe = _probe(x, key)
                    got = rules_for([probe], self.operations)
                    if got is not None:
                        self._stores[key] = self._store(probe, got)
                        self._fixed[key] = draws_nothing(got)
                    self._rules[key] = got
        return got is not None

    def _store(self, probe: gpuarray, rules: list) -> template_share.TemplateStore:
        """The templates of a group whose first input is ``probe``: shared by the run's
        recorders (every device's and worker's) and with later runs of the same Operations
        over inputs of the same kind (``template_share``: a new Pipeline of the same chain
        records none again), or the group's own where they are not shared.

        A template keeps the input it was recorded from (a Pipeline's: an input's value as
        the run found it), so a shared store keeps up to two inputs a coin pattern (its
        templates and their warp-clip variants) on each device alive after the run: shared
        only where those of one device are within ``template_share``'s bound on a store's
        inputs (``MAX_INPUT_BYTES``), counting every pattern the coins can make."""
        coins = sum(r.probability is not None for r in rules)
        nbytes = math.prod(probe.shape) * np.dtype(probe.dtype).itemsize
        if coins >= 32 or 2 * (1 << coins) * nbytes > template_share.MAX_INPUT_BYTES:
            return template_share.TemplateStore()
        return template_share.store(template_share.chain_key(
            [probe], self.operations, rule_key(rules), "pipeline chunk"))

    def _recorder(self, key: tuple, device: int) -> Recorder:
        # one per worker thread: a recorder's state holds the chunk it records
        at = (key, device, threading.get_ident())
        with self._lock:
            rec = self._recorders.get(at)
            if rec is None:
                rec = self._recorders[at] = Recorder(_ChunkState(self.operations, self.seed),
                                                     self._rules[key], self._stores[key])
            return rec

    def launch(self, key: tuple, positions: list[int], xs: list[gpuarray],
               nodes: list[Node | Member], device: int, stream: Any,
               copy_stream: Callable[[], Any], cancelled: Callable[[], bool]) -> Launched:
        """Queue the kernels of the chunk ``xs`` (at ``positions``, values ``nodes``: each a
        node or, for an input bound to an unread member, the member) on ``device``.
        ``copy_stream()`` gives the stream for peer copies. Raises :class:`ChunkFailure` or
        ``workers.Cancelled``."""
        return self.start(self.record(key, positions, xs, nodes, device, stream, copy_stream,
                                      cancelled), stream)

    def record(self, key: tuple, positions: list[int], xs: list[gpuarray],
               nodes: list[Node | Member], device: int, stream: Any,
               copy_stream: Callable[[], Any], cancelled: Callable[[], bool]) -> Recorded:
        """:meth:`launch` up to its launches: the chunk stacked, recorded and its arguments
        uploaded (a worker process replies the outputs' :meth:`Recorded.layout` here)."""
        n = len(xs)
        span = (positions[0], positions[-1], n)
        try:
            stack = stack_values(nodes, device, stream, copy_stream)
        except Exception as err:
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        # a fixed chain's chunk of a size, stack layout (input i at stack row i: no value held
        # by two inputs; a node's id and a member are each one object's), device and stream
        # seen before: that chunk's groups on this stack and its pack, unchanged (:meth:`_reuse`
        # says why that is what recording again would give)
        reuse = REUSE_FIXED and self._fixed.get(key) and not faults.ARMED and \
            len(set(map(id, nodes))) == n
        if reuse:
            kept_all = self._stores[key].reused
            at = (key, device, stream if runtime.caps.launches_on_streams else
                  threading.get_ident())
            kept = kept_all.get(at)
            got = None if kept is None else kept.get(n)
            if got is not None:
                if cancelled():
                    raise Cancelled()
                return Recorded([g.rebound(stack) for g in got[0]], [], got[1], stack, nodes,
                                span, device)
        # keyed by node id, a member by itself (``record_template`` adds its node's id where
        # it records from it); a value held by several inputs keeps its first row (the dict
        # made from the last row back: no call an input)
        keys = [node if type(node) is Member else node.id for node in nodes]
        stacks: dict[Any, tuple[Any, int]] = dict(zip(
            reversed(keys), [(stack, i) for i in range(n - 1, -1, -1)], strict=True))
        rec = self._recorder(key, device)
        st = rec.state
        st.inputs, st.stacked_nodes = xs, {device: nodes}
        st.positions = np.asarray(positions, dtype=np.int64)
        # no value held by two inputs (as a rule): input i is stack row i
        st.stack_rows = np.arange(n, dtype=np.int64) if len(stacks) == n else None
        try:
            groups, left = rec.groups(list(positions), device, stacks)
        except RecordError as err:
            raise ChunkFailure(err.k, err.err) from err
        finally:
            st.inputs, st.stacked_nodes, st.stack_rows = [], {}, None
        if faults.ARMED:
            self._check_faults(groups, positions, device, cancelled)
        if cancelled():
            raise Cancelled()
        try:
            pk = batch.Pack(n)
            for g in groups:
                g.pack(pk)
            pk.upload(device)
        except Exception as err:
            raise ChunkFailure(positions[0], kernels_failed(self.operations, err), span) \
                from err
        if reuse and not left:
            self._reuse(kept_all, at, n, groups, pk)
        return Recorded(groups, left, pk, stack, nodes, span, device)

    @staticmethod
    def _reuse(kept_all: dict, at: tuple, n: int, groups: list, pk: batch.Pack) -> None:
        """Keep a fixed chain's chunk of ``n`` inputs (its groups, without its stack, and its
        uploaded pack) in ``kept_all`` (its template store's ``reused``) for the next chunks
        of its size recorded on ``at``'s stream (its thread's on the cpu backend): this run's,
        and where the store is shared (``template_share``), later runs' of the same chain
        over inputs of the same kind (the entry's key holds the stream: a kept chunk's pack is
        read only in that stream's order).

        What recording such a chunk again would give is the same: with no coin and nothing
        drawn, every input has one pattern (``batch_record.draw``: all coins set, no
        parameters) and its device's one template, recorded once and kept (``Recorder.
        template``); its members' arrays are that template's rows (``batch_groups.
        member_arrays``: no drawn column or sampler map, so no row's warp clip differs from
        the template's and none is left or split off), whatever the inputs hold or where they
        sit in the run, and their stack rows are 0 .. n - 1 (a chunk with an input twice is
        not kept). The one part of the pack a kernel writes is the members' warp-clip bounds
        (``batch_group.clip_bounds``), written from each chunk's own stack right before the
        gather that reads them, on the worker's one stream: chunks in flight at once (one
        launching while the last one's kernels run, or a worker process's planned chunks)
        write and read them in stream order: an entry is a stream's on GPUs (a stream has
        one worker at a time, of whatever run), a thread's on the cpu backend (whose kernels
        run on the launching thread). A chunk with inputs left to the per-input path is not
        kept (its template was not decided yet). What is kept holds no input of the chunk:
        the groups' copies have no stack nor a view of one (``Group.rebound``), and their
        templates are the store's already."""
        if at not in kept_all and len(kept_all) >= REUSE_ENTRIES:
            kept_all.clear()
        kept = kept_all.setdefault(at, {})
        if n not in kept and len(kept) >= REUSE_SIZES:
            kept.pop(next(iter(kept)))
        kept[n] = ([g.rebound(None) for g in groups], pk)

    def start(self, got: Recorded, stream: Any, into: list | None = None) -> Launched:
        """Queue the kernels of a recorded chunk on ``stream``; group ``g``'s outputs into
        ``into[g]`` where given (a buffer of its :meth:`Recorded.layout`), else into new
        buffers. Raises :class:`ChunkFailure`."""
        device, span = got.device, got.span
        values: list[Member | None] = [None] * span[2]
        try:
            for i, g in enumerate(got.groups):
                node = g.kernels()[-1].output
                rows = g.index.tolist()
                buffer = g.launch(got.pk, into=None if into is None else into[i])
                out = Batch(buffer, node.shape, node.dtype, device,
                            runtime.member_views(buffer))
                made = out.members(len(rows))
                if len(rows) == len(values) and rows == list(range(len(rows))):
                    values = made  # (the whole chunk in one group, in order: as a rule)
                else:
                    for r, value in zip(rows, made, strict=True):
                        values[r] = value
            event = runtime.record_event(stream) if runtime.caps.launches_on_streams else None
        except Exception as err:
            raise ChunkFailure(span[0], kernels_failed(self.operations, err), span) from err
        return Launched(values, got.left, event, (got.pk, got.stack, got.groups), got.nodes)

    def _check_faults(self, groups: list, positions: list[int], device: int,
                      cancelled: Callable[[], bool]) -> None:
        """The fault points the per-input path meets, per input in position order (as
        ``graph.exec.batch.materialize_batch`` checks them per member): each Operation's
        (``operation:<name>``), then per planned kernel (its group's first template's) its
        nodes' (``op:<name>``) and its output's allocation (``alloc``: made and dropped, so an
        armed out-of-memory fault fires at the input the per-input path would have reached).
        Inputs left to the per-input path check their own. Only with a fault armed (tests)."""
        kernels: dict[int, list] = {}
        for g in groups:
            ks = g.kernels()
            for r in g.index.tolist():
                kernels[r] = ks
        for r, pos in enumerate(positions):
            if r not in kernels:
                continue
            for j, op in enumerate(self.operations):
                try:
                    faults.check(f"operation:{op.name}", device)
                except BaseException as err:
                    raise ChunkFailure(pos, StepError(f"operation {j} ({op.name!r})", err)) \
                        from err
                if cancelled():
                    raise Cancelled()
            try:
                for k in kernels[r]:
                    for m in k.nodes:
                        if not m.gated_off:
                            faults.check(f"op:{m.name}", device)
                    runtime.empty(k.output.shape, k.output.dtype, device)
            except Exception as err:
                raise ChunkFailure(pos, kernels_failed(self.operations, err)) from err


def stack_values(values: list[Node | Member], device: int, stream: Any,
                 copy_stream: Callable[[], Any]) -> Any:
    """The values (stored nodes or members of batch buffers, one shape and dtype) copied into
    one (n, ...) buffer on ``device``, ready for work queued on ``stream`` next.

    Members ``a..a+n-1`` of one batch buffer on ``device``, in order (a chunk of the previous
    stage's, or of the last run's, outputs, read by no one), are that buffer's rows already:
    it (or its slice) is the stack, no copy (the chunk's kernels read the stack and write
    buffers of their own; nothing writes a batch buffer once computed).

    Values on another device come on the copy stream, the stack taken from that stream's pool
    (it is given back only after the chunk's kernels are done, so no later copy can overwrite
    a block the kernels still read), and ``stream`` waits for them: small values read by the
    stack kernel through peer access, large ones by the copy engines (peer copies).
    """
    first = values[0]
    rows = rows_of(values, device)
    if rows is not None:
        return rows
    bufs = [v.view() if type(v) is Member else v.buffer for v in values]
    if runtime.caps.launches_on_streams:
        # (a member's device read from its batch: no property call an input)
        remote = {v.batch.device if type(v) is Member else v.device for v in values}
        remote.discard(device)
    else:
        remote = ()
    if not remote:
        stack = runtime.empty((len(values), *first.shape), first.dtype, device)
        runtime.stack_into(stack, bufs, stream,
                           device=device if runtime.caps.launches_on_streams else None)
        return stack
    # a peer copy costs the driver ~5 us of CPU (four H200s: 5.3 us an input of a chunk's
    # host time against 1.9 for the kernel): worth it only where the copy itself is long
    read = math.prod(first.shape) * first.dtype.itemsize <= PEER_READ_BYTES and \
        all(devices.can_peer(device, d) for d in remote)
    cs = copy_stream()
    with runtime.using_stream(cs):
        stack = runtime.empty((len(values), *first.shape), first.dtype, device)
        runtime.stack_into(stack, bufs, cs, device=device if read else None)
        runtime.wait_event(runtime.record_event(cs), stream)
    return stack


def rows_of(values: list[Node | Member], device: int) -> Any:
    """The batch buffer (or its slice) whose rows ``values`` are, in order, when they are
    members ``a..a+n-1`` of one batch on ``device``; else None."""
    first = values[0]
    if type(first) is not Member or first.batch.device != device:
        return None
    b, at = first.batch, first.index
    for i, v in enumerate(values):
        if type(v) is not Member or v.batch is not b or v.index != at + i:
            return None
    buf = b.buffer
    n = len(values)
    return buf if at == 0 and n == buf.shape[0] else buf[at:at + n]
