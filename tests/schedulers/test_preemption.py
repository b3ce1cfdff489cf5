"""Preemption's decisions on their own: which node and which victims, or why none, read from a
cache fed in memory (the binder's writes are tested on the whole stack in test_scheduler_preemption)."""

from __future__ import annotations

from typing import Any

from kube.objects import Obj
from schedulers.allocator import AllocatorFeatures
from schedulers.cycle import Placement, ScheduleFailure, SchedulingCycle
from schedulers.preemption import NoPreemption, Preempt, Preemption
from tests.schedulers.cluster import DRIVER, Cluster, allocation, claim, device_class, pod, reserved_for


async def bound_with_devices(cluster: Cluster, name: str, node_name: str, priority: int, *devices: str, start: str = "2026-01-01T00:00:00Z") -> Obj:
    """A pod bound to ``node_name`` whose own claim holds ``devices`` there."""
    p = pod(name, claims=[f"{name}-claim"], nodeName=node_name, priority=priority)
    p["status"] = {"startTime": start}
    status = {"allocation": allocation(node_name, *devices), "reservedFor": reserved_for(p)}
    await cluster.put(cluster.cache.claims, claim(f"{name}-claim", count=len(devices), status=status))
    return await cluster.put(cluster.cache.pods, p)


async def decide(cluster: Cluster, preemptor: Obj) -> tuple[ScheduleFailure, Preempt | NoPreemption]:
    cycle = SchedulingCycle(cluster.cache)
    failure = cycle.schedule(preemptor)
    assert isinstance(failure, ScheduleFailure), failure
    return failure, Preemption(cycle).post_filter(preemptor, failure)


def victims(decision: object) -> list[str]:
    assert isinstance(decision, Preempt), decision
    return [v["metadata"]["name"] for v in decision.victims]


def devices(decision: Preempt) -> list[tuple[str, str, str]]:
    return [(r["driver"], r["pool"], r["device"]) for a in decision.nomination.allocations for r in a["devices"]["results"]]


async def preemptor(cluster: Cluster, name: str = "high", *, priority: int = 1000, count: int = 1, **spec: Any) -> Obj:
    await cluster.put(cluster.cache.claims, claim(f"{name}-claim", count=count))
    return await cluster.put(cluster.cache.pods, pod(name, claims=[f"{name}-claim"], priority=priority, **spec))


async def test_the_lowest_priority_holder_of_a_device_is_the_only_victim() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 2})
    await bound_with_devices(cluster, "mid", "n", 5, "dev-0")
    await bound_with_devices(cluster, "low", "n", 1, "dev-1")
    failure, decision = await decide(cluster, await preemptor(cluster))
    assert failure.potential == ["n"]
    assert victims(decision) == ["low"]
    assert isinstance(decision, Preempt)
    assert decision.nomination.node == "n" and decision.nomination.priority == 1000
    assert devices(decision) == [(DRIVER, "n", "dev-1")]  # the device the victim's claim frees
    assert decision.nomination.victim_claims == {"uid-low-claim"}
    # The preemptor's own FailedScheduling text is the filter's, without a preemption part.
    assert decision.message == "0/1 nodes are available: 1 cannot allocate all claims."


async def test_of_equal_priorities_the_most_recently_started_pod_goes() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 2})
    await bound_with_devices(cluster, "old", "n", 1, "dev-0", start="2026-01-01T00:00:00Z")
    await bound_with_devices(cluster, "new", "n", 1, "dev-1", start="2026-01-02T00:00:00Z")
    _, decision = await decide(cluster, await preemptor(cluster))
    assert victims(decision) == ["new"]


async def test_the_node_with_the_fewest_and_least_important_victims_is_chosen() -> None:
    cluster = Cluster()
    await cluster.topology({"two-pods": 2, "one-pod": 2, "important": 2})
    await bound_with_devices(cluster, "a1", "two-pods", 1, "dev-0")
    await bound_with_devices(cluster, "a2", "two-pods", 1, "dev-1")
    await bound_with_devices(cluster, "b", "one-pod", 1, "dev-0", "dev-1")
    await bound_with_devices(cluster, "c", "important", 500, "dev-0", "dev-1")
    _, decision = await decide(cluster, await preemptor(cluster, count=2))
    assert victims(decision) == ["b"]
    assert isinstance(decision, Preempt) and decision.nomination.node == "one-pod"


async def test_cpu_is_freed_as_well() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 0}, cpu="1")
    await cluster.put(cluster.cache.pods, pod("low", cpu="900m", nodeName="n", priority=0))
    high = await cluster.put(cluster.cache.pods, pod("high", cpu="500m", priority=10))
    failure, decision = await decide(cluster, high)
    assert failure.fit_message == "0/1 nodes are available: 1 Insufficient cpu."
    assert victims(decision) == ["low"]


async def test_equal_priority_never_preempts() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 1})
    await bound_with_devices(cluster, "peer", "n", 1000, "dev-0")
    _, decision = await decide(cluster, await preemptor(cluster))
    assert decision == NoPreemption(
        "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


async def test_preemption_policy_never() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 1})
    await bound_with_devices(cluster, "low", "n", 1, "dev-0")
    _, decision = await decide(cluster, await preemptor(cluster, preemptionPolicy="Never"))
    assert decision == NoPreemption("0/1 nodes are available: 1 cannot allocate all claims. preemption: not eligible due to preemptionPolicy=Never.")


