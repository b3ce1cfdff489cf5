"""The claim controller as its own identity (``system:kube-controller-manager``) on a server with
Node,RBAC: it makes a pod's claim from its template, that write is its own, and it is refused
what is not its job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.server import ServerProcess
from tests.authcluster import AuthCluster, audit_writers, start_auth_cluster
from tests.helpers import new_namespace
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"


@pytest.fixture(scope="module")
def cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> AuthCluster:
    return start_auth_cluster(start_server, tmp_path_factory.mktemp("controller-identity"), nodes=())


def test_the_controller_makes_claims_from_templates_as_itself_and_no_more(cluster: AuthCluster, tmp_path: Path) -> None:
    with cluster.admin() as admin:
        ns = new_namespace(admin)
        template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}  # fmt: skip
        assert admin.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=template).status_code == 201
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}}  # fmt: skip
        assert admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod).status_code == 201
        controller = Worker("controllers", [*cluster.server.worker_flags("controller"), "--lease-duration", "2"], tmp_path / "controller.log").start()
        try:

            def claim_name() -> str:
                statuses = admin.get(f"/api/v1/namespaces/{ns}/pods/p").json().get("status", {}).get("resourceClaimStatuses") or []
                return str(statuses[0]["resourceClaimName"]) if statuses else ""

            name = eventually(claim_name, what="the pod's claim", timeout=30)
        finally:
            controller.stop()
        claim = admin.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}").json()
    assert claim["metadata"]["ownerReferences"][0]["name"] == "p"
    writers = audit_writers(cluster.audit_log)
    assert writers[("resourceclaims", "")] == {"system:kube-controller-manager"}
    with cluster.identity("controller") as controller_client:
        assert controller_client.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "grab"}}).status_code == 403
        grab = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "grab"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"}]}  # fmt: skip
        assert controller_client.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", json=grab).status_code == 403
        assert controller_client.post(f"{RESOURCE}/deviceclasses", json={"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "grab"}, "spec": {}}).status_code == 403
