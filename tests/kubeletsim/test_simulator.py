"""The kubelet simulator as a real subprocess against a real API server.

The process tests run in file order and share one simulator (2 nodes); the last of them restarts
it. The tests of the pure admission rules and of the heartbeat loop at the end need no processes.
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

from devtools.server import REPO_ROOT, ServerProcess, stop_process
from kube.features import Gate

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
    # Every test starts from registered, Ready nodes with their slices published: under
    # pytest-xdist any test of this module may be the first to use the simulator.
    with httpx.Client(base_url=server.url) as client:
        wait_for(
            lambda: all(node_ready(client, n) for n in simulator.nodes) and {s["spec"]["nodeName"] for s in our_slices(client, simulator)} == set(simulator.nodes),
            what="simulated nodes Ready with their slices",
        )
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
    client: httpx.Client,
    namespace: str,
    name: str,
    node: str,
    *,
    claim: str | None = None,
    annotations: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create a pod and bind it to ``node`` through pods/binding, as a scheduler would."""
    pod: dict[str, Any] = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    if requests:
        pod["spec"]["containers"][0]["resources"] = {"requests": requests}
    if claim:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        pod["spec"]["containers"][0].setdefault("resources", {})["claims"] = [{"name": "gpu"}]
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
        node = wait_for(lambda n=name: node_ready(client, n), what=f"node {name} Ready")  # type: ignore[misc]  # mypy types no lambda with a default argument (here: binding the loop variable)
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


def rejection(client: httpx.Client, namespace: str, name: str, reason: str) -> str:
    """Wait until the pod failed admission with ``reason``; return its status message (checked against its event)."""
    pod = wait_for(lambda: pod_phase(client, namespace, name, "Failed"), what=f"pod {name} rejected")
    assert pod["status"]["reason"] == reason, pod["status"]
    assert not pod["status"].get("containerStatuses")

    def event() -> list[dict[str, Any]]:
        items = client.get(f"/api/v1/namespaces/{namespace}/events").json()["items"]
        return [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]

    [found] = wait_for(event, what=f"{reason} event")
    assert found["type"] == "Warning" and found["source"]["component"] == "kubelet"
    assert pod["status"]["message"] == f"Pod was rejected: {found['message']}"
    return str(pod["status"]["message"])


def test_pods_that_do_not_fit_are_rejected(client: httpx.Client, sim: Sim, namespace: str) -> None:
    node = sim.nodes[1]  # 32 cpu, 256Gi; the earlier pods there request nothing or have finished
    make_pod(client, namespace, "big", node, requests={"cpu": "30", "memory": "200Gi"})
    wait_for(lambda: pod_phase(client, namespace, "big", "Running"), what="big pod Running")
    make_pod(client, namespace, "more-cpu", node, requests={"cpu": "2500m"})
    message = rejection(client, namespace, "more-cpu", "OutOfcpu")
    assert message == "Pod was rejected: Node didn't have enough resource: cpu, requested: 2500, used: 30000, capacity: 32000"
    make_pod(client, namespace, "more-memory", node, requests={"memory": "100Gi"})
    message = rejection(client, namespace, "more-memory", "OutOfmemory")
    assert message == f"Pod was rejected: Node didn't have enough resource: memory, requested: {100 * 2**30}, used: {200 * 2**30}, capacity: {256 * 2**30}"
    # The other node is not affected, and a finished pod frees what it held.
    make_pod(client, namespace, "elsewhere", sim.nodes[0], requests={"cpu": "2500m"})
    wait_for(lambda: pod_phase(client, namespace, "elsewhere", "Running"), what="pod on the other node Running")
    assert client.delete(f"/api/v1/namespaces/{namespace}/pods/big").status_code == 200
    wait_for(lambda: client.get(f"/api/v1/namespaces/{namespace}/pods/big").status_code == 404, what="big pod gone")
    make_pod(client, namespace, "fits-now", node, requests={"cpu": "2500m", "memory": "100Gi"})
    wait_for(lambda: pod_phase(client, namespace, "fits-now", "Running"), what="pod Running once resources are free")
    for name in ("fits-now", "elsewhere"):
        client.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")
        wait_for(lambda n=name: client.get(f"/api/v1/namespaces/{namespace}/pods/{n}").status_code == 404, what=f"{name} gone")  # type: ignore[misc]  # mypy types no lambda with a default argument (here: binding the loop variable)


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
    make_pod(client, namespace, "survivor", sim.nodes[0], requests={"cpu": "30"})
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
    # And it still works after the restart, counting what the pods admitted before it hold.
    make_pod(client, namespace, "after-restart", sim.nodes[0])
    fresh = wait_for(lambda: pod_phase(client, namespace, "after-restart", "Running"), what="pod Running after restart")
    assert fresh["status"]["podIP"] != after_pod["status"]["podIP"]
    make_pod(client, namespace, "no-room", sim.nodes[0], requests={"cpu": "4"})
    assert "cpu, requested: 4000, used: 30000, capacity: 32000" in rejection(client, namespace, "no-room", "OutOfcpu")


# ---- resource admission: pure rules ------------------------------------------------------------------


