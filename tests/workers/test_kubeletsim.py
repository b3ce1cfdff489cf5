"""The kubelet simulator as a real subprocess against a real API server.

Tests run in file order and share one simulator (2 nodes); the last test restarts it.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.testing.server import REPO_ROOT, ServerProcess, stop_process

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Sim:
    """``python -m kubeletsim`` in a subprocess."""

    def __init__(self, server: str, prefix: str, log_path: Path) -> None:
        self.server, self.prefix, self.log_path = server, prefix, log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def nodes(self) -> list[str]:
        return [f"{self.prefix}0", f"{self.prefix}1"]

    def start(self) -> Sim:
        args = [
            sys.executable, "-m", "kubeletsim", "--server", self.server, "--nodes", "2", "--profile", "gpu",
            "--node-prefix", self.prefix, "--lease-interval", "1", "--resync-interval", "2", "--log-level", "debug",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=log, stderr=log)
        return self

    def stop(self) -> None:
        stop_process(self.process)

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        yield http


@pytest.fixture(scope="module")
def sim(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    prefix = f"ks{uuid.uuid4().hex[:6]}-"
    simulator = Sim(server.url, prefix, tmp_path_factory.mktemp("kubeletsim") / "sim.log").start()
    yield simulator
    simulator.stop()
    assert "Traceback" not in simulator.log(), simulator.log()


@pytest.fixture
def namespace(client: httpx.Client) -> str:
    name = f"ks-{uuid.uuid4().hex[:8]}"
    assert client.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    return name


def our_slices(client: httpx.Client, sim: Sim) -> list[dict[str, Any]]:
    return [s for s in client.get(SLICES).json()["items"] if s["spec"].get("nodeName") in sim.nodes]


def node_ready(client: httpx.Client, name: str) -> dict[str, Any] | None:
    response = client.get(f"/api/v1/nodes/{name}")
    if response.status_code != 200:
        return None
    node = response.json()
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in (node.get("status") or {}).get("conditions") or [])
    return node if ready else None


def make_pod(
    client: httpx.Client, namespace: str, name: str, node: str, *, claim: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """Create a pod and bind it to ``node`` through pods/binding, as a scheduler would."""
    pod: dict[str, Any] = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    if claim:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    response = client.post(f"/api/v1/namespaces/{namespace}/pods", json=pod)
    assert response.status_code == 201, response.text
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    response = client.post(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", json=binding)
    assert response.status_code == 201, response.text
    return client.get(f"/api/v1/namespaces/{namespace}/pods/{name}").json()


def make_claim(client: httpx.Client, namespace: str, name: str) -> None:
    claim = {
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }
    response = client.post(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", json=claim)
    assert response.status_code == 201, response.text


def allocate(client: httpx.Client, namespace: str, claim_name: str, node: str, device: str, reserve_for: dict[str, Any] | None) -> None:
    """Write the claim status a scheduler would: an allocation on ``node`` and (optionally) the reservation."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{claim_name}"
    claim = client.get(path).json()
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }
    }
    if reserve_for is not None:
        meta = reserve_for["metadata"]
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": meta["name"], "uid": meta["uid"]}]
    response = client.put(f"{path}/status", json=claim)
    assert response.status_code == 200, response.text


def pod_phase(client: httpx.Client, namespace: str, name: str, phase: str) -> dict[str, Any] | None:
    response = client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    pod = response.json() if response.status_code == 200 else {}
    return pod if (pod.get("status") or {}).get("phase") == phase else None


# ---- tests ------------------------------------------------------------------------------------------


