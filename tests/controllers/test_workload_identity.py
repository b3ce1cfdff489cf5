"""The workload controllers' identities on a server with Node,RBAC: as the process's own user
(``system:kube-controller-manager``, which the project's bindings grant their roles), and with
--use-service-account-credentials as upstream's service accounts, whose roles are upstream's
bootstrap policy's: each controller's writes succeed under its own name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from devtools.server import ServerProcess
from kube.objects import Obj
from tests.authcluster import AuthCluster, audit_writers, start_auth_cluster
from tests.helpers import new_namespace
from tests.processes import Worker, eventually

APPS = "/apis/apps/v1"
LABELS = {"app": "web"}
TEMPLATE: Obj = {"metadata": {"labels": LABELS}, "spec": {"containers": [{"name": "c", "image": "x"}]}}


def account(name: str) -> str:
    return f"system:serviceaccount:kube-system:{name}"


@pytest.fixture(scope="module")
def cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> AuthCluster:
    return start_auth_cluster(start_server, tmp_path_factory.mktemp("workload-identity"), nodes=())


def status_of(admin: httpx.Client, path: str) -> Obj:
    return admin.get(path).json().get("status") or {}  # type: ignore[no-any-return]


def seen(admin: httpx.Client, path: str) -> Callable[[], bool]:
    """Whether the controller has written the object's status (a Job's: its active pod)."""
    return lambda: status_of(admin, path).get("observedGeneration") == 1 or status_of(admin, path).get("active") == 1


def writers_in(cluster: AuthCluster, ns: str) -> dict[tuple[str, str], set[str]]:
    """audit_writers of the namespace's objects only (the module's tests share the audit log)."""
    kept = cluster.tmp / f"audit-{ns}.log"
    kept.write_bytes(b"\n".join(line for line in cluster.audit_log.read_bytes().splitlines() if f'"namespace":"{ns}"'.encode() in line))
    return audit_writers(kept)


def test_as_the_controller_manager(cluster: AuthCluster, tmp_path: Path) -> None:
    """Without --use-service-account-credentials: a Deployment's ReplicaSet, its pod and both statuses."""
    with cluster.admin() as admin:
        ns = new_namespace(admin)
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                      "spec": {"replicas": 1, "selector": {"matchLabels": LABELS}, "template": TEMPLATE}}  # fmt: skip
        assert admin.post(f"{APPS}/namespaces/{ns}/deployments", json=deployment).status_code == 201
        controller = Worker("controllers", [*cluster.server.worker_flags("controller"), "--lease-duration", "2"], tmp_path / "controller.log").start()
        try:
            path = f"{APPS}/namespaces/{ns}/deployments/web"
            eventually(lambda: status_of(admin, path).get("replicas") == 1, what="the deployment's pod counted", timeout=30)
        finally:
            controller.stop()
    writers = writers_in(cluster, ns)
    for written in [("replicasets", ""), ("replicasets", "status"), ("deployments", "status"), ("pods", "")]:
        assert writers[written] == {"system:kube-controller-manager"}, written


def test_as_upstreams_service_accounts(cluster: AuthCluster, tmp_path: Path) -> None:
    """With --use-service-account-credentials: a Deployment, a Job, a DaemonSet and a StatefulSet,
    each controller writing as its own account; the garbage collector deletes the Deployment's
    ReplicaSet once it is deleted."""
    with cluster.admin() as admin:
        ns = new_namespace(admin)
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{ns}"}}
        assert admin.post("/api/v1/nodes", json=node).status_code == 201
        spec = {"selector": {"matchLabels": LABELS}, "template": TEMPLATE}
        bodies = {
            f"{APPS}/namespaces/{ns}/deployments": {"metadata": {"name": "web"}, "spec": {"replicas": 1, **spec}},
            f"{APPS}/namespaces/{ns}/daemonsets": {"metadata": {"name": "web"}, "spec": spec},
            f"{APPS}/namespaces/{ns}/statefulsets": {"metadata": {"name": "web"}, "spec": {"replicas": 1, "serviceName": "web", **spec}},
            f"/apis/batch/v1/namespaces/{ns}/jobs": {"metadata": {"name": "web"},
                                                     "spec": {"template": {"spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}}},
        }  # fmt: skip
        for path, body in bodies.items():
            assert admin.post(path, json=body).status_code == 201, path
        flags = [*cluster.server.worker_flags("controller"), "--lease-duration", "2", "--use-service-account-credentials"]
        controller = Worker("controllers", flags, tmp_path / "controller.log").start()
        try:
            for path in bodies:
                eventually(seen(admin, f"{path}/web"), what=f"{path} seen", timeout=30)
            eventually(lambda: len(admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]) == 4, what="four pods", timeout=30)
            assert admin.delete(f"{APPS}/namespaces/{ns}/deployments/web").status_code == 200
            eventually(lambda: not admin.get(f"{APPS}/namespaces/{ns}/replicasets").json()["items"], what="the replicaset collected", timeout=30)
        finally:
            controller.stop()
    writers = writers_in(cluster, ns)
    assert writers[("replicasets", "")] == writers[("deployments", "status")] == {account("deployment-controller")}
    assert writers[("replicasets", "status")] == {account("replicaset-controller")}
    assert writers[("daemonsets", "status")] == {account("daemon-set-controller")}
    assert writers[("statefulsets", "status")] == {account("statefulset-controller")}
    assert writers[("jobs", "status")] == {account("job-controller")}
    assert writers[("pods", "")] == {account(name) for name in ("replicaset-controller", "daemon-set-controller", "statefulset-controller", "job-controller")}
    assert writers[("controllerrevisions", "")] == {account("daemon-set-controller"), account("statefulset-controller")}
