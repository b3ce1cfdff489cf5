"""Every process of the stack as its own identity, with least privilege (``make run``'s setup:
HTTPS, Node,RBAC): a pod with a claim goes Running, each write of the run came from the identity
that should make it, and each identity is refused what is not its job."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools.credentials import ClusterCredentials
from devtools.devstack import node_names, worker_commands
from devtools.server import REPO_ROOT, ServerProcess, migrated_sqlite, stop_process
from tests.authcluster import audit_writers
from tests.processes import eventually

pytestmark = [pytest.mark.slow]

NODES = 2


def _client(server: ServerProcess, identity: str) -> httpx.Client:
    return httpx.Client(**server.httpx_options(identity), timeout=30.0)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    tmp = tmp_path_factory.mktemp("identities")
    database_url = migrated_sqlite(tmp / "dra.sqlite")
    credentials = ClusterCredentials.ensure(tmp / "pki")
    credentials.ensure_node_tokens(node_names(NODES))
    audit = tmp / "audit.log"
    server = ServerProcess(database_url, "--audit-log-path", str(audit), log_path=tmp / "apiserver.log", credentials=credentials).start()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in worker_commands(server, "", NODES, "gpu"):
            with open(tmp / f"{name}.log", "ab") as log:
                workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
        yield server, audit
    finally:
        for worker in workers:
            stop_process(worker)
        server.stop()


def test_each_worker_does_its_job_as_itself(stack: tuple[ServerProcess, Path]) -> None:
    server, audit = stack
    with _client(server, "admin") as admin:
        device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class).status_code == 201
        template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}}  # fmt: skip
        assert admin.post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", json=template).status_code == 201
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker-check"},
               "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}}  # fmt: skip
        assert admin.post("/api/v1/namespaces/default/pods", json=pod).status_code == 201

        def running() -> dict | None:
            got = admin.get("/api/v1/namespaces/default/pods/worker-check").json()
            return got if (got.get("status") or {}).get("phase") == "Running" else None

        started = eventually(running, "the pod runs", timeout=60)
        claim_name = started["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        claim = admin.get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim_name}").json()
        node = started["spec"]["nodeName"]
        assert claim["status"]["allocation"] and claim["status"]["devices"]

    writers = audit_writers(audit)
    assert writers[("resourceclaims", "")] >= {"system:kube-controller-manager"}  # the claim from the template
    assert "system:kube-scheduler" in writers[("resourceclaims", "status")]  # the allocation
    assert "system:serviceaccount:kube-system:dra-kubeletsim-driver" in writers[("resourceclaims", "status")]  # the device status
    assert "system:kube-scheduler" in writers[("pods", "binding")]
    assert f"system:node:{node}" in writers[("pods", "status")]
    assert writers[("resourceslices", "")] == {f"system:node:{name}" for name in node_names(NODES)}
    assert writers[("leases", "")] >= {f"system:node:{name}" for name in node_names(NODES)}
    assert "kubernetes-admin" not in writers[("resourceclaims", "status")]


def test_each_identity_is_refused_what_is_not_its_job(stack: tuple[ServerProcess, Path]) -> None:
    server, _audit = stack
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    with _client(server, "admin") as admin:
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "probe"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}  # fmt: skip
        admin.post(claims, json=claim)
        slices = admin.get("/apis/resource.k8s.io/v1/resourceslices").json()["items"]
    other_slice = next(s for s in slices if s["spec"]["nodeName"] == "sim-1")
    with _client(server, "scheduler") as scheduler:
        probe = scheduler.get(f"{claims}/probe").json()
        probe["status"] = {"devices": [{"driver": "gpu.example.com", "pool": "sim-0", "device": "gpu-0"}]}
        assert scheduler.put(f"{claims}/probe/status", json=probe).status_code == 422  # device status is the driver's
        assert scheduler.post("/apis/resource.k8s.io/v1/deviceclasses", json={}).status_code == 403
    with _client(server, "controller") as controller:
        grab = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "grab"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"}]}  # fmt: skip
        assert controller.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json=grab).status_code == 403
        assert controller.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "sim-9"}}).status_code == 403
    assert server.credentials is not None
    trust = ssl.create_default_context(cafile=str(server.credentials.ca_cert))
    node0 = server.credentials.token("system:node:sim-0")
    with httpx.Client(base_url=server.url, verify=trust, headers={"Authorization": f"Bearer {node0}"}) as node:
        refused = node.delete(f"/apis/resource.k8s.io/v1/resourceslices/{other_slice['metadata']['name']}")
        assert refused.status_code == 403, refused.text
        assert node.get("/api/v1/namespaces/default/pods").status_code == 403
    with _client(server, "kubeletsim") as fleet:
        assert fleet.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "sim-9"}}).status_code == 403
        assert fleet.get("/api/v1/pods").status_code == 200
