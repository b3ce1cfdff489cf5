"""Extended resources backed by devices, in the scheduler: the
special claim's requests and mappings, and the cycle's placement (cache fed in memory)."""

from __future__ import annotations

from typing import Any

from kube.objects import Obj
from schedulers.cycle import Placement, ScheduleFailure, SchedulingCycle
from schedulers.extended import IN_MEMORY_NAME, requests_and_mappings
from tests.schedulers.cluster import CLASS, DRIVER, Cluster, claim, device_class, node, node_slice, pod

GPU = "example.com/gpu"


def klass(name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z", driver: str = DRIVER) -> Obj:
    body = device_class(name, driver)
    body["metadata"]["creationTimestamp"] = created
    if resource:
        body["spec"]["extendedResourceName"] = resource
    return body


def asking(name: str, amounts: dict[str, str], *, init: list[Obj] | None = None, **spec: Any) -> Obj:
    p = pod(name, **spec)
    p["spec"]["containers"][0]["resources"]["requests"].update(amounts)
    if init is not None:
        p["spec"]["initContainers"] = init
    return p


def test_requests_per_container_and_init_containers_reuse_later_ones() -> None:
    p = asking("p", {GPU: "2", "cpu": "1"}, init=[
        {"name": "setup", "image": "i", "resources": {"requests": {GPU: "3"}}},
        {"name": "small", "image": "i", "resources": {"requests": {GPU: "1"}}},
        {"name": "sidecar", "image": "i", "restartPolicy": "Always", "resources": {"requests": {GPU: "1"}}},
    ])  # fmt: skip
    p["spec"]["containers"].append({"name": "second", "image": "i", "resources": {"requests": {GPU: "1"}}})
    requests, mappings = requests_and_mappings(p, {GPU: 6}, {GPU: "gpu"})
    # Container indexes count init containers first; the request index is the resource's place
    # among the container's sorted request names (cpu < example.com/gpu).
    assert requests == [
        {"name": "container-2-request-0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
        {"name": "container-3-request-1", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}},
        {"name": "container-4-request-0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
    ]
    # "setup" needs 3: the sidecar's and main's devices (1 + 2) cover it; "small" reuses the sidecar's.
    assert mappings == [
        {"containerName": "sidecar", "resourceName": GPU, "requestName": "container-2-request-0"},
        {"containerName": "main", "resourceName": GPU, "requestName": "container-3-request-1"},
        {"containerName": "second", "resourceName": GPU, "requestName": "container-4-request-0"},
        {"containerName": "setup", "resourceName": GPU, "requestName": "container-2-request-0"},
        {"containerName": "setup", "resourceName": GPU, "requestName": "container-3-request-1"},
        {"containerName": "small", "resourceName": GPU, "requestName": "container-2-request-0"},
    ]
    # Init containers that need more than what comes after them get one request, the largest
    # of what they miss, and all of them map to it.
    p["spec"]["initContainers"][0]["resources"]["requests"][GPU] = "6"  # misses 2
    p["spec"]["initContainers"][1]["resources"]["requests"][GPU] = "5"  # misses 1
    requests, mappings = requests_and_mappings(p, {GPU: 6}, {GPU: "gpu"})
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [
        ("container-0-request-0", 2), ("container-2-request-0", 1), ("container-3-request-1", 2), ("container-4-request-0", 1),
    ]  # fmt: skip
    assert [m["requestName"] for m in mappings if m["containerName"] == "small"] == [
        "container-2-request-0", "container-3-request-1", "container-4-request-0", "container-0-request-0",
    ]  # fmt: skip


async def extended_cluster(devices: dict[str, int], **node_fields: Any) -> Cluster:
    cluster = Cluster()
    await cluster.put(cluster.cache.classes, klass(CLASS, GPU))
    for name, count in devices.items():
        await cluster.put(cluster.cache.nodes, node(name, **node_fields))
        await cluster.put(cluster.cache.slices, node_slice(name, count))
    return cluster


async def test_a_pod_asking_for_an_extended_resource_gets_devices_through_a_special_claim() -> None:
    cluster = await extended_cluster({"n": 4})
    p = await cluster.put(cluster.cache.pods, asking("p", {GPU: "2"}))
    placement = SchedulingCycle(cluster.cache).schedule(p)
    assert isinstance(placement, Placement) and placement.extended is not None
    special = placement.extended.claim
    assert placement.claims == [special]
    assert special["metadata"]["name"] == IN_MEMORY_NAME
    assert special["metadata"]["generateName"] == "p-extended-resources-"
    assert special["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert special["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}]
    assert special["spec"]["devices"]["requests"] == [
        {"name": "container-0-request-1", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2}}
    ]
    results = placement.allocations[special["metadata"]["uid"]]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [("container-0-request-1", "dev-0"), ("container-0-request-1", "dev-1")]
    assert placement.extended.mappings == [{"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-1"}]


