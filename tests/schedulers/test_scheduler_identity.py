"""The scheduler as its own identity (``system:kube-scheduler``) on a server with Node,RBAC: it
allocates and binds, every such write is its own, and it is refused what is not its job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.server import ServerProcess
from tests.authcluster import AuthCluster, audit_writers, start_auth_cluster
from tests.helpers import new_namespace
from tests.processes import Worker, eventually
from tests.schedulers.test_scheduler import RESOURCE, Topo, get_claim, node_of


@pytest.fixture(scope="module")
def cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> AuthCluster:
    return start_auth_cluster(start_server, tmp_path_factory.mktemp("scheduler-identity"), nodes=())


def test_the_scheduler_allocates_and_binds_as_itself_and_no_more(cluster: AuthCluster, tmp_path: Path) -> None:
    with cluster.admin() as admin:
        ns = new_namespace(admin)
        topo = Topo(admin, nodes=1, devices=1)
        topo.claim(ns, "c1")
        topo.pod(ns, "p1", [{"name": "gpu", "resourceClaimName": "c1"}])
        scheduler = Worker("schedulers", cluster.server.worker_flags("scheduler"), tmp_path / "scheduler.log").start()
        try:
            node = eventually(lambda: node_of(admin, ns, "p1"), what="p1 bound", timeout=30)
        finally:
            scheduler.stop()
        claim = get_claim(admin, ns, "c1")
    assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == node
    writers = audit_writers(cluster.audit_log)
    assert writers[("resourceclaims", "status")] == {"system:kube-scheduler"}
    assert writers[("pods", "binding")] == {"system:kube-scheduler"}
    with cluster.identity("scheduler") as scheduler_client:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"grab-{topo.tag}"}, "spec": {}}
        assert scheduler_client.post(f"{RESOURCE}/deviceclasses", json=device_class).status_code == 403
        assert scheduler_client.delete(f"{RESOURCE}/resourceslices/{node}-{topo.driver}").status_code == 403
        assert scheduler_client.get(f"/api/v1/namespaces/{ns}/secrets").status_code == 403
