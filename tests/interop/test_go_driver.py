"""A DRA driver written in Go on k8s.io/dynamic-resource-allocation/kubeletplugin v0.37.2
(``interop/dradriver``) on the project's own stack: the simulator's nodes host it through their
plugin registration directories, exactly as a kubelet hosts a driver's DaemonSet pod.

One stack (API server, scheduler, controller, a simulator with two nodes) and one driver process
per node, each as a service account whose token is bound to its node. The tests run in file
order on that stack and look at what a user or a driver author sees: the ResourceSlices the
library publishes, pods going Running, the driver's own record of every prepare and unprepare
call (its state file), its CDI spec files, the node's PodResources socket and the pods' device
health. Later tests hand a node over to a new instance (the helper's rolling update), crash a
driver and restart the simulator. The drivers run on client-go's defaults, as against a real
cluster: protobuf for every built-in kind.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from devtools.devstack import EXAMPLE_DRIVER_ACCOUNT, EXAMPLE_DRIVER_MANIFESTS, apply_manifest, node_bound_kubeconfig
from devtools.server import REPO_ROOT, stop_process
from kubeletapi.layout import NodeDirs
from kubeletapi.podresources.v1 import api_pb2 as podresources
from kubeletapi.podresources.v1 import api_pb2_grpc as podresources_grpc
from tests.interop.golang import go_program, needs_go
from tests.processes import eventually
from tests.stack import Stack, running_stack

# Whichever test comes first builds the driver in the module's fixture: on a cold Go cache
# (modules downloaded, client-go and k8s.io/api compiled) that alone takes minutes on 2 cores.
pytestmark = [pytest.mark.slow, needs_go, pytest.mark.timeout(900)]

DRIVER = "godriver.example.com"
CDI_KIND = f"k8s.{DRIVER}/gpu"
MANIFESTS = REPO_ROOT / "interop" / "dradriver" / "manifests"
NODES = ("sim-0", "sim-1")
RESOURCE = "/apis/resource.k8s.io/v1"
NS = "default"



@dataclass
class GoDriver:
    """One driver process serving one node."""

    binary: Path
    node: str
    dirs: NodeDirs
    kubeconfig: Path
    work: Path
    # Set: the helper's rolling updates (this instance's sockets are named after it).
    pod_uid: str = ""
    log_name: str = "driver.log"
    driver: str = DRIVER
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.work / self.log_name

    @property
    def endpoint(self) -> Path:
        return self.dirs.plugin_dir(self.driver) / (f"dra-{self.pod_uid}.sock" if self.pod_uid else "dra.sock")

    @property
    def state_file(self) -> Path:
        return self.work / "state.jsonl"

    @property
    def cdi_root(self) -> Path:
        return self.work / "cdi"

    def start(self) -> None:
        command = [
            str(self.binary), "--driver-name", self.driver, "--node-name", self.node, "--kubeconfig", str(self.kubeconfig),
            "--kubelet-registrar-directory-path", str(self.dirs.registry), "--kubelet-plugins-directory-path", str(self.dirs.plugins),
            "--num-devices", "2", "--unhealthy", "gpu-1", "--cdi-root", str(self.cdi_root), "--state-file", str(self.state_file),
            "--health-interval", "2s", *(["--pod-uid", self.pod_uid] if self.pod_uid else []),
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log)

    def stop(self) -> None:
        stop_process(self.process)

    def kill(self) -> None:
        """SIGKILL, as a crash would: the sockets stay behind."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def records(self, op: str, uid: str | None = None) -> list[dict[str, Any]]:
        """The state file's lines of one kind (``prepare``, ``unprepare``, ``registration``), of one claim."""
        if not self.state_file.exists():
            return []
        lines = [json.loads(line) for line in self.state_file.read_text().splitlines() if line]
        return [r for r in lines if r["op"] == op and (uid is None or r["claim"]["uid"] == uid)]

    def cdi_specs(self) -> list[str]:
        return sorted(p.name for p in self.cdi_root.glob("*.json"))

    def logged(self, msg: str, uid: str) -> bool:
        """Whether this instance logged ``msg`` (``Prepared claim``, ``Unprepared claim``) for the claim."""
        return any(f'"{msg}"' in line and f'uid="{uid}"' in line for line in self.log_path.read_text(errors="replace").splitlines())

    def error_lines(self) -> list[str]:
        """klog's error lines (``E<date> ...``) of the driver's log."""
        return [line for line in self.log_path.read_text(errors="replace").splitlines() if line.startswith("E")]


