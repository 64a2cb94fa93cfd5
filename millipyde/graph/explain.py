"""``explain()``: what materializing a value would launch, without running anything.

A :class:`Plan` lists one entry per kernel launch with its fused ops, device and the bytes it
must read and write, prints as a table, and draws the operation graph (nodes coloured by the
kernel that computes them) to a PNG.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from ..kernels import REGISTRY
from ..kernels.registry import BlockCodec, Window
from ..kernels.stats import STATISTICS, stat_channels
from .exec.codec import PASSES as CODEC_PASSES
from .exec.variants import stencil_passes
from .ir.node import Node
from .plan.schedule import Kernel, pending_graph, plan

_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948",
            "#ff9da7", "#9c755f", "#bab0ac"]


def _nbytes(n: Node) -> int:
    size = 1
    for s in n.shape:
        size *= s
    return size * n.dtype.itemsize


@dataclass(frozen=True)
class KernelInfo:
    """One kernel launch of a plan."""

    index: int
    kind: str
    ops: tuple[str, ...]
    device: int
    bytes_read: int
    bytes_written: int
    launches: int

    def __str__(self) -> str:
        return (f"#{self.index} {self.kind:7s} dev {self.device}  {' -> '.join(self.ops):50s} "
                f"read {self.bytes_read / 1e6:9.3f} MB  write {self.bytes_written / 1e6:9.3f} MB")


def _stat_slots(k: Kernel) -> int:
    """Slots of the statistic row a stat kernel stores (``kernels.stats``)."""
    prefix = k.prefix  # type: ignore[attr-defined]
    return STATISTICS[k.output.op.stat].width(stat_channels(prefix.channels, prefix.phase == 2))


def _info(i: int, k: Kernel) -> KernelInfo:
    out = k.output
    sources = getattr(k, "leaves", None) or [k.source]
    read = sum(_nbytes(s) for s in sources)
    # a stat kernel (a statistic row for a fused op) stores its row, not its op's value
    written = 8 * _stat_slots(k) if k.kind == "stat" else _nbytes(out)
    launches = 1
    if k.kind == "stencil":
        n = k.stencil
        taps = REGISTRY[n.op.name].fn(*n.params)
        if isinstance(taps, Window):  # the window passes: two, or one (a median, a plane)
            launches = 1 if taps.median or taps.plane is not None else 2
        elif isinstance(taps, BlockCodec):  # samples, coefficients, decode, colour
            launches = CODEC_PASSES
        else:
            launches = stencil_passes(len(taps) // 2)
        if launches == 2:
            # the rows pass writes a float64 temporary that the cols pass reads back
            c = out.shape[2] if len(out.shape) == 3 else 1
            tmp = out.shape[0] * out.shape[1] * min(c, 3) * 8
            read += tmp
            written += tmp
    return KernelInfo(i, k.kind, tuple(k.names), out.device, read, written, launches)


class Plan:
    """The kernels that materializing a node would run, and the graph they come from."""

    def __init__(self, target: Node, fuse: bool | None = None, title: str = "") -> None:
        self.graph: nx.DiGraph = pending_graph(target)
        self._kernels: list[Kernel] = plan(target, fuse=fuse)
        self.kernels: list[KernelInfo] = [_info(i, k) for i, k in enumerate(self._kernels)]
        self.title = title

    @property
    def bytes_moved(self) -> int:
        """Device bytes read plus written by all kernels."""
        return sum(k.bytes_read + k.bytes_written for k in self.kernels)

    def __len__(self) -> int:
        return len(self.kernels)

    def __str__(self) -> str:
        head = f"{self.title}: " if self.title else ""
        lines = [f"{head}{len(self.kernels)} kernel(s), "
                 f"{sum(k.launches for k in self.kernels)} launch(es), "
                 f"{self.bytes_moved / 1e6:.3f} MB moved"]
        lines += [f"  {k}" for k in self.kernels]
        return "\n".join(lines)

    __repr__ = __str__

    def to_png(self, path: str | Path, width: int = 900) -> Path:
        """Draw the operation graph, nodes coloured by kernel, to ``path`` (PNG)."""
        from PIL import Image, ImageDraw

        owner: dict[int, int] = {}
        for i, k in enumerate(self._kernels):
            for n in k.nodes:
                owner[n.id] = i
        layers = list(nx.topological_generations(self.graph))
        box_w, box_h, gap_y = 150, 34, 26
        cols = max(len(layer) for layer in layers) if layers else 1
        width = max(width, cols * (box_w + 20) + 20)
        height = len(layers) * (box_h + gap_y) + gap_y + 20 * (len(self._kernels) + 1)
        img = Image.new("RGB", (width, height), "white")
        draw = ImageDraw.Draw(img)
        pos: dict[int, tuple[int, int]] = {}
        for row, layer in enumerate(layers):
            step = width // (len(layer) + 1)
            for j, n in enumerate(sorted(layer, key=lambda m: m.id)):
                pos[n.id] = (step * (j + 1), gap_y + row * (box_h + gap_y))
        for a, b in self.graph.edges:
            (xa, ya), (xb, yb) = pos[a.id], pos[b.id]
            draw.line([(xa, ya + box_h), (xb, yb)], fill="#555555", width=2)
        for n in self.graph.nodes:
            x, y = pos[n.id]
            k = owner.get(n.id)
            fill = "#dddddd" if k is None else _PALETTE[k % len(_PALETTE)]
            draw.rectangle([x - box_w // 2, y, x + box_w // 2, y + box_h], fill=fill,
                           outline="black")
            label = n.name if k is None else f"{n.name} [k{k}]"
            draw.text((x - box_w // 2 + 6, y + 4), label, fill="black")
            draw.text((x - box_w // 2 + 6, y + 18), "x".join(map(str, n.shape)) + f" {n.dtype}",
                      fill="black")
        y0 = len(layers) * (box_h + gap_y) + gap_y
        draw.text((10, y0), str(self).splitlines()[0], fill="black")
        for i, k in enumerate(self.kernels):
            draw.text((10, y0 + 20 * (i + 1)), f"k{i}: {', '.join(k.ops)}",
                      fill=_PALETTE[i % len(_PALETTE)])
        path = Path(path)
        img.save(path)
        return path


def explain_operations(x, operations, seed: int, sample: int, copy: bool, title: str) -> Plan:
    """The plan of applying ``operations`` to ``x`` as an executor would, for one sample.

    Built-in methods only record; a Python-callable Operation is called (its work cannot be
    known otherwise). ``copy`` starts from a device copy, as a Generator's outputs do.
    """
    from .ir.node import apply

    node = apply("copy", x._node, (), x.shape, x.dtype) if copy else x._node
    probe = x._new_like(node)
    for index, op in enumerate(operations):
        op.apply(probe, seed, sample, index)
    return Plan(probe._node, title=title)
