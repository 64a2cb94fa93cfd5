"""``millipyde.config``: every MILLIPYDE_* variable read, checked and documented in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from millipyde import config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("raw,expected", [("1", True), ("0", False), ("TRUE", True),
                                          ("off", False), (" yes ", True), ("", True)])
def test_flags_read_the_usual_spellings(monkeypatch, raw, expected) -> None:
    monkeypatch.setenv("MILLIPYDE_FUSION", raw)
    assert config.fusion() is expected


@pytest.mark.parametrize("read,name", [(config.fusion, "MILLIPYDE_FUSION"),
                                       (config.gpu_variants, "MILLIPYDE_GPU_VARIANTS"),
                                       (config.gpu_pool, "MILLIPYDE_GPU_POOL"),
                                       (config.fast_launch, "MILLIPYDE_FAST_LAUNCH")])
def test_a_bad_flag_is_a_value_error_naming_the_variable(monkeypatch, read, name) -> None:
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(ValueError, match=f"{name}='maybe'"):
        read()
    monkeypatch.delenv(name)
    assert read() is True


@pytest.mark.parametrize("read,name,lo,hi", [
    (config.cpu_devices, "MILLIPYDE_CPU_DEVICES", 1, 64),
    (config.workers, "MILLIPYDE_WORKERS", 1, 64),
    (lambda: config.generator_batch(64), "MILLIPYDE_GENERATOR_BATCH", 1, 65535)])
def test_integers_are_checked_against_their_range(monkeypatch, read, name, lo, hi) -> None:
    monkeypatch.setenv(name, str(hi))
    assert read() == hi
    for bad in (str(lo - 1), str(hi + 1), "x", "2.5"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=name):
            read()


def test_defaults_when_unset(monkeypatch) -> None:
    for name in config.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert config.cpu_devices() == 1
    assert config.workers() is None
    assert config.generator_batch(64) == 64
    assert config.backend() == ""
    assert config.cache_dir() == Path.home() / ".cache" / "millipyde"


def test_cache_dir_and_backend(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MILLIPYDE_CACHE_DIR", str(tmp_path))
    assert config.cache_dir() == tmp_path
    assert config.backend({"MILLIPYDE_BACKEND": " CudaSim "}) == "cudasim"
    with pytest.raises(ValueError, match="MILLIPYDE_BACKEND='opencl'"):
        config.backend({"MILLIPYDE_BACKEND": "opencl"})


def test_unknown_setting_names_fail_loudly() -> None:
    with pytest.raises(KeyError, match="MILLIPYDE_FUSON"):
        config.flag("MILLIPYDE_FUSON")


def _variable_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and re.fullmatch(r"MILLIPYDE_[A-Z0-9_]+", n.value)]


def test_no_other_module_reads_a_millipyde_variable() -> None:
    readers = {str(p.relative_to(ROOT)): found for p in (ROOT / "millipyde").rglob("*.py")
               if p.name != "config.py" and (found := _variable_literals(p))}
    assert readers == {}
    assert set(_variable_literals(ROOT / "millipyde" / "config.py")) >= set(config.VARIABLES)


def test_readme_documents_every_variable_in_one_table() -> None:
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(MILLIPYDE_[A-Z0-9_]+)` \|", readme, flags=re.M)
    assert sorted(rows) == sorted(config.VARIABLES)


def test_once_keeps_a_value_until_refresh(monkeypatch) -> None:
    monkeypatch.setenv("MILLIPYDE_FUSION", "0")
    config.refresh()
    assert config.once(config.fusion) is False
    monkeypatch.setenv("MILLIPYDE_FUSION", "1")
    assert config.once(config.fusion) is False  # read once: no environment read per op
    seen = []
    config.on_refresh(lambda: seen.append(True))
    try:
        config.refresh()
        assert seen == [True]
        assert config.once(config.fusion) is True
    finally:
        config._on_refresh.pop()
        monkeypatch.delenv("MILLIPYDE_FUSION")
        config.refresh()


def test_once_raises_on_a_bad_value_each_time(monkeypatch) -> None:
    monkeypatch.setenv("MILLIPYDE_GPU_VARIANTS", "maybe")
    config.refresh()
    try:
        for _ in range(2):
            with pytest.raises(ValueError, match="MILLIPYDE_GPU_VARIANTS='maybe'"):
                config.once(config.gpu_variants)
    finally:
        monkeypatch.delenv("MILLIPYDE_GPU_VARIANTS")
        config.refresh()
