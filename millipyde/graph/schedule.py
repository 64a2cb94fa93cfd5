"""Cut the graph of pending nodes into kernels (Grumpy's Algorithm 1, seed 003).

Walk back from the requested node to materialized leaves (a networkx DAG), then go forward in
topological order, growing a kernel while the next node can be fused into it and cutting where a
value must be stored: the requested node, nodes used more than once, stencils, copies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..kernels import OpSpec, affine_of
from .node import Node

GATHER_KINDS = ("elementwise", "index_map", "sampler", "pixel")


def fusion_enabled() -> bool:
    """Fusion is on unless ``MILLIPYDE_FUSION=0`` (the switch the fusion tests compare with)."""
    return os.environ.get("MILLIPYDE_FUSION", "1") != "0"


def pending_graph(target: Node) -> nx.DiGraph:
    """The DAG of unmaterialized ancestors of ``target`` plus the leaves they read."""
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


def full_range(dtype: np.dtype) -> float:
    """The value of full intensity for an image dtype: 1.0 for floats, the max for integers."""
    dtype = np.dtype(dtype)
    if dtype.kind in "ui":
        return float(np.iinfo(dtype).max)
    return 1.0


def _affine3(spec: OpSpec, h: int, w: int, params: tuple = ()) -> np.ndarray:
    m = np.eye(3)
    m[:2] = affine_of(spec, h, w, tuple(float(p) for p in params))
    return m


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
    cur: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        self.cur = self.source.shape[:2]

    @property
    def channels(self) -> int:
        """Channels of the source image."""
        return self.source.shape[2] if len(self.source.shape) == 3 else 1

    @property
    def lut_mode(self) -> bool:
        """uint8 sources fold elementwise chains into 256-entry tables."""
        return self.source.dtype == np.uint8

    def accepts(self, n: Node) -> bool:
        """Whether ``n`` can join this kernel."""
        if not isinstance(n.op, OpSpec) or n.op.kind not in GATHER_KINDS:
            return False
        kind = n.op.kind
        if kind == "sampler":
            return self.phase == 0
        if kind == "pixel":
            return self.phase < 2 and self.channels >= 3
        return True

    def add(self, n: Node) -> None:
        """Fuse ``n`` (``accepts`` must have said yes)."""
        spec = n.op
        h, w = self.cur
        if spec.kind == "elementwise":
            (self.pre, self.post, self.grey_ops)[self.phase].append(n)
        elif spec.kind == "index_map":
            m = _affine3(spec, h, w)
            if self.A is None:
                self.P = self.P @ m
            else:
                self.A = self.A @ m
        elif spec.kind == "sampler":
            self.A = _affine3(spec, h, w, n.params)
            self.mid = (h, w)
            self.phase = 1
        elif spec.kind == "pixel":
            self.phase = 2
        self.cur = n.shape[:2]
        self.nodes.append(n)


def _new_kernel(n: Node, source: Node) -> Kernel:
    if n.op == "copy":
        return Kernel("copy", source, [n])
    if n.op == "move":
        return Kernel("move", source, [n])
    if isinstance(n.op, OpSpec) and n.op.kind == "stencil":
        return Kernel("stencil", source, [n])
    if isinstance(n.op, OpSpec) and n.op.kind in GATHER_KINDS:
        g = Gather("gather", source)
        g.add(n)
        return g
    raise TypeError(f"no kernel can run node {n!r}")


def plan(target: Node, fuse: bool | None = None) -> list[Kernel]:
    """Kernels, in order, that materialize ``target``."""
    if target.materialized:
        return []
    fuse = fusion_enabled() if fuse is None else fuse
    g = pending_graph(target)
    kernels: list[Kernel] = []
    open_by_tail: dict[int, Kernel] = {}
    for n in nx.topological_sort(g):
        if n.materialized:
            continue
        (src,) = n.inputs
        k = open_by_tail.pop(src.id, None)
        if (
            fuse
            and k is not None
            and isinstance(k, Gather)
            and src.users == 1
            and src is not target
            and k.accepts(n)
        ):
            k.add(n)
        else:
            k = _new_kernel(n, src)
            kernels.append(k)
        open_by_tail[n.id] = k
    return kernels
