"""kubectl dra's modules import one another in one direction only: no circle, counting every
import (also those inside functions), so each can be read, loaded and changed on its own."""

from __future__ import annotations

from tests.test_layers import ROOT, _imports, _module_name

PACKAGE = ROOT / "kubectl_dra"


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {target for _, target in _imports(path) if target in modules and target != name} for name, path in modules.items()}


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle (``a -> b -> a``), or [] when there is none."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        for target in sorted(graph.get(module, ())):
            found = visit(target, [*path, module])
            if found:
                return found
        done.add(module)
        return []

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return []


def test_no_import_circle() -> None:
    graph = _graph()
    assert "kubectl_dra.dashboard.server" in graph["kubectl_dra.cli"]  # the graph counts imports inside functions
    circle = _circle(graph)
    assert not circle, " -> ".join(circle)


def test_the_check_finds_a_circle() -> None:
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set()}) == []

