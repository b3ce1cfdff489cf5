"""The schema tables: the official definitions plus the extra properties the served kinds declare."""

from __future__ import annotations

from typing import Any

import pytest

from app.api import schemas
from app.registry import KINDS
from app.registry.base import KindStrategy
from app.registry.resource.resourceclaim import STRATEGY as CLAIMS
from app.registry.resource.resourceclaimtemplate import STRATEGY as TEMPLATES

RESOURCE_V1 = "resource.k8s.io/v1"
CONSUMER = {"resource": "podgroups", "name": "g", "uid": "u"}


def _claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}, "reservedFor": dict(CONSUMER)}


def test_every_declared_property_is_in_its_definition() -> None:
    claim = schemas.schema_for_kind(RESOURCE_V1, "ResourceClaim")
    assert claim is not None
    spec = claim.property("spec")
    allocation = claim.property("status")
    assert spec is not None and allocation is not None
    allocation = allocation.property("allocation")
    assert allocation is not None
    nodes = {spec.definition_name: spec, allocation.definition_name: allocation}
    declared = schemas.merged_extra_properties(KINDS)
    assert set(declared) == set(nodes)
    for definition_name, properties in declared.items():
        official = schemas.definition(definition_name) or {}
        for prop, schema in properties.items():
            assert prop not in official["properties"]
            assert prop in nodes[definition_name].property_names()
            found = nodes[definition_name].property(prop)
            assert found is not None and found.raw == schema


def test_extra_properties_survive_pruning_and_unknown_siblings_do_not() -> None:
    claim = {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {**_claim_spec(), "bogus": 1},
        "status": {"allocation": {"reservedForAnyPod": True, "bogus": 2}},
    }
    assert schemas.prune_unknown_fields(claim, RESOURCE_V1, "ResourceClaim") == ["spec.bogus", "status.allocation.bogus"]
    assert claim["spec"] == _claim_spec()
    assert claim["status"] == {"allocation": {"reservedForAnyPod": True}}


def test_a_template_knows_the_claim_spec_properties() -> None:
    template = {"metadata": {"name": "t"}, "spec": {"spec": {**_claim_spec(), "bogus": 1}}}
    assert schemas.unknown_fields(template, RESOURCE_V1, "ResourceClaimTemplate") == ["spec.spec.bogus"]


def test_the_kinds_declare_the_properties_they_serve() -> None:
    assert "reservedFor" in CLAIMS.extra_schema_properties["io.k8s.api.resource.v1.ResourceClaimSpec"]
    assert "reservedForAnyPod" in CLAIMS.extra_schema_properties["io.k8s.api.resource.v1.AllocationResult"]
    assert TEMPLATES.extra_schema_properties["io.k8s.api.resource.v1.ResourceClaimSpec"] == (
        CLAIMS.extra_schema_properties["io.k8s.api.resource.v1.ResourceClaimSpec"]
    )


def _kind(name: str, properties: dict[str, dict[str, Any]]) -> KindStrategy:
    strategy = KindStrategy()
    strategy.kind = name
    strategy.extra_schema_properties = {"io.example.Thing": properties}
    return strategy


def test_kinds_sharing_a_definition_merge_their_properties() -> None:
    merged = schemas.merged_extra_properties(
        [_kind("A", {"a": {"type": "string"}}), _kind("B", {"a": {"type": "string"}, "b": {"type": "integer"}})]
    )
    assert merged == {"io.example.Thing": {"a": {"type": "string"}, "b": {"type": "integer"}}}


def test_two_kinds_may_not_declare_one_property_differently() -> None:
    with pytest.raises(ValueError, match=r"B declares io\.example\.Thing\.a unlike another kind"):
        schemas.merged_extra_properties([_kind("A", {"a": {"type": "string"}}), _kind("B", {"a": {"type": "integer"}})])
