"""Cut the graph of pending nodes into kernels (Grumpy's Algorithm 1, seed 003).

Walk back from the requested node to materialized leaves (a networkx DAG), then go forward in
topological order, growing a kernel while the next node can be fused into it and cutting where a
value must be stored: the requested node, nodes used more than once, stencils, copies.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ... import config
from ...kernels import OpSpec
from ...kernels.registry import matrix_of
from ..codegen.gather_body import COORD_LIMIT
from ..ir.node import Node

if TYPE_CHECKING:
    import networkx as nx

GATHER_KINDS = ("elementwise", "pixelwise", "positional", "neighbourhood", "index_map",
                "sampler", "user_map", "pixel")
# ops held in a gather's value chains (pre/post/grey_ops), in recording order
CHAIN_KINDS = ("elementwise", "pixelwise", "positional", "neighbourhood")


#: the settings of the open ``with fusion(...)`` blocks, innermost last (replay keys on it)
fusion_override: list[bool] = []


def fusion_enabled() -> bool:
    """Fusion is on unless ``MILLIPYDE_FUSION=0`` or inside ``with fusion(False)``."""
    if fusion_override:
        return fusion_override[-1]
    return config.once(config.fusion)


@contextlib.contextmanager
def fusion(enabled: bool) -> Iterator[None]:
    """Turn fusion on or off for materializations inside the block (process-wide)."""
    fusion_override.append(bool(enabled))
    try:
        yield
    finally:
        fusion_override.pop()


def pending_graph(target: Node) -> nx.DiGraph:
    """The DAG of unmaterialized ancestors of ``target`` plus the leaves they read
    (``explain``'s; materializing walks them without networkx: ``_pending``)."""
    import networkx as nx  # here: ~0.2-0.3 s of every process's import otherwise

    g = nx.DiGraph()
    g.add_node(target)
    stack = [target]
    while stack:
        n = stack.pop()
        if n.materialized:
            continue
        for i in n.inputs:
            if i not in g:
                g.add_node(i)
                stack.append(i)
            g.add_edge(i, n)
    return g


def _pending(target: Node) -> tuple[list[Node], dict[int, list[Node]]]:
    """Topological order of the pending ancestors of ``target`` (leaves they read included)
    and each one's consumers within that set: ``pending_graph`` without building a DiGraph,
    for the hot path (a Generator plans one graph per output)."""
    order: list[Node] = []
    succ: dict[int, list[Node]] = {target.id: []}
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(target, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if n.id in seen:
            continue
        seen.add(n.id)
        stack.append((n, True))
        if n.materialized:
            continue
        for i in n.inputs:
            succ.setdefault(i.id, []).append(n)
            if i.id not in seen:
                stack.append((i, False))
    return order, succ


def full_range(dtype: np.dtype) -> float:
    """The value of full intensity for an image dtype: 1.0 for floats, the max for integers."""
    got = _FULL.get(dtype)
    if got is None:
        d = np.dtype(dtype)
        # (``np.iinfo`` builds an object per call: a batch asks ~5 times)
        got = float(np.iinfo(d).max) if d.kind in "ui" else 1.0
        if len(_FULL) < 64:
            _FULL[dtype] = got
    return got


_FULL: dict[object, float] = {}


def affine3(spec: OpSpec, h: int, w: int, params: tuple = ()) -> np.ndarray:
    """The 3x3 matrix of an index map or sampler op (``registry.matrix_of``) from its node's
    parameters.

    Parameters
    ----------
    spec : OpSpec
        The op.
    h, w : int
        The size of the image it reads.
    params : tuple, optional
        The node's parameters (the first ``spec.nparams`` are read).

    Returns
    -------
    numpy.ndarray
        (3, 3) float64.
    """
    # (a projective sampler's third row is its homography's: ``matrix_of``)
    return matrix_of(spec, h, w, tuple(float(p) for p in params[:spec.nparams]))


def wide_map(a: np.ndarray, out: tuple[int, int]) -> bool:
    """Whether the affine sampler map ``a`` (3x3, input <- output) sends a pixel of an
    ``out``-sized output to a non-finite position or one beyond ``COORD_LIMIT`` (its
    extremes are at the corners): its kernel must test each position (``GatherSig.guard``)."""
    ys = np.array([0.0, 0.0, out[0] - 1.0, out[0] - 1.0])
    xs = np.array([0.0, out[1] - 1.0, 0.0, out[1] - 1.0])
    with np.errstate(all="ignore"):
        pos = a[:2, :2] @ np.stack([ys, xs]) + a[:2, 2:3]
    return not bool((np.abs(pos) < COORD_LIMIT).all())


def axis_aligned(p: np.ndarray) -> np.ndarray:
    """Whether integer maps ``p`` (..., 3, 3) send rows and columns to rows and columns (flips,
    transposes, crops, pads): then the pixels a rectangle reads form a rectangle."""
    lin = np.abs(np.asarray(p)[..., :2, :2])
    return ((np.sort(lin, axis=-1) == [0.0, 1.0]).all(axis=(-1, -2))
            & (lin.sum(axis=-2) == 1.0).all(axis=-1))


def fill_window(window: np.ndarray, p: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """A fused pad's readable window: ``window`` (..., 4: top, left, height, width, in source
    coordinates) narrowed to the pixels that the pad's input, (..., 2) ``hw`` pixels reached
    through the axis-aligned integer map ``p`` (..., 3, 3), reads.

    The pad's input may be smaller than the source (a crop before it): positions outside it
    must read the fill even where the source has pixels, so the kernel tests the window, not
    the source's bounds.
    """
    p = np.asarray(p, dtype=np.float64)
    hw = np.asarray(hw, dtype=np.float64)
    ys = np.stack([np.zeros_like(hw[..., 0]), hw[..., 0] - 1], axis=-1)[..., [0, 0, 1, 1]]
    xs = np.stack([np.zeros_like(hw[..., 1]), hw[..., 1] - 1], axis=-1)[..., [0, 1, 0, 1]]
    sy = p[..., 0, 0, None] * ys + p[..., 0, 1, None] * xs + p[..., 0, 2, None]
    sx = p[..., 1, 0, None] * ys + p[..., 1, 1, None] * xs + p[..., 1, 2, None]
    w = np.asarray(window, dtype=np.float64)
    top = np.maximum(w[..., 0], sy.min(axis=-1))
    left = np.maximum(w[..., 1], sx.min(axis=-1))
    bottom = np.minimum(w[..., 0] + w[..., 2], sy.max(axis=-1) + 1)
    right = np.minimum(w[..., 1] + w[..., 3], sx.max(axis=-1) + 1)
    empty = (hw[..., 0] <= 0) | (hw[..., 1] <= 0) | (bottom <= top) | (right <= left)
    out = np.stack([top, left, bottom - top, right - left], axis=-1)
    return np.where(empty[..., None], 0.0, out).astype(np.int64)


@dataclass
class Kernel:
    """One launch: ``nodes`` fused in order, reading ``source``, storing the last node."""

    kind: str  # "gather" | "stencil" | "copy" | "move"
    source: Node
    nodes: list[Node] = field(default_factory=list)

    @property
    def output(self) -> Node:
        """The node whose value this kernel stores."""
        return self.nodes[-1]

    @property
    def names(self) -> list[str]:
        """Fused op names in order."""
        return [n.name for n in self.nodes]


@dataclass
class Gather(Kernel):
    """A fused gather: integer maps, at most one bilinear sampler, elementwise chains, grey."""

    P: np.ndarray = field(default_factory=lambda: np.eye(3))
    A: np.ndarray | None = None
    mid: tuple[int, int] = (0, 0)
    phase: int = 0
    pre: list[Node] = field(default_factory=list)
    post: list[Node] = field(default_factory=list)
    grey_ops: list[Node] = field(default_factory=list)
    grey: str = ""  # the colour-to-grey conversion's kernel (phase 2)
    cur: tuple[int, int] = (0, 0)
    # a fill-reading index map (pad) is fused: pixels mapped outside ``window`` (top, left,
    # height, width in source coordinates: the pad's input, narrowed by any crop before it)
    # read ``fill``
    fill: float | None = None
    window: tuple[int, int, int, int] | None = None
    # the sampler is a user's map called in the kernel (``user_map``), not the matrix ``A``
    umap: Node | None = None
    edge: bool = False
    # the sampler's positions may leave the integer range: tested per pixel (``wide_map``)
    guard: bool = False
    # a positional (or neighbourhood) op is fused: nothing geometric may follow it here
    positional: bool = False
    # the sampler reads the nearest pixel
    nearest: bool = False
    # the sampler is a homography: positions are divided by the third row of ``A``
    projective: bool = False
    # (stat op, this gather as it was before the op): each needs a reduction before the launch
    stats: list[tuple[Node, Gather]] = field(default_factory=list)
    new_stats: list[tuple[Node, Gather]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cur = self.source.shape[:2]

    @property
    def channels(self) -> int:
        """Channels of the source image."""
        return self.source.shape[2] if len(self.source.shape) == 3 else 1

    @property
    def lut_mode(self) -> bool:
        """uint8 sources fold elementwise chains into 256-entry tables (unless an op that
        mixes channels or knows its pixel is in the chain: then every op is inlined)."""
        return self.source.dtype == np.uint8 and all(
            n.op.kind == "elementwise" for n in self.pre + self.post)

    clip_check: bool = False

    def accepts(self, n: Node) -> bool:
        """Whether ``n`` can join this kernel."""
        if not isinstance(n.op, OpSpec) or n.op.kind not in GATHER_KINDS:
            return False
        kind = n.op.kind
        if self.positional and kind in ("index_map", "sampler", "user_map"):
            return False
        if kind == "index_map" and n.op.fills:
            # the fill enters the chain here: only ops after it may change it, and one value;
            # what the pad's input covers must be a rectangle of the source (its window)
            return (self.phase == 0 and not self.pre and bool(axis_aligned(self.P))
                    and (self.fill is None or self.fill == float(n.params[-1])))
        if kind == "pixelwise":
            return self.phase < 2 and self.channels >= 3
        if kind == "neighbourhood":
            # its neighbours are what the kernel computes before it, at other output pixels:
            # not after a grey conversion (the tail), nor with a user map (``prefix_lines``)
            return self.phase < 2 and self.umap is None
        if kind == "user_map":
            return self.phase == 0
        if kind == "sampler" and (n.op.mode == "edge" or not n.op.warp_clip):
            return self.phase == 0
        if kind == "sampler":
            # a sampler that may need scikit-image's data-dependent clip reads a stored value,
            # whose minimum is then measured (see needs_warp_clip)
            h, w = self.cur
            return self.phase == 0 and (n.gated_off or not needs_warp_clip(
                affine3(n.op, h, w, n.params), (h, w), n.shape[:2]))
        if kind == "pixel":
            return self.phase < 2 and self.channels >= 3
        return True

    def add(self, n: Node) -> None:
        """Fuse ``n`` (``accepts`` must have said yes)."""
        spec = n.op
        h, w = self.cur
        if spec.kind in CHAIN_KINDS:
            if spec.stat and not n.gated_off:
                # the reduction sees this kernel as it is before ``n``
                snap = copy.copy(self)
                for name in ("nodes", "pre", "post", "grey_ops", "stats", "new_stats"):
                    setattr(snap, name, list(getattr(self, name)))
                self.stats.append((n, snap))
                self.new_stats.append((n, snap))
            self.positional = self.positional or spec.reads_position
            (self.pre, self.post, self.grey_ops)[self.phase].append(n)
        elif spec.kind == "user_map":
            self.A = np.eye(3)
            self.umap = n
            self.mid = (h, w)
            self.phase = 1
        elif spec.kind == "index_map":
            if spec.fills:
                self.fill = float(n.params[-1])
                if not n.gated_off:
                    whole = self.window or (0, 0) + tuple(self.source.shape[:2])
                    self.window = tuple(int(v) for v in fill_window(whole, self.P, (h, w)))
            # a gated-off map (batch.py) leaves the matrices as if it were never recorded
            if not n.gated_off:
                m = affine3(spec, h, w, n.params)
                if self.A is None:
                    self.P = self.P @ m
                else:
                    self.A = self.A @ m
        elif spec.kind == "sampler":
            # gated off: an identity map, and the batched kernel reads one tap unblended
            self.A = np.eye(3) if n.gated_off else affine3(spec, h, w, n.params)
            self.mid = (h, w)
            self.phase = 1
            # an empty input has no edge to repeat: every position reads the zero outside it
            self.edge = spec.mode == "edge" and h > 0 and w > 0
            self.nearest = spec.nearest
            self.projective = spec.projective and not n.gated_off
            # a homography's positions go to infinity where its third row is 0: tested
            self.guard = self.projective or (not self.edge and wide_map(self.A, n.shape[:2]))
            self.clip_check = (spec.warp_clip and not self.edge
                               and needs_warp_clip(self.A, (h, w), n.shape[:2]))
        elif spec.kind == "pixel":
            self.phase = 2
            self.grey = spec.name
        self.cur = n.shape[:2]
        self.nodes.append(n)


@dataclass
class Stat(Kernel):
    """The per-image statistic (``kernels.stats``: a grey sum, channel ranges, histograms) an
    op of a gather reads: ``prefix`` is that gather as it was before the op, run as a
    reduction. Stores no node value (``execute``)."""

    prefix: Gather | None = None


def _flush_stats(kernels: list[Kernel], k: Kernel) -> None:
    """Put the reductions a gather's newly fused stat ops need right before it."""
    if isinstance(k, Gather) and k.new_stats:
        at = kernels.index(k)
        for node, prefix in k.new_stats:
            kernels.insert(at, Stat("stat", k.source, [node], prefix=prefix))
            at += 1
        k.new_stats = []


@dataclass
class Stencil(Kernel):
    """A separable stencil, with uint8 elementwise chains fused as tables: ``pre`` applied to
    each value it loads (a prologue), ``post`` to each value it stores (an epilogue)."""

    pre: list[Node] = field(default_factory=list)
    post: list[Node] = field(default_factory=list)

    @property
    def stencil(self) -> Node:
        """The stencil node itself."""
        return next(n for n in self.nodes if _kind(n) == "stencil")


def _table_op(n: Node) -> bool:
    """An elementwise op on uint8 values: a 256-entry table can stand for it (not one that
    reads a statistic of its input: a stencil's tables run no reduction first)."""
    return (_kind(n) == "elementwise" and n.dtype == np.uint8 and n.inputs[0].dtype == np.uint8
            and not n.op.stat)


def _stencil_with_prologue(k: Kernel | None, n: Node) -> Stencil | None:
    """``n`` (a stencil) reading the open kernel ``k``'s output, folded into one kernel when
    ``k`` only copies on its own device (any dtype) or also applies uint8 tables."""
    if k is None:
        return None
    if k.kind == "copy" and k.source.device == k.output.device:
        return Stencil("stencil", k.source, [*k.nodes, n])
    if n.dtype == np.uint8 and isinstance(k, Gather) and all(
        _table_op(m) or (m.op == "copy" and m.device == k.source.device) for m in k.nodes
    ):
        return Stencil("stencil", k.source, [*k.nodes, n], pre=list(k.pre))
    return None


@dataclass
class Expr(Kernel):
    """Fused NumPy arithmetic: ``nodes`` (topological order) over stored ``leaves``.

    For a reduction the last node is the reduce and the others are its fused map.
    """

    leaves: list[Node] = field(default_factory=list)


def _kind(n: Node) -> str:
    op = n.op
    return op if isinstance(op, str) else getattr(op, "kind", "leaf")


def _expr_kernel(root: Node, fusable: Callable[[Node], bool]) -> Expr:
    members: list[Node] = []
    seen: set[int] = set()

    def visit(n: Node) -> None:
        if n.id in seen:
            return
        seen.add(n.id)
        for i in n.inputs:
            if i is not root and not i.materialized and _kind(i) == "arith" and fusable(i):
                visit(i)
        members.append(n)

    visit(root)
    leaves: list[Node] = []
    for n in members:
        for i in n.inputs:
            if i.id not in seen and all(i is not x for x in leaves):
                leaves.append(i)
    return Expr("expr", leaves[0], members, leaves)


def needs_warp_clip(a: np.ndarray, mid: tuple[int, int], out: tuple[int, int]) -> bool:
    """Whether scikit-image's ``warp(clip=True)`` could change this sampler's output.

    skimage clips to the input's [min, max] unless the output holds the fill value 0. With a
    fill of 0 that happens iff some output pixel lies wholly outside the input; the inside
    region is convex, so checking the output's four corners decides it. Integer maps
    interpolate nothing and never need the clip.
    """
    if all(abs(v - round(v)) <= 1e-12 for v in a[:2].ravel().tolist()):
        return False
    mh, mw = mid
    for y in (0, out[0] - 1):
        for x in (0, out[1] - 1):
            fy, fx = a[0, 0] * y + a[0, 1] * x + a[0, 2], a[1, 0] * y + a[1, 1] * x + a[1, 2]
            if fy <= -1 or fy >= mh or fx <= -1 or fx >= mw:
                return False
    return True


def _new_kernel(n: Node, source: Node) -> Kernel:
    if n.op == "copy":
        return Kernel("copy", source, [n])
    if n.op == "move":
        return Kernel("move", source, [n])
    if isinstance(n.op, OpSpec) and n.op.kind == "stencil":
        return Stencil("stencil", source, [n])
    if isinstance(n.op, OpSpec) and n.op.kind in GATHER_KINDS:
        g = Gather("gather", source)
        g.add(n)
        return g
    raise TypeError(f"no kernel can run node {n!r}")


def plan(target: Node, fuse: bool | None = None, stencil_tables: bool = True) -> list[Kernel]:
    """Kernels, in order, that materialize ``target``.

    ``stencil_tables=False`` keeps elementwise ops out of stencils (the batched kernels take no
    prologue or epilogue tables yet).
    """
    if target.materialized:
        return []
    fuse = fusion_enabled() if fuse is None else fuse
    order, succ = _pending(target)

    def fusable(n: Node) -> bool:
        """``n`` need not be stored: only nodes of this graph read it, and it isn't wanted."""
        return fuse and n is not target and n.users == len(succ.get(n.id, ()))

    def feeds_only_expressions(n: Node) -> bool:
        return all(_kind(s) in ("arith", "reduce") for s in succ.get(n.id, ()))

    kernels: list[Kernel] = []
    open_by_tail: dict[int, Kernel] = {}
    for n in order:
        if n.materialized:
            continue
        kind = _kind(n)
        if kind == "arith":
            if not (fusable(n) and feeds_only_expressions(n)):
                kernels.append(_expr_kernel(n, lambda m: fusable(m) and
                                            feeds_only_expressions(m)))
            continue
        if kind == "reduce":
            kernels.append(_expr_kernel(n, lambda m: fusable(m) and
                                        feeds_only_expressions(m)))
            continue
        (src,) = n.inputs
        k = _place(n, open_by_tail.pop(src.id, None), fusable(src), stencil_tables, kernels)
        _flush_stats(kernels, k)
        open_by_tail[n.id] = k
    return kernels


def _place(n: Node, k: Kernel | None, src_fusable: bool, stencil_tables: bool,
           kernels: list[Kernel]) -> Kernel:
    """The kernel that runs ``n`` (not an expression), whose input's open kernel is ``k``.

    ``n`` joins ``k`` where fusion allows (``src_fusable``: fusion is on and the input need not
    be stored), which may replace ``k`` in ``kernels``; else a new kernel is appended.
    """
    (src,) = n.inputs
    if src_fusable and isinstance(k, Gather) and k.accepts(n):
        k.add(n)
        return k
    if (src_fusable and k is not None and k.kind == "copy" and src.device == k.source.device
            and _kind(n) in GATHER_KINDS):
        # a same-device copy followed by a gather: the gather reads the original and
        # writes the new buffer, so the copy costs no pass of its own
        g2 = Gather("gather", k.source)
        g2.nodes.append(src)
        if g2.accepts(n):
            g2.add(n)
            kernels[kernels.index(k)] = g2
            return g2
        k = _new_kernel(n, src)
        kernels.append(k)
        return k
    if (src_fusable and stencil_tables and _kind(n) == "stencil"
            and (st := _stencil_with_prologue(k, n)) is not None):
        kernels[kernels.index(k)] = st
        return st
    if (src_fusable and stencil_tables and isinstance(k, Stencil) and _table_op(n)
            and not n.op.stat):
        # (a statistic's op reads its input's mean, which only a Stat kernel before a gather
        # measures: its table cannot be built when planned)
        k.post.append(n)
        k.nodes.append(n)
        return k
    k = _new_kernel(n, src)
    kernels.append(k)
    return k
