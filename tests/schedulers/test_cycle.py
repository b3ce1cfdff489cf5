"""The scheduling cycle on its own: which node a pod gets and why, read from a cache fed in memory.

The cycle only decides; nothing here is written or reserved, so each test can ask again.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from schedulers.cycle import Placement, ScheduleFailure, SchedulingCycle, WaitForClaims
from tests.schedulers.cluster import CLASS, DRIVER, NS, Cluster, allocation, claim, device_class, node, pod, reserved_for

PREEMPTION = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


def failure(n: int, *reasons: str) -> str:
    return f"0/{n} nodes are available: {', '.join(reasons)}. " + PREEMPTION.format(n=n)


def placed(result: object) -> Placement:
    assert isinstance(result, Placement), result
    return result


def failed(result: object) -> ScheduleFailure:
    assert isinstance(result, ScheduleFailure), result
    return result


def devices_of(placement: Placement) -> dict[str, list[tuple[str, str, str]]]:
    """Claim uid -> the (driver, pool, device) triples the cycle allocated."""
    return {
        uid: [(r["driver"], r["pool"], r["device"]) for r in alloc["devices"]["results"]]
        for uid, alloc in placement.allocations.items()
    }


async def test_a_claim_goes_to_the_node_it_fills_most() -> None:
    cluster = Cluster()
    await cluster.topology({"roomy": 4, "snug": 2, "none": 0})
    await cluster.put(cluster.cache.claims, claim("c"))
    p = await cluster.put(cluster.cache.pods, pod("p", claims=["c"]))
    placement = placed(SchedulingCycle(cluster.cache).schedule(p))
    assert placement.node == "snug"
    assert devices_of(placement) == {"uid-c": [(DRIVER, "snug", "dev-0")]}
    assert placement.allocations["uid-c"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["snug"]
    assert [c["metadata"]["name"] for c in placement.claims] == ["c"]
    assert placement.requests == {"cpu": Fraction(1, 10)} and placement.statuses == []
    assert cluster.cache.allocated_state().devices == set()  # deciding reserves nothing


async def test_pods_without_claims_go_to_the_node_with_fewest_pods() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 0, "b": 0, "c": 0})
    cycle = SchedulingCycle(cluster.cache)
    p = await cluster.put(cluster.cache.pods, pod("p"))
    assert placed(cycle.schedule(p)).node == "a"  # a tie goes to the first name
    await cluster.put(cluster.cache.pods, pod("on-a", nodeName="a"))
    await cluster.put(cluster.cache.pods, pod("on-b", nodeName="b"))
    assert placed(cycle.schedule(p)).node == "c"


async def test_each_node_counts_once_under_its_first_reason() -> None:
    cluster = Cluster()
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    await cluster.put(cluster.cache.nodes, node("elsewhere", labels={"zone": "y"}))
    await cluster.put(cluster.cache.nodes, node("tainted", labels={"zone": "x"}, taints=[taint]))
    await cluster.put(cluster.cache.nodes, node("small", labels={"zone": "x"}, cpu="50m"))
    await cluster.put(cluster.cache.nodes, node("cordoned", labels={"zone": "x"}, unschedulable=True, taints=[taint]))
    cycle = SchedulingCycle(cluster.cache)
    p = await cluster.put(cluster.cache.pods, pod("p", nodeSelector={"zone": "x"}))
    result = failed(cycle.schedule(p))
    assert result.reason == "Unschedulable" and result.pinning_claims == []
    assert result.message == failure(
        4, "1 Insufficient cpu", "1 node(s) didn't match Pod's node affinity/selector",
        "1 node(s) had untolerated taint {k: v}", "1 node(s) were unschedulable",
    )
    tolerant = await cluster.put(cluster.cache.pods, pod("t", nodeSelector={"zone": "x"}, tolerations=[{"key": "k", "operator": "Exists"}]))
    assert placed(cycle.schedule(tolerant)).node == "tainted"


async def test_a_node_that_fails_several_filters_counts_under_the_first_in_upstreams_order() -> None:
    """NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit, DynamicResources: a
    tainted node outside the pod's zone is a taint to upstream's scheduler, not a selector mismatch."""
    cluster = Cluster()
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    await cluster.put(cluster.cache.nodes, node("tainted-elsewhere", labels={"zone": "y"}, taints=[taint], cpu="50m"))
    await cluster.put(cluster.cache.nodes, node("small-elsewhere", labels={"zone": "y"}, cpu="50m"))
    p = await cluster.put(cluster.cache.pods, pod("p", nodeSelector={"zone": "x"}))
    assert failed(SchedulingCycle(cluster.cache).schedule(p)).message == failure(
        2, "1 node(s) didn't match Pod's node affinity/selector", "1 node(s) had untolerated taint {k: v}"
    )


async def test_a_node_short_of_several_resources_counts_under_each() -> None:
    """Upstream's NodeResourcesFit names every resource the node lacks, and FitError counts each."""
    cluster = Cluster()
    await cluster.put(cluster.cache.nodes, node("small", cpu="50m", pods="1"))
    await cluster.put(cluster.cache.nodes, node("roomy"))
    await cluster.put(cluster.cache.pods, pod("there", cpu="0", nodeName="small"))
    big = pod("big")
    big["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64Gi"
    p = await cluster.put(cluster.cache.pods, big)
    result = failed(SchedulingCycle(cluster.cache).schedule(p))
    assert result.message == failure(2, "1 Insufficient cpu", "1 Too many pods", "2 Insufficient memory")
    assert sorted(result.potential) == ["roomy", "small"]


async def test_devices_already_allocated_or_in_flight_are_not_handed_out() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.topology({"n1": 2})
    await cluster.put(cache.claims, claim("taken", status={"allocation": allocation("n1", "dev-0")}))
    flying = await cluster.put(cache.claims, claim("flying"))
    await cluster.put(cache.claims, claim("c"))
    p = await cluster.put(cache.pods, pod("p", claims=["c"]))
    cycle = SchedulingCycle(cache)
    assert devices_of(placed(cycle.schedule(p))) == {"uid-c": [(DRIVER, "n1", "dev-1")]}
    cache.assume_allocation(flying, allocation("n1", "dev-1"), "uid-other")
    result = failed(cycle.schedule(p))
    assert result.message == failure(1, "1 cannot allocate all claims")


async def test_a_pod_waits_for_claims_that_do_not_exist_yet_or_another_pod_is_allocating() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.topology({"n1": 2})
    cycle = SchedulingCycle(cache)
    p = await cluster.put(cache.pods, pod("p", claims=["c"]))
    assert cycle.schedule(p) == WaitForClaims([(NS, "c")], "waiting for resourceclaim 'c' to be created")
    c = await cluster.put(cache.claims, claim("c"))
    cache.assume_allocation(c, allocation("n1", "dev-0"), "uid-other")
    assert cycle.schedule(p) == WaitForClaims([(NS, "c")], f"resource claim {NS}/c is in the process of being allocated")
    cache.assume_allocation(c, allocation("n1", "dev-0"), "uid-p")  # its own allocation (a retry of this pod)
    assert not isinstance(cycle.schedule(p), WaitForClaims)


async def test_template_claims_wait_for_the_controller_and_must_belong_to_the_pod() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.topology({"n1": 2})
    cycle = SchedulingCycle(cache)
    spec_pod = pod("p")
    spec_pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    p = await cluster.put(cache.pods, spec_pod)
    result = cycle.schedule(p)
    assert isinstance(result, WaitForClaims) and result.why == "waiting for resource claim of entry gpu"
    p = await cluster.put(cache.pods, {**p, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}})
    await cluster.put(cache.claims, claim("p-gpu"))
    assert failed(cycle.schedule(p)).message == f"0/1 nodes are available: ResourceClaim {NS}/p-gpu was not created for pod p (pod is not owner). " + PREEMPTION.format(n=1)
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}]
    await cluster.put(cache.claims, claim("p-gpu", ownerReferences=owner))
    assert placed(cycle.schedule(p)).node == "n1"
    p = await cluster.put(cache.pods, {**p, "status": {"resourceClaimStatuses": [{"name": "gpu"}]}})  # no claim needed after all
    assert placed(cycle.schedule(p)).allocations == {}


