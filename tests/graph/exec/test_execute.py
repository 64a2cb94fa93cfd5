"""The driver finds a runner for every kernel kind the planner makes."""

from __future__ import annotations

import ast
from pathlib import Path

from millipyde.graph.exec import execute
from millipyde.graph.plan import schedule


def _planned_kinds() -> set[str]:
    """The kinds ``schedule`` builds kernels of: the first argument of each kernel class call."""
    tree = ast.parse(Path(schedule.__file__).read_text())
    classes = {"Kernel", "Gather", "Stencil", "Expr", "Stat"}
    return {n.args[0].value for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in classes
            and n.args and isinstance(n.args[0], ast.Constant)}


def test_every_planned_kind_has_a_registered_runner() -> None:
    kinds = _planned_kinds()
    assert {"gather", "stencil", "expr", "copy", "move", "stat"} <= kinds  # the scan saw them
    assert kinds <= set(execute.RUNNERS), kinds - set(execute.RUNNERS)
