"""The layering contract: no import cycles in the package, and imports only point downwards.

Every ``import``/``from ... import`` in ``millipyde/`` counts, including those inside functions
(a deferred import is still a dependency). Layers, lowest first; a module may import its own
layer and the layers below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1] / "millipyde"

# (layer name, module-name prefixes); a module belongs to the first layer whose prefix matches
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("millipyde.version", "millipyde.config", "millipyde.source_cache",
              "millipyde.kernels", "millipyde.checks")),
    ("backend", ("millipyde.faults", "millipyde.backend.base", "millipyde.backend.selection",
                 "millipyde.backend.launcher", "millipyde.backend.pool",
                 "millipyde.backend.rawlaunch", "millipyde.backend.staging")),
    ("backend.impl", ("millipyde.backend.cpu", "millipyde.backend.cuda",
                      "millipyde.backend.cuda_devices", "millipyde.backend.cuda_memory",
                      "millipyde.backend.cuda_launch", "millipyde.backend.cuda_bound",
                      "millipyde.backend.cuda_jit", "millipyde.backend.jit_launch",
                      "millipyde.backend.cuda_pack",
                      "millipyde.backend.hip",
                      "millipyde.backend.sim")),
    ("backend.active", ("millipyde.backend",)),
    ("devices", ("millipyde.devices",)),
    ("graph.ir", ("millipyde.graph.ir",)),
    ("graph.codegen", ("millipyde.graph.codegen",)),
    ("graph.plan", ("millipyde.graph.plan",)),
    ("graph.exec", ("millipyde.graph.exec",)),
    ("graph.explain", ("millipyde.graph.explain", "millipyde.graph")),
    # the op definitions: read by the api (methods, batches), never by the graph or backends
    # (generated kernels name them in their text; the graph reads kernels through the nodes)
    ("ops", ("millipyde.ops",)),
    ("api", ("millipyde",)),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> nx.DiGraph:
    """Modules of the package and the package modules each one imports."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("millipyde") and target != name:
                    graph.add_edge(name, target)
    return graph


def layer_of(module: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no layer")


def _is_package_init(module: str) -> bool:
    return (ROOT.parent / module.replace(".", "/") / "__init__.py").exists()


def test_the_import_graph_is_read():
    graph = import_graph()
    # a parser that saw no imports would pass every check below
    assert graph.has_edge("millipyde.array", "millipyde.graph.exec.execute")
    assert graph.has_edge("millipyde.graph.exec.execute", "millipyde.graph.plan.schedule")
    assert graph.number_of_edges() > 50


def test_no_import_cycles():
    graph = import_graph()
    # a package's __init__ re-exports its modules: that is not a dependency of them on it
    graph.remove_edges_from([(a, b) for a, b in graph.edges if _is_package_init(b)])
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == [], f"import cycles: {cycles}"


def test_imports_only_point_down():
    graph = import_graph()
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
              for a, b in graph.edges
              if not _is_package_init(b) and layer_of(b) > layer_of(a)]
    assert upward == [], "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_the_installed_package_never_imports_the_repository_bench():
    graph = import_graph()
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "bench" or n.startswith("bench.") for n in names), path
    assert graph.number_of_nodes() > 20