@dataclass
class Cluster:
    stack: Stack
    api: httpx.Client
    drivers: dict[str, GoDriver]
    # Instances replaced by a rolling update, stopped.
    retired: list[GoDriver]

    def sim_records(self, msg: str) -> list[dict[str, Any]]:
        records = []
        for line in (self.stack.tmp / "kubeletsim.log").read_text(errors="replace").splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("msg") == msg and record.get("driver") == DRIVER:
                    records.append(record)
        return records

    def slices(self, driver: str = DRIVER) -> list[dict[str, Any]]:
        items = self.api.get(f"{RESOURCE}/resourceslices", params={"fieldSelector": f"spec.driver={driver}"}).json()["items"]
        return list(items)

    def pod(self, name: str) -> dict[str, Any] | None:
        response = self.api.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        return dict(response.json()) if response.status_code == 200 else None

    def running(self, name: str) -> dict[str, Any] | None:
        pod = self.pod(name)
        return pod if pod is not None and pod.get("status", {}).get("phase") == "Running" else None

    def claim_of(self, pod: dict[str, Any]) -> dict[str, Any]:
        [status] = pod["status"]["resourceClaimStatuses"]
        return dict(self.api.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{status['resourceClaimName']}").json())

    def create_pod(self, name: str, template: str, node: str = "") -> None:
        body: dict[str, Any] = {
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node} if node else {},
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            },
        }
        response = self.api.post(f"/api/v1/namespaces/{NS}/pods", json=body)
        assert response.status_code == 201, response.text

    def delete_pod(self, name: str) -> None:
        assert self.api.delete(f"/api/v1/namespaces/{NS}/pods/{name}").status_code == 200
        eventually(lambda: self.pod(name) is None, f"pod {name} gone", timeout=60)

    def pod_resources(self, node: str) -> list[podresources.PodResources]:
        socket = NodeDirs(self.stack.kubelet_root, node).pod_resources_socket
        with grpc.insecure_channel(f"unix:{socket}") as channel:
            response = podresources_grpc.PodResourcesListerStub(channel).List(podresources.ListPodResourcesRequest(), timeout=10)
        return list(response.pod_resources)


