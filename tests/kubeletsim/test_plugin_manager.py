"""Prepare/unprepare, the checkpoint, health and PodResources of one node against fake drivers over real sockets."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest

from kube.tasks import wait_for
from kubeletapi.dra_health.v1 import api_pb2 as health_v1
from kubeletapi.layout import NodeDirs
from kubeletapi.podresources.v1 import api_pb2 as podresources
from kubeletapi.podresources.v1 import api_pb2_grpc as podresources_grpc
from kubeletsim.plugins.checkpoint import Checkpoint, CorruptCheckpoint
from kubeletsim.plugins.draplugin import PluginStore
from kubeletsim.plugins.health import HealthCache, HealthStreams
from kubeletsim.plugins.manager import DRAManager, PrepareError
from kubeletsim.plugins.podresources import PodResourcesServer
from kubeletsim.plugins.registration import PluginWatcher
from tests.kubeletsim.fakeplugin import FakeDriver, short_root
from tests.kubeletsim.test_plugin_registration import FAST, eventually

FAKE, OTHER, BUILTIN = "fake.example.com", "other.example.com", "gpu.example.com"


def make_claim(name: str, *devices: tuple[str, str], ns: str = "ns", node: str = "n0") -> dict:
    """An allocated claim with one request ``req`` and the given (driver, device) results on ``node``."""
    results = [{"request": "req", "driver": driver, "pool": node, "device": device} for driver, device in devices]
    return {
        "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4())},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def make_pod(name: str, *claims: dict, ns: str = "ns") -> dict:
    refs = [{"name": f"pc-{c['metadata']['name']}", "resourceClaimName": c["metadata"]["name"]} for c in claims]
    return {
        "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4())},
        "spec": {
            "resourceClaims": refs,
            "containers": [{"name": "main", "resources": {"claims": [{"name": r["name"]} for r in refs]}}, {"name": "plain"}],
        },
    }


def by_name(*claims: dict) -> dict[str, dict]:
    return {c["metadata"]["name"]: c for c in claims}


@dataclass
class Node:
    dirs: NodeDirs
    store: PluginStore
    manager: DRAManager
    health: HealthCache
    changes: list[tuple[str, set[str]]]

    def restarted(self) -> DRAManager:
        """A manager as a restarted simulator builds it: from the checkpoint file."""
        checkpoint = Checkpoint(self.dirs.checkpoint)
        checkpoint.load()
        return DRAManager(self.dirs.node, self.store, checkpoint, self.health, builtin_drivers=[BUILTIN])


@asynccontextmanager
async def node(call_timeout: float = 5.0, name: str = "n0") -> AsyncIterator[Node]:
    """A node's plugin side (watcher, plugin store, DRA manager, health streams) in this event loop."""
    dirs = NodeDirs(short_root(), name)
    dirs.create()
    cache = HealthCache()
    changes: list[tuple[str, set[str]]] = []
    checkpoint = Checkpoint(dirs.checkpoint)
    holder: list[DRAManager] = []
    streams = HealthStreams(name, cache, lambda driver, devices: changes.append((driver, holder[0].pods_using(driver, devices))), retry_interval=0.1)
    store = PluginStore(name, reserved=[BUILTIN], call_timeout=call_timeout, on_change=streams.plugin_changed)
    manager = DRAManager(name, store, checkpoint, cache, builtin_drivers=[BUILTIN])
    holder.append(manager)
    watcher = PluginWatcher(dirs, store, interval=0.02, timeouts=FAST)
    task = asyncio.create_task(watcher.run())
    try:
        yield Node(dirs, store, manager, cache, changes)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await streams.close()
        await store.close()


@asynccontextmanager
async def driver(n: Node, name: str = FAKE, **options: object) -> AsyncIterator[FakeDriver]:
    async with FakeDriver(n.dirs, name, **options) as fake:  # type: ignore[arg-type]
        await eventually(lambda: n.store.usable(name))
        yield fake


