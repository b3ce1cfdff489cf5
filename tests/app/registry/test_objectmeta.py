"""ObjectMeta rules every kind shares (app/registry/objectmeta.py), on create and update.

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy

import pytest

from app.registry.objectmeta import validate_object_meta, validate_object_meta_update, validate_qualified_name
from kube.errors import INVALID, REQUIRED, TOO_LONG
from tests.app.registry.helpers import Mutation, Obj, mutated, pairs, setitem

META_BASE: Obj = {
    "metadata": {
        "name": "web",
        "namespace": "default",
        "labels": {"app.kubernetes.io/name": "web"},
        "annotations": {"example.com/note": "hello"},
        "finalizers": ["example.com/cleanup", "kubernetes"],
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1", "controller": True},
        ],
    }
}

META_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("bad name", setitem("metadata.name", "Web_1"), [("metadata.name", INVALID)]),
    ("long name", setitem("metadata.name", "a" * 254), [("metadata.name", INVALID)]),
    ("no name", lambda o: o["metadata"].pop("name"), [("metadata.name", REQUIRED)]),
    ("bad generateName", lambda o: (o["metadata"].pop("name"), o["metadata"].update(generateName="Bad_")), [("metadata.generateName", INVALID)]),
    ("name wrong type", setitem("metadata.name", 5), [("metadata.name", INVALID), ("metadata.name", REQUIRED)]),
    ("no namespace", lambda o: o["metadata"].pop("namespace"), [("metadata.namespace", REQUIRED)]),
    ("bad namespace", setitem("metadata.namespace", "Not.A.Label"), [("metadata.namespace", INVALID)]),
    ("negative generation", setitem("metadata.generation", -1), [("metadata.generation", INVALID)]),
    ("bad label key", setitem("metadata.labels", {"a/b/c": "x"}), [("metadata.labels", INVALID)]),
    ("bad label value", setitem("metadata.labels", {"k": "-bad-"}), [("metadata.labels", INVALID)]),
    ("labels wrong type", setitem("metadata.labels", ["x"]), [("metadata.labels", INVALID)]),
    ("bad annotation key", setitem("metadata.annotations", {"-x": "y"}), [("metadata.annotations", INVALID)]),
    ("annotations too big", setitem("metadata.annotations", {"k": "x" * (256 * 1024)}), [("metadata.annotations", TOO_LONG)]),
    ("bad finalizer", setitem("metadata.finalizers", ["a/b/c"]), [("metadata.finalizers", INVALID)]),
    ("finalizer without domain", setitem("metadata.finalizers", ["cleanup"]), [("metadata.finalizers[0]", INVALID)]),
    ("orphan and foreground", setitem("metadata.finalizers", ["orphan", "foregroundDeletion"]), [("metadata.finalizers", INVALID)]),
    ("finalizers wrong type", setitem("metadata.finalizers", "x"), [("metadata.finalizers", INVALID)]),
    (
        "owner ref missing fields",
        setitem("metadata.ownerReferences", [{"apiVersion": "", "kind": "", "name": "", "uid": ""}]),
        [
            ("metadata.ownerReferences.apiVersion", INVALID),
            ("metadata.ownerReferences.kind", INVALID),
            ("metadata.ownerReferences.name", INVALID),
            ("metadata.ownerReferences.uid", INVALID),
        ],
    ),
    (
        "two controllers",
        setitem("metadata.ownerReferences", [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": True},
        ]),
        [("metadata.ownerReferences", INVALID)],
    ),
    (
        "event owner",
        setitem("metadata.ownerReferences", [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"}]),
        [("metadata.ownerReferences", INVALID)],
    ),
    ("managed fields operation", setitem("metadata.managedFields", [{"operation": "Patch"}]), [("metadata.managedFields[0].operation", INVALID)]),
    ("metadata wrong type", setitem("metadata", "x"), [("metadata", INVALID)]),
]


def test_valid_object_meta() -> None:
    assert validate_object_meta(copy.deepcopy(META_BASE), True, "subdomain") == []
    generated = {"metadata": {"generateName": "web-", "namespace": "default"}}
    assert validate_object_meta(generated, True, "subdomain") == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in META_CASES], ids=[c[0] for c in META_CASES])
def test_invalid_object_meta(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(validate_object_meta(mutated(META_BASE, mutate), True, "subdomain")) == sorted(expected)


def test_object_meta_messages() -> None:
    errs = validate_object_meta(mutated(META_BASE, setitem("metadata.finalizers", ["cleanup"])), True, "subdomain")
    assert str(errs[0]) == (
        'metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified'
    )
    errs = validate_object_meta({"metadata": {"name": "n", "namespace": "x"}}, False, "subdomain")
    assert [str(e) for e in errs] == ["metadata.namespace: Forbidden: not allowed on this type"]
    # Lease and Event skip core's finalizer rule.
    assert validate_object_meta(mutated(META_BASE, setitem("metadata.finalizers", ["cleanup"])), True, "subdomain", kube_finalizers=False) == []


def test_qualified_name_messages() -> None:
    assert [e.detail for e in validate_qualified_name("a/b/c", "x")] == [
        "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    ]


META_UPDATE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("name", setitem("metadata.name", "other"), [("metadata.name", INVALID)]),
    ("namespace", setitem("metadata.namespace", "other"), [("metadata.namespace", INVALID)]),
    ("uid", setitem("metadata.uid", "u2"), [("metadata.uid", INVALID)]),
    ("creationTimestamp", setitem("metadata.creationTimestamp", "2030-01-01T00:00:00Z"), [("metadata.creationTimestamp", INVALID)]),
    ("generation decremented", setitem("metadata.generation", 1), [("metadata.generation", INVALID)]),
    ("bad label", setitem("metadata.labels", {"k": "-"}), [("metadata.labels", INVALID)]),
    ("kube finalizer", setitem("metadata.finalizers", ["x"]), [("metadata.finalizers[0]", INVALID)]),
]


def _stored_meta() -> Obj:
    obj = copy.deepcopy(META_BASE)
    obj["metadata"].update(uid="u1", creationTimestamp="2026-01-01T00:00:00Z", generation=2, resourceVersion="5")
    return obj


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in META_UPDATE_CASES], ids=[c[0] for c in META_UPDATE_CASES])
def test_invalid_object_meta_update(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    old = _stored_meta()
    assert pairs(validate_object_meta_update(mutated(old, mutate), old)) == sorted(expected)


def test_object_meta_update_messages() -> None:
    old = _stored_meta()
    assert validate_object_meta_update(copy.deepcopy(old), old) == []
    errs = validate_object_meta_update(mutated(old, setitem("metadata.name", "other")), old)
    assert str(errs[0]) == 'metadata.name: Invalid value: "other": field is immutable'
    old["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    new = mutated(old, setitem("metadata.finalizers", ["example.com/cleanup", "kubernetes", "example.com/new"]))
    assert [str(e) for e in validate_object_meta_update(new, old)] == [
        'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/new"}'
    ]
