"""Node: taints, resource quantities, declared features and the set-once fields.

Each invalid case names the exact (field path, reason) pairs upstream reports for it.
"""

from __future__ import annotations

import copy

import pytest

from app.registry.core.node import STATUS_STRATEGY as NODE_STATUS
from app.registry.core.node import STRATEGY as NODES
from kube.errors import DUPLICATE, FORBIDDEN, INVALID, NOT_SUPPORTED, REQUIRED
from kube.features import Gate
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

NODE: Obj = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "spec": {"taints": [{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"], "providerID": "sim://node-1"},
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/gpu": "2"},
        "allocatable": {"cpu": "7500m", "memory": "30Gi", "pods": "110"},
        "declaredFeatures": [Gate.DRANodeAllocatableResources],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    },
}

NODE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("negative capacity", setitem("status.capacity.cpu", "-1"), [("status.capacity.cpu", INVALID)]),
    ("unparsable allocatable", setitem("status.allocatable.memory", "lots"), [("status.allocatable.memory", INVALID)]),
    ("fractional pods", setitem("status.capacity.pods", "1.5"), [("status.capacity.pods", INVALID)]),
    ("fractional extended resource", lambda n: n["status"]["capacity"].update({"example.com/gpu": "0.5"}), [("status.capacity.example.com/gpu", INVALID)]),
    ("quantity wrong type", setitem("status.capacity.cpu", True), [("status.capacity.cpu", INVALID)]),
    ("capacity wrong type", setitem("status.capacity", ["8"]), [("status.capacity", INVALID)]),
    ("duplicate feature", setitem("status.declaredFeatures", ["A", "A"]), [("status.declaredFeatures[1]", DUPLICATE)]),
    ("empty feature", setitem("status.declaredFeatures", [""]), [("status.declaredFeatures[0]", REQUIRED)]),
    ("feature wrong type", setitem("status.declaredFeatures", [1]), [("status.declaredFeatures[0]", INVALID)]),
    ("features wrong type", setitem("status.declaredFeatures", "A"), [("status.declaredFeatures", INVALID)]),
    ("taint effect", setitem("spec.taints.0.effect", "Sometimes"), [("metadata.taints[0].effect", NOT_SUPPORTED)]),
    ("taint no effect", setitem("spec.taints.0.effect", ""), [("metadata.taints[0].effect", REQUIRED)]),
    ("taint key", setitem("spec.taints.0.key", "a/b/c"), [("metadata.taints[0].key", INVALID)]),
    ("taint value", setitem("spec.taints.0.value", "-x-"), [("metadata.taints[0].value", INVALID)]),
    ("duplicate taint", lambda n: n["spec"]["taints"].append(dict(n["spec"]["taints"][0])), [("metadata.taints[1]", DUPLICATE)]),
    ("spec wrong type", setitem("spec", 1), [("spec", INVALID)]),
]


def test_valid_node() -> None:
    assert NODES.validate_create(copy.deepcopy(NODE), ctx()) == []
    assert NODES.validate_update(copy.deepcopy(NODE), NODE, ctx()) == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_invalid_node(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(NODES.validate_create(mutated(NODE, mutate), ctx())) == sorted(expected)


NODE_UPDATE_CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("podCIDRs", setitem("spec.podCIDRs", ["10.0.1.0/24"]), [("spec.podCIDRs", FORBIDDEN)]),
    ("providerID", setitem("spec.providerID", "sim://other"), [("spec.providerID", FORBIDDEN)]),
    ("duplicate address", lambda n: n["status"]["addresses"].append(dict(n["status"]["addresses"][0])), [("status.addresses[1]", DUPLICATE)]),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in NODE_UPDATE_CASES], ids=[c[0] for c in NODE_UPDATE_CASES])
def test_invalid_node_update(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(NODES.validate_update(mutated(NODE, mutate), NODE, ctx())) == sorted(expected)
    assert pairs(NODE_STATUS.validate_update(mutated(NODE, mutate), NODE, ctx())) == sorted(expected)