async def test_the_implicit_name_works_beside_a_claim_of_the_pod() -> None:
    cluster = await extended_cluster({"n": 2})
    await cluster.put(cluster.cache.claims, claim("c"))
    p = await cluster.put(cluster.cache.pods, asking("p", {f"deviceclass.resource.kubernetes.io/{CLASS}": "1"}, claims=["c"]))
    placement = SchedulingCycle(cluster.cache).schedule(p)
    assert isinstance(placement, Placement) and placement.extended is not None
    assert [c["metadata"]["name"] for c in placement.claims] == ["c", IN_MEMORY_NAME]
    devices = sorted(r["device"] for a in placement.allocations.values() for r in a["devices"]["results"])
    assert devices == ["dev-0", "dev-1"]  # never the same device twice


async def test_a_node_advertising_the_resource_serves_it_without_devices() -> None:
    cluster = await extended_cluster({"n": 4})
    advertised = node("n")
    advertised["status"]["allocatable"] = {**advertised["status"]["allocatable"], GPU: "1"}
    await cluster.put(cluster.cache.nodes, advertised)
    cycle = SchedulingCycle(cluster.cache)
    placement = cycle.schedule(await cluster.put(cluster.cache.pods, asking("one", {GPU: "1"})))
    assert isinstance(placement, Placement) and placement.extended is None and placement.claims == []
    failure = cycle.schedule(await cluster.put(cluster.cache.pods, asking("two", {GPU: "2"})))
    assert isinstance(failure, ScheduleFailure) and failure.fit_message == f"0/1 nodes are available: 1 Insufficient {GPU}."
    # Advertised as 0: devices serve it again.
    advertised["status"]["allocatable"][GPU] = "0"
    await cluster.put(cluster.cache.nodes, advertised)
    placement = cycle.schedule(await cluster.put(cluster.cache.pods, asking("three", {GPU: "2"})))
    assert isinstance(placement, Placement) and placement.extended is not None


async def test_more_than_any_node_has() -> None:
    cluster = await extended_cluster({"a": 2, "b": 3})
    failure = SchedulingCycle(cluster.cache).schedule(await cluster.put(cluster.cache.pods, asking("p", {GPU: "4"})))
    assert isinstance(failure, ScheduleFailure)
    assert failure.fit_message == "0/2 nodes are available: 2 cannot allocate all claims."


async def test_a_resource_no_class_serves_is_left_to_the_node() -> None:
    cluster = await extended_cluster({"n": 1})
    placement = SchedulingCycle(cluster.cache).schedule(await cluster.put(cluster.cache.pods, asking("p", {"other.example.com/fpga": "1"})))
    assert isinstance(placement, Placement) and placement.extended is None


async def test_a_special_claim_left_by_an_earlier_attempt_is_stale() -> None:
    cluster = await extended_cluster({"n": 2})
    p = await cluster.put(cluster.cache.pods, asking("p", {GPU: "1"}))
    left = claim("p-extended-resources-abcde", annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
                 ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}])  # fmt: skip
    await cluster.put(cluster.cache.claims, left)
    failure = SchedulingCycle(cluster.cache).schedule(p)
    assert isinstance(failure, ScheduleFailure)
    assert failure.stale_extended_claim is not None and failure.stale_extended_claim["metadata"]["name"] == "p-extended-resources-abcde"
    assert failure.message.startswith("0/1 nodes are available: 1 cannot schedule extended resource claim.")