async def test_a_claim_being_deleted_makes_the_pod_unschedulable() -> None:
    cluster = Cluster()
    await cluster.topology({"n1": 2})
    await cluster.put(cluster.cache.claims, claim("c", deletionTimestamp="2030-01-01T00:00:00Z"))
    p = await cluster.put(cluster.cache.pods, pod("p", claims=["c"]))
    result = failed(SchedulingCycle(cluster.cache).schedule(p))
    # A PreFilter rejection: upstream's FitError with the PreFilter's message, then what PostFilter says.
    assert result.message == '0/1 nodes are available: resourceclaim "c" is being deleted. ' + PREEMPTION.format(n=1)
    assert result.fit_message == '0/1 nodes are available: resourceclaim "c" is being deleted.' and result.potential == []


async def test_a_claim_whose_class_does_not_exist_is_unschedulable_until_the_class_appears() -> None:
    """Upstream's DynamicResources PreFilter: every class a request names must exist; until then
    the pod is Unschedulable (a DeviceClass event brings it back), not an error."""
    cluster = Cluster()
    await cluster.topology({"n1": 2, "n2": 2})
    await cluster.put(cluster.cache.claims, claim("c", device_class_name="later"))
    p = await cluster.put(cluster.cache.pods, pod("p", claims=["c"]))
    cycle = SchedulingCycle(cluster.cache)
    result = failed(cycle.schedule(p))
    assert result.reason == "Unschedulable"
    assert result.message == "0/2 nodes are available: request gpu: device class later does not exist. " + PREEMPTION.format(n=2)
    await cluster.put(cluster.cache.classes, device_class("later"))
    assert placed(cycle.schedule(p)).node in ("n1", "n2")


