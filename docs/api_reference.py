"""Write docs/API.md: the reference of millipyde's public names, from their docstrings.

    python docs/api_reference.py [--check]

Every public name of ``millipyde`` (its ``__all__``) and of the subpackages users import
(:data:`GROUPS`) gets a section: its signature (parameter defaults as written in the source),
its docstring's description and its numpydoc Parameters / Returns / Yields / Raises sections
as Markdown; a class also its public methods and properties. The gpuimage methods that are
forms of the op library get one line linking to docs/OPS.md, which has them. ``--check``
writes nothing and exits 1, naming the sections that differ, when docs/API.md is not what
this script writes (tests/test_docs_api.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import enum
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "API.md"
COMMAND = "python docs/api_reference.py"

#: the page's groups: (title, intro, [(module, names or None for its ``__all__``)]); names
#: in a group are sorted per module, modules in the order given
GROUPS: list[tuple[str, str, list[tuple[str, list[str] | None]]]] = [
    ("Arrays and images",
     "Device arrays and images, reading image files, and the global seed.",
     [("millipyde", ["gpuarray", "gpuimage", "image_from_path", "images_from_path",
                     "max_image_pixels", "seed", "set_max_image_pixels"]),
      ("millipyde.targets", ["Targets"])]),
    ("Devices",
     "The devices of the active backend and the ``with mp.Device(i)`` scope.",
     [("millipyde", ["DEVICE_COUNT", "Device", "device_count", "get_current_device",
                     "get_device_count", "synchronize"])]),
    ("Operation, Pipeline, Generator",
     "Operations and their compositions, policies and batch mixes, user ops, Pipelines, "
     "Generators and the built-in recipes.",
     [("millipyde", ["AugMix", "AutoAugment", "AutoAugmentPolicy", "CutMix", "Generator",
                     "MixUp", "OneOf", "Operation", "Pipeline", "RandAugment", "RandomChoice",
                     "RandomOrder", "SomeOf", "TrivialAugmentWide", "elementwise", "index_map",
                     "pixelwise"]),
      ("millipyde.pipeline", None),
      ("millipyde.training.recipes", ["RECIPES", "operations"])]),
    ("Data sources and streams",
     "``mp.data``: streamed sources for a Generator (docs/DATA.md is the guide).",
     [("millipyde", ["data"]), ("millipyde.data", None)]),
    ("Transforms",
     "``millipyde.transforms``: torchvision.transforms.v2's names over the op library.",
     [("millipyde.transforms", None)]),
    ("torch",
     "``millipyde.torch``: the PyTorch adapter (imports without torch; torch is needed when "
     "a stream runs: ``pip install millipyde[torch]``).",
     [("millipyde.torch", ["BatchStream", "iterable_dataset", "to_tensor"])]),
    ("Distributed",
     "``millipyde.distributed``: Pipelines and Generators on a Dask cluster (imports without "
     "dask; the ``dask`` extra is needed to run; docs/DISTRIBUTED.md has the details).",
     [("millipyde.distributed", None)]),
    ("Configuration and errors",
     "The backend, the settings read from ``MILLIPYDE_*`` variables (README, Environment "
     "variables) and the errors raised on bad arguments.",
     [("millipyde", ["backend"]), ("millipyde.config", ["refresh"]),
      ("millipyde.array", ["ArgumentError"])]),
]

#: signatures longer than this are written one parameter a line
WIDTH = 96

#: dunder methods documented where a class defines them with a docstring
PROTOCOL = ("__call__", "__enter__", "__exit__", "__iter__", "__len__", "__next__")

_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(~?)([^`<]*?)(?:\s*<[^>]*>)?`")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SECTION_NAMES = ("Parameters", "Other Parameters", "Returns", "Yields", "Raises", "Warns",
                  "Attributes")


def markdown_text(text: str) -> str:
    """reST inline markup as Markdown: roles and double backquotes to code spans."""
    text = _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`",
                     text)
    return text.replace("``", "`")


def own_doc(obj: Any) -> str:
    """``obj``'s own docstring, cleaned ('' where it has none: no inherited text)."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    doc = getattr(obj, "__doc__", None)  # a property's: its ``doc=``, else its getter's
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else ""


