"""The layering contract: no import cycles in the package, and imports only point downwards.

Every ``import``/``from ... import`` in ``millipyde/`` counts, including those inside functions
(a deferred import is still a dependency). Layers, lowest first; a module may import its own
layer and the layers below it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1] / "millipyde"

#: the package's own ``__init__``: a layer entry of it holds that module alone (every other
#: module's name starts with it, and each belongs to a layer of its own)
ROOT_PACKAGE = "millipyde"

# (layer name, module-name prefixes); a module belongs to the first layer whose prefix matches
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # (and ``childproc``: starting, watching and stopping the worker processes of the decode
    # and the Pipeline, below both)
    ("base", ("millipyde.version", "millipyde.config", "millipyde.source_cache",
              "millipyde.kernels", "millipyde.checks", "millipyde.childproc")),
    ("backend", ("millipyde.faults", "millipyde.backend.base", "millipyde.backend.selection",
                 "millipyde.backend.launcher", "millipyde.backend.pool",
                 "millipyde.backend.rawlaunch", "millipyde.backend.staging",
                 "millipyde.backend.dlpack")),
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
    # the api, what users import, from the values up to the entry points:
    # the handles, their random streams, targets and commit locks; reading and writing files
    # (io reads them, encode writes PNGs outside the GIL)
    ("api.values", ("millipyde.random", "millipyde.targets", "millipyde.locks", "millipyde.array",
                    "millipyde.image", "millipyde.io", "millipyde.encode", "millipyde.torch")),
    # streamed sources: files, shards, decoders, samplers, the loader
    ("api.data", ("millipyde.data",)),
    # user ops: what their function computes, and the decorators that make them
    ("api.user_ops", ("millipyde.user_functions", "millipyde.decorators")),
    # Operations, their compositions, the per-device workers that apply them, and the batch
    # mixes (MixUp, CutMix: Operations on a whole batch, which transforms name and batches run)
    ("api.operations", ("millipyde.operation", "millipyde.compose", "millipyde.workers",
                        "millipyde.training.batch_mix")),
    # torchvision's transforms as Operations (and the conversions a Generator takes as settings)
    ("api.transforms", tuple(f"millipyde.transforms.{m}" for m in (
        "base", "options", "colour", "geometry", "misc", "mix", "containers", "unsupported"))),
    # augmentation policies and AugMix (over the transforms' base), and their torchvision names
    ("api.policies", ("millipyde.policies", "millipyde.augmix", "millipyde.transforms.policies")),
    ("api.distributed", ("millipyde.distributed",)),
    ("api.training", ("millipyde.training",)),
    ("api.pipeline", ("millipyde.pipeline",)),
    # the transforms package as users import it (``millipyde.transforms``, ``.v2``)
    ("api.transforms.package", ("millipyde.transforms",)),
    # the package (its lazy names reach every layer) and the command line
    ("api.entry", ("millipyde.cli", "millipyde.__main__", ROOT_PACKAGE)),
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


@functools.cache
def _parsed() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package: its file and its syntax tree (parsed once for all tests)."""
    return {_module_name(p): (p, ast.parse(p.read_text(), str(p)))
            for p in sorted(ROOT.rglob("*.py"))}


def import_graph() -> nx.DiGraph:
    """Modules of the package and the package modules each one imports."""
    modules = _parsed()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, (path, tree) in modules.items():
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
        if any(module == p or (p != ROOT_PACKAGE and module.startswith(p + "."))
               for p in prefixes):
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
    for path, tree in _parsed().values():
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "bench" or n.startswith("bench.") for n in names), path
    assert graph.number_of_nodes() > 20


# --- names that cross a module are public -------------------------------------------------

#: Private names another millipyde module may still use, each an alias kept at its definition
#: while a module being changed elsewhere still imports the old name. Only such aliases belong
#: here, and each goes once its last user imports the public name.
PRIVATE_ALIASES: dict[str, str] = {}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


@functools.cache
def cross_module_uses() -> tuple[tuple[str, int, str, str], ...]:
    """Every use of another millipyde module's name: (file, line, using module, the name in
    full), from ``from .x import name`` and from ``mod.name`` where ``mod`` is a millipyde
    module (imported as a module, by any form of import, at any depth of the file)."""
    modules = _parsed()
    uses = []
    for name, (path, tree) in modules.items():
        rel = str(path.relative_to(ROOT.parent))
        aliases: dict[str, str] = {}  # a local name (dotted for ``import a.b``) -> its module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(name, path.name == "__init__.py", node)
                if not base.startswith("millipyde"):
                    continue
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in modules:
                        aliases[a.asname or a.name] = full
                    if base != name:
                        uses.append((rel, node.lineno, name, full))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("millipyde"):
                        aliases[a.asname or a.name] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                owner = _dotted(node.value)
                module = aliases.get(owner or "") or (owner if owner in modules else None)
                if module is not None and module != name:
                    uses.append((rel, node.lineno, name, f"{module}.{node.attr}"))
    return tuple(uses)


def test_the_cross_module_uses_are_read():
    uses = {(user, full) for _, _, user, full in cross_module_uses()}
    # one of each form: a scan that saw neither would pass the check below
    assert ("millipyde.training.batches", "millipyde.graph.exec.batch.launch") in uses
    assert ("millipyde.training.batches", "millipyde.faults.ARMED") in uses


def test_names_that_cross_a_module_are_public():
    private = [f"{file}:{line}: {user} uses {full}"
               for file, line, user, full in cross_module_uses()
               if any(_private(part) for part in full.split(".")) and full not in PRIVATE_ALIASES]
    assert private == [], ("private names used by another module (give them a public name at "
                           "their definition):\n" + "\n".join(private))


def test_the_private_aliases_are_still_needed():
    import importlib

    used = {full for _, _, _, full in cross_module_uses()}
    for old, new in PRIVATE_ALIASES.items():
        module, _, attr = old.rpartition(".")
        public = new.rpartition(".")[2]
        assert getattr(importlib.import_module(module), attr) is getattr(
            importlib.import_module(module), public), f"{old} is not an alias of {new}"
        assert old in used, f"no module uses {old} any more: remove the alias and this entry"
