"""The bootstrap policy lets upstream's components do, on a server with Node,RBAC, what they do at
start with the kinds served for them (docs/upstream-components.md): kube-scheduler lists and
watches what its informers do and records events through events.k8s.io; kube-controller-manager
reads the authentication configmap, and its namespace controller (as its service account)
deletes collections of every served resource."""

from __future__ import annotations

import httpx
import pytest

from tests.authcluster import AuthCluster

SCHEDULER_READS = [
    "/api/v1/persistentvolumes",
    "/api/v1/persistentvolumeclaims",
    "/api/v1/services",
    "/api/v1/replicationcontrollers",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/statefulsets",
    "/apis/policy/v1/poddisruptionbudgets",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/storage.k8s.io/v1/csistoragecapacities",
    "/apis/storage.k8s.io/v1/volumeattachments",
]


@pytest.mark.parametrize("path", SCHEDULER_READS)
def test_the_scheduler_lists_and_watches_what_its_informers_need(auth_cluster: AuthCluster, path: str) -> None:
    with auth_cluster.as_user("system:kube-scheduler") as scheduler:
        assert scheduler.get(path).status_code == 200
        with scheduler.stream("GET", path, params={"watch": "true", "timeoutSeconds": "1"}) as watch:
            assert watch.status_code == 200  # authorized as the watch starts: no need to wait for its end
        # Nothing beyond reading (the volume scheduler role updates volumes and claims only).
        assert scheduler.request("DELETE", path).status_code == 403


def test_the_scheduler_records_events_through_the_events_api(auth_cluster: AuthCluster, namespace: str) -> None:
    event = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "pod.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-a",
        "action": "Binding", "reason": "Scheduled", "type": "Normal", "note": "assigned",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": "pod"},
    }  # fmt: skip
    with auth_cluster.as_user("system:kube-scheduler") as scheduler:
        assert scheduler.post(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", json=event).status_code == 201


def test_the_controller_manager_reads_configmaps_and_creates_them_as_the_root_ca_publisher(auth_cluster: AuthCluster) -> None:
    with auth_cluster.as_user("system:kube-controller-manager") as manager:
        # Allowed: the server publishes it (app/controlplane/authentication.py).
        assert manager.get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication").status_code == 200
        assert manager.get("/api/v1/namespaces/kube-system/configmaps/other").status_code == 404  # upstream's "get configmaps"
        # Upstream's own rules for the process write no ConfigMaps; the root CA publisher's role
        # (create, update), bound to the process for running without service account credentials, does.
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine"}}
        assert manager.post("/api/v1/namespaces/kube-system/configmaps", json=body).status_code == 201
    with auth_cluster.admin() as admin:
        binding = admin.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:dra-controller-manager:root-ca-cert-publisher").json()
        assert binding["roleRef"]["name"] == "system:controller:root-ca-cert-publisher"
        assert admin.delete("/api/v1/namespaces/kube-system/configmaps/mine").status_code == 200


def test_the_scheduler_reads_the_authentication_configmap_through_its_role(auth_cluster: AuthCluster) -> None:
    with auth_cluster.as_user("system:kube-scheduler") as scheduler:
        assert scheduler.get("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication").status_code == 200
        assert scheduler.get("/api/v1/namespaces/kube-system/configmaps/other").status_code == 403


def test_the_namespace_controller_deletes_collections(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert admin.post(path, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}).status_code == 201
    with auth_cluster.as_user("system:serviceaccount:kube-system:namespace-controller", ("system:serviceaccounts", "system:serviceaccounts:kube-system")) as controller:
        assert controller.request("DELETE", path).status_code == 200
        assert controller.request("DELETE", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets").status_code == 200
    assert admin.get(path).json()["items"] == []
