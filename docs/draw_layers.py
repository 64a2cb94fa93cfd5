"""Draw docs/layers.png: the package's layers and the imports between them, from the code.

    python docs/draw_layers.py [--out docs/layers.png]

The import graph and the layer table are tests/test_layers.py's (the layering contract), so
the picture shows what that test checks. Modules are grouped (one box per graph/ folder, per
backend module, per top-level module); an arrow is drawn when any module of a box imports one
of another. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_layers import LAYERS, import_graph, layer_of  # noqa: E402


def box_of(module: str) -> str:
    """The box a module is drawn in: graph/ folders and packages' __init__ are one box each; a
    package's modules share its box, but for those of another layer than its own, drawn one
    by one."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    if parts[0] == "graph" and len(parts) > 1 and parts[1] in ("ir", "plan", "codegen", "exec"):
        return f"graph/{parts[1]}/"
    if parts[0] == "kernels":
        return "kernels/"
    if parts[0] == "backend":
        return "backend/" + (f"{parts[1]}.py" if len(parts) > 1 else "__init__ (ACTIVE)")
    if parts[0] == "graph":
        return "graph/" + (f"{parts[1]}.py" if len(parts) > 1 else "__init__")
    package = f"millipyde.{parts[0]}"
    if len(parts) == 1 and not _is_package(package):
        return f"{parts[0]}.py"
    if len(parts) > 1 and layer_of(module) != layer_of(package):
        return f"{parts[0]}/{parts[1]}.py"
    return f"{parts[0]}/"


def _is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


def boxes() -> tuple[nx.DiGraph, dict[str, int]]:
    """The grouped graph and each box's layer (the lowest of its modules')."""
    graph = import_graph()
    grouped = nx.DiGraph()
    level: dict[str, int] = {}
    for module in graph.nodes:
        box = box_of(module)
        grouped.add_node(box)
        level[box] = min(level.get(box, 99), layer_of(module))
    for a, b in graph.edges:
        if box_of(a) != box_of(b):
            grouped.add_edge(box_of(a), box_of(b))
    return grouped, level


def draw(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped, level = boxes()
    rows: dict[int, list[str]] = {}
    for box in sorted(grouped.nodes):
        rows.setdefault(level[box], []).append(box)
    width = max(len(r) for r in rows.values())
    pos = {}
    for lv, names in rows.items():
        for i, name in enumerate(names):
            pos[name] = ((i + 0.5) * width / len(names), lv * 1.6)
    fig, ax = plt.subplots(figsize=(2.0 * width + 2, 1.3 * len(LAYERS) + 1), dpi=110)
    for a, b in grouped.edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        same = level[a] == level[b]  # within one layer: an arc above the row
        ax.annotate("", xy=(x1, y1 + 0.25), xytext=(x0, y0 + (0.25 if same else -0.25)),
                    arrowprops={"arrowstyle": "->", "color": "#9aa7b8", "lw": 0.7,
                                "shrinkA": 2, "shrinkB": 2,
                                "connectionstyle": "arc3,rad=-0.25" if same else "arc3"})
    for name, (x, y) in pos.items():
        ax.text(x, y, name, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round,pad=0.35", "fc": "#e8eef6", "ec": "#46607f"})
    for lv, (layer, _) in enumerate(LAYERS):
        if lv in rows:
            ax.text(-0.6, lv * 1.6, layer, ha="right", va="center", fontsize=9,
                    weight="bold", color="#46607f")
    ax.set_xlim(-3.2, width + 0.2)
    ax.set_ylim(-0.8, (len(LAYERS) - 1) * 1.6 + 1.8)  # room for the arcs of the top row
    ax.axis("off")
    ax.set_title("millipyde: layers (lowest at the bottom) and imports; arrows point down "
                 "(tests/test_layers.py)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out} ({grouped.number_of_nodes()} boxes, {grouped.number_of_edges()} "
          f"imports between them)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "layers.png")
    draw(parser.parse_args().out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
