"""The scheduler as a real process against a real server (plus the claim controller).

Every test creates its own nodes, slices, class and namespace, and steers pods to its own nodes
with a per-test node label, so tests can share one server and one scheduler (with the files that
use these fixtures too: tests/schedulers/conftest.py). Nodes are cluster scoped, so messages are
checked against the live node count.
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from devtools.ports import free_port
from devtools.server import REPO_ROOT, ServerProcess
from tests.processes import Worker, eventually

RESOURCE = "/apis/resource.k8s.io/v1"
TIMEOUT = 20.0


def start_scheduler(cluster: tuple[ServerProcess, Path], *extra: str, name: str = "default-scheduler") -> Worker:
    server, logs = cluster
    args = ["--server", server.url, "--scheduler-name", name, "--log-level", "debug", *extra]
    return Worker("schedulers", args, logs / f"scheduler-{name}-{uuid.uuid4().hex[:6]}.log").start()


# ---------------------------------------------------------------- objects


class Topo:
    """Per-test nodes with one slice each, and a class for the test's driver."""

    def __init__(self, client: httpx.Client, nodes: int, devices: int, cpu: str = "8") -> None:
        self.client = client
        self.tag = uuid.uuid4().hex[:6]
        self.driver = f"{self.tag}.example.com"
        self.klass = f"gpu-{self.tag}"
        self.nodes = [f"n-{self.tag}-{i}" for i in range(nodes)]
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": self.klass},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]}}
        assert client.post(f"{RESOURCE}/deviceclasses", json=body).status_code == 201
        for node in self.nodes:
            self.add_node(node, cpu)
            self.add_slice(node, devices)

    def add_node(self, name: str, cpu: str) -> None:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"test": self.tag, "kubernetes.io/hostname": name}}}
        response = self.client.post("/api/v1/nodes", json=body)
        assert response.status_code == 201, response.text
        node = response.json()
        node["status"] = {"capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"}, "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}
        assert self.client.put(f"/api/v1/nodes/{name}/status", json=node).status_code == 200

    def add_slice(self, node: str, devices: int) -> None:
        body = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{self.driver}"},
            "spec": {"driver": self.driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)]},
        }
        response = self.client.post(f"{RESOURCE}/resourceslices", json=body)
        assert response.status_code == 201, response.text

    def claim(self, ns: str, name: str, count: int = 1) -> dict[str, Any]:
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": self.klass, "count": count}}]}}}
        response = self.client.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=body)
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    def template(self, ns: str, name: str) -> None:
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": self.klass}}]}}}}
        assert self.client.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=body).status_code == 201

    def pod(self, ns: str, name: str, claims: Sequence[dict[str, str]] = (), **spec: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "resourceClaims": list(claims), "nodeSelector": {"test": self.tag}, **spec},
        }
        response = self.client.post(f"/api/v1/namespaces/{ns}/pods", json=body)
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]


def get_pod(client: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def node_of(client: httpx.Client, ns: str, name: str) -> str:
    return str(get_pod(client, ns, name)["spec"].get("nodeName") or "")


def get_claim(client: httpx.Client, ns: str, name: str) -> dict[str, Any]:
    response = client.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def condition(client: httpx.Client, ns: str, name: str) -> dict[str, Any] | None:
    for c in get_pod(client, ns, name).get("status", {}).get("conditions") or []:
        if c["type"] == "PodScheduled":
            return c  # type: ignore[no-any-return]
    return None


def events(client: httpx.Client, ns: str, reason: str, pod: str) -> list[dict[str, Any]]:
    items = client.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == pod]


def node_count(client: httpx.Client) -> int:
    return len(client.get("/api/v1/nodes").json()["items"])


def assert_no_double_allocation(client: httpx.Client) -> None:
    owners: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for claim in client.get(f"{RESOURCE}/resourceclaims").json()["items"]:
        for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            owners[(r["driver"], r["pool"], r["device"])] += 1
    assert [d for d, n in owners.items() if n > 1] == []


