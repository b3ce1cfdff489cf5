"""The simulator's PodController in this event loop against a real server: admission, pod
addresses, run time, claims' device status, graceful deletion."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube.client import KubeClient, resource_path
from kube.features import FeatureGates
from kube.informer import Informer
from kube.workqueue import ExponentialBackoff
from kubeletsim import nodes as nodes_mod
from kubeletsim.podcontroller import PodController
from kubeletsim.profiles import load_profiles
from tests.kubeletsim.harness import NODES, register_node, running
from tests.kubeletsim.test_plugin_manager import FAKE
from tests.kubeletsim.test_plugin_manager import driver as plugin_driver
from tests.kubeletsim.test_plugin_manager import node as plugin_node
from tests.processes import eventually_async, get_or_none

GPU = "gpu.example.com"


@pytest.fixture
async def pods(kube_client: KubeClient, prefix: str) -> AsyncIterator[PodController]:
    """A PodController for the nodes ``<prefix>0`` and ``<prefix>1`` (registered, Ready), running."""
    names = [f"{prefix}0", f"{prefix}1"]
    for index, name in enumerate(names):
        await register_node(kube_client, name, index)
    controller = PodController(
        kube_client,
        Informer(kube_client, NODES, name="nodes"),
        Informer(kube_client, resource_path("", "v1", "pods"), field_selector="spec.nodeName!=", name="pods"),
        Informer(kube_client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims"),
        names,
        load_profiles("gpu"),
        max_pods=110,
        gates=FeatureGates(),
        backoff=ExponentialBackoff(0.05, 1.0),
    )
    async with running([controller.nodes, controller.pods, controller.claims], controller.queue, controller.sync):
        yield controller


def pods_path(ns: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path("", "v1", "pods", ns, name or None, subresource)


def claims_path(ns: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path("resource.k8s.io", "v1", "resourceclaims", ns, name or None, subresource)


async def bound_pod(kube_client: KubeClient, ns: str, name: str, node: str, *, claim: str = "", annotations: dict[str, str] | None = None, cpu: str = "") -> dict[str, Any]:
    """Create a pod and bind it to ``node``, as the scheduler would."""
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    spec: dict[str, Any] = {"containers": [container]}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        container.setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    await kube_client.create(pods_path(ns), {"metadata": {"name": name, "annotations": annotations or {}}, "spec": spec})
    await kube_client.post_raw(pods_path(ns, name, "binding"), {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}})
    return await kube_client.get(pods_path(ns, name))


async def allocated_claim(kube_client: KubeClient, ns: str, name: str, node: str, device: str, users: list[dict[str, Any]], driver: str = GPU) -> dict[str, Any]:
    """A claim with the allocation (and reservations) a scheduler would write."""
    requests = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver}}]}}
    claim = await kube_client.create(claims_path(ns), {"metadata": {"name": name}, "spec": requests})
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": driver, "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }
    }
    if users:
        claim["status"]["reservedFor"] = [{"resource": "pods", "name": u["metadata"]["name"], "uid": u["metadata"]["uid"]} for u in users]
    return await kube_client.update(claims_path(ns, name, "status"), claim)


async def in_phase(kube_client: KubeClient, ns: str, name: str, phase: str) -> dict[str, Any] | None:
    pod = await get_or_none(kube_client, pods_path(ns, name))
    return pod if pod is not None and (pod.get("status") or {}).get("phase") == phase else None


async def devices(kube_client: KubeClient, ns: str, claim: str) -> list[tuple[str, str, str]]:
    status = (await kube_client.get(claims_path(ns, claim))).get("status") or {}
    return [(d["driver"], d["pool"], d["device"]) for d in status.get("devices") or []]


async def test_bound_pods_run_with_addresses_of_their_node(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    node = f"{prefix}1"
    await bound_pod(kube_client, ns, "a", node)
    await bound_pod(kube_client, ns, "b", node)
    first = await eventually_async(lambda: in_phase(kube_client, ns, "a", "Running"), what="pod a Running")
    second = await eventually_async(lambda: in_phase(kube_client, ns, "b", "Running"), what="pod b Running")
    cidr = nodes_mod.pod_cidr(1)
    addresses = {first["status"]["podIP"], second["status"]["podIP"]}
    assert len(addresses) == 2 and all(ipaddress.IPv4Address(a) in cidr for a in addresses)
    assert first["status"]["hostIP"] == nodes_mod.node_ip(1)
    assert {c["type"] for c in first["status"]["conditions"] if c["status"] == "True"} >= {"Ready", "ContainersReady", "Initialized"}


async def test_pods_on_other_nodes_are_left_alone(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    other = f"{prefix}other"
    await register_node(kube_client, other, 7)
    await bound_pod(kube_client, ns, "elsewhere", other)
    await bound_pod(kube_client, ns, "here", f"{prefix}0")
    await eventually_async(lambda: in_phase(kube_client, ns, "here", "Running"), what="the pod on our node Running")
    await asyncio.sleep(0.3)
    assert not ((await kube_client.get(pods_path(ns, "elsewhere"))).get("status") or {}).get("hostIP")


async def test_run_time_exit_codes_and_resource_admission(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    node = f"{prefix}0"  # 32 cpu
    await bound_pod(kube_client, ns, "big", node, cpu="30", annotations={"dra.example.dev/run-seconds": "1"})
    await eventually_async(lambda: in_phase(kube_client, ns, "big", "Running"), what="big pod Running")
    await bound_pod(kube_client, ns, "too-big", node, cpu="4")
    rejected = await eventually_async(lambda: in_phase(kube_client, ns, "too-big", "Failed"), what="pod rejected")
    assert rejected["status"]["reason"] == "OutOfcpu"
    assert rejected["status"]["message"] == "Pod was rejected: Node didn't have enough resource: cpu, requested: 4000, used: 30000, capacity: 32000"
    await eventually_async(lambda: in_phase(kube_client, ns, "big", "Succeeded"), what="big pod finished after its run time")
    # What the finished pod held is free again.
    await bound_pod(kube_client, ns, "fits-now", node, cpu="4")
    await eventually_async(lambda: in_phase(kube_client, ns, "fits-now", "Running"), what="pod Running on the freed cpu")
    await bound_pod(kube_client, ns, "fails", node, annotations={"dra.example.dev/run-seconds": "0", "dra.example.dev/exit-code": "3"})
    failed = await eventually_async(lambda: in_phase(kube_client, ns, "fails", "Failed"), what="pod failed with its exit code")
    assert failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


async def test_devices_are_prepared_for_users_and_released_after_the_last(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    node = f"{prefix}1"
    first = await bound_pod(kube_client, ns, "first", node, claim="shared")
    second = await bound_pod(kube_client, ns, "second", node, claim="shared")
    await allocated_claim(kube_client, ns, "shared", node, "gpu-3", [first, second])
    await eventually_async(lambda: in_phase(kube_client, ns, "first", "Running"), what="first user Running")
    await eventually_async(lambda: in_phase(kube_client, ns, "second", "Running"), what="second user Running")
    assert await devices(kube_client, ns, "shared") == [(GPU, node, "gpu-3")]

    # Graceful deletion: the simulated kubelet stops the pod and lets it go; the other user still has the device.
    await kube_client.delete(pods_path(ns, "first"))
    await eventually_async(lambda: _gone(kube_client, pods_path(ns, "first")), what="first pod gone")
    await asyncio.sleep(0.3)
    assert await devices(kube_client, ns, "shared") == [(GPU, node, "gpu-3")]
    await kube_client.delete(pods_path(ns, "second"))
    await eventually_async(lambda: _gone(kube_client, pods_path(ns, "second")), what="second pod gone")
    await eventually_async(lambda: _empty(devices(kube_client, ns, "shared")), what="device released")


async def test_a_pod_that_ends_releases_its_devices(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    node = f"{prefix}0"
    ends = await bound_pod(kube_client, ns, "ends", node, claim="gpu", annotations={"dra.example.dev/run-seconds": "1"})
    await allocated_claim(kube_client, ns, "gpu", node, "gpu-2", [ends])
    await eventually_async(lambda: in_phase(kube_client, ns, "ends", "Running"), what="pod Running")
    assert await devices(kube_client, ns, "gpu") == [(GPU, node, "gpu-2")]
    await eventually_async(lambda: in_phase(kube_client, ns, "ends", "Succeeded"), what="pod finished after its run time")
    # The pod object stays (Succeeded); its device is released all the same.
    await eventually_async(lambda: _empty(devices(kube_client, ns, "gpu")), what="device released after the pod ended")


async def test_a_pod_that_ends_has_its_plugin_drivers_claims_unprepared(kube_client: KubeClient, prefix: str, ns: str) -> None:
    """A driver on the node's plugin socket: the kubelet calls NodeUnprepareResources once the
    pod's containers are done, while the pod object stays (Succeeded), not only when it goes."""
    name = f"{prefix}0"
    await register_node(kube_client, name, 0)
    async with plugin_node(name=name) as node, plugin_driver(node) as fake:
        controller = PodController(
            kube_client, Informer(kube_client, NODES, name="nodes"),
            Informer(kube_client, resource_path("", "v1", "pods"), field_selector="spec.nodeName!=", name="pods"),
            Informer(kube_client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims"),
            [name], load_profiles("gpu"), max_pods=110, gates=FeatureGates(), backoff=ExponentialBackoff(0.05, 1.0), managers={name: node.manager},
        )  # fmt: skip
        async with running([controller.nodes, controller.pods, controller.claims], controller.queue, controller.sync):
            pod = await bound_pod(kube_client, ns, "ends", name, claim="plugged", annotations={"dra.example.dev/run-seconds": "1"})
            claim = await allocated_claim(kube_client, ns, "plugged", name, "dev-plugged", [pod], driver=FAKE)
            await eventually_async(lambda: in_phase(kube_client, ns, "ends", "Running"), what="pod Running")
            assert fake.node.prepare_calls == [[(ns, "plugged", claim["metadata"]["uid"])]]
            assert fake.node.unprepare_calls == []
            await eventually_async(lambda: in_phase(kube_client, ns, "ends", "Succeeded"), what="pod finished after its run time")

            async def unprepared() -> bool:
                return bool(fake.node.unprepare_calls)

            await eventually_async(unprepared, what="NodeUnprepareResources after the pod ended")
            assert fake.node.unprepare_calls == [[(ns, "plugged", claim["metadata"]["uid"])]]
            assert fake.node.prepared == set()
            assert await in_phase(kube_client, ns, "ends", "Succeeded"), "the pod object stays"


async def test_a_pod_deleted_at_once_releases_its_devices(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    node = f"{prefix}1"
    pod = await bound_pod(kube_client, ns, "forced", node, claim="gpu")
    await allocated_claim(kube_client, ns, "gpu", node, "gpu-4", [pod])
    await eventually_async(lambda: in_phase(kube_client, ns, "forced", "Running"), what="pod Running")
    assert await devices(kube_client, ns, "gpu") == [(GPU, node, "gpu-4")]
    # A forced deletion: the pod is gone from the server before the simulated kubelet sees it stop.
    await kube_client.delete(pods_path(ns, "forced"), grace_period_seconds=0)
    assert await _gone(kube_client, pods_path(ns, "forced"))
    await eventually_async(lambda: _empty(devices(kube_client, ns, "gpu")), what="device released after the forced deletion")


async def test_a_pod_waits_for_a_claim_reserved_for_it(kube_client: KubeClient, pods: PodController, prefix: str, ns: str) -> None:
    node = f"{prefix}0"
    await allocated_claim(kube_client, ns, "unreserved", node, "gpu-1", [])
    await bound_pod(kube_client, ns, "waits", node, claim="unreserved")

    async def warning() -> list[dict[str, Any]]:
        events = (await kube_client.list(resource_path("", "v1", "events", ns)))["items"]
        return [e for e in events if e["reason"] == "FailedPrepareDynamicResources" and e["involvedObject"]["name"] == "waits"]

    [event] = await eventually_async(warning, what="FailedPrepareDynamicResources event")
    assert event["type"] == "Warning" and "not reserved" in event["message"]
    pod = await kube_client.get(pods_path(ns, "waits"))
    assert pod["status"]["phase"] == "Pending" and "not reserved" in pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert await devices(kube_client, ns, "unreserved") == []
    await asyncio.sleep(0.3)
    assert len(await warning()) == 1  # reported once, not on every re-check


async def _gone(kube_client: KubeClient, path: str) -> bool:
    return await get_or_none(kube_client, path) is None


async def _empty(value: Any) -> bool:
    return not await value
