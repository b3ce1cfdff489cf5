"""The scheduler's side of the two DRA proposals, behind their alpha gates (server, controller and
scheduler all run with them on): claims reserved for a workload (KEP-5194) and node allocatable
resources mapped from devices (KEP-5517)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.schedulers.test_scheduler import RESOURCE, Worker, condition, eventually, get_claim, get_pod

GATES = gates_flag({Gate.DRAReservedForWorkloads: True, Gate.DRANodeAllocatableResources: True})
FEATURE = Gate.DRANodeAllocatableResources


@pytest.fixture(scope="module")
def gated(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Server, claim controller and scheduler, every one with both proposal gates on."""
    server = start_server("--bookmark-interval", "1", "--feature-gates", GATES)
    logs = tmp_path_factory.mktemp("proposals")
    common = ["--server", server.url, "--feature-gates", GATES, "--log-level", "debug"]
    controller = Worker("controllers", [*common, "--lease-duration", "2"], logs / "controller.log").start()
    scheduler = Worker("schedulers", [*common, "--no-leader-elect"], logs / "scheduler.log").start()
    yield server
    scheduler.stop()
    controller.stop()


@pytest.fixture
def client(gated: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gated.url, timeout=30.0) as c:
        yield c


@pytest.fixture
def ns(client: httpx.Client) -> str:
    name = f"p-{uuid.uuid4().hex[:8]}"
    assert client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}).status_code == 201
    return name


class Cluster:
    """Per-test nodes (tagged), one slice per node with the given devices, and a class for the driver."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.tag = uuid.uuid4().hex[:6]
        self.driver = f"{self.tag}.example.com"
        self.klass = f"dev-{self.tag}"
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": self.klass},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]}}
        assert client.post(f"{RESOURCE}/deviceclasses", json=body).status_code == 201

    def node(self, name: str, devices: list[dict[str, Any]], cpu: str = "4", memory: str = "8Gi", declares: bool = True) -> str:
        name = f"{name}-{self.tag}"
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"test": self.tag, "kubernetes.io/hostname": name}}}
        node = self.client.post("/api/v1/nodes", json=body).json()
        node["status"] = {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"}, "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}
        if declares:
            node["status"]["declaredFeatures"] = [FEATURE]
        assert self.client.put(f"/api/v1/nodes/{name}/status", json=node).status_code == 200
        slice_body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-slice"},
                      "spec": {"driver": self.driver, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}
        response = self.client.post(f"{RESOURCE}/resourceslices", json=slice_body)
        assert response.status_code == 201, response.text
        return name

    def claim(self, ns: str, name: str, **spec: Any) -> dict[str, Any]:
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": self.klass}}]}, **spec}}
        response = self.client.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=body)
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    def pod(self, ns: str, name: str, claim: str, cpu: str = "0", memory: str = "0", containers: int = 1) -> None:
        spec: dict[str, Any] = {
            "containers": [
                {"name": f"c{i}", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}, "claims": [{"name": "dev"}]}}
                for i in range(containers)
            ],
            "resourceClaims": [{"name": "dev", "resourceClaimName": claim}],
            "nodeSelector": {"test": self.tag},
        }
        response = self.client.post(f"/api/v1/namespaces/{ns}/pods", json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
        assert response.status_code == 201, response.text


def bound_node(client: httpx.Client, ns: str, name: str) -> str:
    return eventually(lambda: get_pod(client, ns, name)["spec"].get("nodeName"), what=f"{name} bound")  # type: ignore[no-any-return]


def unschedulable_message(client: httpx.Client, ns: str, name: str) -> str:
    def check() -> str | None:
        c = condition(client, ns, name)
        return c["message"] if c and c.get("reason") == "Unschedulable" else None

    return eventually(check, what=f"{name} unschedulable")  # type: ignore[no-any-return]


def cpu_device(name: str, cores: str) -> dict[str, Any]:
    """A CPU-like device whose cores count against the node's cpu (mapping, KEP-5517)."""
    return {"name": name, "capacity": {"cores": {"value": cores}},
            "nodeAllocatableResources": {"cpu": {"mapping": {"capacityKey": "cores", "capacityMultiplier": "1"}}}}


def overhead_device(name: str, per_pod: str, per_container: str = "0") -> dict[str, Any]:
    """A device whose users each pay a memory overhead (shareable: overhead is charged per pod)."""
    return {"name": name, "nodeAllocatableResources": {"memory": {"overhead": {"perPod": per_pod, "perContainer": per_container}}}}


# ---------------------------------------------------------------- KEP-5194


