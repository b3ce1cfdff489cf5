"""DRAResourceClaimGranularStatusAuthorization on a real server: allocation and reservedFor need
``resourceclaims/binding``, device status needs a node-aware verb on ``resourceclaims/driver``
for the driver, as upstream's resourceclaim integration test checks it (with impersonation)."""

from __future__ import annotations

import httpx
import pytest

from tests.app.auth.test_authorization import RBAC
from tests.authcluster import AuthCluster

NODE = "worker-1"
DRIVER = "test-driver"
ALLOCATION = {
    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]},
    "devices": {"results": [{"request": "req-1", "driver": DRIVER, "pool": "pool1", "device": "dev1"}]},
}
DEVICES = [{"driver": DRIVER, "pool": "pool1", "device": "dev1"}]
BASE_RULES = [
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"], "verbs": ["update", "patch"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
]


@pytest.fixture
def claim_path(admin: httpx.Client, namespace: str) -> str:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "test-claim"},
        "spec": {"devices": {"requests": [{"name": "req-1", "exactly": {"deviceClassName": "test-class"}}]}},
    }
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    assert admin.post(path, json=claim).status_code == 201
    return f"{path}/test-claim"


def as_driver(admin: httpx.Client, namespace: str, rules: list[dict], extra: dict[str, str] | None = None) -> dict[str, str]:
    """Grant the service account ``rules`` cluster-wide (the binding check is cluster-scoped) and
    answer the headers that impersonate it."""
    name = f"driver-{namespace}"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": BASE_RULES + rules}
    assert admin.post(f"{RBAC}/clusterroles", json=role).status_code == 201
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "dra-plugin-sa", "namespace": namespace}],
    }  # fmt: skip
    assert admin.post(f"{RBAC}/clusterrolebindings", json=binding).status_code == 201
    headers = {"Impersonate-User": f"system:serviceaccount:{namespace}:dra-plugin-sa"}
    for key, value in (extra or {}).items():
        headers[f"Impersonate-Extra-{key.replace('/', '%2F')}"] = value
    return headers


def update_status(client: httpx.Client, path: str, headers: dict[str, str], **status: object) -> httpx.Response:
    claim = client.get(path).json()
    claim["status"] = {**(claim.get("status") or {}), **status}
    return client.put(f"{path}/status", json=claim, headers=headers)


def preallocate(admin: httpx.Client, path: str) -> None:
    assert update_status(admin, path, {}, allocation=ALLOCATION).status_code == 200


def test_device_status_without_driver_permission(admin: httpx.Client, namespace: str, claim_path: str) -> None:
    preallocate(admin, claim_path)
    headers = as_driver(admin, namespace, [])
    response = update_status(admin, claim_path, headers, devices=DEVICES)
    assert response.status_code == 422, response.text
    assert response.json()["message"] == (
        f'ResourceClaim.resource.k8s.io "test-claim" is invalid: status.devices: Forbidden: changing status.devices requires resource="resourceclaims/driver", '
        f'verb="[arbitrary-node:update]" permission: resourceclaims.resource.k8s.io "{DRIVER}" is forbidden: User "system:serviceaccount:{namespace}:dra-plugin-sa" '
        f'cannot arbitrary-node:update resource "resourceclaims/driver" in API group "resource.k8s.io" in the namespace "{namespace}"'
    )
    assert "devices" not in admin.get(claim_path).json()["status"]


def test_associated_node_permission_for_a_service_account_on_the_claims_node(admin: httpx.Client, namespace: str, claim_path: str) -> None:
    preallocate(admin, claim_path)
    rule = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"], "verbs": ["associated-node:update"]}
    on_node = as_driver(admin, namespace, [rule], {"authentication.kubernetes.io/node-name": NODE})
    elsewhere = {**on_node, "Impersonate-Extra-authentication.kubernetes.io%2Fnode-name": "worker-2"}
    refused = update_status(admin, claim_path, elsewhere, devices=DEVICES)
    assert refused.status_code == 422 and 'verb="[arbitrary-node:update]"' in refused.json()["message"]
    accepted = update_status(admin, claim_path, on_node, devices=DEVICES)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["status"]["devices"] == DEVICES


def test_deallocation_needs_the_binding_permission_only(admin: httpx.Client, namespace: str, claim_path: str) -> None:
    preallocate(admin, claim_path)
    assert update_status(admin, claim_path, {}, devices=DEVICES).status_code == 200
    headers = as_driver(admin, namespace, [])
    response = update_status(admin, claim_path, headers, allocation=None, devices=None)
    assert response.status_code == 422
    assert response.json()["message"] == (
        f'ResourceClaim.resource.k8s.io "test-claim" is invalid: status: Forbidden: changing status.allocation or status.reservedFor requires '
        f'resource="resourceclaims/binding", verb="update" permission: resourceclaims.resource.k8s.io is forbidden: User '
        f'"system:serviceaccount:{namespace}:dra-plugin-sa" cannot update resource "resourceclaims/binding" in API group "resource.k8s.io" at the cluster scope'
    )
    assert admin.get(claim_path).json()["status"]["allocation"] == ALLOCATION


def test_reserved_for_with_binding_permission(admin: httpx.Client, namespace: str, claim_path: str) -> None:
    preallocate(admin, claim_path)
    rule = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["update"]}
    headers = as_driver(admin, namespace, [rule])
    response = update_status(admin, claim_path, headers, reservedFor=[{"resource": "pods", "name": "pod-1", "uid": "uid-1"}])
    assert response.status_code == 200, response.text


def test_the_scheduler_cannot_write_device_status(auth_cluster: AuthCluster, admin: httpx.Client, claim_path: str) -> None:
    preallocate(admin, claim_path)
    with auth_cluster.as_user("system:kube-scheduler") as scheduler:
        response = update_status(scheduler, claim_path, {}, devices=DEVICES)
    assert response.status_code == 422
    assert "changing status.devices requires" in response.json()["message"]


def test_removing_another_drivers_device_status_needs_that_drivers_permission(admin: httpx.Client, namespace: str, claim_path: str) -> None:
    other = "other-driver"
    results = [{"request": "req-1", "driver": d, "pool": "pool1", "device": dev} for d, dev in ((DRIVER, "dev1"), (other, "dev2"))]
    both = [*DEVICES, {"driver": other, "pool": "pool1", "device": "dev2"}]
    assert update_status(admin, claim_path, {}, allocation={**ALLOCATION, "devices": {"results": results}}, devices=both).status_code == 200
    # Allowed to write its own driver's entries only.
    rule = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"], "resourceNames": [DRIVER], "verbs": ["arbitrary-node:update"]}
    headers = as_driver(admin, namespace, [rule])
    response = update_status(admin, claim_path, headers, devices=DEVICES)
    assert response.status_code == 422, response.text
    assert response.json()["message"] == (
        f'ResourceClaim.resource.k8s.io "test-claim" is invalid: status.devices: Forbidden: changing status.devices requires resource="resourceclaims/driver", '
        f'verb="[arbitrary-node:update]" permission: resourceclaims.resource.k8s.io "{other}" is forbidden: User "system:serviceaccount:{namespace}:dra-plugin-sa" '
        f'cannot arbitrary-node:update resource "resourceclaims/driver" in API group "resource.k8s.io" in the namespace "{namespace}"'
    )
    assert admin.get(claim_path).json()["status"]["devices"] == both
    # Its own entry it may remove.
    response = update_status(admin, claim_path, headers, devices=both[1:])
    assert response.status_code == 200, response.text
    assert response.json()["status"]["devices"] == both[1:]
