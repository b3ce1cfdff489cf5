"""Namespace: spec.finalizers and the status phase.

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy

import pytest

from app.registry.core.namespace import STATUS_STRATEGY as NAMESPACE_STATUS
from app.registry.core.namespace import STRATEGY as NAMESPACES
from app.registry.objectmeta import validate_object_meta
from kube.errors import INVALID
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

NAMESPACE: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

NAMESPACE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("finalizer without domain", setitem("spec.finalizers", ["cleanup"]), [("spec.finalizers", INVALID)]),
    ("finalizer three parts", setitem("spec.finalizers", ["a/b/c"]), [("spec.finalizers", INVALID)]),
    ("finalizer bad prefix", setitem("spec.finalizers", ["Bad_Domain/x"]), [("spec.finalizers", INVALID)]),
    ("finalizer bad name", setitem("spec.finalizers", ["example.com/-x"]), [("spec.finalizers", INVALID)]),
    # An empty name part is both empty and off the regex: two messages, as upstream.
    ("finalizer empty name", setitem("spec.finalizers", ["example.com/"]), [("spec.finalizers", INVALID)] * 2),
    ("finalizer empty", setitem("spec.finalizers", [""]), [("spec.finalizers", INVALID)] * 3),
    ("two bad finalizers", setitem("spec.finalizers", ["x", "y"]), [("spec.finalizers", INVALID), ("spec.finalizers", INVALID)]),
    ("finalizer long", setitem("spec.finalizers", ["example.com/" + "a" * 64]), [("spec.finalizers", INVALID)]),
    ("finalizers wrong type", setitem("spec.finalizers", "kubernetes"), [("spec.finalizers", INVALID)]),
    ("finalizer wrong type", setitem("spec.finalizers", [1]), [("spec.finalizers", INVALID)]),
    ("spec wrong type", setitem("spec", []), [("spec", INVALID)]),
    ("prefix empty", setitem("spec.finalizers", ["/x"]), [("spec.finalizers", INVALID)]),
    ("uppercase unqualified", setitem("spec.finalizers", ["Kubernetes"]), [("spec.finalizers", INVALID)]),
    ("space", setitem("spec.finalizers", ["example.com/a b"]), [("spec.finalizers", INVALID)]),
    ("long prefix", setitem("spec.finalizers", ["a" * 254 + "/x"]), [("spec.finalizers", INVALID)]),
]


def test_valid_namespace() -> None:
    assert NAMESPACES.validate_create(copy.deepcopy(NAMESPACE), ctx()) == []
    assert NAMESPACES.validate_create(mutated(NAMESPACE, setitem("spec.finalizers", ["example.com/x", "orphan"])), ctx()) == []
    assert validate_object_meta(NAMESPACE, False, NAMESPACES.name_rule) == []
    assert pairs(validate_object_meta(mutated(NAMESPACE, setitem("metadata.name", "a.b")), False, NAMESPACES.name_rule)) == [("metadata.name", INVALID)]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in NAMESPACE_CASES], ids=[c[0] for c in NAMESPACE_CASES])
def test_invalid_namespace(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(NAMESPACES.validate_create(mutated(NAMESPACE, mutate), ctx())) == sorted(expected)


def test_namespace_status_phase() -> None:
    bad = mutated(NAMESPACE, setitem("status.phase", "Terminating"))
    assert [str(e) for e in NAMESPACE_STATUS.validate_update(bad, NAMESPACE, ctx())] == [
        "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
    ]
    deleting = mutated(NAMESPACE, setitem("metadata.deletionTimestamp", "2026-01-01T00:00:00Z"))
    assert pairs(NAMESPACE_STATUS.validate_update(deleting, NAMESPACE, ctx())) == [("status.Phase", INVALID)]