async def test_claims_are_prepared_in_one_call_per_driver_and_their_cdi_devices_reach_the_container() -> None:
    async with node() as n, driver(n) as fake, driver(n, OTHER) as other:
        c1, c2, c3 = make_claim("c1", (FAKE, "dev-c1")), make_claim("c2", (FAKE, "dev-c2"), (BUILTIN, "gpu-0")), make_claim("c3", (OTHER, "dev-c3"))
        pod = make_pod("p", c1, c2, c3)
        await n.manager.prepare_resources(pod, by_name(c1, c2, c3))
        assert [sorted(call) for call in fake.node.prepare_calls] == [sorted(("ns", c["metadata"]["name"], c["metadata"]["uid"]) for c in (c1, c2))]
        assert other.node.prepare_calls == [[("ns", "c3", c3["metadata"]["uid"])]]
        main, plain = pod["spec"]["containers"]
        assert n.manager.cdi_devices(pod, main) == [
            f"{FAKE}/device=dev-c1-{c1['metadata']['uid'][:8]}",
            f"{FAKE}/device=dev-c2-{c2['metadata']['uid'][:8]}",
            f"{OTHER}/device=dev-c3-{c3['metadata']['uid'][:8]}",
        ]
        assert n.manager.cdi_devices(pod, plain) == []


async def test_a_shared_claim_is_prepared_once_and_unprepared_after_its_last_pod_even_across_a_restart() -> None:
    async with node() as n, driver(n) as fake:
        shared = make_claim("shared", (FAKE, "dev-shared"))
        first, second = make_pod("a", shared), make_pod("b", shared)
        await n.manager.prepare_resources(first, by_name(shared))
        await n.manager.prepare_resources(second, by_name(shared))
        assert len(fake.node.prepare_calls) == 1
        restarted = n.restarted()
        await restarted.prepare_resources(first, by_name(shared))
        assert len(fake.node.prepare_calls) == 1, "a restart must not prepare again"
        await restarted.unprepare_resources(first["metadata"]["uid"], "ns", ["shared"])
        assert fake.node.unprepare_calls == []
        await restarted.unprepare_resources(second["metadata"]["uid"], "ns", ["shared"])
        assert fake.node.unprepare_calls == [[("ns", "shared", shared["metadata"]["uid"])]]
        assert fake.node.prepared == set() and n.restarted().checkpoint.claims == {}


async def test_a_missing_driver_gives_upstreams_error_and_records_nothing() -> None:
    async with node() as n:
        claim = make_claim("c", (OTHER, "d"))
        with pytest.raises(PrepareError) as failure:
            await n.manager.prepare_resources(make_pod("p", claim), by_name(claim))
        assert str(failure.value) == "prepare dynamic resources: DRA driver other.example.com is not registered"
        assert n.restarted().checkpoint.claims == {}


async def test_only_built_in_drivers_need_no_plugin() -> None:
    async with node() as n:
        claim = make_claim("c", (BUILTIN, "gpu-0"))
        await n.manager.prepare_resources(make_pod("p", claim), by_name(claim))
        assert n.manager.checkpoint.claims == {}


@pytest.mark.parametrize(
    ("misbehave", "message"),
    [
        ("abort", "NodePrepareResources: rpc error: code = Internal desc = driver failure injected by the test"),
        ("claim error", "NodePrepareResources failed for ResourceClaim c: device on fire"),
        ("missing claim", "NodePrepareResources skipped 1 ResourceClaims"),
        ("unknown claim", "NodePrepareResources returned result for unknown claim UID not-asked"),
        (
            "other pool",
            "NodePrepareResources returned device elsewhere/dev-c for ResourceClaim c, which is not among the devices allocated to it by driver fake.example.com",
        ),
    ],
)
async def test_driver_failures_keep_the_claim_unprepared_until_a_retry_succeeds(misbehave: str, message: str) -> None:
    async with node() as n, driver(n) as fake:
        claim = make_claim("c", (FAKE, "dev-c"))
        uid = claim["metadata"]["uid"]
        pod = make_pod("p", claim)
        b = fake.node.behaviour
        if misbehave == "abort":
            b.abort = grpc.StatusCode.INTERNAL
        elif misbehave == "claim error":
            b.claim_errors[uid] = "device on fire"
        elif misbehave == "missing claim":
            b.drop_claims.add(uid)
        elif misbehave == "unknown claim":
            b.extra_claims.add("not-asked")
        else:
            b.pool = "elsewhere"
        with pytest.raises(PrepareError) as failure:
            await n.manager.prepare_resources(pod, by_name(claim))
        assert str(failure.value) == f"prepare dynamic resources: {message}"
        assert n.manager.cdi_devices(pod, pod["spec"]["containers"][0]) == []
        fake.node.behaviour = type(b)()
        await n.manager.prepare_resources(pod, by_name(claim))
        assert n.manager.cdi_devices(pod, pod["spec"]["containers"][0]) == [f"{FAKE}/device=dev-c-{uid[:8]}"]


