"""The modules ``pip install`` compiles with mypyc, and the switch back to their Python source.

setup.py compiles :data:`COMPILED_MODULES` into C extensions next to their ``.py`` files (an
editable install builds them in place), where Python's import system prefers them. They are
used only when all of them are at least as new as their source: after an edit, the interpreter
runs the source until the next ``pip install -e .``, so a change is never hidden behind a stale
build (compiled modules of one build call each other directly, hence all or none).

``DRA_PURE_PYTHON=1`` forces the source: set while installing, nothing is compiled; set at run
time, the compiled modules are ignored. :data:`ACTIVE` says which way this process went.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PURE_ENV = "DRA_PURE_PYTHON"

# Chosen from `python -m bench.profile` (bench/README.md): the request path's own Python.
COMPILED_MODULES: tuple[str, ...] = (
    "app.api.apply",
    "app.api.bodies",
    "app.api.fieldsets",
    "app.api.generic",
    "app.api.handlers.create",
    "app.api.handlers.scope",
    "app.api.handlers.update",
    "app.api.options",
    "app.api.protobuf",
    "app.api.requestinfo",
    "app.api.routing",
    "app.api.schemas",
    "app.auth.attributes",
    "app.auth.system",
    "app.filters.limits",
    "app.filters.observe",
    "app.metrics",
    "app.protobuf",
    "app.registry.accessors",
    "app.registry.objectmeta",
    "app.registry.resource.claimspec",
    "app.registry.resource.common",
    "app.storage.cache",
    "kube.fields",
    "kube.gatedfields",
    "kube.labels",
    "kube.uids",
)

_ROOT = Path(__file__).resolve().parent.parent
# What the last complete build compiled: each listed module's source digest (written by setup.py).
BUILT_SOURCES = ".mypyc-sources.json"


def source_path(module: str, root: Path = _ROOT) -> Path:
    """The ``.py`` file of a listed module."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def built_path(module: str, root: Path = _ROOT) -> Path | None:
    """The compiled extension of a listed module, if one was built next to its source."""
    src = source_path(module, root)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = src.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def _pure_requested() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def _usable() -> bool:
    """Every listed module has an extension no older than its source."""
    if _pure_requested():
        return False
    # The library holding the compiled code itself; each module's extension only loads it.
    if not any(_ROOT.glob("*__mypyc.*")):
        return False
    return all(built_path(module) is not None for module in COMPILED_MODULES) and not stale_modules()


def _source_digest(module: str, root: Path) -> str:
    return hashlib.sha256(source_path(module, root).read_bytes()).hexdigest()


def source_digests(root: Path = _ROOT) -> dict[str, str]:
    """Each listed module's source digest, taken before a build reads the sources."""
    return {module: _source_digest(module, root) for module in COMPILED_MODULES if source_path(module, root).exists()}


def record_built_sources(digests: dict[str, str], root: Path = _ROOT) -> None:
    """Note what a complete build compiled, so that a source touched but not changed (a branch
    switched and back) is still known to match its extension."""
    (root / BUILT_SOURCES).write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")


def _built_digests(root: Path) -> dict[str, str]:
    try:
        recorded = json.loads((root / BUILT_SOURCES).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def stale_modules(root: Path = _ROOT) -> list[str]:
    """The listed modules built once but edited since: why a built checkout runs as Python.

    A checkout never built (no extension at all) is not stale, only pure."""
    # A module's extension only loads the shared library that holds every module's code, and a
    # rebuild rewrites that library but leaves an extension whose own few lines did not change
    # with its old time: the module was rebuilt when either is newer than its source.
    library_built = max((library.stat().st_mtime for library in root.glob("*__mypyc.*")), default=0.0)
    stale = []
    built_digests: dict[str, str] | None = None
    for module in COMPILED_MODULES:
        built = built_path(module, root)
        if built is not None and max(built.stat().st_mtime, library_built) < source_path(module, root).stat().st_mtime:
            # Newer by its time only? A checkout rewrites files it leaves as they were, and a
            # rebuild of unchanged code writes no new library: the recorded digest tells.
            if built_digests is None:
                built_digests = _built_digests(root)
            if built_digests.get(module) != _source_digest(module, root):
                stale.append(module)
    return stale


def stale_build_warning(root: Path = _ROOT) -> str:
    """What to tell someone whose built checkout runs as Python because of a later edit ("" if none)."""
    if _pure_requested():
        return ""
    stale = stale_modules(root)
    if not stale:
        return ""
    return (
        f"{len(stale)} compiled module(s) older than their source ({', '.join(stale[:3])}{', ...' if len(stale) > 3 else ''}): "
        "running every compiled module as Python, slower, until `pip install -e .` (or `make venv`) rebuilds them"
    )


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the listed modules' ``.py`` files ahead of the extensions beside them."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in COMPILED_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


ACTIVE = _usable()
if not ACTIVE and not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _SourceFinder())
