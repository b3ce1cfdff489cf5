"""The import graph: the programs on the shared libraries, and no import running back up a layer.

docs/architecture.md draws these layers; this test keeps the code honest to the drawing.
Every import in every module counts, including ones inside functions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Package -> the project packages it may import (besides itself). Lower layers first.
ALLOWED: dict[str, set[str]] = {
    # The client runtime every program stands on.
    "kube": set(),
    # CEL (DRA's selectors, admission policies): the API server and the scheduler.
    "kube.cel": {"kube"},
    # DRA's rules the server and the workers share: claims, pods, device taints, tolerations...
    "kube.dra": {"kube"},
    # Resource quota's evaluators: the server's admission and the quota controller.
    "kube.quota": {"kube", "kube.dra"},
    # The kubelet's gRPC plugin interfaces (protos and stubs), shared by the simulator and drivers.
    "kubeletapi": set(),
    # Kubernetes' protobuf wire format: only the API server speaks it.
    "app.protobuf": {"kube"},
    "app.storage": {"kube"},
    "app.registry": {"kube", "kube.cel", "kube.dra", "app.protobuf"},
    "app.config": {"kube"},
    "app.metrics": {"kube", "app.storage", "app.registry"},
    "app.auth": {"kube", "kube.cel", "kube.dra", "app.storage", "app.registry", "app.config"},
    "app.api": {"kube", "app.protobuf", "app.storage", "app.registry", "app.config", "app.metrics", "app.auth"},
    "app": {"kube", "kube.cel", "kube.dra", "kube.quota", "app.protobuf", "app.storage", "app.registry", "app.api", "app.auth", "app.config", "app.metrics", "migrations"},
    "schedulers": {"kube", "kube.cel", "kube.dra"},
    "controllers": {"kube", "kube.dra", "kube.quota"},
    "kubeletsim": {"kube", "kube.dra", "kubeletapi"},
    # A DRA driver: a client of the API and of the kubelet, like any external driver.
    "exampledriver": {"kube", "kube.dra", "kubeletapi"},
    "migrations": {"kube", "app.storage"},
    "devtools": {"kube", "app", "app.protobuf"},
    # kubectl dra and its dashboard: clients of the API server and of the scheduler's explanations.
    "kubectl_dra": {"kube", "kube.dra"},
    "bench": {"kube", "kube.cel", "kube.dra", "kube.quota", "app.protobuf", "devtools", "schedulers", "controllers", "kubeletsim", "exampledriver", "app"},
}
PROJECT_PACKAGES = ("kube", "kubeletapi", "app", "schedulers", "controllers", "kubeletsim", "exampledriver", "devtools", "bench", "migrations", "kubectl_dra")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path, module: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) for every module ``path`` (the module ``module``) imports."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                # `from kube import errors` imports the module kube.errors; `from kube.errors import
                # ApiError` imports kube.errors.
                submodule = f"{source}.{alias.name}"
                yield node.lineno, submodule if _exists(submodule) else source


def _layer(module: str) -> str | None:
    """The most specific package of ALLOWED that holds ``module``."""
    best: str | None = None
    for layer in ALLOWED:
        if (module == layer or module.startswith(layer + ".")) and (best is None or len(layer) > len(best)):
            best = layer
    return best


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PROJECT_PACKAGES


def _source_files() -> list[Path]:
    return sorted(p for pkg in ALLOWED if "." not in pkg for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_imports_only_lower_layers(path: Path) -> None:
    own = _layer(_module_name(path))
    assert own is not None
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {target} ({other} is not below {own})"
        for line, target in _imports(path)
        if _is_project(target)
        and (other := _layer(target)) != own
        and other not in ALLOWED[own]
        # A module may import the package that holds it (its __init__ only).
        and not own.startswith(f"{other}.")
    ]
    assert not wrong, "\n".join(wrong)


def test_the_programs_share_only_kube() -> None:
    """Server, scheduler, controller, simulator, example driver and kubectl dra never import one another."""
    programs = ("app", "schedulers", "controllers", "kubeletsim", "exampledriver", "kubectl_dra")
    for program in programs:
        for path in (ROOT / program).rglob("*.py"):
            for line, target in _imports(path):
                top = target.split(".")[0]
                assert top == program or top not in programs, f"{path.relative_to(ROOT)}:{line} imports {target}"


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: an import from app.registry into app.api is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from app.api import schemas\n")
    assert list(_imports(bad, "app.registry.resource.bad")) == [(1, "app.api.schemas")]
    assert _layer("app.api.schemas") not in ALLOWED[_layer("app.registry.resource.bad") or ""]


def test_the_runtime_does_not_import_the_rules(tmp_path: Path) -> None:
    """The checker itself: kube's client runtime importing DRA's rules or CEL is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from kube.dra import pods\nfrom kube.cel import compile_selector\n")
    found = list(_imports(bad, "kube.bad"))
    assert found == [(1, "kube.dra.pods"), (2, "kube.cel")]
    # Layers of their own, which the runtime's row does not allow.
    assert [_layer(target) for _, target in found] == ["kube.dra", "kube.cel"]
    assert not ALLOWED["kube"] & {"kube.dra", "kube.cel"}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> modules it imports): each strongly connected set
    of two or more modules, sorted (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next((t for t in targets if t in graph), None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == module:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return sorted(found)


def test_no_import_circles() -> None:
    """No module imports, directly or through others, a module that imports it back. Every import
    counts, as for the layers: one moved into a function or under TYPE_CHECKING still ties the two
    modules together, it only hides the circle from the interpreter."""
    graph = {_module_name(path): {target for _, target in _imports(path) if _is_project(target)} for path in _source_files()}
    circles = _circles(graph)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(circle) for circle in circles)


def test_the_circle_check_finds_a_circle() -> None:
    """The checker itself: a circle through three modules is found, the module outside it is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _circles(graph) == [["a", "b", "c"]]


def _documented_rules() -> dict[str, set[str]]:
    """The import table of docs/architecture.md: package -> the project packages it may import."""
    rules: dict[str, set[str]] = {}
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("| package | may import", 1)[1].split("\n\n", 1)[0]
    for row in table.splitlines()[2:]:
        packages, may_import = row.strip("|").split("|")
        for package in re.findall(r"`([^`]+)`", packages):
            rules[package] = set(re.findall(r"`([^`]+)`", may_import))
    return rules


def test_the_documented_import_rules_are_the_enforced_ones() -> None:
    """docs/architecture.md's import table says what ALLOWED enforces, row for row."""
    assert _documented_rules() == ALLOWED


def _private_reaches(path: Path, module: str | None = None) -> Iterator[str]:
    """``line: name`` for each private name ``path`` takes from another project module: ``from m
    import _name``, or ``m._name`` on a module it imported."""
    module = module or _module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # local names bound to imported project modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names if _is_project(a.name))
        elif isinstance(node, ast.ImportFrom):
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join([*base, node.module] if node.module else base)
            if not _is_project(source):
                continue
            for alias in node.names:
                if _exists(f"{source}.{alias.name}"):
                    modules.add(alias.asname or alias.name)
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield f"{node.lineno}: from {source} import {alias.name}"
    for node in ast.walk(tree):
        private = isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
        if private and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            yield f"{node.lineno}: {node.value.id}.{node.attr}"


@pytest.mark.parametrize("path", sorted((ROOT / "schedulers").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_scheduler_modules_use_only_public_names_of_each_other(path: Path) -> None:
    """What one scheduler module needs of another is public (named without ``_``, documented):
    the explanations and the what-if use the allocator's and the plugins' checks this way."""
    reaches = list(_private_reaches(path))
    assert not reaches, f"{path.relative_to(ROOT)} reaches into private names: " + "; ".join(reaches)


def test_the_private_name_check_finds_one(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from schedulers.allocator import search\nfrom schedulers.framework import _go\nx = search._probe\n")
    assert sorted(_private_reaches(bad, "schedulers.bad")) == ["2: from schedulers.framework import _go", "3: search._probe"]