def template(name: str, index: int) -> dict[str, Any]:
    """A claim template asking for the driver's device with the given ``index`` attribute."""
    selector = f'device.attributes["{DRIVER}"].index == {index}'
    exactly = {"deviceClassName": f"gpu.{DRIVER}", "selectors": [{"cel": {"expression": selector}}]}
    return {"metadata": {"name": name}, "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def health_of(pod: dict[str, Any] | None) -> list[dict[str, Any]]:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return next((s.get("allocatedResourcesStatus") or [] for s in statuses if s["name"] == "main"), [])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    binary = go_program("dradriver")
    tmp = tmp_path_factory.mktemp("go-driver")
    with running_stack(tmp, nodes=len(NODES), explain=False) as stack, stack.admin() as admin:
        # The example driver's identity has what a node-local driver on the helper needs (nodes get,
        # ResourceSlices, claims read); the Go driver writes no claim status.
        apply_manifest(admin, EXAMPLE_DRIVER_MANIFESTS / "rbac.yaml")
        drivers: dict[str, GoDriver] = {}
        for node in NODES:
            work = tmp / f"driver-{node}"
            work.mkdir()
            kubeconfig = node_bound_kubeconfig(admin, stack.server, EXAMPLE_DRIVER_ACCOUNT, node, work / "kubeconfig")
            # sim-1's driver runs with the helper's rolling updates, as a DaemonSet with maxSurge would.
            pod_uid = str(uuid.uuid4()) if node == "sim-1" else ""
            drivers[node] = GoDriver(binary, node, NodeDirs(stack.kubelet_root, node), kubeconfig, work, pod_uid)
        try:
            for driver in drivers.values():
                driver.start()
            cluster = Cluster(stack, admin, drivers, [])
            yield cluster
        finally:
            for driver in [*drivers.values(), *cluster.retired]:
                driver.stop()


def test_the_library_publishes_each_nodes_devices_and_the_driver_registers(cluster: Cluster) -> None:
    def by_node() -> dict[str, dict[str, Any]]:
        return {s["spec"]["nodeName"]: s for s in cluster.slices()}

    published = eventually(lambda: by_node() if set(by_node()) == set(NODES) else None, "a ResourceSlice per node", timeout=60)
    for node, resource_slice in published.items():
        node_uid = cluster.api.get(f"/api/v1/nodes/{node}").json()["metadata"]["uid"]
        # The library's shape: named <index>-<driver>-<node>-<random>, owned by the Node, one pool named after the node.
        assert re.fullmatch(rf"0+-{re.escape(DRIVER)}-{node}-[a-z0-9]{{5}}", resource_slice["metadata"]["name"])
        assert [(o["kind"], o["name"], o["uid"]) for o in resource_slice["metadata"]["ownerReferences"]] == [("Node", node, node_uid)]
        assert resource_slice["spec"]["pool"] == {"name": node, "generation": 1, "resourceSliceCount": 1}
        devices = resource_slice["spec"]["devices"]
        assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
        assert devices[1]["attributes"] == {"index": {"int": 1}, "model": {"string": "sim-gpu"}, "driverVersion": {"version": "1.0.0"}}
        assert devices[1]["capacity"] == {"memory": {"value": "16Gi"}}

    registered = eventually(lambda: cluster.sim_records("registered DRA plugin") if len(cluster.sim_records("registered DRA plugin")) == 2 else None,
                            "the simulator registers the driver on both nodes")  # fmt: skip
    assert sorted(r["node"] for r in registered) == list(NODES)
    assert {r["service"] for r in registered} == {"v1.DRAPlugin"}
    for node, driver in cluster.drivers.items():
        assert [r["endpoint"] for r in registered if r["node"] == node] == [str(driver.endpoint)]
        eventually(lambda d=driver: d.records("registration"), f"the driver on {node} hears it is registered")  # type: ignore[misc]
        assert [r["registered"] for r in driver.records("registration")] == [True]


def test_a_pod_runs_with_the_drivers_device_prepared_once_and_unprepared_once(cluster: Cluster) -> None:
    for path in (MANIFESTS / "deviceclass.yaml", MANIFESTS / "pod.yaml"):
        apply_manifest(cluster.api, path)
    pod = eventually(lambda: cluster.running("godriver-pod"), "the pod Running", timeout=60)
    node = pod["spec"]["nodeName"]
    driver = cluster.drivers[node]
    claim = cluster.claim_of(pod)
    uid = claim["metadata"]["uid"]
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (DRIVER, node, "gpu-0")
    cdi = f"{CDI_KIND}={uid}-gpu-0"

    [prepared] = driver.records("prepare", uid)
    assert prepared["devices"] == [{"request": "gpu", "pool": node, "device": "gpu-0", "cdiDeviceIDs": [cdi]}]
    assert driver.cdi_specs() == [f"{DRIVER}-{uid}.json"]
    spec = json.loads((driver.cdi_root / f"{DRIVER}-{uid}.json").read_text())
    assert (spec["kind"], [d["name"] for d in spec["devices"]]) == (CDI_KIND, [f"{uid}-gpu-0"])
    other = next(d for n, d in cluster.drivers.items() if n != node)
    assert other.records("prepare") == []

    # PodResources of the pod's node lists the claim's device with the CDI ID the driver returned.
    expected = podresources.PodResources(name="godriver-pod", namespace=NS)
    resource = (
        expected.containers.add(name="main")
        .dynamic_resources.add(claim_name=claim["metadata"]["name"], claim_namespace=NS)
        .claim_resources.add(driver_name=DRIVER, pool_name=node, device_name="gpu-0")
    )
    resource.cdi_devices.add(name=cdi)
    assert cluster.pod_resources(node) == [expected]

    # The library's health stream reaches the node: the container's device is Healthy.
    healthy = [{"name": "claim:gpu", "resources": [{"resourceID": cdi, "health": "Healthy"}]}]
    eventually(lambda: health_of(cluster.pod("godriver-pod")) == healthy, "the device's health in the pod status", timeout=30)

    cluster.delete_pod("godriver-pod")
    eventually(lambda: driver.records("unprepare", uid), "the claim unprepared")
    assert len(driver.records("prepare", uid)) == 1 and len(driver.records("unprepare", uid)) == 1
    assert driver.cdi_specs() == [] and cluster.pod_resources(node) == []


def test_a_device_the_driver_reports_unhealthy_shows_in_the_pod_status(cluster: Cluster) -> None:
    response = cluster.api.post(f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", json=template("godriver-gpu1", 1))
    assert response.status_code == 201, response.text
    cluster.create_pod("sick", "godriver-gpu1")
    pod = eventually(lambda: cluster.running("sick"), "the pod Running", timeout=60)
    uid = cluster.claim_of(pod)["metadata"]["uid"]
    unhealthy = [{"name": "claim:gpu", "resources": [{"resourceID": f"{CDI_KIND}={uid}-gpu-1", "health": "Unhealthy"}]}]
    eventually(lambda: health_of(cluster.pod("sick")) == unhealthy, "Unhealthy, as the driver reports it", timeout=30)
    assert cluster.running("sick"), "health is reported; the pod keeps running"
    cluster.delete_pod("sick")
    driver = cluster.drivers[pod["spec"]["nodeName"]]
    assert len(driver.records("prepare", uid)) == 1 and len(driver.records("unprepare", uid)) == 1


def test_a_rolling_update_hands_the_node_over_to_the_new_instance(cluster: Cluster) -> None:
    node = "sim-1"
    old = cluster.drivers[node]
    cluster.create_pod("handover", "godriver-gpu", node)
    first = cluster.claim_of(eventually(lambda: cluster.running("handover"), "the pod Running", timeout=60))["metadata"]["uid"]
    assert old.logged("Prepared claim", first)

    # The new instance starts beside the old one, in the same plugin data directory, with its own sockets.
    new = GoDriver(old.binary, node, old.dirs, old.kubeconfig, old.work, str(uuid.uuid4()), "driver-2.log")
    new.start()
    cluster.drivers[node], cluster.retired = new, [*cluster.retired, old]
    [both] = eventually(lambda: [r for r in cluster.sim_records("registered DRA plugin") if r["endpoint"] == str(new.endpoint)],
                        "the node registers the new instance")  # fmt: skip
    assert both["instances"] == 2
    # Calls go to the newest instance (the other device: the first pod holds gpu-0).
    cluster.create_pod("second", "godriver-gpu1", node)
    second = cluster.claim_of(eventually(lambda: cluster.running("second"), "the second pod Running", timeout=60))["metadata"]["uid"]
    assert new.logged("Prepared claim", second) and not old.logged("Prepared claim", second)

    old.stop()  # SIGTERM: the helper removes its sockets, the node deregisters it
    [gone] = eventually(lambda: [r for r in cluster.sim_records("deregistered DRA plugin") if r["endpoint"] == str(old.endpoint)],
                        "the node deregisters the old instance")  # fmt: skip
    assert gone["instances"] == 1
    cluster.delete_pod("handover")
    cluster.delete_pod("second")
    # The new instance unprepares what the old one prepared; each claim once.
    assert new.logged("Unprepared claim", first) and new.logged("Unprepared claim", second)
    for uid in (first, second):
        assert len(new.records("prepare", uid)) == 1 and len(new.records("unprepare", uid)) == 1
    assert new.cdi_specs() == []


def test_a_crashed_driver_restarts_registers_again_and_adopts_its_slice(cluster: Cluster) -> None:
    cluster.create_pod("survivor", "godriver-gpu")
    pod = eventually(lambda: cluster.running("survivor"), "the pod Running", timeout=60)
    uid = cluster.claim_of(pod)["metadata"]["uid"]
    node = pod["spec"]["nodeName"]
    driver = cluster.drivers[node]
    [before] = [s for s in cluster.slices() if s["spec"]["nodeName"] == node]
    registered = len([r for r in cluster.sim_records("registered DRA plugin") if r["node"] == node])
    driver.kill()
    driver.start()

    eventually(lambda: len([r for r in cluster.sim_records("registered DRA plugin") if r["node"] == node]) == registered + 1,
               "the node registers the restarted driver", timeout=60)  # fmt: skip
    eventually(lambda: len(driver.records("registration")) == 2, "the restarted driver hears it")
    # The library finds its slice as it left it: what this server stored matches what it publishes,
    # so it neither rewrites it nor bumps the pool's generation.
    time.sleep(2.0)
    [after] = [s for s in cluster.slices() if s["spec"]["nodeName"] == node]
    assert (after["metadata"]["uid"], after["metadata"]["resourceVersion"]) == (before["metadata"]["uid"], before["metadata"]["resourceVersion"])
    cluster.delete_pod("survivor")
    assert len(driver.records("prepare", uid)) == 1 and len(driver.records("unprepare", uid)) == 1
    assert driver.cdi_specs() == []


def test_after_a_simulator_restart_the_driver_registers_again_and_its_slices_come_back(cluster: Cluster) -> None:
    cluster.create_pod("steady", "godriver-gpu")
    pod = eventually(lambda: cluster.running("steady"), "the pod Running", timeout=60)
    uid = cluster.claim_of(pod)["metadata"]["uid"]
    driver = cluster.drivers[pod["spec"]["nodeName"]]
    before = {s["metadata"]["uid"] for s in cluster.slices()}
    registrations = len(cluster.sim_records("registered DRA plugin"))
    heard = {node: len(each.records("registration")) for node, each in cluster.drivers.items()}
    cluster.stack.stop_worker("kubeletsim")
    cluster.stack.start_worker("kubeletsim")

    eventually(lambda: len(cluster.sim_records("registered DRA plugin")) == registrations + 2, "both nodes register the driver again", timeout=60)
    for node, each in cluster.drivers.items():
        eventually(lambda d=each, n=heard[node]: len(d.records("registration")) == n + 1, f"the driver on {node} hears it again")  # type: ignore[misc]
    # A starting kubelet wipes the node's slices of every driver (none has registered yet); the
    # library publishes them again (after its sync delay: 30 s).
    eventually(lambda: {s["spec"]["nodeName"] for s in cluster.slices() if s["metadata"]["uid"] not in before} == set(NODES),
               "the driver's slices published again", timeout=90)  # fmt: skip
    assert cluster.running("steady") and len(driver.records("prepare", uid)) == 1, "a running pod's claim is not prepared again"
    cluster.delete_pod("steady")
    assert len(driver.records("unprepare", uid)) == 1 and driver.cdi_specs() == []


def test_the_driver_logged_no_errors(cluster: Cluster) -> None:
    """Anything the library logged as an error is a place where this stack answers unlike Kubernetes."""
    for driver in [*cluster.drivers.values(), *cluster.retired]:
        assert driver.error_lines() == [], driver.log_path.read_text(errors="replace")[-6000:]
