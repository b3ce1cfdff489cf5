"""The kubelet simulator with an identity per node (``system:node:NAME``) on a server with
Node,RBAC and NodeRestriction: each node registers itself and publishes its own ResourceSlices,
every such write is that node's, and a node is refused another node's slices."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from devtools.server import ServerProcess
from tests.authcluster import AuthCluster, audit_writers, start_auth_cluster
from tests.processes import Worker, eventually

NODES = ("idsim-0", "idsim-1")
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


@pytest.fixture(scope="module")
def cluster(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> AuthCluster:
    return start_auth_cluster(start_server, tmp_path_factory.mktemp("kubeletsim-identity"), nodes=NODES)


def test_each_simulated_node_writes_as_itself_and_no_more(cluster: AuthCluster, tmp_path: Path) -> None:
    flags = [*cluster.server.worker_flags("kubeletsim"), "--nodes", str(len(NODES)), "--node-prefix", "idsim-", "--profile", "gpu"]
    simulator = Worker("kubeletsim", flags, tmp_path / "kubeletsim.log").start()
    try:
        with cluster.admin() as admin:

            def published() -> dict[str, str]:
                found = {s["spec"]["nodeName"]: s["metadata"]["name"] for s in admin.get(SLICES).json()["items"]}
                return found if set(found) == set(NODES) else {}

            slices = eventually(published, what="a slice of each node", timeout=30)
    finally:
        simulator.stop()
    writers = audit_writers(cluster.audit_log)
    assert writers[("resourceslices", "")] == {f"system:node:{n}" for n in NODES}
    assert writers[("nodes", "")] >= {f"system:node:{n}" for n in NODES}
    assert "kubernetes-admin" not in writers[("nodes", "status")]
    with cluster.with_token(cluster.credentials.token("system:node:idsim-0")) as node:
        assert node.delete(f"{SLICES}/{slices['idsim-1']}").status_code == 403
        assert node.get("/api/v1/pods").status_code == 403
        assert node.get("/api/v1/namespaces/default/secrets").status_code == 403