async def test_a_subrequest_names_its_missing_class_by_request_and_subrequest() -> None:
    cluster = Cluster()
    await cluster.topology({"n1": 2})
    body = claim("c")
    body["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": CLASS}, {"name": "small", "deviceClassName": "nowhere"}]}]
    await cluster.put(cluster.cache.claims, body)
    p = await cluster.put(cluster.cache.pods, pod("p", claims=["c"]))
    assert failed(SchedulingCycle(cluster.cache).schedule(p)).fit_message == "0/1 nodes are available: request gpu/small: device class nowhere does not exist."


async def test_no_nodes_at_all_is_said_once() -> None:
    """Upstream's ErrNoNodesAvailable: unresolvable, and no preemption text after it."""
    cluster = Cluster()
    p = await cluster.put(cluster.cache.pods, pod("p"))
    result = failed(SchedulingCycle(cluster.cache).schedule(p))
    assert (result.message, result.fit_message, result.reason) == ("no nodes available to schedule pods", "", "Unschedulable")


async def test_an_allocated_claim_pins_the_pod_to_its_node() -> None:
    cluster = Cluster()
    cache = cluster.cache
    await cluster.topology({"a": 2, "b": 2})
    p = await cluster.put(cache.pods, pod("p", claims=["c"]))
    c = await cluster.put(cache.claims, claim("c", status={"allocation": allocation("b", "dev-0"), "reservedFor": reserved_for(p)}))
    cycle = SchedulingCycle(cache)
    placement = placed(cycle.schedule(p))
    assert placement.node == "b" and placement.allocations == {}
    await cluster.put(cache.nodes, node("b", cpu="50m"))  # the pinned node no longer fits
    result = failed(cycle.schedule(p))
    assert result.message == failure(2, "1 Insufficient cpu", "1 resourceclaim not available on the node")
    assert result.pinning_claims == [c]


async def test_a_broken_claim_is_a_scheduler_error() -> None:
    cluster = Cluster()
    await cluster.topology({"n1": 2})
    broken = claim("c")
    broken["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": "device.driver =="}}]
    await cluster.put(cluster.cache.claims, broken)
    p = await cluster.put(cluster.cache.pods, pod("p", claims=["c"]))
    result = failed(SchedulingCycle(cluster.cache).schedule(p))
    assert result.reason == "SchedulerError"
    assert result.message.startswith('running "DynamicResources" filter plugin: claim default/c: selector #0: CEL compile error')


async def test_the_search_stops_after_enough_feasible_nodes_and_the_next_one_starts_further_on() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 0, "b": 0, "c": 0})
    cycle = SchedulingCycle(cluster.cache, nodes_to_find=1)
    pods: list[Any] = [await cluster.put(cluster.cache.pods, pod(f"p{i}")) for i in range(4)]
    assert [placed(cycle.schedule(p)).node for p in pods] == ["a", "b", "c", "a"]
