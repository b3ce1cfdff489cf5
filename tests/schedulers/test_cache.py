"""The scheduler's cache on its own: which informer events queue or wake pods, what nodes' pods
use, and which version of a claim (informed, assumed, in flight) counts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from fractions import Fraction
from typing import Any

import pytest

from schedulers.cache import SchedulerCache
from tests.schedulers.cluster import DRIVER, NS, Cluster, allocation, claim, node, node_slice, pod

HALF_CPU = {"cpu": Fraction(1, 2)}


async def parked(cluster: Cluster, name: str) -> tuple[str, str]:
    """Queue a pending pod, take it out as the cycle would, and park it as unschedulable."""
    await cluster.put(cluster.cache.pods, pod(name))
    key = await cluster.queue.pop()
    cluster.queue.unschedulable(key)
    return key


def fit(cache: SchedulerCache, node_name: str, requests: dict[str, Fraction] = HALF_CPU) -> list[str]:
    node_obj = cache.nodes.get("", node_name)
    assert node_obj is not None
    return cache.insufficient(node_name, node_obj, requests)


async def test_pending_pods_of_this_scheduler_are_queued() -> None:
    cluster = Cluster()
    pods = cluster.cache.pods
    await cluster.put(pods, pod("mine"))
    await cluster.put(pods, pod("other", schedulerName="other-scheduler"))
    await cluster.put(pods, pod("gated", schedulingGates=[{"name": "wait"}]))
    await cluster.put(pods, pod("bound", nodeName="n1"))
    states = {name: cluster.queue.state((NS, name)) for name in ("mine", "other", "gated", "bound")}
    assert states == {"mine": "active", "other": None, "gated": None, "bound": None}
    await cluster.put(pods, pod("gated"))  # the gate is removed
    assert cluster.queue.state((NS, "gated")) == "active"
    await cluster.put(pods, {**pod("mine"), "metadata": {**pod("mine")["metadata"], "deletionTimestamp": "2030-01-01T00:00:00Z"}})
    assert cluster.queue.state((NS, "mine")) is None


async def test_bound_pods_use_their_node_until_they_finish() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.put(cache.nodes, node("n1", cpu="1", pods="2"))
    assert fit(cache, "n1") == []
    first = await cluster.put(cache.pods, pod("first", cpu="600m", nodeName="n1"))
    assert fit(cache, "n1") == ["Insufficient cpu"]
    await cluster.put(cache.pods, pod("second", cpu="0", nodeName="n1"))
    assert fit(cache, "n1") == ["Too many pods", "Insufficient cpu"]
    waiting = await parked(cluster, "waiting")
    await cluster.put(cache.pods, {**first, "status": {"phase": "Succeeded"}})
    assert fit(cache, "n1", {"cpu": Fraction(1)}) == []
    assert cluster.queue.state(waiting) == "backoff"  # a finished pod may make room
    third = await cluster.put(cache.pods, pod("third", cpu="600m", nodeName="n1"))
    assert fit(cache, "n1") == ["Too many pods", "Insufficient cpu"]
    await cluster.delete(cache.pods, third)
    assert fit(cache, "n1") == []


async def test_a_pod_being_bound_counts_on_its_node_and_is_left_to_its_binding() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.put(cache.nodes, node("n1", cpu="1"))
    pending = await cluster.put(cache.pods, pod("p"))
    key = await cluster.queue.pop()
    cache.assume_pod(pending, "n1", {"cpu": Fraction(1)})
    cluster.queue.done(key)
    assert cache.is_binding(key) and fit(cache, "n1") == ["Insufficient cpu"]
    await cluster.put(cache.pods, {**pending, "metadata": {**pending["metadata"], "labels": {"changed": "yes"}}})
    assert cluster.queue.state(key) is None  # the binding's outcome decides, not the update
    cache.forget_pod(pending)  # the binding failed
    assert not cache.is_binding(key) and fit(cache, "n1") == []
    cache.assume_pod(pending, "n1", {"cpu": Fraction(1)})
    cache.finish_binding(pending)  # it succeeded: the pod keeps its share until it is seen bound
    assert not cache.is_binding(key) and fit(cache, "n1") == ["Insufficient cpu"]
    await cluster.put(cache.pods, {**pending, "spec": {**pending["spec"], "nodeName": "n1"}})
    assert fit(cache, "n1") == ["Insufficient cpu"]  # charged once, not twice
    assert fit(cache, "n1", {"cpu": Fraction(0)}) == []


async def test_only_relevant_pod_changes_requeue_an_unschedulable_pod() -> None:
    cluster = Cluster()
    key = await parked(cluster, "p")
    current = cluster.cache.pods.get(*key)
    assert current is not None
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    current = await cluster.put(cluster.cache.pods, {**current, "status": {"conditions": [condition]}})
    assert cluster.queue.state(key) == "unschedulable"  # the scheduler's own condition write
    await cluster.put(cluster.cache.pods, {**current, "metadata": {**current["metadata"], "labels": {"tier": "gpu"}}})
    assert cluster.queue.state(key) == "active"


def _with(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], **spec}}


EVENTS: dict[str, tuple[Callable[[Cluster], Awaitable[object]], bool]] = {
    "node added": (lambda c: c.put(c.cache.nodes, node("n2")), True),
    "node tainted": (lambda c: c.put(c.cache.nodes, _with(node("n1"), taints=[{"key": "k", "effect": "NoSchedule"}])), True),
    "node cordoned": (lambda c: c.put(c.cache.nodes, _with(node("n1"), unschedulable=True)), True),
    "node relabelled": (lambda c: c.put(c.cache.nodes, node("n1", labels={"zone": "b"})), True),
    "node allocatable changed": (lambda c: c.put(c.cache.nodes, node("n1", cpu="16")), True),
    "node heartbeat": (lambda c: c.put(c.cache.nodes, {**node("n1"), "status": {**node("n1")["status"], "conditions": [{"type": "Ready"}]}}), False),
    "node deleted": (lambda c: c.delete(c.cache.nodes, node("n1")), False),
    "slice added": (lambda c: c.put(c.cache.slices, node_slice("n1", 2)), True),
    "class added": (lambda c: c.put(c.cache.classes, {"metadata": {"name": "fpga"}, "spec": {}}), True),
    "taint rule added": (lambda c: c.put(c.cache.taint_rules, {"metadata": {"name": "r"}, "spec": {"deviceSelector": {}}}), True),
    "namespace labelled": (lambda c: c.put(c.cache.namespaces, {"metadata": {"name": NS, "labels": {"admin": "yes"}}}), True),
    "unallocated claim added": (lambda c: c.put(c.cache.claims, claim("c")), False),
}


@pytest.mark.parametrize(("event", "moves"), [(e, m) for e, (_, m) in EVENTS.items()], ids=list(EVENTS))
async def test_cluster_events_that_may_make_room_move_unschedulable_pods(event: str, moves: bool) -> None:
    cluster = Cluster()
    await cluster.put(cluster.cache.nodes, node("n1"))
    await cluster.put(cluster.cache.namespaces, {"metadata": {"name": NS}})
    key = await parked(cluster, "p")
    await EVENTS[event][0](cluster)
    assert cluster.queue.state(key) == ("backoff" if moves else "unschedulable")


async def test_a_pod_leaving_its_node_moves_only_pods_that_its_resources_or_terms_may_help() -> None:
    """Upstream's AssignedPod Delete event concerns NodeResourcesFit, NodePorts, InterPodAffinity
    and PodTopologySpread, not DynamicResources: a pod no node's devices fit waits for the claim
    events that free them (an attempt before them fails and lengthens its backoff)."""
    cluster = Cluster()
    cache = cluster.cache
    await cluster.put(cache.nodes, node("n1"))
    leaving = [await cluster.put(cache.pods, pod(f"bound-{i}", cpu="100m", nodeName="n1")) for i in range(2)]
    parked_by: dict[str, tuple[str, str]] = {}
    for name, plugins in (("by-dra", ["DynamicResources"]), ("by-fit", ["NodeResourcesFit"]), ("preemptor", [])):
        await cluster.put(cache.pods, pod(name))
        key = await cluster.queue.pop()
        cluster.queue.unschedulable(key, plugins)
        parked_by[name] = key
    await cluster.delete(cache.pods, leaving[0])
    states = {name: cluster.queue.state(key) for name, key in parked_by.items()}
    assert states == {"by-dra": "unschedulable", "by-fit": "backoff", "preemptor": "backoff"}
    for name in ("by-fit", "preemptor"):
        cluster.queue.unschedulable(parked_by[name], ["NodeResourcesFit"] if name == "by-fit" else [])
    await cluster.put(cache.pods, {**leaving[1], "status": {"phase": "Succeeded"}})  # finished: leaves too
    states = {name: cluster.queue.state(key) for name, key in parked_by.items()}
    assert states == {"by-dra": "unschedulable", "by-fit": "backoff", "preemptor": "backoff"}


async def test_node_names_are_sorted_and_follow_the_informer() -> None:
    cluster = Cluster()
    for name in ("n3", "n1", "n2"):
        await cluster.put(cluster.cache.nodes, node(name))
    assert cluster.cache.node_names() == ["n1", "n2", "n3"]
    await cluster.delete(cluster.cache.nodes, node("n2"))
    assert cluster.cache.node_names() == ["n1", "n3"]


async def test_namespace_labels_come_from_the_informer() -> None:
    cluster = Cluster()
    await cluster.put(cluster.cache.namespaces, {"metadata": {"name": "a", "labels": {"x": "1"}}})
    await cluster.put(cluster.cache.namespaces, {"metadata": {"name": "b"}})
    labels = cluster.cache.namespace_labels
    assert dict(labels) == {"a": {"x": "1"}, "b": {}}
    assert "c" not in labels


async def test_a_written_claim_counts_until_the_informer_has_caught_up() -> None:
    cluster = Cluster()
    cache = cluster.cache
    informed = await cluster.put(cache.claims, claim("c"))
    assert cache.claim(NS, "c") == informed
    written = {**informed, "metadata": {**informed["metadata"], "resourceVersion": "10"}, "status": {"allocation": allocation("n1", "dev-0")}}
    cache.assume_claim(written)
    assert cache.claim(NS, "c") == written
    assert (DRIVER, "n1", "dev-0") in cache.allocated_state().devices
    # An older event (written before ours) does not replace what we wrote.
    await cache.claims.apply({"type": "MODIFIED", "object": {**informed, "metadata": {**informed["metadata"], "resourceVersion": "5"}}})
    assert cache.claim(NS, "c") == written
    caught_up = {**written, "metadata": {**written["metadata"], "resourceVersion": "11"}, "status": {}}
    await cache.claims.apply({"type": "MODIFIED", "object": caught_up})
    assert cache.claim(NS, "c") == caught_up
    assert (DRIVER, "n1", "dev-0") not in cache.allocated_state().devices
    stale = {**written, "metadata": {**written["metadata"], "resourceVersion": "9"}}
    cache.assume_claim(stale)  # a write answered after a newer event: the event stays
    assert cache.claim(NS, "c") == caught_up


async def test_in_flight_allocations_take_devices_and_belong_to_one_pod() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.put(cache.claims, claim("a", status={"allocation": allocation("n1", "dev-0")}))
    b = await cluster.put(cache.claims, claim("b"))
    assert cache.allocated_state().devices == {(DRIVER, "n1", "dev-0")}
    cache.assume_allocation(b, allocation("n1", "dev-1"), "uid-pod")
    assert cache.allocated_state().devices == {(DRIVER, "n1", "dev-0"), (DRIVER, "n1", "dev-1")}
    assert cache.allocating_pod("uid-b") == "uid-pod"
    # A pod waiting for the claim wakes when the allocation is given up.
    await cluster.put(cache.pods, pod("waiter", claims=["b"]))
    waiter = await cluster.queue.pop()
    cluster.queue.wait_for(waiter, [(NS, "b")])
    cache.forget_allocation(b, "uid-someone-else")
    assert cache.allocating_pod("uid-b") == "uid-pod" and cluster.queue.state(waiter) == "waiting"
    cache.forget_allocation(b, "uid-pod")
    assert cache.allocating_pod("uid-b") is None and cluster.queue.state(waiter) == "active"
    assert cache.allocated_state().devices == {(DRIVER, "n1", "dev-0")}
    await cluster.delete(cache.claims, claim("a", status={"allocation": allocation("n1", "dev-0")}))
    assert cache.allocated_state().devices == set()


async def test_the_stored_copy_of_an_allocation_keeps_the_device_state_and_its_caches() -> None:
    """The server stamps allocationTimestamp on the allocation it stores: the same devices, so the
    state (which every node's free list and cached search is keyed on) is not rebuilt per claim."""
    cluster = Cluster()
    cache = cluster.cache
    b = await cluster.put(cache.claims, claim("b"))
    cache.assume_allocation(b, allocation("n1", "dev-1"), "uid-pod")
    state = cache.allocated_state()
    stored = {**allocation("n1", "dev-1"), "allocationTimestamp": "2030-01-01T00:00:00Z"}
    cache.assume_claim({**b, "metadata": {**b["metadata"], "resourceVersion": "10"}, "status": {"allocation": stored}})
    assert cache.allocated_state() is state
    assert cache.effective_allocation("uid-b") == stored
    moved = {**b, "metadata": {**b["metadata"], "resourceVersion": "11"}, "status": {"allocation": allocation("n1", "dev-2")}}
    await cache.claims.apply({"type": "MODIFIED", "object": moved})
    assert cache.allocated_state().devices == {(DRIVER, "n1", "dev-2")}


async def test_claim_events_wake_pods_waiting_for_them_and_freed_devices_move_parked_pods() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.put(cache.pods, pod("waiter", claims=["c"]))
    waiter = await cluster.queue.pop()
    cluster.queue.wait_for(waiter, [(NS, "c")])
    blocked = await parked(cluster, "blocked")
    allocated = await cluster.put(cache.claims, claim("c", status={"allocation": allocation("n1", "dev-0")}))
    assert cluster.queue.state(waiter) == "active" and cluster.queue.state(blocked) == "unschedulable"
    await cluster.put(cache.claims, {**allocated, "status": {}})  # deallocated: its device is free
    assert cluster.queue.state(blocked) == "backoff"