def test_nodes_slices_and_leases(client: httpx.Client, sim: Sim) -> None:
    for name in sim.nodes:
        node = wait_for(lambda n=name: node_ready(client, n), what=f"node {name} Ready")
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == name and labels["type"] == "kubeletsim"
        assert node["status"]["allocatable"]["cpu"] == "32" and len(node["status"]["nodeInfo"]) == 10
    slices = wait_for(lambda: len(our_slices(client, sim)) == 2 and our_slices(client, sim), what="slices")
    for slice_ in slices:
        spec = slice_["spec"]
        assert spec["driver"] == "gpu.example.com" and spec["pool"]["name"] == spec["nodeName"]
        assert spec["pool"]["generation"] == 1 and spec["pool"]["resourceSliceCount"] == 1
        assert len(spec["devices"]) == 8
    lease = wait_for(lambda: client.get(f"{LEASES}/{sim.nodes[0]}").json().get("spec"), what="lease")
    assert lease["leaseDurationSeconds"] == 40 and lease["holderIdentity"] == sim.nodes[0]
    wait_for(lambda: client.get(f"{LEASES}/{sim.nodes[0]}").json()["spec"]["renewTime"] != lease["renewTime"], what="lease renewal")


def test_pod_without_claims_runs(client: httpx.Client, sim: Sim, namespace: str) -> None:
    make_pod(client, namespace, "plain", sim.nodes[0])
    pod = wait_for(lambda: pod_phase(client, namespace, "plain", "Running"), what="pod Running")
    status = pod["status"]
    assert {c["type"] for c in status["conditions"] if c["status"] == "True"} >= {
        "PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready",
    }  # fmt: skip
    container = status["containerStatuses"][0]
    assert container["ready"] and container["started"] and container["restartCount"] == 0
    assert container["state"]["running"]["startedAt"] and container["imageID"] and container["containerID"]
    assert status["podIP"] and status["hostIP"] and status["startTime"]
    make_pod(client, namespace, "plain2", sim.nodes[0])
    other = wait_for(lambda: pod_phase(client, namespace, "plain2", "Running"), what="second pod Running")
    assert other["status"]["podIP"] != status["podIP"]


def test_pod_with_reserved_claim_runs_and_gets_device_status(client: httpx.Client, sim: Sim, namespace: str) -> None:
    make_claim(client, namespace, "gpu-claim")
    pod = make_pod(client, namespace, "with-claim", sim.nodes[1], claim="gpu-claim")
    allocate(client, namespace, "gpu-claim", sim.nodes[1], "gpu-0", reserve_for=pod)
    wait_for(lambda: pod_phase(client, namespace, "with-claim", "Running"), what="pod with claim Running")
    claim_path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/gpu-claim"
    devices = client.get(claim_path).json()["status"]["devices"]
    assert [(d["driver"], d["pool"], d["device"]) for d in devices] == [("gpu.example.com", sim.nodes[1], "gpu-0")]
    assert devices[0]["conditions"][0]["type"] == "Ready" and devices[0]["conditions"][0]["status"] == "True"
    # Deleting the pod (default grace period) unprepares the device and removes the pod.
    assert client.delete(f"/api/v1/namespaces/{namespace}/pods/with-claim").status_code == 200
    wait_for(lambda: client.get(f"/api/v1/namespaces/{namespace}/pods/with-claim").status_code == 404, what="pod deleted")
    wait_for(lambda: not client.get(claim_path).json()["status"].get("devices"), what="device unprepared")


def test_pod_with_unreserved_claim_stays_pending(client: httpx.Client, sim: Sim, namespace: str) -> None:
    make_claim(client, namespace, "unreserved")
    make_pod(client, namespace, "waits", sim.nodes[0], claim="unreserved")
    allocate(client, namespace, "unreserved", sim.nodes[0], "gpu-1", reserve_for=None)

    def event() -> list[dict[str, Any]]:
        items = client.get(f"/api/v1/namespaces/{namespace}/events").json()["items"]
        return [e for e in items if e["reason"] == "FailedPrepareDynamicResources" and "not reserved" in e["message"]]

    events = wait_for(event, what="FailedPrepareDynamicResources event")
    assert events[0]["involvedObject"]["name"] == "waits" and events[0]["type"] == "Warning"
    pod = client.get(f"/api/v1/namespaces/{namespace}/pods/waits").json()
    assert pod["status"]["phase"] == "Pending"
    assert "not reserved" in pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    time.sleep(0.5)
    assert pod_phase(client, namespace, "waits", "Pending")