async def test_a_hanging_driver_times_out_without_holding_up_other_drivers() -> None:
    async with node(call_timeout=0.5) as n, driver(n) as hanging, driver(n, OTHER):
        hanging.node.behaviour.delay = 3.0
        stuck, fine = make_claim("stuck", (FAKE, "dev-stuck")), make_claim("fine", (OTHER, "dev-fine"))
        slow = asyncio.create_task(n.manager.prepare_resources(make_pod("slow", stuck), by_name(stuck)))
        await hanging.node.call_started.wait()
        await wait_for(n.manager.prepare_resources(make_pod("quick", fine), by_name(fine)), 0.4)
        with pytest.raises(PrepareError, match=r"^prepare dynamic resources: NodePrepareResources: rpc error: code = DeadlineExceeded desc = "):
            await slow


async def test_a_driver_crashing_mid_call_leaves_nothing_prepared_once_the_pod_is_gone() -> None:
    async with node() as n:
        claim = make_claim("c", (FAKE, "dev-c"))
        pod = make_pod("p", claim)
        async with driver(n) as fake:
            fake.node.behaviour.delay = 5.0
            call = asyncio.create_task(n.manager.prepare_resources(pod, by_name(claim)))
            await fake.node.call_started.wait()
        with pytest.raises(PrepareError, match=r"^prepare dynamic resources: NodePrepareResources: rpc error: code = (Unavailable|Canceled) "):
            await call
        await eventually(lambda: not n.store.registered(FAKE))
        # The pod is deleted while the driver is down: unpreparing waits for it, with upstream's error.
        with pytest.raises(PrepareError, match=r"^unprepare dynamic resources: DRA driver fake.example.com is not registered$"):
            await n.manager.unprepare_resources(pod["metadata"]["uid"], "ns", ["c"])
        async with driver(n) as restarted:
            await n.manager.unprepare_resources(pod["metadata"]["uid"], "ns", ["c"])
            assert restarted.node.unprepare_calls == [[("ns", "c", claim["metadata"]["uid"])]]
        assert n.restarted().checkpoint.claims == {}


async def test_a_plugin_deregistered_during_a_call_fails_the_call_and_leaves_its_caller_running() -> None:
    async with node() as n, driver(n) as slow:
        slow.node.behaviour.delay = 5.0
        claim = make_claim("c", (FAKE, "dev-c"))
        call = asyncio.create_task(n.manager.prepare_resources(make_pod("p", claim), by_name(claim)))
        await slow.node.call_started.wait()
        # Its channel closes under the call (the registration socket went away).
        await n.store.deregister(FAKE, n.store.get(FAKE).endpoint)
        with pytest.raises(PrepareError) as failure:
            await call
        assert str(failure.value) == (
            "prepare dynamic resources: NodePrepareResources: rpc error: code = Canceled desc = grpc: the client connection is closing"
        )
        assert not call.cancelled() and not any(info.prepared for info in n.manager.checkpoint.claims.values())


async def test_device_health_reaches_the_container_status_and_clears() -> None:
    async with node() as n, driver(n, health=True) as fake:
        assert fake.health is not None
        claim = make_claim("c", (FAKE, "dev-c"))
        pod = make_pod("p", claim)
        await n.manager.prepare_resources(pod, by_name(claim))
        cdi = f"{FAKE}/device=dev-c-{claim['metadata']['uid'][:8]}"
        statuses = [{"name": "main", "ready": True}, {"name": "plain", "ready": True}]
        assert n.manager.allocated_resources_status(pod, statuses)[0]["allocatedResourcesStatus"] == [
            {"name": "claim:pc-c", "resources": [{"resourceID": cdi, "health": "Unknown"}]}
        ]
        await eventually(lambda: fake.health is not None and fake.health.watchers > 0)
        await fake.health.updates.put([("n0", "dev-c", health_v1.UNHEALTHY)])
        await eventually(lambda: (FAKE, {pod["metadata"]["uid"]}) in n.changes)
        main, plain = n.manager.allocated_resources_status(pod, statuses)
        assert main["allocatedResourcesStatus"] == [{"name": "claim:pc-c", "resources": [{"resourceID": cdi, "health": "Unhealthy"}]}]
        assert "allocatedResourcesStatus" not in plain
        n.changes.clear()
        await fake.health.updates.put([("n0", "dev-c", health_v1.HEALTHY)])
        await eventually(lambda: bool(n.changes))
        assert n.manager.allocated_resources_status(pod, statuses)[0]["allocatedResourcesStatus"][0]["resources"][0]["health"] == "Healthy"