# ---------------------------------------------------------------- tests


def test_cli_help() -> None:
    out = subprocess.run([sys.executable, "-m", "schedulers", "--help"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    assert "--scheduler-name" in out and "--feature-gates" in out and "--no-leader-elect" in out


def test_pod_with_claim_gets_bound_with_allocation(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=2, devices=2)
    topo.claim(ns, "c1")
    topo.pod(ns, "p1", [{"name": "gpu", "resourceClaimName": "c1"}])
    node = eventually(lambda: node_of(client, ns, "p1"), what="p1 bound")
    claim = get_claim(client, ns, "c1")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 1 and results[0]["pool"] == node and results[0]["driver"] == topo.driver
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p1", "uid": get_pod(client, ns, "p1")["metadata"]["uid"]}]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    assert eventually(lambda: events(client, ns, "Scheduled", "p1"))[0]["message"] == f"Successfully assigned {ns}/p1 to {node}"


def test_a_watcher_never_sees_a_claim_allocated_without_its_finalizer(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    """Upstream's bindClaim adds delete-protection before it writes the allocation; upstream's e2e
    claim informer fails the test on a claim "allocated without any finalizer"."""
    topo = Topo(client, nodes=1, devices=1)
    rv = client.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims").json()["metadata"]["resourceVersion"]
    topo.claim(ns, "c")
    topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "c"}])
    seen: list[tuple[bool, bool]] = []  # (allocated, protected) per watch event, in order
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": str(int(TIMEOUT))}
    with client.stream("GET", f"{RESOURCE}/namespaces/{ns}/resourceclaims", params=params, timeout=TIMEOUT + 5) as stream:
        for line in stream.iter_lines():
            claim = orjson.loads(line)["object"]
            allocated = bool((claim.get("status") or {}).get("allocation"))
            seen.append((allocated, "resource.kubernetes.io/delete-protection" in (claim["metadata"].get("finalizers") or [])))
            if allocated:
                break
    assert seen[0] == (False, False) and seen[-1] == (True, True), seen
    assert (True, False) not in seen and (False, True) in seen, seen  # protected first, then allocated


