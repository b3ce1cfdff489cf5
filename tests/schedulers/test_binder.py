"""The binder with the DynamicResources plugin's binding cycle: which requests they send to bind
a pod, how they undo a failed binding, what the plugin's PostFilter frees, and how pods no node
fits are reported. The API server is an in-memory fake behind the client's
transport that records every request; the cache is fed in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from fractions import Fraction
from typing import Any

import httpx
import orjson
import pytest

from kube.client import KubeClient
from kube.objects import Obj
from schedulers.binder import Binder
from schedulers.cycle import Placement, ScheduleFailure, SchedulingCycle
from schedulers.plugins.dynamicresources import DynamicResources
from schedulers.plugins.dynamicresources_binding import DELETE_PROTECTION_FINALIZER, REASON_DEALLOCATED
from tests.schedulers.cluster import DRIVER, NS, Cluster, allocation, claim, pod, reserved_for

CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
PODS = f"/api/v1/namespaces/{NS}/pods"
EVENTS = f"/api/v1/namespaces/{NS}/events"


class FakeApi:
    """Stores claims by path, checks resourceVersions on PUT, and records every request."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.fail: dict[tuple[str, str], int] = {}  # (method, path) -> status to answer once
        self.hold_binding: asyncio.Event | None = None  # set: bindings wait for it
        self._version = 1000

    def written(self) -> list[tuple[str, str]]:
        """The writes so far (events left out), as (method, path)."""
        return [(m, p) for m, p, _ in self.requests if m != "GET" and p != EVENTS]

    def bodies(self, method: str, path: str) -> list[Any]:
        return [b for m, p, b in self.requests if (m, p) == (method, path)]

    def events(self) -> list[tuple[str, str]]:
        return [(b["reason"], b["message"]) for m, p, b in self.requests if p == EVENTS]

    async def handle(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        body: Any = orjson.loads(request.content) if request.content else None
        self.requests.append((method, path, body))
        status = self.fail.pop((method, path), None)
        if status is not None:
            return httpx.Response(status, json={"kind": "Status", "code": status, "message": "injected"})
        if path.endswith("/binding") and self.hold_binding is not None:
            await self.hold_binding.wait()
        stored_path = path.removesuffix("/status")
        if method == "GET":
            stored = self.objects.get(stored_path)
            return httpx.Response(200, json=stored) if stored else httpx.Response(404, json={"kind": "Status", "code": 404})
        if method == "PUT":
            stored = self.objects[stored_path]
            if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
                return httpx.Response(409, json={"kind": "Status", "code": 409, "reason": "Conflict"})
            self._version += 1
            body["metadata"]["resourceVersion"] = str(self._version)
            self.objects[stored_path] = body
            return httpx.Response(200, json=body)
        return httpx.Response(201 if method == "POST" else 200, json=body)


class World:
    def __init__(self) -> None:
        self.api = FakeApi()
        self.client = KubeClient("http://fake", user_agent="test", transport=httpx.MockTransport(self.api.handle))
        self.cluster = Cluster(self.client)
        self.cache = self.cluster.cache
        self.queue = self.cluster.queue
        self.binder = Binder(self.client, self.cache, self.queue)

    async def claim(self, obj: Obj) -> Obj:
        """A claim the server and the cache's informer both hold."""
        obj = await self.cluster.put(self.cache.claims, obj)
        self.api.objects[f"{CLAIMS}/{obj['metadata']['name']}"] = obj
        return obj

    async def popped(self, obj: Obj) -> Obj:
        """A pending pod, popped from the queue as the scheduler's loop would."""
        obj = await self.cluster.put(self.cache.pods, obj)
        assert await self.queue.pop() == (NS, obj["metadata"]["name"])
        return obj

    def placement(self, p: Obj) -> Placement:
        result = SchedulingCycle(self.cache).schedule(p)
        assert isinstance(result, Placement), result
        return result

    def server_claim(self, name: str) -> Obj:
        return self.api.objects[f"{CLAIMS}/{name}"]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.binder.cancel()
    await w.client.close()


async def test_a_new_allocation_is_written_then_the_pod_is_bound(world: World) -> None:
    """The finalizer first, then the allocation (upstream's bindClaim): no watcher ever sees the
    claim allocated without the finalizer (upstream's e2e claim informer fails on that)."""
    await world.cluster.topology({"n1": 2})
    await world.claim(claim("c"))
    p = await world.popped(pod("p", claims=["c"]))
    world.binder.reserve(p, world.placement(p))
    # Until the writes land, the pod and its devices are taken in the cache.
    assert world.cache.is_binding((NS, "p")) and world.cache.allocating_pod("uid-c") == "uid-p"
    assert world.cache.allocated_state().devices == {(DRIVER, "n1", "dev-0")}
    await world.binder.wait()
    assert world.api.written() == [("PUT", f"{CLAIMS}/c"), ("PUT", f"{CLAIMS}/c/status"), ("POST", f"{PODS}/p/binding")]
    [protected] = world.api.bodies("PUT", f"{CLAIMS}/c")
    assert protected["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER] and "allocation" not in protected.get("status", {})
    assert world.api.bodies("PUT", f"{CLAIMS}/c/status")[0]["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    status = world.api.bodies("PUT", f"{CLAIMS}/c/status")[0]["status"]
    assert status["reservedFor"] == reserved_for(p)
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["dev-0"]
    assert world.server_claim("c")["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    binding = world.api.bodies("POST", f"{PODS}/p/binding")[0]
    assert binding["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    assert world.api.events() == [("Scheduled", f"Successfully assigned {NS}/p to n1")]
    # The written claim counts at once, before the informer sees it.
    assert not world.cache.is_binding((NS, "p")) and world.cache.allocating_pod("uid-c") is None
    cached = world.cache.claim(NS, "c")
    assert cached is not None and cached["status"]["allocation"] == status["allocation"]
    assert world.queue.state((NS, "p")) is None and world.binder.stats.scheduled == 1


async def test_a_claim_allocated_before_only_gets_the_pod_added(world: World) -> None:
    await world.cluster.topology({"n1": 2})
    other = pod("q")
    await world.claim(claim("c", finalizers=[DELETE_PROTECTION_FINALIZER],
                            status={"allocation": allocation("n1", "dev-1"), "reservedFor": reserved_for(other)}))
    p = await world.popped(pod("p", claims=["c"]))
    world.binder.reserve(p, world.placement(p))
    await world.binder.wait()
    assert world.api.written() == [("PUT", f"{CLAIMS}/c/status"), ("POST", f"{PODS}/p/binding")]
    status = world.server_claim("c")["status"]
    # Upstream's PreBind stamps an allocation that has no allocationTimestamp yet (binding conditions on).
    assert status["reservedFor"] == reserved_for(other, p)
    assert status["allocation"] == {**allocation("n1", "dev-1"), "allocationTimestamp": status["allocation"]["allocationTimestamp"]}


async def test_a_conflict_rereads_the_claim_and_writes_again(world: World) -> None:
    await world.cluster.topology({"n1": 2})
    c = await world.claim(claim("c"))
    # Someone else changed the claim; the cache has not seen it yet.
    world.api.objects[f"{CLAIMS}/c"] = {**c, "metadata": {**c["metadata"], "labels": {"new": "yes"}, "resourceVersion": "999"}}
    p = await world.popped(pod("p", claims=["c"]))
    world.binder.reserve(p, world.placement(p))
    await world.binder.wait()
    assert [(m, path) for m, path, _ in world.api.requests if path != EVENTS] == [
        ("PUT", f"{CLAIMS}/c"), ("GET", f"{CLAIMS}/c"), ("PUT", f"{CLAIMS}/c"), ("PUT", f"{CLAIMS}/c/status"), ("POST", f"{PODS}/p/binding"),
    ]  # fmt: skip
    assert world.server_claim("c")["metadata"]["labels"] == {"new": "yes"}  # the other writer's change is kept
    assert world.binder.stats.scheduled == 1


async def test_a_failed_binding_frees_the_claim_and_retries_the_pod_after_a_backoff(world: World) -> None:
    await world.cluster.topology({"n1": 2})
    await world.claim(claim("c"))
    p = await world.popped(pod("p", claims=["c"], cpu="8"))
    world.api.fail[("POST", f"{PODS}/p/binding")] = 500
    world.binder.reserve(p, world.placement(p))
    await world.binder.wait()
    assert world.api.written()[-1] == ("PUT", f"{CLAIMS}/c/status")
    assert "allocation" not in world.server_claim("c")["status"] and "reservedFor" not in world.server_claim("c")["status"]
    # As upstream's: the finalizer stays until the claim controller removes it from a claim being deleted.
    assert world.server_claim("c")["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
    assert world.queue.state((NS, "p")) == "backoff" and world.binder.stats.bind_failures == 1
    # Nothing of the attempt is left in the cache: the node's cpu and the device are free again.
    node = world.cache.nodes.get("", "n1")
    assert node is not None and world.cache.insufficient("n1", node, {"cpu": Fraction(8)}) == []
    assert world.cache.allocated_state().devices == set() and not world.cache.is_binding((NS, "p"))


async def test_a_claim_allocated_elsewhere_meanwhile_stops_the_binding_before_any_write(world: World) -> None:
    await world.cluster.topology({"n1": 2})
    c = await world.claim(claim("c"))
    p = await world.popped(pod("p", claims=["c"]))
    world.binder.reserve(p, world.placement(p))
    # Before the binding task runs, the informer reports another scheduler's allocation.
    await world.claim({**c, "status": {"allocation": allocation("n1", "dev-1")}})
    await world.binder.wait()
    assert world.api.written() == []
    assert world.queue.state((NS, "p")) == "backoff" and world.binder.stats.bind_failures == 1


async def test_leadership_ending_mid_binding_undoes_the_reservation(world: World) -> None:
    await world.cluster.topology({"n1": 2})
    await world.claim(claim("c"))
    p = await world.popped(pod("p", claims=["c"]))
    world.api.hold_binding = asyncio.Event()
    world.binder.reserve(p, world.placement(p))
    while ("POST", f"{PODS}/p/binding") not in world.api.written():
        await asyncio.sleep(0.001)
    await world.binder.cancel()
    assert not world.cache.is_binding((NS, "p"))
    assert world.cache.allocating_pod("uid-c") is None


async def test_an_unschedulable_pod_gets_a_condition_and_an_event_per_new_message(world: World) -> None:
    p = await world.popped(pod("p"))
    world.binder.unschedulable(p, "first")
    await world.binder.wait()
    assert world.queue.state((NS, "p")) == "unschedulable"
    [patch] = world.api.bodies("PATCH", f"{PODS}/p/status")
    [condition] = patch["status"]["conditions"]
    assert {k: condition[k] for k in ("type", "status", "reason", "message")} == {
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "first",
    }  # fmt: skip
    for message, reason in (("first", "Unschedulable"), ("second", "SchedulerError")):
        world.queue.add((NS, "p"))
        await world.queue.pop()
        world.binder.unschedulable(p, message, reason)
        await world.binder.wait()
    assert world.api.events() == [("FailedScheduling", "first"), ("FailedScheduling", "second")]
    assert world.api.bodies("PATCH", f"{PODS}/p/status")[-1]["status"]["conditions"][0]["reason"] == "SchedulerError"
    world.binder.forget_reports(p)  # the pod was deleted; one of the same name is reported afresh
    world.binder.unschedulable(p, "second")
    await world.binder.wait()
    assert world.api.events()[-1] == ("FailedScheduling", "second") and len(world.api.events()) == 3
    assert world.binder.stats.unschedulable == 4


async def test_stale_allocations_are_freed_only_when_they_serve_no_other_pod(world: World) -> None:
    p, q = pod("p"), pod("q")
    only_p = await world.claim(claim("only-p", status={"allocation": allocation("n1", "dev-0"), "reservedFor": reserved_for(p)}))
    shared = await world.claim(claim("shared", status={"allocation": allocation("n1", "dev-1"), "reservedFor": reserved_for(p, q)}))
    plugin = DynamicResources(world.cache)
    assert plugin.post_filter(p, ScheduleFailure("m", pinning_claims=[shared])) == (None, None)
    status, writes = plugin.post_filter(p, ScheduleFailure("m", pinning_claims=[only_p, shared]))
    assert status is not None and status.message == REASON_DEALLOCATED and writes is not None
    world.binder.spawn(writes)
    await world.binder.wait()
    assert world.api.written() == [("PUT", f"{CLAIMS}/only-p/status")]
    assert world.server_claim("only-p")["status"] == {}
    cached = world.cache.claim(NS, "only-p")
    assert cached is not None and cached["status"] == {}
