"""The explanation engine: every failure kind produces its message, over the allocator's own table
and over a cache fed in memory for whole pods (node filters, grouping, bounds, bad input)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kube.features import Gate
from schedulers import explain as ex
from schedulers.allocator import AllocatedState, AllocationError, Allocator, AllocatorFeatures, ResourceIndex, Unschedulable
from schedulers.cycle import SchedulingCycle
from schedulers.explain import DeviceExplainer, Explainer, ExplainLimits, Reason, device_users, selector_values
from tests.schedulers import cluster as c
from tests.schedulers.test_allocator import (
    ADMIN_NS,
    CASES,
    SHARED_DEV,
    TWO,
    Case,
    allocated_claim,
    claim,
    dclass,
    device,
    first_available,
    node,
    one_device_slice,
    part,
    partitionable_slices,
    req,
    result,
    rslice,
    sub,
    taint,
)


def explain_case(case: Case, timeout: float | None = None) -> list[Reason]:
    index = ResourceIndex(case.slices, case.classes, case.rules, case.features)
    state = AllocatedState.from_claims(case.allocated, case.in_flight)
    counter = itertools.count()
    allocator = Allocator(index, state, case.features, case.namespaces, lambda: f"share-{next(counter)}", timeout=timeout)
    users = device_users([*case.allocated, *case.in_flight.values()])
    return DeviceExplainer(allocator, users).explain(case.node, case.claims)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_allocator_case_is_explained(case: Case) -> None:
    """A case that allocates has nothing to explain; one that fails has at least one reason; a broken one raises like the allocator."""
    if isinstance(case.expect, str):
        with pytest.raises(AllocationError):
            explain_case(case)
        return
    reasons = explain_case(case)
    if isinstance(case.expect, Unschedulable):
        assert reasons, case.name
        # Each failure gets a specific cause, never only the allocator's generic "no combination".
        assert all(r.kind != ex.NO_COMBINATION for r in reasons), [r.text() for r in reasons]
    else:
        assert reasons == []


KIND_CASES: list[tuple[Case, str, str, list[str]]] = [
    (Case("no-devices", [claim()], [], []), ex.NO_DEVICE_OF_CLASS,
     "claim default/claim-0, request req-0: no device of class class-a on the node", ["the node has no published devices"]),
    (Case("other-driver-only", [claim()], [one_device_slice(driver="driver-b")], []), ex.NO_DEVICE_OF_CLASS,
     "claim default/claim-0, request req-0: no device of class class-a on the node",
     ["the node has 1 device of driver-b", 'class class-a selects `device.driver == "driver-a"`']),
    (Case("selector-false", [claim("claim-0", req(selectors=('device.capacity["driver-a"].memory.compareTo(quantity("80Gi")) >= 0',)))],
          [rslice("slice-1", [device("device-1", capacity={"memory": "40Gi"}), device("device-2", capacity={"memory": "40Gi"}),
                              device("device-3", capacity={"memory": "24Gi"})])], []),
     ex.SELECTOR_FALSE,
     'claim default/claim-0, request req-0: selector `device.capacity["driver-a"].memory.compareTo(quantity("80Gi")) >= 0` is false',
     ["2 devices (device-1, device-2) with memory=40Gi", "1 device (device-3) with memory=24Gi"]),
    (Case("taken", [claim()], [rslice("slice-1", TWO)], [],
          allocated=[allocated_claim("a", result("req-0")), allocated_claim("b", result("req-0", "device-2"))]),
     ex.DEVICES_TAKEN, "claim default/claim-0, request req-0: every class-a device is taken", ["device-1 by default/a; device-2 by default/b"]),
    (Case("taint", [claim()], [rslice("slice-1", [device("device-1", taints=[taint(value="yes")])])], []),
     ex.TAINT_NOT_TOLERATED, "claim default/claim-0, request req-0: device taint example.com/broken=yes:NoSchedule is not tolerated", ["device-1"]),
    (Case("capacity", [claim("claim-0", req(capacity={"requests": {"memory": "4Gi"}}))], [rslice("slice-1", [SHARED_DEV])], [],
          allocated=[allocated_claim("other", result("req-0", "shared-1", shareID="s", consumedCapacity={"memory": "8Gi"}))]),
     ex.CAPACITY_EXHAUSTED, "claim default/claim-0, request req-0: not enough memory left on the devices",
     ["shared-1: requests 4Gi memory, 2Gi of 10Gi left"]),
    (Case("capacity-policy", [claim("claim-0", req(capacity={"requests": {"memory": "5Gi"}}))],
          [rslice("slice-1", [device("shared-1", allowMultipleAllocations=True, capacity={"memory": {
              "value": "10Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "4Gi"}}}})])], []),
     ex.CAPACITY_EXHAUSTED, "claim default/claim-0, request req-0: not enough memory left on the devices",
     ["shared-1: request 5Gi memory is outside its request policy"]),
    (Case("capacity-exclusive", [claim("claim-0", req(capacity={"requests": {"memory": "2Gi"}}))],
          [rslice("slice-1", [device("device-1", capacity={"memory": "1Gi"})])], []),
     ex.CAPACITY_EXHAUSTED, "claim default/claim-0, request req-0: not enough memory left on the devices", ["device-1: requests 2Gi memory, has 1Gi"]),
    (Case("counters", [claim()], partitionable_slices([part("p1", "8Gi"), part("p2")]), [],
          allocated=[allocated_claim("other", result("req-0", "p1"))]),
     ex.COUNTERS_EXHAUSTED, "claim default/claim-0, request req-0: shared counters of the devices are used up by other devices",
     ["p2: gpu-0/memory needs 4Gi, 0 left"]),
    (Case("counters-together", [claim("claim-0", req(count=3))], partitionable_slices([part("p1"), part("p2"), part("p3")]), []),
     ex.COUNTERS_EXHAUSTED, "claim default/claim-0, request req-0: shared counters do not cover 3 devices together",
     ["p1, p2, p3 are free, their counters are not enough for 3"]),
    (Case("not-enough", [claim("claim-0", req(count=3))], [rslice("slice-1", TWO)], []),
     ex.NOT_ENOUGH_DEVICES, "claim default/claim-0, request req-0: needs 3 class-a devices", ["2 match on the node, 2 usable: device-1, device-2"]),
    (Case("match-attribute", [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "driver-a/model"}])],
          [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2", {"model": "B"})])], []),
     ex.CONSTRAINT_UNSATISFIABLE, "claim default/claim-0: matchAttribute driver-a/model: no value is shared by the 2 devices needed",
     ['requests req-0; candidates: device-1 ("A"), device-2 ("B")']),
    (Case("distinct-attribute", [claim("claim-0", req(count=2), constraints=[{"distinctAttribute": "driver-a/numa"}])],
          [rslice("slice-1", [device("device-1", {"numa": 0}), device("device-2", {"numa": 0})])], []),
     ex.CONSTRAINT_UNSATISFIABLE, "claim default/claim-0: distinctAttribute driver-a/numa: fewer different values than the 2 devices needed",
     ["requests req-0; candidates: device-1 (0), device-2 (0)"]),
    (Case("attribute-missing", [claim("claim-0", req(count=2), constraints=[{"matchAttribute": "driver-a/model"}])],
          [rslice("slice-1", [device("device-1", {"model": "A"}), device("device-2")])], []),
     ex.CONSTRAINT_UNSATISFIABLE, "claim default/claim-0, request req-0: devices lack the constrained attribute driver-a/model",
     ["device-2", "1 of 2 matching devices usable: device-1"]),
    (Case("compete", [claim("claim-0"), claim("claim-1")], [one_device_slice()], []),
     ex.REQUESTS_COMPETE, "the pod's requests need 2 devices together, fewer are free for them",
     ["needs: claim default/claim-0 request req-0 (1), claim default/claim-1 request req-0 (1)", "1 usable: device-1"]),
    (Case("alternatives", [claim("claim-0", first_available("req-0", sub("sub-0", count=2), sub("sub-1", "class-b")))],
          [one_device_slice()], [], classes=[dclass(), dclass("class-b", "driver-b")]),
     ex.NO_ALTERNATIVE, "claim default/claim-0, request req-0: none of the 2 alternatives fits (tried in order)",
     ["req-0/sub-0: needs 2 class-a devices", "req-0/sub-1: no device of class class-b on the node"]),
    (Case("admin", [claim("claim-0", req(adminAccess=True))], [one_device_slice()], [], namespaces={"default": {}}),
     ex.ADMIN_ACCESS_NOT_ALLOWED, "claim default/claim-0, request req-0: admin access is not allowed in namespace default",
     ['the namespace needs the label resource.kubernetes.io/admin-access="true"']),
    (Case("binding-conditions-off", [claim()], [rslice("slice-1", [device("device-1", bindingConditions=["a"], bindingFailureConditions=["f"])])],
          [], features=AllocatorFeatures(binding_conditions=False)),
     ex.BINDING_CONDITIONS_OFF,
     f"claim default/claim-0, request req-0: devices with binding conditions are not used ({Gate.DRADeviceBindingConditions} is off)", ["device-1"]),
    (Case("invalid-pool", [claim()], [one_device_slice(count=2), one_device_slice("slice-2", count=2)], []),
     ex.POOL_INVALID, "invalid resource pools on the node", ["driver-a/pool-1: duplicate device name device-1"]),
]


@pytest.mark.parametrize(("case", "kind", "message", "details"), KIND_CASES, ids=[k[0].name for k in KIND_CASES])
def test_each_failure_kind_has_its_message(case: Case, kind: str, message: str, details: list[str]) -> None:
    reasons = explain_case(case)
    found = [r for r in reasons if r.kind == kind]
    assert found, [r.text() for r in reasons]
    assert found[0].text() == message
    assert found[0].details == details


def test_every_kind_is_covered() -> None:
    kinds = {k for _, k, _, _ in KIND_CASES} | {ex.FILTER_TIMEOUT, ex.POOL_INCOMPLETE}
    device_kinds = {
        ex.NO_DEVICE_OF_CLASS, ex.SELECTOR_FALSE, ex.DEVICES_TAKEN, ex.TAINT_NOT_TOLERATED, ex.CAPACITY_EXHAUSTED, ex.COUNTERS_EXHAUSTED,
        ex.NOT_ENOUGH_DEVICES, ex.CONSTRAINT_UNSATISFIABLE, ex.REQUESTS_COMPETE, ex.NO_ALTERNATIVE, ex.ADMIN_ACCESS_NOT_ALLOWED,
        ex.FILTER_TIMEOUT, ex.POOL_INVALID, ex.POOL_INCOMPLETE, ex.BINDING_CONDITIONS_OFF,
    }  # fmt: skip
    assert device_kinds <= kinds


def test_prioritized_alternatives_keep_their_order_and_reasons() -> None:
    case = KIND_CASES[[k[0].name for k in KIND_CASES].index("alternatives")][0]
    (reason,) = explain_case(case)
    assert [(a.request, a.kind) for a in reason.alternatives] == [("req-0/sub-0", ex.NOT_ENOUGH_DEVICES), ("req-0/sub-1", ex.NO_DEVICE_OF_CLASS)]


def test_filter_timeout() -> None:
    # 40 devices, no two of one model: the search runs long enough to reach its first deadline check.
    devices = [device(f"device-{i}", {"model": f"m{i}"}) for i in range(40)]
    case = Case("timeout", [claim("claim-0", req(count=3), constraints=[{"matchAttribute": "driver-a/model"}])], [rslice("slice-1", devices)], [])
    (reason,) = explain_case(case, timeout=-1.0)
    assert reason.kind == ex.FILTER_TIMEOUT
    assert reason.text() == "the device search timed out after -1s (the scheduler's filter timeout)"


def test_incomplete_pool_is_named() -> None:
    reasons = explain_case(Case("incomplete", [claim()], [one_device_slice(count=2)], []))
    assert [r.kind for r in reasons] == [ex.NO_DEVICE_OF_CLASS, ex.POOL_INCOMPLETE]
    assert reasons[1].details == ["driver-a/pool-1: 1 device published so far"]


def test_selector_values_show_what_the_expression_reads() -> None:
    index = ResourceIndex([rslice("slice-1", [device("device-1", {"model": "A", "other.example/numa": 1}, capacity={"memory": "40Gi"})])])
    (dev,) = index.slice_devices("slice-1")
    assert selector_values('device.attributes["driver-a"].model == "B" && device.capacity["driver-a"].memory.isGreaterThan(quantity("1"))', dev) == (
        "model=A, memory=40Gi"
    )
    assert selector_values('device.attributes["other.example"]["numa"] == 0', dev) == "other.example/numa=1"
    assert selector_values('device.attributes["driver-a"].missing == 1', dev) == "missing=<none>"
    assert selector_values('device.driver == "x"', dev) == "driver=driver-a"


# --- whole pods against the scheduler's cache ------------------------------------------------------


async def fill(cluster: c.Cluster, pod: c.Obj, **slices: int) -> c.Obj:
    await cluster.topology(slices)
    return await cluster.put(cluster.cache.pods, pod)


def explainer(cluster: c.Cluster, **limits: Any) -> Explainer:
    return Explainer(cluster.cache, SchedulingCycle(cluster.cache), ExplainLimits(**limits))


async def test_nodes_are_grouped_by_their_reasons() -> None:
    cluster = c.Cluster()
    await cluster.topology({f"full-{i}": 1 for i in range(4)} | {"empty-0": 0, "empty-1": 0})
    for i in range(4):
        await cluster.put(cluster.cache.claims, c.claim(f"held-{i}", status={"allocation": c.allocation(f"full-{i}", "dev-0")}))
    await cluster.put(cluster.cache.claims, c.claim("mine"))
    pod = await cluster.put(cluster.cache.pods, c.pod("p", claims=["mine"]))
    out = explainer(cluster).explain(pod)
    assert out["state"] == ex.UNSCHEDULABLE
    assert [(g["count"], [r["message"] for r in g["reasons"]]) for g in out["groups"]] == [
        (4, ["claim default/mine, request gpu: every gpu device is taken"]),
        (2, ["claim default/mine, request gpu: no device of class gpu on the node"]),
    ]
    assert out["groups"][0]["nodes"] == ["full-0", "full-1", "full-2", "full-3"]
    # Each node's own holders: dev-0 of full-0 is not dev-0 of full-1.
    assert out["groups"][0]["reasons"][0]["details"] == [f"full-{i}: dev-0 by default/held-{i}" for i in range(4)]
    assert out["groups"][0]["reasons"][0]["devices"] == [f"gpu.example.com/full-{i}/dev-0" for i in range(4)]
    assert out["message"].startswith("0/6 nodes fit. 4 nodes: claim default/mine, request gpu: every gpu device is taken. 2 nodes:")
    assert out["claims"] == [{"name": "default/mine", "entry": "mine", "allocated": False, "requests": [{"name": "gpu", "deviceClassName": "gpu", "count": 1}]}]


async def test_a_selector_that_fails_on_a_device_in_use_is_not_an_error() -> None:
    # As upstream's allocator, the scheduler asks no selector of a device in use (kube-scheduler:
    # "cannot allocate all claims"), so the explanation says the device is taken; a selector that
    # fails on a free device is the claim's error, for both.
    cluster = c.Cluster()
    await cluster.topology({"a": 2, "b": 1})
    await cluster.put(cluster.cache.claims, c.claim("held", count=2, status={"allocation": c.allocation("a", "dev-0", "dev-1")}))
    mine = c.claim("mine")
    mine["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": 'device.attributes["x"].profile == "p"'}}]
    await cluster.put(cluster.cache.claims, mine)
    pod = await cluster.put(cluster.cache.pods, c.pod("p", claims=["mine"], nodeSelector={"kubernetes.io/hostname": "a"}))
    await cluster.put(cluster.cache.nodes, c.node("a", labels={"kubernetes.io/hostname": "a"}))
    out = explainer(cluster).explain(pod)
    assert out["state"] == ex.UNSCHEDULABLE
    assert next(r["message"] for g in out["groups"] if g["nodes"] == ["a"] for r in g["reasons"]) == "claim default/mine, request gpu: every gpu device is taken"
    await cluster.delete(cluster.cache.claims, await cluster.put(cluster.cache.claims, c.claim("held")))
    out = explainer(cluster).explain(pod)
    assert out["state"] == ex.ERROR and "CEL runtime error: no such key: profile" in out["message"]


async def test_node_filters_all_show() -> None:
    cluster = c.Cluster()
    await cluster.put(cluster.cache.classes, c.device_class())
    await cluster.put(cluster.cache.nodes, c.node("tainted", cpu="1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    await cluster.put(cluster.cache.nodes, c.node("other", labels={"zone": "b"}))
    pod = await cluster.put(cluster.cache.pods, c.pod("p", cpu="2", nodeSelector={"zone": "a"}))
    out = explainer(cluster).explain(pod)
    by_node = {g["nodes"][0]: [(r["kind"], r["message"], r.get("details")) for r in g["reasons"]] for g in out["groups"]}
    assert by_node == {
        "other": [(ex.NODE_SELECTOR, "node(s) didn't match Pod's node affinity/selector", ["nodeSelector zone=a: the node has b"])],
        "tainted": [  # in the scheduler's (upstream's) filter order
            (ex.NODE_TAINT, "node(s) had untolerated taint {k: v}", None),
            (ex.NODE_SELECTOR, "node(s) didn't match Pod's node affinity/selector", ["nodeSelector zone=a: the node has no such label"]),
            (ex.NODE_RESOURCES, "Insufficient cpu", ["requests 2 cpu, 1 of 1 free"]),
        ],
    }
    assert out["note"] == "the pod has no resource claims; only node filters apply"


async def test_a_pod_that_fits_says_where() -> None:
    cluster = c.Cluster()
    pod = await fill(cluster, c.pod("p"), a=0, b=0)
    out = explainer(cluster).explain(pod)
    assert out["state"] == ex.SCHEDULABLE
    assert out["nodes"] == {"total": 2, "examined": 2, "fit": 2, "fitting": ["a", "b"]}


async def test_claim_allocated_for_another_node() -> None:
    cluster = c.Cluster()
    await cluster.topology({"a": 1, "b": 1})
    await cluster.put(cluster.cache.claims, c.claim("held", status={"allocation": c.allocation("a", "dev-0")}))
    await cluster.put(cluster.cache.nodes, c.node("a", cpu="0"))
    pod = await cluster.put(cluster.cache.pods, c.pod("p", claims=["held"]))
    out = explainer(cluster).explain(pod)
    kinds = sorted((g["nodes"][0], r["kind"]) for g in out["groups"] for r in g["reasons"])
    assert kinds == [("a", ex.NODE_RESOURCES), ("b", ex.CLAIM_ON_OTHER_NODE)]
    assert out["claims"][0]["devices"] == ["gpu.example.com/a/dev-0"]


async def test_claims_of_hidden_namespaces_are_not_named() -> None:
    cluster = c.Cluster()
    await cluster.topology({"a": 1})
    held = c.claim("secret", status={"allocation": c.allocation("a", "dev-0")})
    held["metadata"]["namespace"] = "team-b"
    await cluster.put(cluster.cache.claims, held)
    await cluster.put(cluster.cache.claims, c.claim("mine"))
    pod = await cluster.put(cluster.cache.pods, c.pod("p", claims=["mine"]))
    out = explainer(cluster).explain(pod, can_see_namespace=lambda ns: ns == "default")
    assert out["groups"][0]["reasons"][0]["details"] == ["dev-0 by a claim in another namespace"]


async def test_groups_examples_and_time_are_bounded() -> None:
    cluster = c.Cluster()
    await cluster.put(cluster.cache.classes, c.device_class())
    for i in range(30):
        # A node selector mismatch is one group whatever the labels; taints of different keys are not.
        await cluster.put(cluster.cache.nodes, c.node(f"n{i:02}", labels={"zone": f"z{i}"}, taints=[{"key": f"t{i % 10}", "effect": "NoSchedule"}]))
    pod = await cluster.put(cluster.cache.pods, c.pod("p", nodeSelector={"zone": "none"}))
    out = explainer(cluster, groups=3, nodes_per_group=2).explain(pod)
    assert [g["count"] for g in out["groups"]] == [3, 3, 3] and out["moreGroups"] == {"groups": 7, "nodes": 21}
    assert out["groups"][0]["nodes"] == ["n00", "n10"]
    assert [r["kind"] for r in out["groups"][0]["reasons"]] == [ex.NODE_TAINT, ex.NODE_SELECTOR]
    slow = explainer(cluster, seconds=0.0).explain(pod)
    assert slow["nodes"]["examined"] == 0
    assert slow["groups"] == [{"count": 30, "nodes": [], "reasons": [{
        "kind": ex.NOT_EXAMINED, "message": "not examined: the explanation stops after 0s", "summary": "not examined: the explanation stops after 0s"}]}]


async def test_async_explanation_gives_the_loop_turns() -> None:
    cluster = c.Cluster()
    await cluster.topology({f"n{i}": 1 for i in range(50)})
    await cluster.put(cluster.cache.claims, c.claim("mine", count=2))
    pod = await cluster.put(cluster.cache.pods, c.pod("p", claims=["mine"]))
    out = await explainer(cluster).explain_async(pod, slice_seconds=0.0)
    assert out == explainer(cluster).explain(pod) | {"elapsedSeconds": out["elapsedSeconds"]}
    assert out["groups"][0]["count"] == 50


# --- bad input -------------------------------------------------------------------------------------


async def pod_state(cluster: c.Cluster, pod: c.Obj) -> tuple[str, str]:
    out = explainer(cluster).explain(await cluster.put(cluster.cache.pods, pod))
    return out["state"], out["message"]


async def test_bound_gated_and_foreign_pods() -> None:
    cluster = c.Cluster()
    await cluster.topology({"a": 1})
    assert await pod_state(cluster, c.pod("bound", nodeName="a")) == (ex.BOUND, "the pod is bound to node a")
    assert await pod_state(cluster, c.pod("gated", schedulingGates=[{"name": "wait"}])) == (
        ex.GATED, "the pod is not considered for scheduling until its scheduling gates are removed: wait")
    assert await pod_state(cluster, c.pod("other", schedulerName="custom")) == (
        ex.OTHER_SCHEDULER, "the pod asks for scheduler 'custom'; this is 'default-scheduler'")
    leaving = c.pod("leaving")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await pod_state(cluster, leaving) == (ex.TERMINATING, "the pod is being deleted")
    assert await pod_state(cluster, {**c.pod("done"), "status": {"phase": "Succeeded"}}) == (ex.FINISHED, "the pod has finished (Succeeded)")


async def test_missing_claim_and_missing_class_and_bad_cel() -> None:
    cluster = c.Cluster()
    await cluster.topology({"a": 1})
    assert await pod_state(cluster, c.pod("p1", claims=["nowhere"])) == (ex.WAITING_FOR_CLAIMS, "waiting for resourceclaim 'nowhere' to be created")
    await cluster.put(cluster.cache.claims, c.claim("classless", device_class_name="missing"))
    state, message = await pod_state(cluster, c.pod("p2", claims=["classless"]))
    assert (state, message) == (ex.UNSCHEDULABLE, "request gpu: device class missing does not exist")  # the scheduler's PreFilter
    broken = c.claim("broken")
    broken["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [{"cel": {"expression": "device.driver =="}}]
    await cluster.put(cluster.cache.claims, broken)
    state, message = await pod_state(cluster, c.pod("p3", claims=["broken"]))
    assert state == ex.ERROR and message.startswith("claim default/broken: selector #0: CEL compile error")


async def test_no_nodes() -> None:
    cluster = c.Cluster()
    assert await pod_state(cluster, c.pod("p")) == (ex.NO_NODES, "no nodes available to schedule pods")


def test_admin_access_case_uses_the_allocators_namespace_rule() -> None:
    # With the label the same claim allocates: the reason is the label, nothing else.
    case = Case("admin-ok", [claim("claim-0", req(adminAccess=True))], [one_device_slice()], [], namespaces=ADMIN_NS)
    assert explain_case(case) == []
    assert node()["metadata"]["name"] == "node-1"


def test_holders_name_the_pods_their_claims_are_reserved_for() -> None:
    held = allocated_claim("a", result("req-0"), result("req-0", "device-2"))
    held["status"]["reservedFor"] = [{"resource": "pods", "name": "trainer", "uid": "u1"}]
    assert device_users([held]) == {("driver-a", "pool-1", "device-1"): ["default/a (pod trainer)"], ("driver-a", "pool-1", "device-2"): ["default/a (pod trainer)"]}
    case = Case("held", [claim()], [rslice("slice-1", TWO)], [], allocated=[held])
    (reason,) = explain_case(case)
    assert reason.details == ["device-1, device-2 by default/a (pod trainer)"]


async def test_extended_resources_served_by_devices_are_explained_like_claims() -> None:
    cluster = c.Cluster()
    klass = c.device_class()
    klass["spec"]["extendedResourceName"] = "example.com/gpu"
    await cluster.put(cluster.cache.classes, klass)
    for name, count in (("two", 2), ("none", 0)):
        await cluster.put(cluster.cache.nodes, c.node(name))
        if count:
            await cluster.put(cluster.cache.slices, c.node_slice(name, count))
    greedy = c.pod("greedy")
    greedy["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "3"
    out = explainer(cluster).explain(await cluster.put(cluster.cache.pods, greedy))
    assert out["state"] == ex.UNSCHEDULABLE
    messages = sorted(r["message"] for g in out["groups"] for r in g["reasons"])
    # No "Insufficient example.com/gpu": nodes that do not advertise it serve it with devices.
    assert all("Insufficient" not in m for m in messages)
    assert all("request container-0-request-1" in m for m in messages), messages
    modest = c.pod("modest")
    modest["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "2"
    out = explainer(cluster).explain(await cluster.put(cluster.cache.pods, modest))
    assert out["state"] == ex.SCHEDULABLE and out["nodes"]["fitting"] == ["two"]
