"""This project's scheduler, controller and kubelet simulator against upstream's kube-apiserver
v1.37.2 on etcd v3.7.3 (TLS, client certificates and tokens, Node,RBAC, NodeRestriction), each
as the identity upstream's bootstrap policy expects: the README's tour runs to Running."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools import upstream
from devtools.server import REPO_ROOT, stop_process
from tests.interop.upstream import needs_upstream, upstream_binaries
from tests.processes import eventually

NODES = ["sim-0", "sim-1"]
TIMEOUT = 120.0
CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "single-gpu"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer"},
    "spec": {
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "single-gpu"}],
    },
}

pytestmark = needs_upstream


class Cluster:
    def __init__(self, plane: upstream.UpstreamControlPlane, logs: Path) -> None:
        self.plane = plane
        self.logs = logs
        self.admin = httpx.Client(**plane.httpx_options(), timeout=30.0)  # type: ignore[arg-type]

    def get(self, path: str) -> dict[str, Any]:
        answer = self.admin.get(path)
        answer.raise_for_status()
        return dict(answer.json())

    def create(self, path: str, obj: dict[str, Any]) -> None:
        answer = self.admin.post(path, json=obj)
        assert answer.status_code == 201, answer.text

    def worker_logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.logs.glob("*.log")) if p.stem in ("controller", "scheduler", "kubeletsim"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    upstream_binaries()
    directory = tmp_path_factory.mktemp("upstream")
    workers: list[subprocess.Popen[bytes]] = []
    with upstream.UpstreamControlPlane(directory, nodes=NODES) as plane, upstream.start_companion_controllers(plane):
        try:
            for name, command in upstream.worker_commands(plane, profile="gpu"):
                with open(directory / f"{name}.log", "ab") as log:
                    workers.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=log))
            cluster = Cluster(plane, directory)
            yield cluster
            cluster.admin.close()
        finally:
            for worker in workers:
                stop_process(worker)


def ready_nodes(cluster: Cluster) -> set[str]:
    nodes = cluster.get("/api/v1/nodes")["items"]
    return {
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
    }


def test_simulated_nodes_register_ready_and_publish_their_devices(cluster: Cluster) -> None:
    def published() -> bool:
        slices = cluster.get("/apis/resource.k8s.io/v1/resourceslices")["items"]
        return ready_nodes(cluster) == set(NODES) and {s["spec"].get("nodeName") for s in slices} == set(NODES)

    eventually(published, f"nodes Ready with their ResourceSlices\n{cluster.worker_logs()}", timeout=TIMEOUT)
    slices = cluster.get("/apis/resource.k8s.io/v1/resourceslices")["items"]
    assert {s["spec"]["driver"] for s in slices} == {"gpu.example.com"}
    assert all(len(s["spec"]["devices"]) == 8 for s in slices)
    # The nodes' heartbeats: each node renews its own Lease (NodeRestriction allows no other).
    leases = cluster.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]
    assert {lease["metadata"]["name"] for lease in leases} >= set(NODES)


def test_a_pod_with_a_claim_runs_with_its_device_allocated_and_prepared(cluster: Cluster) -> None:
    eventually(lambda: ready_nodes(cluster) == set(NODES), "nodes Ready", timeout=TIMEOUT)
    cluster.create("/apis/resource.k8s.io/v1/deviceclasses", yaml.safe_load((REPO_ROOT / "examples" / "gpu-deviceclass.yaml").read_text()))
    cluster.create("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", CLAIM)
    cluster.create("/api/v1/namespaces/default/pods", POD)

    def running() -> dict[str, Any] | None:
        pod = cluster.get("/api/v1/namespaces/default/pods/trainer")
        return pod if pod.get("status", {}).get("phase") == "Running" else None

    pod = eventually(running, f"pod trainer Running\n{cluster.worker_logs()}", timeout=TIMEOUT)
    assert pod["spec"]["nodeName"] in NODES
    claim = cluster.get("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/single-gpu")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"]) for r in results] == [("gpu.example.com", pod["spec"]["nodeName"])]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}]
    # The simulated driver reported the prepared device (as its service account, bound to the node).
    conditions = {c["type"]: c for d in claim["status"].get("devices", []) for c in d.get("conditions", [])}
    assert conditions["Ready"]["reason"] == "DevicePrepared"
    # The scheduler's decision, as upstream's words it.
    events = cluster.get("/api/v1/namespaces/default/events")["items"]
    assert any(e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "trainer" for e in events)


def test_a_pod_gets_a_claim_from_its_template_and_loses_it_when_deleted(cluster: Cluster) -> None:
    eventually(lambda: ready_nodes(cluster) == set(NODES), "nodes Ready", timeout=TIMEOUT)
    if cluster.admin.get("/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com").status_code == 404:
        cluster.create("/apis/resource.k8s.io/v1/deviceclasses", yaml.safe_load((REPO_ROOT / "examples" / "gpu-deviceclass.yaml").read_text()))
    template, pod = yaml.safe_load_all((REPO_ROOT / "examples" / "pod-with-claim-template.yaml").read_text())
    cluster.create("/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template)
    cluster.create("/api/v1/namespaces/default/pods", pod)

    def running() -> dict[str, Any] | None:
        found = cluster.get("/api/v1/namespaces/default/pods/gpu-pod")
        return found if found.get("status", {}).get("phase") == "Running" else None

    found = eventually(running, f"pod gpu-pod Running\n{cluster.worker_logs()}", timeout=TIMEOUT)
    statuses = found["status"]["resourceClaimStatuses"]
    assert [s["name"] for s in statuses] == ["gpu"]
    claim_name = statuses[0]["resourceClaimName"]
    assert claim_name.startswith("gpu-pod-gpu-")
    claim = cluster.get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim_name}")
    assert claim["status"]["reservedFor"][0]["name"] == "gpu-pod"

    # Deleted: the simulated kubelet stops the pod, then the controller deletes the generated claim.
    assert cluster.admin.delete("/api/v1/namespaces/default/pods/gpu-pod").status_code == 200
    eventually(
        lambda: cluster.admin.get(f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim_name}").status_code == 404,
        f"claim {claim_name} deleted with its pod\n{cluster.worker_logs()}",
        timeout=TIMEOUT,
    )


def test_upstreams_admission_enforces_the_quota_status_our_controller_keeps(cluster: Cluster) -> None:
    # Upstream's e2e "supports count/resourceclaims.resource.k8s.io ResourceQuota", with this
    # project's controller (as upstream's resourcequota-controller account) and upstream's admission.
    count = "count/resourceclaims.resource.k8s.io"
    cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "quota"}})
    cluster.create("/apis/resource.k8s.io/v1/namespaces/quota/resourceclaims", {**CLAIM, "metadata": {"name": "claim-0"}})
    cluster.create("/api/v1/namespaces/quota/resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "object-count"},
                                                             "spec": {"hard": {count: "1"}}})  # fmt: skip

    def counted() -> bool:
        return cluster.get("/api/v1/namespaces/quota/resourcequotas/object-count").get("status") == {"hard": {count: "1"}, "used": {count: "1"}}

    eventually(counted, f"the quota's status\n{cluster.worker_logs()}", timeout=TIMEOUT)
    refused = cluster.admin.post("/apis/resource.k8s.io/v1/namespaces/quota/resourceclaims", json={**CLAIM, "metadata": {"generateName": "claim-1-"}})
    assert refused.status_code == 403, refused.text
    status = refused.json()
    # The words this server's admission uses too (tests/app/admission/test_resourcequota.py).
    name = status["details"]["name"]
    assert name.startswith("claim-1-") and status["details"] == {"name": name, "group": "resource.k8s.io", "kind": "resourceclaims"}
    assert status["message"] == (
        f'resourceclaims.resource.k8s.io "{name}" is forbidden: exceeded quota: object-count, requested: {count}=1, used: {count}=1, limited: {count}=1'
    )