async def test_pod_resources_lists_dra_devices_per_container() -> None:
    async with node() as n, driver(n):
        claim = make_claim("c", (FAKE, "dev-c"))
        pod = make_pod("p", claim)
        await n.manager.prepare_resources(pod, by_name(claim))
        server = PodResourcesServer(n.dirs.pod_resources_socket, lambda: [pod], n.manager.container_devices)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"unix:{n.dirs.pod_resources_socket}") as channel:
                lister = podresources_grpc.PodResourcesListerStub(channel)
                listed = await lister.List(podresources.ListPodResourcesRequest())
                got = await lister.Get(podresources.GetPodResourcesRequest(pod_name="p", pod_namespace="ns"))
                allocatable = await lister.GetAllocatableResources(podresources.AllocatableResourcesRequest())
                with pytest.raises(grpc.aio.AioRpcError) as missing:
                    await lister.Get(podresources.GetPodResourcesRequest(pod_name="gone", pod_namespace="ns"))
        finally:
            await server.stop()
        expected = podresources.PodResources(name="p", namespace="ns")
        main = expected.containers.add(name="main")
        expected.containers.add(name="plain")
        resource = main.dynamic_resources.add(claim_name="c", claim_namespace="ns").claim_resources.add(
            driver_name=FAKE, pool_name="n0", device_name="dev-c"
        )
        resource.cdi_devices.add(name=f"{FAKE}/device=dev-c-{claim['metadata']['uid'][:8]}")
        assert list(listed.pod_resources) == [expected]
        assert got.pod_resources == expected
        assert allocatable == podresources.AllocatableResourcesResponse()
        assert (missing.value.code(), missing.value.details()) == (grpc.StatusCode.UNKNOWN, "pod gone in namespace ns not found")


def test_a_corrupted_checkpoint_is_not_trusted(tmp_path) -> None:
    checkpoint = Checkpoint(tmp_path / "dra_manager_state")
    checkpoint.load()
    assert checkpoint.claims == {}
    checkpoint.save()
    assert checkpoint.path is not None
    text = checkpoint.path.read_text()
    checkpoint.path.write_text(text.replace('"claims": []', '"claims": [{"uid": "u", "name": "n", "namespace": "ns"}]'))
    with pytest.raises(CorruptCheckpoint, match="checksum mismatch"):
        Checkpoint(checkpoint.path).load()


async def test_extended_resource_devices_reach_the_containers_they_are_mapped_to() -> None:
    async with node() as n, driver(n) as fake:
        name = "p-extended-resources-ab12c"
        claim = make_claim(name, (FAKE, f"dev-{name}"))  # the fake driver prepares request "req"
        pod: dict[str, Any] = {
            "metadata": {"name": "p", "namespace": "ns", "uid": str(uuid.uuid4())},
            "spec": {"containers": [{"name": "mapped"}, {"name": "other-request"}, {"name": "none"}]},
            "status": {"extendedResourceClaimStatus": {"resourceClaimName": name, "requestMappings": [
                {"containerName": "mapped", "resourceName": "example.com/gpu", "requestName": "req"},
                {"containerName": "other-request", "resourceName": "example.com/gpu", "requestName": "container-1-request-0"},
            ]}},
        }  # fmt: skip
        await n.manager.prepare_resources(pod, by_name(claim))
        assert fake.node.prepare_calls == [[("ns", name, claim["metadata"]["uid"])]]
        mapped, other, none = pod["spec"]["containers"]
        assert n.manager.cdi_devices(pod, mapped) == [f"{FAKE}/device=dev-{name}-{claim['metadata']['uid'][:8]}"]
        assert n.manager.cdi_devices(pod, other) == []
        assert n.manager.cdi_devices(pod, none) == []