def split_sections(doc: str) -> tuple[list[str], dict[str, list[str]]]:
    """The description lines and the numpydoc sections (title -> lines) of a docstring."""
    lines = doc.splitlines()
    head: list[str] = []
    sections: dict[str, list[str]] = {}
    current = head
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and re.fullmatch(r"-{3,}", nxt.strip()) and not line.startswith(" "):
            current = sections.setdefault(line.strip(), [])
            i += 2
            continue
        current.append(line)
        i += 1
    return head, sections


def render_prose(lines: list[str]) -> list[str]:
    """Description lines as Markdown paragraphs; doctests and ``::`` blocks fenced."""
    out: list[str] = []
    para: list[str] = []
    block: list[str] = []
    mode = ""  # "doctest" or "literal" while a block is open
    expect_literal = False

    def flush_para() -> None:
        nonlocal expect_literal
        if para:
            text = "\n".join(para)
            expect_literal = text.endswith("::")
            out.extend([markdown_text(text[:-1] if expect_literal else text), ""])
            para.clear()

    def flush_block() -> None:
        while block and not block[-1].strip():
            block.pop()
        out.extend(["```python", *textwrap.dedent("\n".join(block)).splitlines(), "```", ""])
        block.clear()

    for line in [*lines, ""]:
        stripped = line.strip()
        if mode == "doctest" and stripped or mode == "literal" and (
                not stripped or line.startswith(" ")):
            block.append(line)
            continue
        if mode:
            flush_block()
            mode = ""
            expect_literal = False
        if stripped.startswith(">>>"):
            flush_para()
            mode = "doctest"
            block.append(line)
        elif expect_literal and stripped and line.startswith(" ") and not para:
            mode = "literal"
            block.append(line)
        elif not stripped:
            flush_para()
        else:
            expect_literal = False
            para.append(stripped)
    if block:
        flush_block()
    while out and not out[-1]:
        out.pop()
    return out