def test_run_seconds_and_exit_code(client: httpx.Client, sim: Sim, namespace: str) -> None:
    make_pod(client, namespace, "ok", sim.nodes[0], annotations={"dra.example.dev/run-seconds": "1"})
    make_pod(client, namespace, "bad", sim.nodes[1], annotations={"dra.example.dev/run-seconds": "1", "dra.example.dev/exit-code": "3"})
    wait_for(lambda: pod_phase(client, namespace, "ok", "Succeeded"), what="pod Succeeded")
    failed = wait_for(lambda: pod_phase(client, namespace, "bad", "Failed"), what="pod Failed")
    terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"


def test_deleted_node_and_slice_come_back(client: httpx.Client, sim: Sim) -> None:
    victim = our_slices(client, sim)[0]
    assert client.delete(f"{SLICES}/{victim['metadata']['name']}").status_code == 200
    recreated = wait_for(lambda: client.get(f"{SLICES}/{victim['metadata']['name']}").status_code == 200, what="slice recreated")
    assert recreated
    pool = [s for s in our_slices(client, sim) if s["spec"]["nodeName"] == victim["spec"]["nodeName"]]
    assert len(pool) == 1 and pool[0]["spec"]["pool"]["generation"] == 2
    old_uid = client.get(f"/api/v1/nodes/{sim.nodes[1]}").json()["metadata"]["uid"]
    assert client.delete(f"/api/v1/nodes/{sim.nodes[1]}").status_code == 200
    node = wait_for(lambda: (n := node_ready(client, sim.nodes[1])) and n["metadata"]["uid"] != old_uid and n, what="node re-registered")
    assert node["status"]["allocatable"]["pods"] == "110"


def test_restart_duplicates_nothing(client: httpx.Client, sim: Sim, namespace: str) -> None:
    make_pod(client, namespace, "survivor", sim.nodes[0])
    before_pod = wait_for(lambda: pod_phase(client, namespace, "survivor", "Running"), what="pod Running")
    wait_for(lambda: all(s["metadata"].get("ownerReferences") for s in our_slices(client, sim)), what="slices settled")
    time.sleep(0.5)
    nodes_before = {n: client.get(f"/api/v1/nodes/{n}").json()["metadata"]["uid"] for n in sim.nodes}
    slices_before = {s["metadata"]["name"]: (s["metadata"]["uid"], s["spec"]["pool"]["generation"]) for s in our_slices(client, sim)}
    events_before = len(client.get(f"/api/v1/namespaces/{namespace}/events").json()["items"])
    sim.stop()
    sim.start()
    lease = client.get(f"{LEASES}/{sim.nodes[0]}").json()["spec"]["renewTime"]
    wait_for(lambda: client.get(f"{LEASES}/{sim.nodes[0]}").json()["spec"]["renewTime"] != lease, what="restarted simulator renews leases")
    time.sleep(1.0)
    assert {n: client.get(f"/api/v1/nodes/{n}").json()["metadata"]["uid"] for n in sim.nodes} == nodes_before
    slices_after = {s["metadata"]["name"]: (s["metadata"]["uid"], s["spec"]["pool"]["generation"]) for s in our_slices(client, sim)}
    assert slices_after == slices_before
    after_pod = client.get(f"/api/v1/namespaces/{namespace}/pods/survivor").json()
    assert after_pod["metadata"]["resourceVersion"] == before_pod["metadata"]["resourceVersion"]
    assert len(client.get(f"/api/v1/namespaces/{namespace}/events").json()["items"]) == events_before
    # And it still works after the restart.
    make_pod(client, namespace, "after-restart", sim.nodes[0])
    fresh = wait_for(lambda: pod_phase(client, namespace, "after-restart", "Running"), what="pod Running after restart")
    assert fresh["status"]["podIP"] != after_pod["status"]["podIP"]
