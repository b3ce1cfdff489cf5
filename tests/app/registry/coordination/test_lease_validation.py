"""Lease: upstream's coordination rules for the spec.

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy

import pytest

from app.registry.coordination.lease import STRATEGY as LEASES
from kube.errors import FORBIDDEN, INVALID, NOT_SUPPORTED
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

LEASE: Obj = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
    "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0},
}

LEASE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("zero duration", setitem("spec.leaseDurationSeconds", 0), [("spec.leaseDurationSeconds", INVALID)]),
    ("negative duration", setitem("spec.leaseDurationSeconds", -5), [("spec.leaseDurationSeconds", INVALID)]),
    ("duration wrong type", setitem("spec.leaseDurationSeconds", "40"), [("spec.leaseDurationSeconds", INVALID)]),
    ("duration bool", setitem("spec.leaseDurationSeconds", True), [("spec.leaseDurationSeconds", INVALID)]),
    ("negative transitions", setitem("spec.leaseTransitions", -1), [("spec.leaseTransitions", INVALID)]),
    ("transitions wrong type", setitem("spec.leaseTransitions", 1.5), [("spec.leaseTransitions", INVALID)]),
    ("unknown strategy", setitem("spec.strategy", "Newest"), [("spec.strategy.strategy", NOT_SUPPORTED)]),
    ("bad qualified strategy", setitem("spec.strategy", "example.com/-x"), [("spec.strategy.strategy", INVALID)]),
    ("strategy three parts", setitem("spec.strategy", "a/b/c"), [("spec.strategy.strategy", INVALID)]),
    ("strategy wrong type", setitem("spec.strategy", 1), [("spec.strategy", INVALID), ("spec.strategy.strategy", NOT_SUPPORTED)]),
    ("preferred holder without strategy", setitem("spec.preferredHolder", "node-2"), [("spec.preferredHolder", FORBIDDEN)]),
    ("holder wrong type", setitem("spec.holderIdentity", 7), [("spec.holderIdentity", INVALID)]),
    ("renewTime wrong type", setitem("spec.renewTime", 7), [("spec.renewTime", INVALID)]),
    ("acquireTime wrong type", setitem("spec.acquireTime", []), [("spec.acquireTime", INVALID)]),
    ("spec wrong type", setitem("spec", "x"), [("spec", INVALID)]),
    ("two problems", lambda o: o["spec"].update(leaseDurationSeconds=0, leaseTransitions=-1), [("spec.leaseDurationSeconds", INVALID), ("spec.leaseTransitions", INVALID)]),
]


def test_valid_lease() -> None:
    assert LEASES.validate_create(copy.deepcopy(LEASE), ctx()) == []
    coordinated = mutated(LEASE, lambda o: o["spec"].update(strategy="OldestEmulationVersion", preferredHolder="node-2"))
    assert LEASES.validate_update(coordinated, LEASE, ctx()) == []
    assert LEASES.object_meta_kube_finalizers is False


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in LEASE_CASES], ids=[c[0] for c in LEASE_CASES])
def test_invalid_lease(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(LEASES.validate_create(mutated(LEASE, mutate), ctx())) == sorted(expected)
    assert pairs(LEASES.validate_update(mutated(LEASE, mutate), LEASE, ctx())) == sorted(expected)