def entries(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """A numpydoc list section's entries: (the head line, its description lines)."""
    head: str | None = None
    desc: list[str] = []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            if head is not None:
                yield head, desc
            head, desc = line.strip(), []
        elif head is not None:
            desc.append(line.strip())
    if head is not None:
        yield head, desc


def render_section(title: str, lines: list[str]) -> list[str]:
    """A numpydoc section as a bold title and a bullet list."""
    items = []
    for head, desc in entries(lines):
        text = " ".join(d for d in desc if d)
        if title in ("Raises", "Warns"):
            label = f"`{head}`"
        elif " : " in head or head.endswith(" :"):
            name, _, kind = head.partition(" :")
            kind = kind.strip()
            label = f"`{name.strip()}` ({markdown_text(kind)})" if kind else f"`{name.strip()}`"
        elif title in ("Returns", "Yields"):
            label = markdown_text(head)
        else:
            label = f"`{head}`"
        items.append(f"- {label}" + (f": {markdown_text(text)}" if text else ""))
    return [f"**{title}**", "", *items] if items else []


def render_doc(doc: str) -> list[str]:
    """A docstring as Markdown: its description, then its list sections."""
    if not doc:
        return ["*(no docstring)*"]
    head, sections = split_sections(doc)
    out = render_prose(head)
    for title in _SECTION_NAMES:
        if title in sections:
            part = render_section(title, sections[title])
            if part:
                out.extend(["", *part])
    return out


def _defaults_as_written(func: Callable) -> dict[str, str]:
    """Parameter name -> its default's source text (empty where the source is not found)."""
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(func)))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    fn = next((n for n in ast.walk(tree)
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return {}
    args = fn.args
    positional = args.posonlyargs + args.args
    with_default = positional[len(positional) - len(args.defaults):]
    found = {a.arg: ast.get_source_segment(source, d)
             for a, d in zip(with_default, args.defaults, strict=True)}
    found.update({a.arg: ast.get_source_segment(source, d)
                  for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                  if d is not None})
    return {k: v for k, v in found.items() if v is not None}


def _annotation(value: Any) -> str:
    return value if isinstance(value, str) else inspect.formatannotation(value)


def signature(obj: Any, name: str) -> str | None:
    """``name(params) -> return`` with defaults as written, or None where there is none."""
    func = obj
    if inspect.isclass(obj):
        if issubclass(obj, (enum.Enum, BaseException)):
            return None
        func = obj.__init__ if "__init__" in _own_attrs(obj) or _millipyde(obj.__init__) \
            else obj
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    written = _defaults_as_written(func) if inspect.isfunction(inspect.unwrap(func)) else {}
    parts = []
    star = False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if p.kind is p.VAR_POSITIONAL:
            star = True
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            default = written.get(p.name) or _ADDRESS.sub("", repr(p.default))
            text += f" = {default}" if p.annotation is not p.empty else f"={default}"
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (
                p is list(sig.parameters.values())[-1]
                or list(sig.parameters.values())[list(sig.parameters).index(p.name) + 1].kind
                is not p.POSITIONAL_ONLY):
            parts.append("/")
    text = f"{name}({', '.join(parts)})"
    if len(text) > WIDTH:  # one parameter a line
        text = f"{name}(\n" + "".join(f"    {p},\n" for p in parts) + ")"
    if sig.return_annotation is not sig.empty and not inspect.isclass(obj):
        text += f" -> {_annotation(sig.return_annotation)}"
    return text


def _own_attrs(cls: type) -> dict[str, Any]:
    return dict(vars(cls))


def _millipyde(obj: Any) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "millipyde"


def op_methods() -> set[str]:
    """Names of the gpuimage methods that are forms of the op library (docs/OPS.md)."""
    from millipyde.ops import OPS

    names: set[str] = set()
    for op in OPS.values():
        for form in op.forms.values():
            names.add(form.name)
            names.update(form.aliases)
    return names


def members(cls: type, documented: set[type]) -> list[tuple[str, Any]]:
    """A class's public methods and properties: its own and those of its millipyde bases that
    are not documented themselves (sorted by name)."""
    found: dict[str, Any] = {}
    for base in cls.__mro__:
        if base is not cls and (base in documented or not _millipyde(base)):
            break
        for key, value in vars(base).items():
            public = not key.startswith("_") or key in PROTOCOL
            if not public or key in found:
                continue
            if key in PROTOCOL and not own_doc(value):
                continue
            if not own_doc(value) and any(key in vars(b) for b in cls.__mro__
                                          if b in documented and b is not cls):
                continue  # an override of a documented base's member: documented there
            if isinstance(value, (property, staticmethod, classmethod)) or inspect.isfunction(
                    value):
                found[key] = value
    return sorted(found.items())


def resolve(module: str, names: list[str] | None) -> list[tuple[str, Any]]:
    """(qualified name, object) of ``names`` of ``module`` (its ``__all__`` if None)."""
    mod = importlib.import_module(module)
    chosen = sorted(names if names is not None else mod.__all__)
    return [(f"{module}.{n}", getattr(mod, n)) for n in chosen]


def data_doc(qualname: str) -> str:
    """The ``#:`` comment above a module constant's assignment, following its imports."""
    module, _, name = qualname.rpartition(".")
    seen = set()
    while module not in seen:
        seen.add(module)
        mod = importlib.import_module(module)
        lazy = getattr(mod, "_LAZY", {})
        if name in lazy:
            module = importlib.util.resolve_name(lazy[name], module)
            continue
        source = inspect.getsource(mod)
        tree = ast.parse(source)
        lines = source.splitlines()
        for node in tree.body:
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                comment = []
                i = node.lineno - 2
                while i >= 0 and lines[i].lstrip().startswith("#:"):
                    comment.insert(0, lines[i].lstrip()[2:].strip())
                    i -= 1
                return " ".join(comment)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
                module = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                     module)
                break
        else:
            return ""
    return ""


def slug(title: str) -> str:
    """A placeholder for the anchor of the heading ``title`` (:func:`anchors` fills it)."""
    return f"@@{title}@@"


def anchors(text: str) -> str:
    """``text`` with its heading placeholders replaced by GitHub's anchors (lower case,
    punctuation dropped, spaces to dashes, ``-1``, ``-2``, ... on repeats)."""
    seen: dict[str, int] = {}
    first: dict[str, str] = {}
    fence = False
    for line in text.splitlines():
        fence ^= line.startswith("```")
        if fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        base = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(base, 0)
        seen[base] = n + 1
        first.setdefault(title, base if n == 0 else f"{base}-{n}")
    return re.sub(r"@@(.*?)@@", lambda m: first[m.group(1)], text)


def documented_objects() -> list[tuple[str, str, Any]]:
    """(group title, qualified name, object) of every documented name, in page order."""
    found = []
    for title, _, modules in GROUPS:
        for module, names in modules:
            found.extend((title, q, obj) for q, obj in resolve(module, names))
    return found


def missing_docstrings() -> list[str]:
    """Documented public names (and their listed methods and properties) without a
    docstring of their own."""
    missing = []
    classes = {obj for _, _, obj in documented_objects() if inspect.isclass(obj)}
    ops = op_methods()
    for _, qualname, obj in documented_objects():
        if inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            if not inspect.ismodule(obj) and not data_doc(qualname):
                missing.append(qualname)
            continue
        if not own_doc(obj):
            missing.append(qualname)
        if inspect.isclass(obj) and not issubclass(obj, enum.Enum):
            for key, value in members(obj, classes - {obj}):
                if key not in ops and not own_doc(value):
                    missing.append(f"{qualname}.{key}")
    return missing


def render_object(qualname: str, obj: Any, first: dict[int, str], classes: set[type],
                  ops: set[str]) -> list[str]:
    """The section of one public name."""
    out = [f"### {qualname}", ""]
    short = qualname.rsplit(".", 1)[-1]
    if first[id(obj)] != qualname:
        other = first[id(obj)]
        return out + [f"The same object as [{other}](#{slug(other)}).", ""]
    if inspect.ismodule(obj):
        return out + [f"The subpackage `{obj.__name__}`: its names follow in this group.", ""]
    if not (inspect.isclass(obj) or callable(obj)):
        annotation = type(obj).__name__
        out.append(f"`{short}: {annotation}`")
        if isinstance(obj, tuple) and all(isinstance(v, str) for v in obj) or isinstance(
                obj, str):
            out[-1] = f"`{short}: {annotation} = {obj!r}`"
        out.append("")
        doc = data_doc(qualname)
        return out + ([markdown_text(doc), ""] if doc else ["*(no docstring)*", ""])
    sig = signature(obj, short)
    kind = "class" if inspect.isclass(obj) else "function"
    if sig:
        out.extend(["```python", f"{kind} {sig}" if kind == "class" else sig, "```", ""])
    if inspect.isclass(obj):
        bases = [b for b in obj.__bases__ if b is not object]
        if bases:
            out.extend(["Bases: " + ", ".join(
                f"[{first.get(id(b), b.__name__)}](#{slug(first[id(b)])})" if id(b) in first
                else f"`{b.__module__}.{b.__qualname__}`" if _millipyde(b)
                else f"`{b.__qualname__}`" for b in bases), ""])
    out.extend([*render_doc(own_doc(obj)), ""])
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        out.extend(["**Members**", ""])
        out.extend(f"- `{m.name}` = `{m.value!r}`" for m in obj)
        out.append("")
        return out
    if inspect.isclass(obj):
        listed = members(obj, classes - {obj})
        op_like = sorted(k for k, _ in listed if k in ops)
        for key, value in listed:
            if key in ops:
                continue
            if isinstance(value, property):
                out.extend([f"#### `{short}.{key}` (property)", ""])
            else:
                func = value.__func__ if isinstance(value, (staticmethod, classmethod)) \
                    else value
                msig = signature(func, key)
                if msig and not isinstance(value, staticmethod):
                    msig = re.sub(r"\((self|cls)(: [^,)]*)?(, )?", "(", msig, count=1)
                prefix = "classmethod " if isinstance(value, classmethod) else \
                    "staticmethod " if isinstance(value, staticmethod) else ""
                out.extend([f"#### `{short}.{key}`", ""])
                if msig:
                    out.extend(["```python", f"{prefix}{msig}", "```", ""])
            out.extend([*render_doc(own_doc(value)), ""])
        if op_like:
            out.extend(["**Op methods** (recorded, lazy; each is documented in "
                        "[OPS.md](OPS.md)): " + ", ".join(f"`{k}`" for k in op_like) + ".", ""])
    return out


def generate() -> str:
    """The text of docs/API.md."""
    import millipyde.transforms as transforms

    objects = documented_objects()
    classes = {obj for _, _, obj in objects if inspect.isclass(obj)}
    ops = op_methods()
    lines = [
        "# millipyde API reference",
        "",
        f"Generated from the docstrings by `{COMMAND}`; do not edit by hand "
        "(tests/test_docs_api.py fails when this page is stale). The built-in ops, one method "
        "of `gpuimage` each and usable as `mp.Operation(name, ...)`, are in [OPS.md](OPS.md); "
        "the README's API tour shows how the pieces fit.",
        "",
        "## Contents",
        "",
    ]
    for title, _, _ in GROUPS:
        lines.append(f"- [{title}](#{slug(title)})")
        for _, qualname, _ in (o for o in objects if o[0] == title):
            lines.append(f"  - [{qualname}](#{slug(qualname)})")
    lines.append("")
    first: dict[int, str] = {}  # each object's first documented name
    for _, qualname, obj in objects:
        first.setdefault(id(obj), qualname)
    for title, intro, _ in GROUPS:
        lines.extend([f"## {title}", "", markdown_text(intro), ""])
        for _, qualname, obj in (o for o in objects if o[0] == title):
            lines.extend(render_object(qualname, obj, first, classes, ops))
        if title == "Transforms":
            lines.extend(["### Not supported yet", "",
                          "These torchvision v2 classes exist in `millipyde.transforms` and "
                          "raise `NotImplementedError` (`millipyde.transforms.NOT_SUPPORTED`); "
                          "each needs:", ""])
            lines.extend(f"- `{name}`: {need}"
                         for name, need in sorted(transforms.NOT_SUPPORTED.items()))
            lines.append("")
        if title == GROUPS[-1][0]:
            errors = sorted({first[id(obj)] for group, _, obj in objects if group != title
                             and inspect.isclass(obj) and issubclass(obj, BaseException)})
            lines.extend(["### Other errors", "",
                          "Raised where their subject is, and documented there:", "",
                          *(f"- [{q}](#{slug(q)})" for q in errors), ""])
    text = "\n".join(line.rstrip() for line in lines)
    text = re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"
    return anchors(text)


def sections_differing(old: str, new: str) -> list[str]:
    """The headings of the sections of ``new`` whose text ``old`` does not have."""
    def split(text: str) -> dict[str, str]:
        parts: dict[str, str] = {}
        heading = "(preamble)"
        for line in text.splitlines():
            if line.startswith(("## ", "### ")):
                heading = line.lstrip("# ")
            parts[heading] = parts.get(heading, "") + line + "\n"
        return parts
    a, b = split(old), split(new)
    return sorted(h for h in set(a) | set(b) if a.get(h) != b.get(h))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/API.md is stale, writing nothing")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        old = OUT.read_text() if OUT.exists() else ""
        if old == text:
            print("docs/API.md is current")
            return 0
        differ = sections_differing(old, text)
        print(f"docs/API.md is stale: run `{COMMAND}`. Sections that differ: "
              + ", ".join(differ), file=sys.stderr)
        sys.stderr.writelines(list(difflib.unified_diff(
            old.splitlines(True), text.splitlines(True), "docs/API.md", "generated", n=1))[:40])
        return 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