def _container(name: str, cpu: str | None = None, memory: str | None = None, restart: str | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": name, "image": "pause", "resources": {"requests": requests}}
    if restart:
        container["restartPolicy"] = restart
    return container


def test_pod_requests_follow_upstream_rules() -> None:
    """The kubelet's admission uses the scheduler's rule (kube.dra.pods.pod_requests, upstream's PodRequests)."""
    from fractions import Fraction

    from kube.dra.pods import pod_requests

    plain = {"spec": {"containers": [_container("a", "250m", "1Gi"), _container("b", "750m")]}}
    assert pod_requests(plain) == {"cpu": Fraction(1), "memory": Fraction(2**30)}
    # The largest init container wins over the sum of the containers when it is larger.
    init = {"spec": {"initContainers": [_container("i", "2", "64Mi")], "containers": [_container("a", "500m", "1Gi")]}}
    assert pod_requests(init) == {"cpu": Fraction(2), "memory": Fraction(2**30)}
    # A sidecar adds to the containers and to every init container after it.
    sidecar = {
        "spec": {
            "initContainers": [_container("s", "1", restart="Always"), _container("i", "2")],
            "containers": [_container("a", "500m")],
        }
    }
    assert pod_requests(sidecar) == {"cpu": Fraction(3)}
    # Pod-level requests replace the containers' cpu/memory; the overhead comes on top.
    pod_level = {"spec": {"resources": {"requests": {"cpu": "4"}}, "overhead": {"cpu": "100m"}, "containers": [_container("a", "1", "1Gi")]}}
    assert pod_requests(pod_level) == {"cpu": Fraction(41, 10), "memory": Fraction(2**30)}
    # What claims charge (KEP-5517, from the status the scheduler writes): mapped amounts and perPod
    # overhead once per claim, perContainer overhead per referencing container.
    with_claims = {
        **plain,
        "status": {
            "nodeAllocatableResourceClaimStatuses": [
                {"resourceClaimName": "cores", "containers": ["a", "b"], "mapping": [{"name": "cpu", "quantity": "8"}]},
                {
                    "resourceClaimName": "gpu",
                    "containers": ["a", "b"],
                    "overhead": [{"name": "memory", "perPod": "128Mi", "perContainer": "64Mi"}],
                },
            ]
        },
    }
    assert pod_requests(with_claims) == {"cpu": Fraction(9), "memory": Fraction(2**30 + 256 * 2**20)}
    assert pod_requests(with_claims, node_allocatable=False) == pod_requests(plain)
    # An ordinary init container's perContainer overhead only counts while it runs (its peak).
    init_claim = {
        "spec": {"initContainers": [_container("i", "1")], "containers": [_container("a", "1")]},
        "status": {
            "nodeAllocatableResourceClaimStatuses": [{"resourceClaimName": "c", "containers": ["i"], "overhead": [{"name": "cpu", "perContainer": "2"}]}]
        },
    }
    assert pod_requests(init_claim) == {"cpu": Fraction(3)}


def test_resource_report_adds_claims_to_pod_level_and_limits_only() -> None:
    """KEP-5517 pod status: pod-level allocatedResources include what claims charge, container
    allocatedResources stay the spec's; container limits grow by the claims the container uses."""
    from kubeletsim.pods import resource_report, running_status

    pod = {
        "metadata": {"uid": "u"},
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "image": "pause",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
                },
                {"name": "b", "image": "pause", "resources": {"requests": {"cpu": "500m"}}},
            ],
            "overhead": {"cpu": "100m"},
        },
        "status": {
            "nodeAllocatableResourceClaimStatuses": [
                {"resourceClaimName": "cores", "containers": ["a"], "mapping": [{"name": "cpu", "quantity": "8"}]},
                {"resourceClaimName": "gpu", "containers": ["b"], "overhead": [{"name": "memory", "perPod": "128Mi"}]},
            ]
        },
    }
    report = resource_report(pod)
    assert report.pod == {
        "allocatedResources": {"cpu": "9500m", "memory": "1152Mi"},
        "resources": {"requests": {"cpu": "9500m", "memory": "1152Mi"}, "limits": {"cpu": "10", "memory": "2176Mi"}},
    }
    assert report.allocated == {"a": {"cpu": "1", "memory": "1Gi"}, "b": {"cpu": "500m"}}
    # b has no limits: unlimited, so the claim's memory is not added there.
    assert report.actual == {
        "a": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "10", "memory": "2Gi"}},
        "b": {"requests": {"cpu": "500m"}},
    }
    status = running_status(pod, "172.16.0.1", "10.64.0.2", "2026-01-01T00:00:00Z", report)
    assert status["allocatedResources"] == report.pod["allocatedResources"]
    assert [c.get("allocatedResources") for c in status["containerStatuses"]] == [{"cpu": "1", "memory": "1Gi"}, {"cpu": "500m"}]
    assert status["containerStatuses"][0]["resources"]["limits"] == {"cpu": "10", "memory": "2Gi"}
    # With the gate off the claims are not counted, and plain pods get no pod-level `resources`.
    off = resource_report(pod, node_allocatable=False)
    assert off.pod == {"allocatedResources": {"cpu": "1500m", "memory": "1Gi"}}
    assert off.actual["a"]["limits"] == {"cpu": "2", "memory": "2Gi"}


