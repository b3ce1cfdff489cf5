"""kubeletsim's device profiles and slice building, plus its pure pod logic (admission, device status, pod status)."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import httpx
import pytest

from kube.dra.pods import qos_class
from kubeletsim import nodes, pods
from kubeletsim.profiles import (
    MAX_ADVANCED_DEVICES_PER_SLICE,
    ProfileError,
    available_profiles,
    build_slices,
    load_profile,
    load_profiles,
    parse_profile,
)

# ---- profiles -------------------------------------------------------------------------------------


def test_shipped_profiles() -> None:
    assert {"gpu", "gpu-partitionable", "nic"} <= set(available_profiles())
    for name in available_profiles():
        profile = load_profile(name)
        assert profile.name == name and profile.drivers and profile.description


def test_gpu_profile_matches_dra_example_driver() -> None:
    slices = build_slices(load_profile("gpu"), "node-a", node_uid="uid-a")
    assert len(slices) == 1
    spec = slices[0]["spec"]
    assert spec["driver"] == "gpu.example.com"
    assert spec["nodeName"] == "node-a"
    assert spec["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    assert slices[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-a"
    devices = spec["devices"]
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(8)]
    first = devices[0]
    assert first["attributes"]["index"] == {"int": 0}
    assert first["attributes"]["model"] == {"string": "LATEST-GPU-MODEL"}
    assert first["attributes"]["driverVersion"] == {"version": "1.0.0"}
    assert first["capacity"] == {"memory": {"value": "80Gi"}}
    uuid_a = first["attributes"]["uuid"]["string"]
    assert uuid_a.startswith("gpu-") and uuid.UUID(uuid_a[4:])
    # Stable per node and index, different across nodes and indexes.
    again = build_slices(load_profile("gpu"), "node-a")[0]["spec"]["devices"]
    other = build_slices(load_profile("gpu"), "node-b")[0]["spec"]["devices"]
    assert again[0]["attributes"]["uuid"]["string"] == uuid_a
    assert other[0]["attributes"]["uuid"]["string"] != uuid_a
    assert len({d["attributes"]["uuid"]["string"] for d in devices}) == 8


def test_partitionable_profile_shape() -> None:
    slices = build_slices(load_profile("gpu-partitionable"), "node-a")
    counts = {s["spec"]["pool"]["resourceSliceCount"] for s in slices}
    assert counts == {len(slices)} and len(slices) == 3
    counter_slices = [s for s in slices if "sharedCounters" in s["spec"]]
    device_slices = [s for s in slices if "devices" in s["spec"]]
    assert len(counter_slices) == 1 and all("devices" not in s["spec"] for s in counter_slices)
    counter_sets = {cs["name"]: cs["counters"] for s in counter_slices for cs in s["spec"]["sharedCounters"]}
    assert len(counter_sets) == 8 and counter_sets["gpu-0-counters"]["memory"] == {"value": "80Gi"}
    devices = [d for s in device_slices for d in s["spec"]["devices"]]
    assert all(len(s["spec"]["devices"]) <= MAX_ADVANCED_DEVICES_PER_SLICE for s in device_slices)
    assert len(devices) == 8 * (1 + 2 + 8)
    for device in devices:
        for consumption in device["consumesCounters"]:
            known = counter_sets[consumption["counterSet"]]
            assert set(consumption["counters"]) <= set(known)
    by_name = {d["name"]: d for d in devices}
    assert set(by_name["gpu-3-mig-4g-1"]["consumesCounters"][0]["counters"]) == {"memory", *(f"memory-slice-{i}" for i in range(4, 8))}
    assert by_name["gpu-3-mig-1g-5"]["attributes"]["parentUUID"] == by_name["gpu-3-full"]["attributes"]["uuid"]


def test_nic_profile_has_topology_attributes() -> None:
    devices = build_slices(load_profile("nic"), "node-a")[0]["spec"]["devices"]
    numa = [d["attributes"]["dra.net/numaNode"]["int"] for d in devices]
    assert numa == [0, 0, 1, 1]
    roots = {d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in devices}
    assert len(roots) == 2


def test_combined_profiles_and_paths(tmp_path: Path) -> None:
    both = load_profiles("gpu,nic")
    assert both.driver_names == ("gpu.example.com", "nic.example.com")
    assert len(build_slices(both, "n")) == 2
    with pytest.raises(ProfileError):
        load_profiles("gpu,gpu-partitionable")  # same driver twice
    with pytest.raises(ProfileError):
        load_profile("no-such-profile")
    path = tmp_path / "many.yaml"
    path.write_text("drivers:\n- name: many.example.com\n  devices:\n  - repeat: {i: 300}\n    name: 'dev-{i}'\n")
    profile = load_profile(str(path))
    slices = build_slices(profile, "n")
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 128, 44]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    assert len({s["metadata"]["name"] for s in slices}) == 3


@pytest.mark.parametrize(
    "devices",
    [
        [{"name": "d-{nope}"}],  # unknown variable
        [{"name": "d-{__import__('os')}"}],  # no calls but uuid()
        [{"name": "d", "repeat": {"i": 2}}],  # duplicate names
        [{"name": "d-{i.real}", "repeat": {"i": 2}}],  # no attribute access
    ],
)
def test_bad_templates(devices: list[dict[str, object]]) -> None:
    with pytest.raises(ProfileError):
        parse_profile("bad", {"drivers": [{"name": "x.example.com", "devices": devices}]})


def test_empty_driver_publishes_an_empty_pool() -> None:
    profile = parse_profile("empty", {"drivers": [{"name": "none.example.com"}]})
    slices = build_slices(profile, "n")
    assert len(slices) == 1 and slices[0]["spec"]["devices"] == []


@pytest.mark.parametrize("name", ["gpu", "gpu-partitionable", "nic"])
def test_slices_are_accepted_by_the_server(api: httpx.Client, name: str) -> None:
    node = f"prof-{uuid.uuid4().hex[:8]}"
    for slice_ in build_slices(load_profile(name), node, node_uid=str(uuid.uuid4())):
        response = api.post("/apis/resource.k8s.io/v1/resourceslices", json=slice_)
        assert response.status_code == 201, response.text
        assert response.json()["spec"]["pool"]["generation"] == 1
        assert not response.headers.get("warning")


# ---- nodes ----------------------------------------------------------------------------------------


def test_node_object() -> None:
    node = nodes.build_node("sim-3", 3, "gpu")
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "sim-3" and labels["type"] == "kubeletsim"
    status = node["status"]
    assert status["capacity"]["cpu"] == "32" and status["allocatable"]["pods"] == "110"
    assert len(status["nodeInfo"]) == 10 and all(isinstance(v, str) and v for v in status["nodeInfo"].values())
    assert {"type": "InternalIP", "address": nodes.node_ip(3)} in status["addresses"]
    assert len({nodes.node_ip(i) for i in range(70000)}) == 70000
    assert nodes.node_index("sim-12", "sim-") == 12 and nodes.node_index("sim-012", "sim-") is None
    lease = nodes.build_lease({"metadata": {"name": "sim-3", "uid": "u"}})
    assert lease["spec"]["leaseDurationSeconds"] == 40 and lease["metadata"]["namespace"] == "kube-node-lease"


# ---- pods -----------------------------------------------------------------------------------------

NODE = {"metadata": {"name": "sim-0", "labels": {"kubernetes.io/hostname": "sim-0"}}}
POD_UID = "11111111-1111-1111-1111-111111111111"


def _pod(claims: list[dict[str, str]] | None = None, statuses: list[dict[str, object]] | None = None) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": POD_UID},
        "spec": {"nodeName": "sim-0", "containers": [{"name": "c", "image": "busybox"}], "resourceClaims": claims or []},
        "status": {"phase": "Pending", "resourceClaimStatuses": statuses or []},
    }


def _claim(reserved: bool = True, pool: str = "sim-0", driver: str = "gpu.example.com", selector_node: str = "sim-0") -> dict[str, object]:
    return {
        "metadata": {"name": "c1", "namespace": "ns", "ownerReferences": [{"uid": POD_UID}]},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": "gpu-0"}]},
                "nodeSelector": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [selector_node]}]}]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": POD_UID}] if reserved else [],
        },
    }


def _admit(pod: dict[str, object], claims: dict[str, object], **kw: bool) -> pods.Admission:
    return pods.check_admission(pod, claims, NODE, {"gpu.example.com"}, **kw)  # type: ignore[arg-type]


def test_admission() -> None:
    by_name = [{"name": "gpu", "resourceClaimName": "c1"}]
    assert _admit(_pod(), {}).ok
    assert _admit(_pod(by_name), {"c1": _claim()}).ok
    assert "not found" in _admit(_pod(by_name), {"c1": None}).message
    unallocated = _claim()
    unallocated["status"] = {}
    assert "not allocated" in _admit(_pod(by_name), {"c1": unallocated}).message
    assert "not reserved" in _admit(_pod(by_name), {"c1": _claim(reserved=False)}).message
    assert "another node" in _admit(_pod(by_name), {"c1": _claim(selector_node="sim-1")}).message
    assert "not on node" in _admit(_pod(by_name), {"c1": _claim(pool="sim-1")}).message
    # Devices of a driver the node does not simulate are left to its plugin (the DRA manager), wherever their pool.
    assert _admit(_pod(by_name), {"c1": _claim(driver="nic.example.com", pool="elsewhere")}).ok
    # DRAReservedForWorkloads: reservedForAnyPod stands in for the pod's own reservation.
    any_pod = _claim(reserved=False)
    any_pod["status"]["allocation"]["reservedForAnyPod"] = True  # type: ignore[index]
    assert not _admit(_pod(by_name), {"c1": any_pod}).ok
    assert _admit(_pod(by_name), {"c1": any_pod}, reserved_for_workloads=True).ok


def test_admission_of_template_claims() -> None:
    from_template = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    assert "to be created" in _admit(_pod(from_template), {}).message
    resolved = _pod(from_template, [{"name": "gpu", "resourceClaimName": "c1"}])
    assert _admit(resolved, {"c1": _claim()}).ok
    foreign = _claim()
    foreign["metadata"]["ownerReferences"] = [{"uid": "other"}]  # type: ignore[index]
    assert "not created for the pod" in _admit(resolved, {"c1": foreign}).message
    # resourceClaimName unset in the status: the controller decided no claim is needed.
    assert _admit(_pod(from_template, [{"name": "gpu"}]), {}).ok


def test_admission_through_the_pods_group() -> None:
    """DRAWorkloadResourceClaims: a claim reserved for the pod's PodGroup (by name) admits it,
    and a claim generated for that group counts as the pod's own."""
    group_ref = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "trainers", "uid": "g"}
    by_name = [{"name": "gpu", "resourceClaimName": "c1"}]
    member = _pod(by_name)
    member["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}  # type: ignore[index]
    for_group = _claim(reserved=False)
    for_group["status"]["reservedFor"] = [group_ref]  # type: ignore[index]
    assert _admit(member, {"c1": for_group}, pod_group_claims=True).ok
    # Not without the gate, not for a pod of another group (or of none), not through KEP-5194's rule.
    assert "not reserved" in _admit(member, {"c1": for_group}).message
    assert "not reserved" in _admit(member, {"c1": for_group}, reserved_for_workloads=True).message
    stranger = _pod(by_name)
    stranger["spec"]["schedulingGroup"] = {"podGroupName": "others"}  # type: ignore[index]
    assert "not reserved" in _admit(stranger, {"c1": for_group}, pod_group_claims=True).message
    assert "not reserved" in _admit(_pod(by_name), {"c1": for_group}, pod_group_claims=True).message
    # A claim the controller made from the group's template: owned by the PodGroup, not the pod.
    from_template = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    templated = _pod(from_template, [{"name": "gpu", "resourceClaimName": "c1"}])
    templated["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}  # type: ignore[index]
    owned = copy.deepcopy(for_group)
    owned["metadata"]["ownerReferences"] = [  # type: ignore[index]
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "trainers", "uid": "g", "controller": True}
    ]
    assert _admit(templated, {"c1": owned}, pod_group_claims=True).ok
    assert "not created for the pod" in _admit(templated, {"c1": owned}).message


def test_device_status_prepare_and_unprepare() -> None:
    claim = _claim()
    devices = pods.prepared_devices(claim, "2026-01-01T00:00:00Z")
    assert devices is not None and len(devices) == 1
    entry = devices[0]
    assert (entry["driver"], entry["pool"], entry["device"]) == ("gpu.example.com", "sim-0", "gpu-0")
    conditions = entry.get("conditions") or []
    assert conditions[0]["type"] == "Ready" and conditions[0]["status"] == "True"
    claim["status"]["devices"] = devices  # type: ignore[index]
    assert pods.prepared_devices(claim, "2026-01-01T00:00:05Z") is None  # idempotent
    assert pods.prepared_devices(_claim(), "2026-01-01T00:00:00Z", drivers={"nic.example.com"}) is None  # another driver's device
    assert pods.unprepared_devices(claim, {"gpu.example.com"}, "sim-1") is None
    assert pods.unprepared_devices(claim, {"gpu.example.com"}, "sim-0") == []


def test_network_data_from_nic_attributes() -> None:
    claim = _claim(driver="nic.example.com")
    attrs = {("nic.example.com", "gpu-0"): {"interfaceName": {"string": "eth1"}, "macAddress": {"string": "02:00:00:00:00:10"}}}
    devices = pods.prepared_devices(claim, "2026-01-01T00:00:00Z", attrs)
    assert devices is not None and devices[0]["networkData"] == {"interfaceName": "eth1", "hardwareAddress": "02:00:00:00:00:10"}


def test_pod_statuses() -> None:
    pod = _pod()
    now = "2026-01-01T00:00:00Z"
    running = pods.running_status(pod, "172.16.0.1", "10.64.0.2", now)
    assert running["phase"] == "Running" and running["podIP"] == "10.64.0.2" and running["hostIP"] == "172.16.0.1"
    types = {c["type"]: c["status"] for c in running["conditions"]}
    assert types == dict.fromkeys(("PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready"), "True")
    container = running["containerStatuses"][0]
    assert container["ready"] and container["started"] and container["restartCount"] == 0
    assert container["state"]["running"]["startedAt"] == now and container["containerID"].startswith("containerd://")
    pod["status"] = running
    later = "2026-01-01T00:01:00Z"
    failed = pods.terminated_status(pod, 3, later)
    assert failed["phase"] == "Failed"
    terminated = failed["containerStatuses"][0]["state"]["terminated"]
    assert terminated == {**terminated, "exitCode": 3, "reason": "Error", "startedAt": now, "finishedAt": later}
    # Unchanged conditions keep their transition time.
    assert {c["type"]: c["lastTransitionTime"] for c in failed["conditions"]}["Initialized"] == now
    assert pods.terminated_status(pod, 0, later)["phase"] == "Succeeded"
    pending = pods.pending_status(_pod(), "172.16.0.1", "waiting", now)
    assert pending["phase"] == "Pending" and pending["containerStatuses"][0]["state"]["waiting"]["message"] == "waiting"


def test_annotations_and_qos() -> None:
    pod = _pod()
    assert pods.run_seconds(pod) is None and pods.exit_code(pod) == 0
    pod["metadata"]["annotations"] = {pods.RUN_SECONDS_ANNOTATION: "2.5", pods.EXIT_CODE_ANNOTATION: "7"}  # type: ignore[index]
    assert pods.run_seconds(pod) == 2.5 and pods.exit_code(pod) == 7
    assert qos_class(pod) == "BestEffort"
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    container["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1Gi"}}
    assert qos_class(pod) == "Guaranteed"
    container["resources"] = {"requests": {"cpu": "1"}}
    assert qos_class(pod) == "Burstable"
