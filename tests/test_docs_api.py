"""docs/API.md: the generated API reference is current, complete and self-contained."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

import millipyde as mp

ROOT = Path(mp.__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_reference",
                                                  ROOT / "docs" / "api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api = _load()


@pytest.fixture(scope="module")
def page() -> str:
    return api.generate()


def test_api_page_is_the_generated_one(page):
    current = api.OUT.read_text() if api.OUT.exists() else ""
    assert page == current, (
        f"docs/API.md is stale: run `{api.COMMAND}` (sections that differ: "
        f"{', '.join(api.sections_differing(current, page))})")


def test_every_documented_name_has_a_docstring():
    missing = api.missing_docstrings()
    assert missing == [], f"public names without a docstring: {', '.join(missing)}"


def test_every_public_name_is_documented():
    documented = {qualname for _, qualname, _ in api.documented_objects()}
    for module in ("millipyde", "millipyde.data", "millipyde.transforms", "millipyde.pipeline",
                   "millipyde.distributed"):
        names = importlib.import_module(module).__all__
        absent = sorted(f"{module}.{n}" for n in names if f"{module}.{n}" not in documented)
        assert absent == [], f"public names missing from docs/API.md: {absent}"
    assert len(mp.__all__) == 32


def test_page_has_no_addresses_or_machine_paths(page):
    assert not re.search(r"0x[0-9a-fA-F]{6,}", page)
    for text in (str(ROOT), str(Path.home()), "site-packages", "/tmp/"):
        assert text not in page, text


def test_links_stay_in_the_repository_and_resolve(page):
    headings = {m.group(1) for m in re.finditer(r"^#+ (.*)$", page, re.M)}
    anchors = set(re.findall(r"\]\(#([^)]+)\)", page))
    assert anchors, "the contents table links to the sections"
    slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    # GitHub's repeats get -1, -2, ...: their base is a heading's slug
    assert {re.sub(r"-\d+$", "", a) if a not in slugs else a for a in anchors} <= slugs
    for target in re.findall(r"\]\(([^#)][^)]*)\)", page):
        assert "://" not in target and not target.startswith(("/", "..")), target
        assert (api.OUT.parent / target).is_file(), target


def test_docstring_rendering():
    doc = api.inspect.cleandoc('''Do a thing with :class:`~millipyde.Operation` and ``x``.

    More text::

        code()

    Parameters
    ----------
    x : int, default 1
        The value,
        on two lines.
    flag

    Returns
    -------
    list of int
        The values.

    Raises
    ------
    ValueError
        ``x`` is negative.

    Examples
    --------
    >>> f(1)
    [1]
    ''')
    assert api.render_doc(doc) == [
        "Do a thing with `Operation` and `x`.", "",
        "More text:", "",
        "```python", "code()", "```", "",
        "**Parameters**", "",
        "- `x` (int, default 1): The value, on two lines.",
        "- `flag`", "",
        "**Returns**", "",
        "- list of int: The values.", "",
        "**Raises**", "",
        "- `ValueError`: `x` is negative.",
    ]
    assert api.render_doc("") == ["*(no docstring)*"]


def test_signature_defaults_as_written():
    def f(a: int, b: str = "NCHW", *, c: object = object(), **kw: int) -> None:
        pass

    assert api.signature(f, "f") == 'f(a: int, b: str = "NCHW", *, c: object = object(), ' \
        "**kw: int) -> None"


def test_check_names_the_stale_sections(page, tmp_path, monkeypatch, capsys):
    stale = tmp_path / "API.md"
    stale.write_text(page.replace("### millipyde.seed\n", "### millipyde.seed\n\nold\n"))
    monkeypatch.setattr(api, "OUT", stale)
    monkeypatch.setattr(api, "generate", lambda: page)
    assert api.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "millipyde.seed" in err and api.COMMAND in err
    stale.write_text(page)
    assert api.main(["--check"]) == 0
