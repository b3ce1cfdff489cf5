"""PodTopologySpread through the scheduling cycle: skew limits, their messages, the node inclusion
policies, soft spreading, the cluster defaults, preemption and the queue's hints."""

from __future__ import annotations

from typing import Any

from schedulers.cycle import SchedulingCycle
from schedulers.preemption import Preempt, Preemption
from tests.schedulers.cluster import NS, Cluster, node
from tests.schedulers.plugins.test_interpodaffinity import ZONE, bind, failed, labelled, placed, zones


def spread(key: str = ZONE, skew: int = 1, when: str = "DoNotSchedule", labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": labels or {"app": "web"}}, **extra}


def web(name: str, *constraints: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return labelled(name, {"app": "web"}, topologySpreadConstraints=list(constraints), **spec)


async def test_max_skew_keeps_zones_within_one_pod_of_each_other() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "a2": "z1", "b1": "z2"})
    cycle = SchedulingCycle(cluster.cache)
    where = [await bind(cluster, cycle, web(f"w{i}", spread())) for i in range(4)]
    zone = {"a1": "z1", "a2": "z1", "b1": "z2"}
    assert sorted(zone[n] for n in where) == ["z1", "z1", "z2", "z2"]
    # z2's only node is full: z1 may take one more (skew 1), then no more.
    await cluster.put(cluster.cache.nodes, node("b1", labels={ZONE: "z2"}, cpu="0"))
    await bind(cluster, cycle, web("w4", spread()))
    result = failed(cycle.schedule(await cluster.put(cluster.cache.pods, web("w5", spread()))))
    assert result.fit_message == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints."
    assert sorted(result.potential) == ["a1", "a2", "b1"]  # a skew may be fixed by removing pods


async def test_a_node_without_the_topology_key_is_unresolvable() -> None:
    cluster = Cluster()
    await cluster.put(cluster.cache.nodes, node("bare"))
    p = await cluster.put(cluster.cache.pods, web("w", spread()))
    result = failed(SchedulingCycle(cluster.cache).schedule(p))
    assert result.fit_message == "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label)."
    assert result.potential == []


async def test_min_domains_counts_missing_domains_as_empty() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "a2": "z1"})
    await cluster.put(cluster.cache.pods, labelled("w0", {"app": "web"}, nodeName="a1"))
    cycle = SchedulingCycle(cluster.cache)
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, web("w1", spread(skew=1))))).node == "a2"  # one domain: skew 0
    result = failed(cycle.schedule(await cluster.put(cluster.cache.pods, web("w2", spread(skew=1, minDomains=2)))))
    assert result.fit_message == "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."


async def test_node_inclusion_policies_choose_the_domains() -> None:
    """nodeAffinityPolicy (default Honor): only nodes the pod could go to are domains;
    nodeTaintsPolicy (default Ignore): tainted nodes are domains unless Honor."""
    cluster = Cluster()
    await zones(cluster, {"a1": "z1"})
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    await cluster.put(cluster.cache.nodes, node("b1", labels={ZONE: "z2", "pool": "other"}))
    await cluster.put(cluster.cache.nodes, node("c1", labels={ZONE: "z3"}, taints=[taint]))
    await cluster.put(cluster.cache.pods, labelled("w0", {"app": "web"}, nodeName="a1"))
    cycle = SchedulingCycle(cluster.cache)
    # z2 is no domain (b1 does not match the pod's affinity) but z3 is (taints ignored): min 0, a1 refused.
    outside_pool = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}]}}}
    p = await cluster.put(cluster.cache.pods, web("w1", spread(), affinity=outside_pool))
    result = failed(cycle.schedule(p))
    assert result.fit_message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't match pod topology spread constraints, 1 node(s) had untolerated taint {k: v}."
    )
    # Honoring the taints leaves z1 the only domain: a1 takes the pod.
    p = await cluster.put(cluster.cache.pods, web("w2", spread(nodeTaintsPolicy="Honor"), affinity=outside_pool))
    assert placed(cycle.schedule(p)).node == "a1"
    # Ignoring the node affinity makes z2 a domain too, with no pod: a1 refused again.
    p = await cluster.put(cluster.cache.pods, web("w3", spread(nodeTaintsPolicy="Honor", nodeAffinityPolicy="Ignore"), affinity=outside_pool))
    assert "1 node(s) didn't match pod topology spread constraints" in failed(cycle.schedule(p)).fit_message


