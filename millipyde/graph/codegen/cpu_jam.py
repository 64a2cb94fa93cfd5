"""The cpu target's pixel loops two pixels a trip, their statements interleaved.

A fused gather's pixel is one long chain of dependent float64 operations (a bilinear sample,
then each chained op on its result, divisions and float-to-integer conversions among them:
the ImageNet recipe's colour ops are 70-100 cycles of latency a pixel each), longer than a
core's reorder window: the next pixel's chain starts only as this one's ends, and the core
mostly waits. Here the generated body of ``for x in range(w)`` is written for two pixels, ``x``
and ``x + 1``, statement by statement (each statement of the second pixel right after the
first's, the second's local names renamed), so two independent chains are in flight at
once. An ``if`` on names the body does not assign (per member gates, the sampler's gate) is
shared by both pixels and interleaved inside; any other compound statement runs once per
pixel, one after the other. An odd last column runs the body as it was.

Each pixel computes what it computed before, with the same operations in the same order, and
the stores go to the same places: results are bit-identical. The rewrite is made only where
that holds: every name the body assigns must be assigned before the body reads it (no value
carried from one pixel to the next, as a reduction's running sum is), no array the body
stores to is read by it, and the body has no ``break``, ``continue``, ``return`` or
``yield``. Otherwise the loop is kept as it was.
"""

from __future__ import annotations

import ast
import threading

#: pixels a trip of the rewritten loop (2: the colour gathers' chains overlap; more lanes spill
#: the 16 vector registers of x86-64 for nothing)
LANES = 2
_SUFFIX = "_j1"


def _assigned(nodes: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
    return out


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx,
                                                                                      ast.Load)}


def _defined_before_read(stmts: list[ast.stmt], local: set[str], done: set[str]) -> set[str]:
    """Names of ``local`` surely assigned after ``stmts`` (from ``done``); raises ValueError
    where one is read before it is surely assigned (a value carried between pixels)."""
    done = set(done)
    for s in stmts:
        if isinstance(s, ast.If):
            if _reads(s.test) & local - done:
                raise ValueError("read before assigned")
            a = _defined_before_read(s.body, local, done)
            b = _defined_before_read(s.orelse, local, done)
            done |= a & b
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            value = s.value if s.value is not None else ast.Constant(None)
            reads = _reads(value)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    if isinstance(s, ast.AugAssign):
                        reads.add(t.id)
                else:
                    reads |= _reads(t)
            if reads & local - done:
                raise ValueError("read before assigned")
            done |= _assigned([s])
        else:
            # loops and the rest: every name they read must be there already, and what they
            # assign counts as assigned only after them
            if _reads(s) & local - done - _assigned([s]):
                raise ValueError("read before assigned")
            if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in local
                   and n.id not in done for n in ast.walk(s)):
                raise ValueError("a compound statement reading its own names")
            done |= _assigned([s])
    return done


class _Rename(ast.NodeTransformer):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            return ast.copy_location(ast.Name(node.id + _SUFFIX, node.ctx), node)
        return node


def _lane(s: ast.stmt, names: set[str]) -> ast.stmt:
    return _Rename(names).visit(ast.parse(ast.unparse(s)).body[0])


def _interleave(stmts: list[ast.stmt], names: set[str]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, ast.If) and not _reads(s.test) & names:
            # a condition of the member, the same for both pixels: one ``if``
            s2 = ast.If(s.test, _interleave(s.body, names) or [ast.Pass()],
                        _interleave(s.orelse, names))
            out.append(s2)
        else:
            out.extend([s, _lane(s, names)])
    return out


def _check(body: list[ast.stmt], names: set[str]) -> None:
    for n in ast.walk(ast.Module(body, [])):
        if isinstance(n, (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom,
                          ast.Global, ast.Nonlocal, ast.FunctionDef, ast.Lambda)):
            raise ValueError(f"a {type(n).__name__} in the body")
    stored: set[str] = set()
    for n in ast.walk(ast.Module(body, [])):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
            stored |= _reads(n.value)
    loaded = set()
    for n in ast.walk(ast.Module(body, [])):
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
            loaded |= _reads(n.value)
    if stored & loaded:
        raise ValueError("the body reads an array it writes")
    if stored & names:
        raise ValueError("the body stores into a local array")
    _defined_before_read(body, names, set())


#: CPython 3.11's parser keeps its recursion depth per interpreter, not per thread: two
#: threads parsing at once (two Generator workers generating kernels) can fail with
#: "SystemError: AST constructor recursion depth mismatch" (seen in CI): one parse at a time
_PARSE = threading.Lock()


def pixel_loop(x: str, w: str, body: str) -> str:
    """``for x in range(w):`` over ``body`` (text at indent 0), as two pixels a trip where
    that computes the same (see the module doc); text at indent 0."""
    plain = f"for {x} in range({w}):\n" + _indent(body)
    with _PARSE:
        try:
            tree = ast.parse(body).body
            names = _assigned(tree) | {x}
            _check(tree, names - {x})
        except (SyntaxError, ValueError):
            return plain
        jammed = _interleave(tree, names)
        two = "\n".join(ast.unparse(s) for s in jammed)
    return (f"for {x} in range(0, {w} - 1, 2):\n"
            f"    {x}{_SUFFIX} = {x} + 1\n" + _indent(two)
            + f"if {w} % 2 == 1:\n    {x} = {w} - 1\n" + _indent(body))


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" if line else "\n" for line in text.splitlines())
