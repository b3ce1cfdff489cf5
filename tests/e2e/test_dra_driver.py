"""A real DRA driver on the simulator's nodes, as processes, on both database backends.

``python -m kubeletsim`` (one node with the built-in ``gpu`` profile) and
``python -m exampledriver`` (serving that node) meet in a root directory of this module; the
tests play the scheduler's part (allocation and reservation written by hand) and watch what a
user sees: the pod's phase, events and container statuses, the claims' device status, the
node's PodResources socket (read with the generated stubs), and the driver's own record of
what it prepared (its CDI spec files and log). The tests run in file order on one stack; the
later ones crash and restart the driver and the simulator.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import orjson
import pytest

from devtools.server import ServerProcess
from exampledriver.driver import DEFAULT_DRIVER
from kubeletapi.layout import NodeDirs
from kubeletapi.podresources.v1 import api_pb2 as podresources
from kubeletapi.podresources.v1 import api_pb2_grpc as podresources_grpc
from kubeletsim.plugins.checkpoint import Checkpoint
from tests.processes import Worker, eventually

BUILTIN = "gpu.example.com"
RESOURCE = "/apis/resource.k8s.io/v1"


@dataclass
class Stack:
    api: httpx.Client
    dirs: NodeDirs
    sim: Worker
    driver: Worker
    ns: str

    @property
    def node(self) -> str:
        return self.dirs.node

    def log_records(self, worker: Worker, msg: str) -> list[dict[str, Any]]:
        records = []
        for line in worker.log_path.read_bytes().splitlines():
            if line.startswith(b"{"):
                record = orjson.loads(line)
                if record.get("msg") == msg:
                    records.append(record)
        return records

    def prepared(self, uid: str) -> int:
        """How often the driver prepared the claim (its log)."""
        return sum(1 for r in self.log_records(self.driver, "prepared claim") if r.get("uid") == uid)

    def cdi_specs(self) -> list[str]:
        """The driver's CDI spec files: what it holds prepared on the node."""
        return sorted(p.name for p in (self.dirs.base / "cdi").glob("*.json"))

    def checkpointed(self) -> dict[tuple[str, str], Any]:
        checkpoint = Checkpoint(self.dirs.checkpoint)
        checkpoint.load()
        return checkpoint.claims

    # ---- objects ---------------------------------------------------------------------------------

    def claim(self, name: str, driver: str = DEFAULT_DRIVER, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        body = {
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"gpu.{driver}"}}]}},
        }
        response = self.api.post(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def pod(self, name: str, *claims: str) -> dict[str, Any]:
        """A pod whose container ``main`` uses ``claims`` (and ``plain`` none), bound to the node as a scheduler would."""
        body = {
            "metadata": {"name": name},
            "spec": {
                "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
                "containers": [
                    {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": c} for c in claims]}},
                    {"name": "plain", "image": "registry.k8s.io/pause:3.10"},
                ],
            },
        }
        response = self.api.post(f"/api/v1/namespaces/{self.ns}/pods", json=body)
        assert response.status_code == 201, response.text
        binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": self.node}}
        assert self.api.post(f"/api/v1/namespaces/{self.ns}/pods/{name}/binding", json=binding).status_code == 201
        return dict(self.api.get(f"/api/v1/namespaces/{self.ns}/pods/{name}").json())

    def allocate(self, claim: str, device: str, pod: dict[str, Any], driver: str = DEFAULT_DRIVER) -> None:
        """The allocation and reservation a scheduler would write."""
        path = f"{RESOURCE}/namespaces/{self.ns}/resourceclaims/{claim}"
        body = self.api.get(path).json()
        body["status"] = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": driver, "pool": self.node, "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}],
        }
        response = self.api.put(f"{path}/status", json=body)
        assert response.status_code == 200, response.text

    def get_claim(self, name: str) -> dict[str, Any]:
        return dict(self.api.get(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims/{name}").json())

    def annotate(self, claim: str, annotations: dict[str, str]) -> None:
        body = self.get_claim(claim)
        body["metadata"]["annotations"] = annotations
        assert self.api.put(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims/{claim}", json=body).status_code == 200

    def get_pod(self, name: str) -> dict[str, Any] | None:
        response = self.api.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        return dict(response.json()) if response.status_code == 200 else None

    def running(self, name: str) -> dict[str, Any] | None:
        pod = self.get_pod(name)
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

    def delete_pod(self, name: str, **params: Any) -> None:
        assert self.api.delete(f"/api/v1/namespaces/{self.ns}/pods/{name}", params=params).status_code == 200
        eventually(lambda: self.get_pod(name) is None, f"pod {name} gone")

    def events(self, pod: str) -> list[dict[str, Any]]:
        """The pod's events of failed NodePrepareResources calls (not of waiting for the allocation)."""
        items = self.api.get(f"/api/v1/namespaces/{self.ns}/events").json()["items"]
        return [
            e for e in items
            if e["involvedObject"]["name"] == pod and e["reason"] == "FailedPrepareDynamicResources" and e["message"].startswith("Failed to prepare")
        ]  # fmt: skip

    def pod_resources(self) -> podresources.ListPodResourcesResponse:
        with grpc.insecure_channel(f"unix:{self.dirs.pod_resources_socket}") as channel:
            return podresources_grpc.PodResourcesListerStub(channel).List(podresources.ListPodResourcesRequest(), timeout=10)


def health_of(pod: dict[str, Any] | None, container: str = "main") -> list[dict[str, Any]]:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return next((s.get("allocatedResourcesStatus") or [] for s in statuses if s["name"] == container), [])


@pytest.fixture(scope="module")
def stack(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("dra-driver")
    root = Path(tempfile.mkdtemp(prefix="xd-", dir="/tmp"))  # unix socket paths are short
    prefix = f"xd{uuid.uuid4().hex[:5]}-"
    dirs = NodeDirs(root, f"{prefix}0")
    sim = Worker(
        "kubeletsim",
        ["--server", server.url, "--nodes", "1", "--profile", "gpu", "--node-prefix", prefix, "--root-dir", str(root), "--resync-interval", "2", "--log-level", "debug"],
        logs / "sim.log",
    )
    driver = Worker(
        "exampledriver",
        ["--server", server.url, "--nodes", "1", "--node-prefix", prefix, "--kubelet-root-dir", str(root), "--num-devices", "4", "--resync-interval", "1"],
        logs / "driver.log",
    )
    sim.start()
    driver.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as api:
            ns = f"xd-{uuid.uuid4().hex[:8]}"
            assert api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
            yield Stack(api, dirs, sim, driver, ns)
    finally:
        driver.stop()
        sim.stop()
    for worker in (sim, driver):
        assert "Traceback" not in worker.log_path.read_text(), worker.log_path.read_text()


def test_the_driver_registers_and_its_devices_join_the_built_in_ones(stack: Stack) -> None:
    def drivers() -> set[str]:
        slices = stack.api.get(f"{RESOURCE}/resourceslices", params={"fieldSelector": f"spec.nodeName={stack.node}"}).json()["items"]
        return {s["spec"]["driver"] for s in slices}

    eventually(lambda: drivers() == {BUILTIN, DEFAULT_DRIVER}, "the built-in pool and the driver's pool on the node")
    [registered] = eventually(lambda: stack.log_records(stack.sim, "registered DRA plugin"), "the simulator registers the driver")
    assert registered["driver"] == DEFAULT_DRIVER and registered["service"] == "v1.DRAPlugin"
    assert registered["endpoint"] == str(stack.dirs.plugin_dir(DEFAULT_DRIVER) / "dra.sock")
    eventually(lambda: stack.log_records(stack.driver, "registered with the kubelet"), "the driver hears it is registered")
    assert stack.pod_resources().pod_resources == []


def test_a_pod_runs_once_its_claims_are_prepared_and_its_container_gets_the_cdi_devices(stack: Stack) -> None:
    stack.claim("builtin", BUILTIN)
    claim = stack.claim("ext")
    uid = claim["metadata"]["uid"]
    pod = stack.pod("both", "builtin", "ext")
    stack.allocate("builtin", "gpu-0", pod, BUILTIN)
    stack.allocate("ext", "gpu-1", pod)
    eventually(lambda: stack.running("both"), "pod Running")
    cdi = f"k8s.{DEFAULT_DRIVER}/gpu={uid}-gpu-1"
    # Each driver wrote its own device status: the built-in one by the simulator, the other by the driver.
    [external] = stack.get_claim("ext")["status"]["devices"]
    assert (external["driver"], external["pool"], external["device"], external["data"]["cdiDeviceIDs"]) == (DEFAULT_DRIVER, stack.node, "gpu-1", [cdi])
    [builtin] = stack.get_claim("builtin")["status"]["devices"]
    assert (builtin["driver"], builtin["device"]) == (BUILTIN, "gpu-0")
    assert stack.prepared(uid) == 1 and stack.cdi_specs() == [f"{DEFAULT_DRIVER}-{uid}.json"]

    expected = podresources.PodResources(name="both", namespace=stack.ns)
    main = expected.containers.add(name="main")
    expected.containers.add(name="plain")
    resource = main.dynamic_resources.add(claim_name="ext", claim_namespace=stack.ns).claim_resources.add(
        driver_name=DEFAULT_DRIVER, pool_name=stack.node, device_name="gpu-1"
    )
    resource.cdi_devices.add(name=cdi)
    assert list(stack.pod_resources().pod_resources) == [expected]
    # ResourceHealthStatus: the container lists the health of the device it got through the claim.
    healthy = [{"name": "claim:ext", "resources": [{"resourceID": cdi, "health": "Healthy"}]}]
    eventually(lambda: health_of(stack.get_pod("both")) == healthy, "the device's health in the pod status")
    assert health_of(stack.get_pod("both"), "plain") == []

    stack.delete_pod("both")
    assert stack.cdi_specs() == [] and stack.checkpointed() == {}
    assert [r["uid"] for r in stack.log_records(stack.driver, "unprepared claim")] == [uid]
    assert "devices" not in stack.get_claim("ext")["status"] and "devices" not in stack.get_claim("builtin")["status"]
    assert stack.pod_resources().pod_resources == []


def test_an_unhealthy_device_shows_in_the_pod_status_until_it_recovers(stack: Stack) -> None:
    claim = stack.claim("sick")
    stack.allocate("sick", "gpu-2", stack.pod("patient", "sick"))
    cdi = f"k8s.{DEFAULT_DRIVER}/gpu={claim['metadata']['uid']}-gpu-2"

    def health() -> list[dict[str, Any]]:
        return [r["health"] for entry in health_of(stack.get_pod("patient")) for r in entry["resources"] if r["resourceID"] == cdi]

    eventually(lambda: health() == ["Healthy"], "Healthy at first")
    stack.annotate("sick", {f"{DEFAULT_DRIVER}/unhealthy": "true"})
    eventually(lambda: health() == ["Unhealthy"], "Unhealthy after the driver reports it")
    assert stack.running("patient")  # health is reported, the pod keeps running
    stack.annotate("sick", {})
    eventually(lambda: health() == ["Healthy"], "Healthy again")
    stack.delete_pod("patient")


def test_a_failed_preparation_keeps_the_pod_pending_with_the_kubelets_event_and_is_retried(stack: Stack) -> None:
    stack.claim("flaky", annotations={f"{DEFAULT_DRIVER}/fail-prepare": "injected by the test"})
    stack.allocate("flaky", "gpu-3", stack.pod("waits", "flaky"))
    message = "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim flaky: injected by the test"
    [event] = eventually(lambda: stack.events("waits"), "FailedPrepareDynamicResources event")
    assert (event["type"], event["message"], event["source"]["component"]) == ("Warning", message, "kubelet")
    pod = stack.get_pod("waits")
    assert pod is not None and pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"] == {"reason": "ContainerCreating", "message": message}
    time.sleep(1.0)
    assert len(stack.events("waits")) == 1, "the same failure is reported once"
    stack.annotate("flaky", {})
    eventually(lambda: stack.running("waits"), "pod Running once a retry succeeds")
    stack.delete_pod("waits")
    assert stack.cdi_specs() == [] and stack.checkpointed() == {}


def test_a_driver_crash_and_restart_neither_prepares_twice_nor_leaks(stack: Stack) -> None:
    claim = stack.claim("steady")
    uid = claim["metadata"]["uid"]
    stack.allocate("steady", "gpu-0", stack.pod("steady", "steady"))
    eventually(lambda: stack.running("steady"), "pod Running")
    registrations = len(stack.log_records(stack.sim, "registered DRA plugin"))
    stack.driver.kill()
    # While the driver is down, a new pod cannot be prepared: the call fails, the pod waits.
    stack.claim("later")
    stack.allocate("later", "gpu-1", stack.pod("later", "later"))
    [event] = eventually(lambda: stack.events("later"), "the failed call is reported")
    assert event["message"].startswith("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources: rpc error: code = Unavailable desc = ")
    stack.driver.start()
    eventually(lambda: len(stack.log_records(stack.sim, "registered DRA plugin")) > registrations, "the restarted driver registers again")
    eventually(lambda: stack.running("later"), "the waiting pod runs once the driver is back")
    assert stack.running("steady") and stack.prepared(uid) == 1, "a running pod's claim is not prepared again"
    stack.delete_pod("steady")
    stack.delete_pod("later")
    assert stack.prepared(uid) == 1 and stack.cdi_specs() == [] and stack.checkpointed() == {}


def test_a_simulator_restart_prepares_nothing_twice_and_releases_what_went_away_meanwhile(stack: Stack) -> None:
    kept, dropped = stack.claim("kept")["metadata"]["uid"], stack.claim("dropped")["metadata"]["uid"]
    stack.allocate("kept", "gpu-2", stack.pod("kept", "kept"))
    stack.allocate("dropped", "gpu-3", stack.pod("dropped", "dropped"))
    eventually(lambda: stack.running("kept") and stack.running("dropped"), "both pods Running")
    assert len(stack.cdi_specs()) == 2
    stack.sim.stop()
    # Deleted for good while no kubelet watches: only the checkpoint remembers its claim is prepared.
    stack.delete_pod("dropped", gracePeriodSeconds=0)
    stack.sim.start()
    # The driver drops its record before the simulator checkpoints the answer: wait for both.
    eventually(
        lambda: stack.cdi_specs() == [f"{DEFAULT_DRIVER}-{kept}.json"] and [c.uid for c in stack.checkpointed().values()] == [kept],
        "the gone pod's claim unprepared after the restart",
    )
    time.sleep(1.0)
    assert stack.running("kept") and stack.prepared(kept) == 1 and stack.prepared(dropped) == 1
    stack.delete_pod("kept")
    assert stack.cdi_specs() == [] and stack.checkpointed() == {}
