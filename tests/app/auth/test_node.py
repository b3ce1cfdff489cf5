"""The Node authorizer and NodeRestriction on a real server: a node writes only its own Node,
Lease, ResourceSlices and pod statuses, reads only the claims of its pods, and every way of
writing another node's slice is refused with nothing stored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.authcluster import AuthCluster

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def slice_of(name: str, node: str | None, **spec: object) -> dict:
    body: dict = {"driver": "gpu.example.com", "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, **spec}
    if node is not None:
        body["nodeName"] = node
    elif not spec:
        body["allNodes"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def node_object(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


@pytest.fixture
def slices(admin: httpx.Client) -> dict[str, dict]:
    """One slice of n1 and one of n2, as the admin made them."""
    made = {}
    for node in ("n1", "n2"):
        name = f"{node}-{hash(node) & 0xFFFF:x}"
        admin.delete(f"{SLICES}/{name}")
        response = admin.post(SLICES, json=slice_of(name, node))
        assert response.status_code == 201, response.text
        made[node] = response.json()
    return made


def expect_forbidden(response: httpx.Response, message: str) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["reason"] == "Forbidden"
    assert response.json()["message"] == message


def test_a_node_manages_its_own_slices(auth_cluster: AuthCluster, admin: httpx.Client, slices: dict[str, dict]) -> None:
    own = slices["n1"]
    with auth_cluster.node("n1") as node:
        assert node.get(f"{SLICES}/{own['metadata']['name']}").status_code == 200
        listed = node.get(SLICES, params={"fieldSelector": "spec.nodeName=n1"})
        assert [s["metadata"]["name"] for s in listed.json()["items"]] == [own["metadata"]["name"]]
        own["spec"]["pool"]["generation"] = 2
        assert node.put(f"{SLICES}/{own['metadata']['name']}", json=own).status_code == 200
        created = node.post(SLICES, json=slice_of("n1-extra", "n1"))
        assert created.status_code == 201, created.text
        assert node.delete(f"{SLICES}/n1-extra").status_code == 200


def test_a_node_cannot_write_another_nodes_slice_by_any_verb(auth_cluster: AuthCluster, admin: httpx.Client, slices: dict[str, dict]) -> None:
    other = slices["n2"]
    name = other["metadata"]["name"]
    no_edge = f'resourceslices.resource.k8s.io "{name}" is forbidden: User "system:node:n1" cannot %s resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: no relationship found between node \'n1\' and this object'
    with auth_cluster.node("n1") as node:
        created = node.post(SLICES, json=slice_of("stolen", "n2"))
        expect_forbidden(created, 'resourceslices.resource.k8s.io "stolen" is forbidden: can only create ResourceSlice with the same NodeName as the requesting node')
        cluster_wide = node.post(SLICES, json=slice_of("everywhere", None))
        expect_forbidden(cluster_wide, 'resourceslices.resource.k8s.io "everywhere" is forbidden: can only create ResourceSlice with the same NodeName as the requesting node')
        changed = {**other, "spec": {**other["spec"], "pool": {**other["spec"]["pool"], "generation": 9}}}
        expect_forbidden(node.put(f"{SLICES}/{name}", json=changed), no_edge % "update")
        expect_forbidden(
            node.patch(f"{SLICES}/{name}", json={"spec": {"pool": {"generation": 9}}}, headers={"Content-Type": "application/merge-patch+json"}),
            no_edge % "patch",
        )
        apply = node.patch(
            f"{SLICES}/{name}", params={"fieldManager": "n1"}, content=json.dumps(changed), headers={"Content-Type": "application/apply-patch+yaml"}
        )
        expect_forbidden(apply, no_edge % "patch")
        expect_forbidden(node.delete(f"{SLICES}/{name}"), no_edge % "delete")
        expect_forbidden(node.get(f"{SLICES}/{name}"), no_edge % "get")
        everything = node.delete(SLICES)
        expect_forbidden(
            everything,
            'resourceslices.resource.k8s.io is forbidden: User "system:node:n1" cannot deletecollection resource "resourceslices" in API group "resource.k8s.io" at the cluster scope: can only list/watch/deletecollection resourceslices with nodeName field selector',
        )
        # A collection delete scoped to its own node removes its own slices only.
        scoped = node.delete(SLICES, params={"fieldSelector": "spec.nodeName=n1"})
        assert scoped.status_code == 200, scoped.text
        expect_forbidden(node.delete(SLICES, params={"fieldSelector": "spec.nodeName=n2"}), (
            'resourceslices.resource.k8s.io is forbidden: User "system:node:n1" cannot deletecollection resource "resourceslices" in API group '
            '"resource.k8s.io" at the cluster scope: can only list/watch/deletecollection resourceslices with nodeName field selector'
        ))  # fmt: skip
    assert admin.get(f"{SLICES}/{name}").json() == other
    assert admin.get(f"{SLICES}/stolen").status_code == 404
    assert admin.get(f"{SLICES}/everywhere").status_code == 404


def test_a_node_owns_only_its_node_and_lease(auth_cluster: AuthCluster, admin: httpx.Client) -> None:
    with auth_cluster.node("n1") as node:
        admin.delete("/api/v1/nodes/n1")
        admin.delete("/api/v1/nodes/n2")
        assert node.post("/api/v1/nodes", json=node_object("n1")).status_code == 201
        expect_forbidden(node.post("/api/v1/nodes", json=node_object("n2")), 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"')
        expect_forbidden(
            node.patch("/api/v1/nodes/n1", json={"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}, headers={"Content-Type": "application/merge-patch+json"}),
            'nodes "n1" is forbidden: node "n1" is not allowed to modify taints',
        )
        expect_forbidden(node.get("/api/v1/nodes"), 'nodes is forbidden: User "system:node:n1" cannot list resource "nodes" in API group "" at the cluster scope: node \'n1\' cannot read all nodes, only its own Node object')
        lease: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n2"}, "spec": {"holderIdentity": "n2"}}
        expect_forbidden(
            node.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease),
            'leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node',
        )
        lease["metadata"]["name"] = lease["spec"]["holderIdentity"] = "n1"
        assert node.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease).status_code in (201, 409)


def test_a_node_reads_only_the_claims_of_its_pods_and_writes_only_their_status(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    assert admin.post(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", json=claim).status_code == 201
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/c"
    with auth_cluster.node("n1") as node:
        expect_forbidden(
            node.get(path),
            f'resourceclaims.resource.k8s.io "c" is forbidden: User "system:node:n1" cannot get resource "resourceclaims" in API group "resource.k8s.io" in the namespace "{namespace}": no relationship found between node \'n1\' and this object',
        )
        pod = {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}], "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]},
        }  # fmt: skip
        assert admin.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).status_code == 201
        assert node.get(path).status_code == 200
        expect_forbidden(node.patch(f"{path}/status", json={"status": {}}, headers={"Content-Type": "application/merge-patch+json"}), (
            f'resourceclaims.resource.k8s.io "c" is forbidden: User "system:node:n1" cannot patch resource "resourceclaims/status" in API group '
            f'"resource.k8s.io" in the namespace "{namespace}": can only get individual resources of this type'
        ))  # fmt: skip
        status = {"status": {"phase": "Running"}}
        merge = {"Content-Type": "application/merge-patch+json"}
        assert node.patch(f"/api/v1/namespaces/{namespace}/pods/p/status", json=status, headers=merge).status_code == 200
        labels = {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}}
        expect_forbidden(node.patch(f"/api/v1/namespaces/{namespace}/pods/p/status", json=labels, headers=merge), 'pods "p" is forbidden: node "n1" cannot update labels through pod status')
    with auth_cluster.node("n2") as other:
        expect_forbidden(other.patch(f"/api/v1/namespaces/{namespace}/pods/p/status", json=status, headers=merge), 'pods "p" is forbidden: node "n2" can only update pod status for pods with spec.nodeName set to itself')
        expect_forbidden(other.delete(f"/api/v1/namespaces/{namespace}/pods/p"), 'pods "p" is forbidden: node "n2" can only delete pods with spec.nodeName set to itself')
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods/p").status_code == 200


def test_a_node_reads_its_pods_extended_resource_claim_and_may_not_rename_it(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    """The scheduler's claim for extended resources is named only in the pod's status; the Node
    authorizer relates it to the pod's node, and NodeRestriction keeps the node from changing it."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "p-extended-resources-x"}, "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    assert admin.post(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", json=claim).status_code == 201
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/p-extended-resources-x"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}}
    assert admin.post(f"/api/v1/namespaces/{namespace}/pods", json=pod).status_code == 201
    merge = {"Content-Type": "application/merge-patch+json"}
    with auth_cluster.node("n1") as node:
        assert node.get(path).status_code == 403
        extended = {"status": {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x", "requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}]}}}
        assert admin.patch(f"/api/v1/namespaces/{namespace}/pods/p/status", json=extended, headers=merge).status_code == 200
        assert node.get(path).status_code == 200
        renamed = {"status": {"extendedResourceClaimStatus": {"resourceClaimName": "other", "requestMappings": extended["status"]["extendedResourceClaimStatus"]["requestMappings"]}}}
        expect_forbidden(node.patch(f"/api/v1/namespaces/{namespace}/pods/p/status", json=renamed, headers=merge), 'pods "p" is forbidden: node "n1" cannot update extended resource claim status')
    got = admin.get(f"/api/v1/namespaces/{namespace}/pods/p").json()
    assert got["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == "p-extended-resources-x"