async def test_match_label_keys_count_only_pods_with_the_same_values() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "b1": "z2"})
    await cluster.put(cluster.cache.pods, labelled("old", {"app": "web", "rev": "1"}, nodeName="a1"))
    await cluster.put(cluster.cache.pods, labelled("filler", {}, nodeName="b1"))
    await cluster.put(cluster.cache.pods, labelled("filler2", {}, nodeName="b1"))
    cycle = SchedulingCycle(cluster.cache)
    per_revision = spread(matchLabelKeys=["rev"])
    new = await cluster.put(cluster.cache.pods, labelled("new", {"app": "web", "rev": "2"}, topologySpreadConstraints=[per_revision]))
    assert placed(cycle.schedule(new)).node == "a1"  # the old revision's pod does not count
    same = await cluster.put(cluster.cache.pods, labelled("same", {"app": "web", "rev": "1"}, topologySpreadConstraints=[per_revision]))
    assert placed(cycle.schedule(same)).node == "b1"


async def test_schedule_anyway_spreads_by_score() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "a2": "z1", "b1": "z2"})
    for i, where in enumerate(("a1", "a2")):
        await cluster.put(cluster.cache.pods, labelled(f"w{i}", {"app": "web"}, nodeName=where))
    for i in range(3):  # b1 has the most pods: the node order alone would not choose it
        await cluster.put(cluster.cache.pods, labelled(f"f{i}", {}, nodeName="b1"))
    cycle = SchedulingCycle(cluster.cache)
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("plain", {"app": "web"})))).node == "a1"
    soft = await cluster.put(cluster.cache.pods, web("soft", spread(when="ScheduleAnyway")))
    assert placed(cycle.schedule(soft)).node == "b1"


async def test_pods_a_replica_set_owns_get_the_cluster_default_spreading() -> None:
    """Upstream's system defaulting: hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway, over
    the pods the owning ReplicaSet selects; pods nothing selects are not spread."""
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "b1": "z2"})
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": NS, "uid": "uid-rs"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    await cluster.put(cluster.cache.replica_sets, rs)
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-rs", "controller": True}]
    for i in range(2):
        await cluster.put(cluster.cache.pods, labelled(f"w{i}", {"app": "web"}, nodeName="a1"))
    for i in range(4):
        await cluster.put(cluster.cache.pods, labelled(f"f{i}", {}, nodeName="b1"))
    cycle = SchedulingCycle(cluster.cache)
    replica = labelled("w2", {"app": "web"})
    replica["metadata"]["ownerReferences"] = owner
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, replica))).node == "b1"
    orphan = labelled("orphan", {"app": "web"})
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, orphan))).node == "a1"  # fewest pods
    # A Service that selects the pod spreads it too.
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS}, "spec": {"selector": {"app": "web"}}}
    await cluster.put(cluster.cache.services, service)
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("orphan2", {"app": "web"})))).node == "b1"


async def test_preemption_removes_pods_that_skew_the_domain() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "b1": "z2"})
    await cluster.put(cluster.cache.pods, labelled("low", {"app": "web"}, nodeName="a1", priority=10))
    await cluster.put(cluster.cache.nodes, node("b1", labels={ZONE: "z2"}, cpu="0"))
    cycle = SchedulingCycle(cluster.cache)
    high = await cluster.put(cluster.cache.pods, web("high", spread(), priority=100))
    failure = failed(cycle.schedule(high))
    assert failure.fit_message == "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod topology spread constraints."
    decision = Preemption(cycle).post_filter(high, failure)
    assert isinstance(decision, Preempt) and decision.nomination.node == "a1"
    assert [v["metadata"]["name"] for v in decision.victims] == ["low"]


async def test_a_pod_placed_in_the_spread_brings_the_waiting_pod_back() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1"})
    key = (NS, "w")
    await cluster.put(cluster.cache.pods, web("w", spread()))
    assert await cluster.queue.pop() == key
    cluster.queue.unschedulable(key, ["PodTopologySpread"])
    await cluster.put(cluster.cache.pods, labelled("unrelated", {"app": "db"}, nodeName="a1"))
    assert cluster.queue.state(key) == "unschedulable"
    await cluster.put(cluster.cache.pods, labelled("peer", {"app": "web"}, nodeName="a1"))
    assert cluster.queue.state(key) in ("backoff", "active")
