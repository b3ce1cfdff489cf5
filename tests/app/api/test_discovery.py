"""Aggregated and legacy discovery documents."""

from __future__ import annotations

from typing import Any

from app.api.discovery import (
    AGGREGATED_DISCOVERY_CONTENT_TYPE,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    api_versions,
    storage_version_hash,
)
from app.registry import KINDS, lookup

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _resources(doc: dict[str, Any], group: str) -> dict[str, dict[str, Any]]:
    for item in doc["items"]:
        if item["metadata"].get("name", "") == group:
            (version,) = item["versions"]
            assert version["version"] == "v1"
            assert version["freshness"] == "Current"
            return {r["resource"]: r for r in version["resources"]}
    raise AssertionError(f"group {group!r} missing")


def test_content_type_constant() -> None:
    assert AGGREGATED_DISCOVERY_CONTENT_TYPE == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def test_aggregated_core() -> None:
    doc = aggregated_discovery(legacy=True)
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert doc["metadata"] == {}
    (item,) = doc["items"]
    assert item["metadata"] == {"creationTimestamp": None}
    resources = _resources(doc, "")
    assert set(resources) == {
        "namespaces", "nodes", "pods", "events", "serviceaccounts", "secrets", "resourcequotas", "endpoints",
        # served as storage only (app.registry.storageonly)
        "persistentvolumes", "persistentvolumeclaims", "services", "replicationcontrollers", "podtemplates", "configmaps",
    }  # fmt: skip
    pods = resources["pods"]
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert pods["scope"] == "Namespaced"
    assert pods["singularResource"] == "pod"
    assert pods["verbs"] == ALL_VERBS
    assert pods["shortNames"] == ["po"]
    assert pods["categories"] == ["all"]
    assert pods["subresources"] == [
        {
            "subresource": "binding",
            "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
            "verbs": ["create"],
        },
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
            "verbs": ["get", "patch", "update"],
        },
    ]
    namespaces = resources["namespaces"]
    assert namespaces["scope"] == "Cluster"
    assert "deletecollection" not in namespaces["verbs"]
    assert [(s["subresource"], s["verbs"]) for s in namespaces["subresources"]] == [
        ("finalize", ["update"]),
        ("status", ["get", "patch", "update"]),
    ]
    assert "subresources" not in resources["events"]
    assert list(resources) == sorted(resources)


def test_aggregated_groups() -> None:
    doc = aggregated_discovery(legacy=False)
    names = [item["metadata"]["name"] for item in doc["items"]]
    assert names == [
        "resource.k8s.io", "coordination.k8s.io", "rbac.authorization.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
        "scheduling.k8s.io", "admissionregistration.k8s.io", "apps", "batch", "policy", "storage.k8s.io", "discovery.k8s.io", "events.k8s.io",
    ]  # fmt: skip
    assert all(item["metadata"]["creationTimestamp"] is None for item in doc["items"])
    resources = _resources(doc, "resource.k8s.io")
    assert set(resources) == {
        "deviceclasses",
        "devicetaintrules",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
    }
    claims = resources["resourceclaims"]
    assert claims == {
        "resource": "resourceclaims",
        "responseKind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
        "scope": "Namespaced",
        "singularResource": "resourceclaim",
        "verbs": ALL_VERBS,
        "subresources": [
            {
                "subresource": "status",
                "responseKind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
                "verbs": ["get", "patch", "update"],
            }
        ],
    }
    assert resources["resourceslices"]["scope"] == "Cluster"
    assert "subresources" not in resources["deviceclasses"]
    assert _resources(doc, "coordination.k8s.io")["leases"]["scope"] == "Namespaced"


def test_api_versions() -> None:
    assert api_versions() == {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    assert api_versions("10.0.0.1:6443")["serverAddressByClientCIDRs"] == [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}
    ]


def test_api_group_list_and_group() -> None:
    groups = api_group_list()
    assert groups["kind"] == "APIGroupList"
    assert groups["apiVersion"] == "v1"
    resource = next(g for g in groups["groups"] if g["name"] == "resource.k8s.io")
    assert resource == {
        "name": "resource.k8s.io",
        "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "resource.k8s.io/v1", "version": "v1"},
    }
    assert all(g["name"] for g in groups["groups"])
    group = api_group("coordination.k8s.io")
    assert group is not None
    assert group["kind"] == "APIGroup"
    assert group["preferredVersion"]["groupVersion"] == "coordination.k8s.io/v1"
    assert api_group("networking.k8s.io") is None
    assert api_group("") is None


def test_api_resource_list_core() -> None:
    doc = api_resource_list("", "v1")
    assert doc is not None
    assert doc["kind"] == "APIResourceList"
    assert doc["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in doc["resources"]}
    assert [r["name"] for r in doc["resources"]] == sorted(by_name)
    assert by_name["pods"]["singularName"] == "pod"
    assert by_name["pods"]["namespaced"] is True
    assert by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods"]["verbs"] == ALL_VERBS
    assert by_name["pods/binding"] == {
        "name": "pods/binding",
        "singularName": "",
        "namespaced": True,
        "kind": "Binding",
        "verbs": ["create"],
    }
    assert by_name["pods/status"]["kind"] == "Pod"
    assert by_name["namespaces/finalize"]["verbs"] == ["update"]
    assert by_name["namespaces/status"]["namespaced"] is False


def test_api_resource_list_group() -> None:
    doc = api_resource_list("resource.k8s.io", "v1")
    assert doc is not None
    assert doc["groupVersion"] == "resource.k8s.io/v1"
    names = [r["name"] for r in doc["resources"]]
    assert "resourceclaims/status" in names
    assert "devicetaintrules/status" in names
    claims = next(r for r in doc["resources"] if r["name"] == "resourceclaims")
    assert claims["kind"] == "ResourceClaim"
    assert "group" not in claims
    assert api_resource_list("resource.k8s.io", "v1beta1") is None
    assert api_resource_list("networking.k8s.io", "v1") is None


def test_storage_version_hash_matches_upstream_algorithm() -> None:
    deviceclasses = lookup("resource.k8s.io", "v1", "deviceclasses")
    assert deviceclasses is not None
    # Upstream published this hash while DeviceClass was stored as resource.k8s.io/v1beta1.
    deviceclasses_v1beta1 = type(deviceclasses)()
    deviceclasses_v1beta1.version = "v1beta1"
    assert storage_version_hash(deviceclasses_v1beta1) == "OgEE055Fbnc="
    assert len({storage_version_hash(k) for k in KINDS}) == len(KINDS)