def test_claim_reserved_for_workload_serves_every_pod(client: httpx.Client, ns: str) -> None:
    cluster = Cluster(client)
    cluster.node("n", [{"name": "gpu-0"}])
    workload = {"apiGroup": "apps", "resource": "statefulsets", "name": "trainer", "uid": str(uuid.uuid4())}
    cluster.claim(ns, "shared", reservedFor=workload)
    pods = [f"worker-{i}" for i in range(30)]
    for name in pods:
        cluster.pod(ns, name, "shared")
    for name in pods:
        bound_node(client, ns, name)
    status = get_claim(client, ns, "shared")["status"]
    # The workload, not the pods, holds the reservation, so 30 (or 1,000) pods are no problem.
    assert status["reservedFor"] == [workload]
    assert status["allocation"]["reservedForAnyPod"] is True
    # Pods leaving change nothing: the workload's controller decides when the claim is released.
    for name in pods:
        assert client.delete(f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"}).status_code == 200
    claim = get_claim(client, ns, "shared")
    assert claim["status"]["reservedFor"] == [workload] and claim["status"].get("allocation")
    # Removing the workload reference deallocates the claim (the controller's job).
    claim["status"]["reservedFor"] = []
    assert client.put(f"{RESOURCE}/namespaces/{ns}/resourceclaims/shared/status", json=claim).status_code == 200
    eventually(lambda: not get_claim(client, ns, "shared").get("status", {}).get("allocation"), what="claim deallocated")


# ---------------------------------------------------------------- KEP-5517


def test_mapped_cpu_counts_against_node_allocatable(client: httpx.Client, ns: str) -> None:
    cluster = Cluster(client)
    node = cluster.node("n", [cpu_device("cpus-0", "3")], cpu="4")
    # 3 mapped cores + 2 requested > 4: fails only because of the DRA-mapped cpu.
    cluster.claim(ns, "cores-a")
    cluster.pod(ns, "too-big", "cores-a", cpu="2")
    assert "Insufficient cpu" in unschedulable_message(client, ns, "too-big")
    # 3 mapped + 1 requested = 4 fits, and the pod's status says what the claim charges.
    cluster.claim(ns, "cores-b")
    cluster.pod(ns, "fits", "cores-b", cpu="1")
    assert bound_node(client, ns, "fits") == node
    statuses = get_pod(client, ns, "fits")["status"]["nodeAllocatableResourceClaimStatuses"]
    assert statuses == [{"resourceClaimName": "cores-b", "containers": ["c0"], "mapping": [{"name": "cpu", "quantity": "3"}]}]


def test_mapping_claim_is_not_shared_between_pods(client: httpx.Client, ns: str) -> None:
    cluster = Cluster(client)
    cluster.node("n", [cpu_device("cpus-0", "1"), cpu_device("cpus-1", "1")], cpu="8")
    cluster.claim(ns, "cores")
    cluster.pod(ns, "first", "cores")
    bound_node(client, ns, "first")
    cluster.pod(ns, "second", "cores")
    message = unschedulable_message(client, ns, "second")
    assert "maps node allocatable resources and is already in use by pod first" in message


def test_overhead_is_charged_per_pod_of_a_shared_claim(client: httpx.Client, ns: str) -> None:
    cluster = Cluster(client)
    cluster.node("n", [overhead_device("nic-0", per_pod="1Gi", per_container="256Mi")], memory="3Gi")
    cluster.claim(ns, "nic")
    # Each pod pays 1Gi + 256Mi per referencing container: 1.25Gi, then 1.5Gi (two containers) = 2.75Gi of 3Gi.
    cluster.pod(ns, "one", "nic")
    bound_node(client, ns, "one")
    cluster.pod(ns, "two", "nic", containers=2)
    bound_node(client, ns, "two")
    entry = get_pod(client, ns, "two")["status"]["nodeAllocatableResourceClaimStatuses"][0]
    assert entry["containers"] == ["c0", "c1"] and entry["overhead"] == [{"name": "memory", "perPod": "1Gi", "perContainer": "256Mi"}]
    # A third pod would bring the total to 4Gi: refused for memory only because of the overhead.
    cluster.pod(ns, "three", "nic")
    assert "Insufficient memory" in unschedulable_message(client, ns, "three")


def test_pods_with_node_allocatable_claims_need_nodes_that_declare_the_feature(client: httpx.Client, ns: str) -> None:
    cluster = Cluster(client)
    cluster.node("old", [cpu_device("cpus-0", "1")], declares=False)
    cluster.claim(ns, "cores")
    cluster.pod(ns, "p", "cores")
    assert f"1 node(s) did not declare the {FEATURE} feature" in unschedulable_message(client, ns, "p")
    # A node that declares it appears: the pod goes there.
    new = cluster.node("new", [cpu_device("cpus-0", "1")])
    assert bound_node(client, ns, "p") == new