def test_admin_access_needs_the_namespace_label_at_scheduling_time(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    label = "resource.kubernetes.io/admin-access"
    namespace = client.get(f"/api/v1/namespaces/{ns}").json()
    namespace["metadata"].setdefault("labels", {})[label] = "true"
    assert client.put(f"/api/v1/namespaces/{ns}", json=namespace).status_code == 200
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "admin"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": topo.klass, "adminAccess": True}}]}}}
    assert client.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=body).status_code == 201
    # The label goes after the claim was admitted: the scheduler checks it again, as upstream's allocator does.
    patch = {"metadata": {"labels": {label: None}}}
    assert client.patch(f"/api/v1/namespaces/{ns}", json=patch, headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
    topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "admin"}])
    c = eventually(lambda: (condition(client, ns, "p") or {}).get("reason") == "Unschedulable" and condition(client, ns, "p"), what="p unschedulable")
    assert f'admin access requires the namespace {ns} to be labelled {label}="true"' in c["message"]
    # Labelled again: the namespace change requeues the pod, and it is scheduled.
    assert client.patch(f"/api/v1/namespaces/{ns}", json={"metadata": {"labels": {label: "true"}}},
                        headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
    eventually(lambda: node_of(client, ns, "p"), what="p bound")


def test_template_claim_waits_for_controller_then_binds(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    topo.template(ns, "tpl")
    topo.pod(ns, "p", [{"name": "gpu", "resourceClaimTemplateName": "tpl"}])
    node = eventually(lambda: node_of(client, ns, "p"), what="pod bound")
    assert node == topo.nodes[0]
    name = get_pod(client, ns, "p")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    assert get_claim(client, ns, name)["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_shared_claim_allocated_once(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=2, devices=1)
    topo.claim(ns, "shared")
    for p in ("a", "b"):
        topo.pod(ns, p, [{"name": "gpu", "resourceClaimName": "shared"}])
    nodes = {eventually(lambda p=p: node_of(client, ns, p), what=f"{p} bound") for p in ("a", "b")}  # type: ignore[misc]
    claim = get_claim(client, ns, "shared")
    assert len(nodes) == 1 and claim["status"]["allocation"]["devices"]["results"][0]["pool"] in nodes
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["a", "b"]


def test_devices_run_out_then_free_up(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=2)
    for i in range(3):
        topo.claim(ns, f"c{i}")
    topo.pod(ns, "p0", [{"name": "gpu", "resourceClaimName": "c0"}])
    topo.pod(ns, "p1", [{"name": "gpu", "resourceClaimName": "c1"}])
    for p in ("p0", "p1"):
        eventually(lambda p=p: node_of(client, ns, p), what=f"{p} bound")  # type: ignore[misc]
    topo.pod(ns, "p2", [{"name": "gpu", "resourceClaimName": "c2"}])
    cond = eventually(lambda: condition(client, ns, "p2"), what="PodScheduled condition")
    total = node_count(client)
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    others = f", {total - 1} node(s) didn't match Pod's node affinity/selector" if total > 1 else ""
    assert cond["message"].startswith(f"0/{total} nodes are available: 1 cannot allocate all claims{others}."), cond["message"]
    assert "preemption: " in cond["message"]
    event = eventually(lambda: events(client, ns, "FailedScheduling", "p2"), what="FailedScheduling event")[0]
    assert event["type"] == "Warning" and event["message"] == cond["message"]
    assert node_of(client, ns, "p2") == ""
    # Deleting p0 lets the controller drop its reservation and deallocate c0; p2 gets the device.
    # No kubelet runs here, so the bound pod is removed at once rather than gracefully.
    assert client.delete(f"/api/v1/namespaces/{ns}/pods/p0", params={"gracePeriodSeconds": "0"}).status_code == 200
    assert eventually(lambda: node_of(client, ns, "p2"), what="p2 bound after a device freed up") == topo.nodes[0]
    assert_no_double_allocation(client)


def test_node_selector_mismatch_message(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    topo.pod(ns, "nowhere", nodeSelector={"test": "no-such-node"})
    cond = eventually(lambda: condition(client, ns, "nowhere"), what="PodScheduled condition")
    total = node_count(client)
    assert cond["message"].startswith(f"0/{total} nodes are available: {total} node(s) didn't match Pod's node affinity/selector.")
    # Labelling the node is an event that makes the pod schedulable.
    patch = {"metadata": {"labels": {"test": "no-such-node"}}}
    assert client.patch(f"/api/v1/nodes/{topo.nodes[0]}", json=patch, headers={"Content-Type": "application/merge-patch+json"}).status_code == 200
    assert eventually(lambda: node_of(client, ns, "nowhere"), what="bound after relabel") == topo.nodes[0]


def test_untolerated_taint_and_insufficient_cpu(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=2, devices=1, cpu="1")
    node = client.get(f"/api/v1/nodes/{topo.nodes[0]}").json()
    node.setdefault("spec", {})["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    assert client.put(f"/api/v1/nodes/{topo.nodes[0]}", json=node).status_code == 200
    topo.pod(ns, "big", containers=[{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "2"}}}])
    cond = eventually(lambda: condition(client, ns, "big"), what="PodScheduled condition")
    assert "1 Insufficient cpu" in cond["message"] and "1 node(s) had untolerated taint {dedicated: x}" in cond["message"]


def test_claim_naming_a_missing_class_is_unschedulable_until_the_class_exists(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    """Upstream's e2e "control plane retries pod scheduling after creating device class": the pod is
    Unschedulable with DynamicResources' PreFilter message, and the class appearing brings it back."""
    topo = Topo(client, nodes=1, devices=1)
    klass = f"later-{topo.tag}"
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": klass}}]}}}
    assert client.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=body).status_code == 201
    topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "c"}])
    cond = eventually(lambda: condition(client, ns, "p"), what="PodScheduled condition")
    total = node_count(client)
    message = f"0/{total} nodes are available: request gpu: device class {klass} does not exist. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    # The event recorder writes after the status update, so the event may trail the condition.
    events = eventually(lambda: client.get(f"/api/v1/namespaces/{ns}/events", params={"fieldSelector": "involvedObject.name=p"}).json()["items"],
                        what="FailedScheduling event")
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [("Warning", "FailedScheduling", message)]
    # The class appearing is the event that brings the pod back.
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": klass},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{topo.driver}"'}}]}}
    assert client.post(f"{RESOURCE}/deviceclasses", json=body).status_code == 201
    assert eventually(lambda: node_of(client, ns, "p"), what="bound once the class exists") == topo.nodes[0]


