"""The modules setup.py compiles with mypyc: the ones imported are the compiled ones when they are
built and current, the sources otherwise or when DRA_PURE_PYTHON=1 asks for them.

CI installs from a fresh clone and sets DRA_EXPECT_COMPILED=1: there, a silently skipped build
(a missing compiler, a mypyc error) fails this test instead of only costing CPU."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kube import compiled

EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def test_every_listed_module_has_a_source() -> None:
    for module in compiled.COMPILED_MODULES:
        assert compiled.source_path(module).is_file(), module


def test_imported_modules_are_the_compiled_ones_when_built() -> None:
    # DRA_PURE_PYTHON outranks CI's expectation: `make test-pure` runs with both set.
    expected = os.environ.get("DRA_EXPECT_COMPILED", "") == "1" and os.environ.get(compiled.PURE_ENV, "") in ("", "0")
    if not compiled.ACTIVE:
        assert not expected, "DRA_EXPECT_COMPILED=1 but the compiled modules are missing, stale or switched off (pip install -e . builds them)"
        pytest.skip("compiled modules not built, older than their sources, or DRA_PURE_PYTHON set")
    for module in compiled.COMPILED_MODULES:
        path = importlib.import_module(module).__file__ or ""
        assert path.endswith(EXTENSIONS), f"{module} imported from {path}"


def test_pure_python_switch_imports_every_source() -> None:
    code = (
        "import importlib, kube.compiled as c\n"
        "assert not c.ACTIVE\n"
        "for m in c.COMPILED_MODULES:\n"
        "    f = importlib.import_module(m).__file__\n"
        "    assert f.endswith('.py'), (m, f)\n"
    )
    env = {**os.environ, "DRA_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def _checkout_with_one_module(tmp_path: Path, *, built_after_edit: bool | None, library_built_at: float | None = None) -> Path:
    """A tree holding the first listed module's source, and its extension built before or after
    the source's last edit (``None``: never built); with ``library_built_at`` also the shared
    library of the compiled code, written at that time."""
    module = compiled.COMPILED_MODULES[0]
    source = compiled.source_path(module, tmp_path)
    source.parent.mkdir(parents=True)
    source.write_text("")
    if built_after_edit is not None:
        built = source.with_suffix(EXTENSIONS[0])
        built.write_bytes(b"")
        edited, built_at = (100.0, 200.0) if built_after_edit else (200.0, 100.0)
        os.utime(source, (edited, edited))
        os.utime(built, (built_at, built_at))
    if library_built_at is not None:
        library = tmp_path / f"0123abcd__mypyc{EXTENSIONS[0]}"
        library.write_bytes(b"")
        os.utime(library, (library_built_at, library_built_at))
    return tmp_path


def test_a_build_older_than_its_source_is_named_with_the_way_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    root = _checkout_with_one_module(tmp_path, built_after_edit=False)
    warning = compiled.stale_build_warning(root)
    assert compiled.COMPILED_MODULES[0] in warning
    assert "as Python" in warning and "pip install -e ." in warning


@pytest.mark.parametrize("built_after_edit", [True, None])
def test_a_current_or_never_built_checkout_gets_no_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built_after_edit: bool | None) -> None:
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    assert compiled.stale_build_warning(_checkout_with_one_module(tmp_path, built_after_edit=built_after_edit)) == ""


@pytest.mark.parametrize(("library_built_at", "stale"), [(300.0, False), (150.0, True)])
def test_a_rebuild_that_left_an_unchanged_extension_old_is_current(tmp_path: Path, library_built_at: float, stale: bool) -> None:
    """A rebuild after the edit rewrote the shared library but not the module's own extension
    (its generated lines were the same): the module runs the new build, it is not stale."""
    root = _checkout_with_one_module(tmp_path, built_after_edit=False, library_built_at=library_built_at)
    assert compiled.stale_modules(root) == ([compiled.COMPILED_MODULES[0]] if stale else [])


def test_asking_for_python_is_not_warned_about(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.PURE_ENV, "1")
    assert compiled.stale_build_warning(_checkout_with_one_module(tmp_path, built_after_edit=False)) == ""


@pytest.mark.parametrize(("recorded", "stale"), [("same", False), ("other", True), (None, True)])
def test_a_source_rewritten_unchanged_after_its_build_is_current(tmp_path: Path, recorded: str | None, stale: bool) -> None:
    """A checkout rewrites a file with the text it had (a branch switched and back): newer than its
    build, yet the text the last complete build recorded, so it still runs compiled; a changed text,
    or no record of the build, is stale."""
    root = _checkout_with_one_module(tmp_path, built_after_edit=False)
    module = compiled.COMPILED_MODULES[0]
    if recorded is not None:
        digests = compiled.source_digests(root)
        if recorded == "other":
            compiled.source_path(module, root).write_text("x = 1\n")
            os.utime(compiled.source_path(module, root), (200.0, 200.0))
        compiled.record_built_sources(digests, root)
    assert compiled.stale_modules(root) == ([module] if stale else [])