def test_pod_ranges_grow_with_max_pods() -> None:
    from kubeletsim import nodes

    assert str(nodes.pod_cidr(0)) == "10.64.0.0/24" and str(nodes.pod_cidr(257)) == "10.65.1.0/24" and nodes.max_host() == 254
    assert str(nodes.pod_cidr(1, 1100)) == "10.64.8.0/21" and nodes.max_host(1100) == 2046
    assert nodes.pod_ip(1, 300, 1100) == "10.64.9.44" and nodes.pod_host(1, "10.64.9.44", 1100) == 300
    assert nodes.pod_host(0, "10.64.9.44", 1100) is None and nodes.pod_host(0, "bogus") is None
    node = nodes.build_node("n", 0, "gpu", max_pods=1100, declared_features=[Gate.DRANodeAllocatableResources])
    assert node["status"]["allocatable"]["pods"] == "1100" and node["status"]["declaredFeatures"] == [Gate.DRANodeAllocatableResources]
    assert "declaredFeatures" not in nodes.build_node("n", 0, "gpu")["status"]


def test_check_fit_reports_the_first_insufficient_resource_like_upstream() -> None:
    from fractions import Fraction

    from kubeletsim.resources import check_fit

    node = {"cpu": Fraction(4), "memory": Fraction(8 * 2**30), "pods": Fraction(3)}
    running = [{"cpu": Fraction(3)}, {"memory": Fraction(6 * 2**30)}]
    assert check_fit({"cpu": Fraction(1)}, running, node) is None
    cpu = check_fit({"cpu": Fraction(3, 2), "memory": Fraction(4 * 2**30)}, running, node)
    assert cpu is not None and cpu.reason == "OutOfcpu"
    assert cpu.message == "Node didn't have enough resource: cpu, requested: 1500, used: 3000, capacity: 4000"
    memory = check_fit({"memory": Fraction(4 * 2**30)}, running, node)
    assert memory is not None and memory.reason == "OutOfmemory"
    assert memory.message == f"Node didn't have enough resource: memory, requested: {4 * 2**30}, used: {6 * 2**30}, capacity: {8 * 2**30}"
    pods = check_fit({}, [*running, {}], node)
    assert pods is not None and (pods.reason, pods.message) == ("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3")
    # Extended resources the node does not have are not the kubelet's business; ones it has are checked.
    assert check_fit({"example.com/foo": Fraction(1)}, [], node) is None
    foo = check_fit({"example.com/foo": Fraction(2)}, [], {**node, "example.com/foo": Fraction(1)})
    assert foo is not None and foo.reason == "OutOfexample.com/foo"


async def test_heartbeats_beat_every_key_once_per_interval() -> None:
    import asyncio
    import contextlib

    from kubeletsim.heartbeats import Heartbeats

    loop = asyncio.get_running_loop()
    seen: dict[str, list[float]] = {}

    async def beat(key: str) -> None:
        seen.setdefault(key, []).append(loop.time())
        if key == "n0":
            raise RuntimeError("a failing beat is retried at its next slot")

    keys = [f"n{i}" for i in range(20)]
    heartbeats = Heartbeats("test", 0.1, beat, concurrency=4)
    task = asyncio.create_task(heartbeats.run())
    start = loop.time()
    for key in keys:
        heartbeats.add(key)
        heartbeats.add(key)  # adding again does not schedule a second beat
    try:
        deadline = start + 20
        while min(len(seen.get(k, [])) for k in keys) < 3 and loop.time() < deadline:
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    elapsed = loop.time() - start
    # Every key beats, and none more than once per slot (however late the loop ran).
    assert all(3 <= len(seen[k]) <= elapsed / 0.1 + 2 for k in keys), {k: len(v) for k, v in seen.items()}


async def test_heartbeats_of_many_keys_share_timer_wakeups() -> None:
    # Thousands of nodes' Leases: each key has its own slot, but the timer wakes at most once per
    # granularity and hands out every key due by then (one wake-up per key was the loop's largest cost).
    import asyncio
    import contextlib

    from kubeletsim.heartbeats import Heartbeats

    loop = asyncio.get_running_loop()
    beats: dict[str, int] = {}

    async def beat(key: str) -> None:
        beats[key] = beats.get(key, 0) + 1

    heartbeats = Heartbeats("test", 0.5, beat, concurrency=64)
    assert heartbeats.granularity == 0.005
    keys = [f"n{i}" for i in range(2000)]
    task = asyncio.create_task(heartbeats.run())
    start = loop.time()
    for key in keys:
        heartbeats.add(key)
    try:
        deadline = start + 30
        while min(beats.get(k, 0) for k in keys) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert min(beats.get(k, 0) for k in keys) >= 2
    # Every sleep lasts at least the granularity (at most 100 wake-ups per interval, for 2,000 beats):
    # far fewer wake-ups than beats, however fast or slow the machine.
    assert heartbeats.wakeups < sum(beats.values()) / 4, (heartbeats.wakeups, sum(beats.values()))