def test_gated_pod_waits_for_gate_removal(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    topo.claim(ns, "c")
    topo.pod(ns, "gated", [{"name": "gpu", "resourceClaimName": "c"}], schedulingGates=[{"name": "example.com/wait"}])
    time.sleep(1.0)
    assert node_of(client, ns, "gated") == "" and "allocation" not in get_claim(client, ns, "c").get("status", {})
    pod = get_pod(client, ns, "gated")
    pod["spec"]["schedulingGates"] = []
    assert client.put(f"/api/v1/namespaces/{ns}/pods/gated", json=pod).status_code == 200
    # A gated pod is no scheduling attempt: had it been parked as unschedulable, nothing but the
    # five-minute safety flush would bring it back. The bound leaves room for a loaded machine.
    eventually(lambda: node_of(client, ns, "gated"), timeout=30, what="bound after the gate went")


def test_pod_waits_for_missing_claim(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    topo = Topo(client, nodes=1, devices=1)
    topo.pod(ns, "early", [{"name": "gpu", "resourceClaimName": "later"}])
    time.sleep(0.5)
    assert node_of(client, ns, "early") == "" and condition(client, ns, "early") is None
    topo.claim(ns, "later")
    eventually(lambda: node_of(client, ns, "early"), timeout=30, what="bound once the claim exists")


def test_finishes_half_done_scheduling(client: httpx.Client, ns: str, scheduler: Worker) -> None:
    """A claim allocated and reserved for a pending pod (a crash before binding) gets its pod bound there."""
    topo = Topo(client, nodes=3, devices=1)
    claim = topo.claim(ns, "c")
    pod = topo.pod(ns, "p", [{"name": "gpu", "resourceClaimName": "c"}], schedulingGates=[{"name": "example.com/hold"}])
    target = topo.nodes[2]
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": topo.driver, "pool": target, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}],
    }
    response = client.put(f"{RESOURCE}/namespaces/{ns}/resourceclaims/c/status", json=claim)
    assert response.status_code == 200, response.text
    pod = get_pod(client, ns, "p")
    pod["spec"]["schedulingGates"] = []
    assert client.put(f"/api/v1/namespaces/{ns}/pods/p", json=pod).status_code == 200
    assert eventually(lambda: node_of(client, ns, "p"), what="pod bound") == target
    assert len(get_claim(client, ns, "c")["status"]["reservedFor"]) == 1


def test_sigkill_and_restart_never_double_allocates(cluster: tuple[ServerProcess, Path], client: httpx.Client, ns: str) -> None:
    name = f"crash-{uuid.uuid4().hex[:4]}"
    topo = Topo(client, nodes=4, devices=5)
    for i in range(20):
        topo.claim(ns, f"c{i}")
        topo.pod(ns, f"p{i}", [{"name": "gpu", "resourceClaimName": f"c{i}"}], schedulerName=name)

    def allocated() -> int:
        items = client.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims").json()["items"]
        return sum(1 for c in items if (c.get("status") or {}).get("allocation"))

    first = start_scheduler(cluster, "--no-leader-elect", name=name)
    try:
        eventually(lambda: allocated() >= 3, what="some allocations written")
        first.kill()
    finally:
        first.kill()
    assert_no_double_allocation(client)
    second = start_scheduler(cluster, "--no-leader-elect", name=name)
    try:
        for i in range(20):
            eventually(lambda i=i: node_of(client, ns, f"p{i}"), what=f"p{i} bound")  # type: ignore[misc]
    finally:
        second.stop()
    assert_no_double_allocation(client)
    for i in range(20):
        claim = get_claim(client, ns, f"c{i}")
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == node_of(client, ns, f"p{i}")
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [f"p{i}"]


SCHEDULER_LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra-scheduler"


def test_a_standby_binds_nothing_while_another_holds_the_lease(cluster: tuple[ServerProcess, Path], client: httpx.Client, ns: str) -> None:
    name = f"idle-{uuid.uuid4().hex[:4]}"
    topo = Topo(client, nodes=1, devices=2)
    # Another scheduler holds the Lease for a minute (the test writes its record, as that leader would).
    lease = client.get(SCHEDULER_LEASE)
    held = {"holderIdentity": "elsewhere", "leaseDurationSeconds": 60, "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}
    if lease.status_code == 404:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "dra-scheduler", "namespace": "kube-system"}, "spec": held}
        response = client.post("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", json=body)
    else:
        response = client.put(SCHEDULER_LEASE, json={**lease.json(), "spec": held})
    assert response.status_code in (200, 201), response.text
    health = free_port()
    standby = start_scheduler(cluster, "--lease-duration", "2", "--identity", "standby", "--health-port", str(health), name=name)
    try:
        topo.claim(ns, "c0")
        topo.pod(ns, "p0", [{"name": "gpu", "resourceClaimName": "c0"}], schedulerName=name)

        def serving() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{health}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        eventually(serving, what="the standby's health endpoint")
        # Several of its retry periods (0.27 s at --lease-duration 2): it keeps off the Lease and binds nothing.
        time.sleep(3)
        assert client.get(SCHEDULER_LEASE).json()["spec"]["holderIdentity"] == "elsewhere"
        assert not node_of(client, ns, "p0")
        assert "allocation" not in (get_claim(client, ns, "c0").get("status") or {})
        # The holder lets go (as a leader that stops releases the Lease): the standby leads and binds.
        lease = client.get(SCHEDULER_LEASE).json()
        lease["spec"] = {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1}
        assert client.put(SCHEDULER_LEASE, json=lease).status_code == 200
        eventually(lambda: node_of(client, ns, "p0"), timeout=20, what="p0 bound once the standby leads")
        assert client.get(SCHEDULER_LEASE).json()["spec"]["holderIdentity"] == "standby"
    finally:
        standby.stop()


