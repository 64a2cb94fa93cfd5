"""``source_cache``: sources written to the cache directory and imported from there."""

from __future__ import annotations

import sys

import pytest

from millipyde import source_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MILLIPYDE_CACHE_DIR", str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("millipyde_test_sc_")]:
        del sys.modules[name]


def test_a_source_is_written_once_and_imported_from_the_cache_dir(cache) -> None:
    mod = source_cache.import_source("millipyde_test_sc_a", "VALUE = 41 + 1\n")
    assert mod.VALUE == 42
    path = source_cache.cache_dir() / "millipyde_test_sc_a.py"
    assert path.is_relative_to(cache) and path.read_text() == "VALUE = 41 + 1\n"
    assert mod.__file__ == str(path)
    # a second import is the same module object, not a second execution
    assert source_cache.import_source("millipyde_test_sc_a", "VALUE = 41 + 1\n") is mod
    assert not list(path.parent.glob("*.tmp"))


def test_a_source_that_fails_leaves_no_module_and_raises(cache) -> None:
    with pytest.raises(ZeroDivisionError):
        source_cache.import_source("millipyde_test_sc_b", "VALUE = 1 / 0\n")
    assert "millipyde_test_sc_b" not in sys.modules
    # the name is usable again once its source is fixed
    assert source_cache.import_source("millipyde_test_sc_b", "VALUE = 1\n").VALUE == 1


def test_the_generated_kernel_loader_uses_the_same_directory(cache) -> None:
    from millipyde.graph.codegen import loader

    assert loader.cache_dir() == source_cache.cache_dir()
    assert source_cache.cache_dir().parent == cache
