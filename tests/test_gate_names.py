"""Gate names are spelt once, in kube/features.py: everywhere else they are ``Gate.<name>``.

A gate named by a string literal can be misspelt (a gate that does not exist reads as off in a
mapping, or raises only on the path that reads it) or survive a rename; a constant cannot. The
rule covers every Python source of the repository, tests included: a string literal (f-string
parts too) may not contain a gate name as a word. Docstrings are prose and may.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from kube.features import KNOWN_FEATURES, FeatureGates, Gate, gates_flag

ROOT = Path(__file__).resolve().parents[1]
DECLARING_MODULE = ROOT / "kube" / "features.py"
_GATE_WORD = re.compile(r"\b(" + "|".join(sorted(KNOWN_FEATURES, key=len, reverse=True)) + r")\b")


def _python_sources() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.splitlines() if (ROOT / line).is_file()]


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def gate_literals(source: str) -> Iterator[tuple[int, str]]:
    """(line, gate name) of every string literal in ``source`` that names a gate."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for match in _GATE_WORD.finditer(node.value):
                yield node.lineno, match.group(1)


def test_no_gate_name_is_a_string_literal_outside_kube_features() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name!r} (use Gate.{name})"
        for path in _python_sources()
        if path != DECLARING_MODULE
        for line, name in gate_literals(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "gate names spelt as strings:\n" + "\n".join(offenders)


def test_the_scan_sees_names_flags_and_messages_but_not_docstrings() -> None:
    admin, workload, preemption, prioritized = Gate.DRAAdminAccess, Gate.GenericWorkload, Gate.DRAPreemption, Gate.DRAPrioritizedList
    source = (
        f'"""Mentions {admin} in prose."""\n'
        f'a = "{admin}"\n'
        f'b = "{workload}=true,{preemption}=false"\n'
        f'c = f"the {prioritized} feature is {{state}}"\n'
        f'd = "{admin}ory is another word"\n'
    )
    assert list(gate_literals(source)) == [(2, admin), (3, workload), (3, preemption), (4, prioritized)]


def test_every_constant_is_its_gate_and_every_gate_has_a_constant() -> None:
    constants = {name: value for name, value in vars(Gate).items() if not name.startswith("_")}
    assert constants == {name: name for name in KNOWN_FEATURES}


def test_gates_flag_is_the_flag_syntax_the_parser_reads() -> None:
    flag = gates_flag({Gate.DRAReservedForWorkloads: True, Gate.DRAConsumableCapacity: False})
    assert flag == f"{Gate.DRAReservedForWorkloads}=true,{Gate.DRAConsumableCapacity}=false"
    gates = FeatureGates.parse(flag)
    assert gates.enabled(Gate.DRAReservedForWorkloads) and not gates.enabled(Gate.DRAConsumableCapacity)