async def sharing_one_device(**priorities: int) -> Cluster:
    """One node whose only device is held by one claim shared by pods of these names and priorities."""
    cluster = Cluster()
    await cluster.topology({"n": 1})
    pods = [pod(name, claims=["shared"], nodeName="n", priority=priority) for name, priority in priorities.items()]
    await cluster.put(cluster.cache.claims, claim("shared", status={"allocation": allocation("n", "dev-0"), "reservedFor": reserved_for(*pods)}))
    for p in pods:
        await cluster.put(cluster.cache.pods, p)
    return cluster


async def test_a_claim_shared_with_a_pod_that_stays_is_not_freed() -> None:
    cluster = await sharing_one_device(low=1, keeper=2000)
    _, decision = await decide(cluster, await preemptor(cluster))
    assert decision == NoPreemption(
        "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: 1 cannot allocate all claims."
    )


async def test_a_claim_shared_only_by_victims_is_freed_with_all_of_them() -> None:
    cluster = await sharing_one_device(first=1, second=2)
    _, decision = await decide(cluster, await preemptor(cluster))
    assert sorted(victims(decision)) == ["first", "second"]


async def test_a_claim_reserved_for_a_workload_is_never_freed() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 1})
    low = pod("low", claims=["held"], nodeName="n", priority=1)
    workload = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "uid-g"}
    await cluster.put(cluster.cache.claims, claim("held", status={"allocation": allocation("n", "dev-0"), "reservedFor": [workload]}))
    await cluster.put(cluster.cache.pods, low)
    _, decision = await decide(cluster, await preemptor(cluster))
    assert isinstance(decision, NoPreemption) and decision.message.endswith("preemption: 0/1 nodes are available: 1 cannot allocate all claims.")


async def test_without_dra_preemption_a_device_shortage_is_not_helped() -> None:
    cluster = Cluster(features=AllocatorFeatures(dra_preemption=False))
    await cluster.topology({"n": 1})
    await bound_with_devices(cluster, "low", "n", 1, "dev-0")
    failure, decision = await decide(cluster, await preemptor(cluster))
    assert failure.potential == []
    assert decision == NoPreemption(
        "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


async def test_a_nomination_keeps_its_devices_from_pods_of_no_higher_priority() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 2})
    await bound_with_devices(cluster, "low", "n", 1, "dev-0")
    high = await preemptor(cluster)
    cycle = SchedulingCycle(cluster.cache)
    assert isinstance(cycle.schedule(high), Placement)  # dev-1 is free
    await bound_with_devices(cluster, "mid", "n", 3, "dev-1")
    failure = cycle.schedule(high)
    assert isinstance(failure, ScheduleFailure)
    decision = Preemption(cycle).post_filter(high, failure)
    assert victims(decision) == ["low"]
    assert isinstance(decision, Preempt)
    cluster.cache.nominate(decision.nomination, high["metadata"]["uid"])
    # The victims are gone: the freed device is held for the preemptor ...
    await cluster.delete(cluster.cache.pods, {"metadata": {"name": "low", "namespace": "default", "uid": "uid-low"}})
    await cluster.put(cluster.cache.claims, claim("low-claim"))  # deallocated
    same = await preemptor(cluster, "same", priority=1000)
    assert isinstance(cycle.schedule(same), ScheduleFailure)
    # ... a pod of higher priority may still take it, and the preemptor itself gets it.
    higher = await preemptor(cluster, "higher", priority=1001)
    assert isinstance(cycle.schedule(higher), Placement)
    placement = cycle.schedule(high)
    assert isinstance(placement, Placement) and placement.node == "n"


async def test_a_victim_holding_extended_resources_frees_its_special_claim() -> None:
    cluster = Cluster()
    await cluster.topology({"n": 1})
    gpu = "example.com/gpu"
    klass = device_class()
    klass["spec"]["extendedResourceName"] = gpu
    await cluster.put(cluster.cache.classes, klass)
    low = pod("low", nodeName="n", priority=1)
    low["spec"]["containers"][0]["resources"]["requests"][gpu] = "1"
    low["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "low-extended-resources-x", "requestMappings": []}}
    special = claim("low-extended-resources-x", status={"allocation": allocation("n", "dev-0"), "reservedFor": reserved_for(low)},
                    annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
                    ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "low", "uid": "uid-low", "controller": True}])  # fmt: skip
    await cluster.put(cluster.cache.claims, special)
    await cluster.put(cluster.cache.pods, low)
    high = pod("high", priority=10)
    high["spec"]["containers"][0]["resources"]["requests"][gpu] = "1"
    _, decision = await decide(cluster, await cluster.put(cluster.cache.pods, high))
    assert victims(decision) == ["low"]
    assert isinstance(decision, Preempt)
    assert decision.nomination.victim_claims == {"uid-low-extended-resources-x"}
    assert devices(decision) == [(DRIVER, "n", "dev-0")]