def test_leader_election_standby_takes_over(cluster: tuple[ServerProcess, Path], client: httpx.Client, ns: str) -> None:
    name = f"le-{uuid.uuid4().hex[:4]}"
    topo = Topo(client, nodes=1, devices=4)
    leader = start_scheduler(cluster, "--lease-duration", "2", "--identity", "one", name=name)
    try:
        eventually(lambda: client.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra-scheduler").json().get("spec", {}).get("holderIdentity") == "one", what="first leader")
        standby = start_scheduler(cluster, "--lease-duration", "2", "--identity", "two", name=name)
        try:
            topo.claim(ns, "c0")
            topo.pod(ns, "p0", [{"name": "gpu", "resourceClaimName": "c0"}], schedulerName=name)
            eventually(lambda: node_of(client, ns, "p0"), what="p0 bound by the leader")
            leader.kill()
            topo.claim(ns, "c1")
            topo.pod(ns, "p1", [{"name": "gpu", "resourceClaimName": "c1"}], schedulerName=name)
            eventually(lambda: node_of(client, ns, "p1"), timeout=10, what="p1 bound by the standby")
            holder = client.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra-scheduler").json()["spec"]["holderIdentity"]
            assert holder == "two"
        finally:
            standby.stop()
    finally:
        leader.kill()
