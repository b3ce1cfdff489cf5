"""Pods nominated to a node (preemptors waiting for their victims to go) count as placed there for
the filters that read placed pods, as upstream's filtering with nominated pods: for pods of no
higher priority than theirs, on that node, and the node must also pass without them."""

from __future__ import annotations

from typing import Any

from schedulers.cache import Nomination
from schedulers.cycle import SchedulingCycle
from schedulers.explain import Explainer
from schedulers.preemption import Preempt, Preemption
from tests.schedulers.cluster import NS, Cluster, node
from tests.schedulers.plugins.test_interpodaffinity import HOSTNAME, anti_affinity, failed, labelled, placed, term
from tests.schedulers.plugins.test_nodeports import serving
from tests.schedulers.plugins.test_podtopologyspread import spread, web


async def nominate(cluster: Cluster, pod: dict[str, Any], node_name: str, priority: int) -> dict[str, Any]:
    """A pending pod held on ``node_name`` as preemption leaves it."""
    pod = await cluster.put(cluster.cache.pods, pod)
    nomination = Nomination((NS, pod["metadata"]["name"]), node_name, priority, {}, [], set())
    cluster.cache.nominate(nomination, pod["metadata"]["uid"])
    return pod


async def two_nodes(cluster: Cluster) -> None:
    """a (empty) and b (one pod): without anything else the cycle picks a."""
    for name in ("a", "b"):
        await cluster.put(cluster.cache.nodes, node(name))
    await cluster.put(cluster.cache.pods, labelled("filler", {"app": "other"}, nodeName="b"))


async def test_anti_affinity_counts_a_pod_nominated_to_the_node() -> None:
    cluster = Cluster()
    await two_nodes(cluster)
    await nominate(cluster, labelled("preemptor", {"app": "web"}, priority=100), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    replica = labelled("replica", {"app": "web"}, priority=100, affinity=anti_affinity(term({"app": "web"})))
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, replica))).node == "b"
    # A nominated pod of lower priority than the incoming one does not count.
    urgent = labelled("urgent", {"app": "web"}, priority=1000, affinity=anti_affinity(term({"app": "web"})))
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, urgent))).node == "a"
    # Nor does the pod's own nomination.
    own = await nominate(cluster, labelled("own", {"app": "web"}, priority=100, affinity=anti_affinity(term({"app": "web"}, key="none"))), "a", 100)
    assert placed(cycle.schedule(own)).node == "a"


async def test_the_nominated_pods_anti_affinity_keeps_the_incoming_pod_out() -> None:
    cluster = Cluster()
    await two_nodes(cluster)
    await nominate(cluster, labelled("preemptor", {"app": "db"}, priority=100, affinity=anti_affinity(term({"app": "web"}))), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    # As upstream's: when no placed pod's anti-affinity selects the pod and it has no terms of its
    # own, the plugin is left out of the cycle, nominated pods and all.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("early", {"app": "web"}, priority=5)))).node == "a"
    with_terms = labelled("web", {"app": "web"}, priority=5, affinity=anti_affinity(term({"app": "none"})))
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, with_terms))).node == "b"


async def test_topology_spread_counts_a_pod_nominated_to_the_node() -> None:
    cluster = Cluster()
    await two_nodes(cluster)
    await nominate(cluster, web("preemptor", priority=100), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    # With the preemptor on a: a would hold 2 matching pods against b's 0, a skew of 2.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, web("w", spread(HOSTNAME), priority=100)))).node == "b"


async def test_the_node_must_also_fit_without_the_nominated_pods() -> None:
    """Affinity that only a nominated pod would satisfy does not count yet (upstream runs the
    filters with the nominated pods and again without)."""
    cluster = Cluster()
    await two_nodes(cluster)
    await cluster.put(cluster.cache.nodes, node("c"))
    for i in range(2):
        await cluster.put(cluster.cache.pods, labelled(f"busy-{i}", {"app": "other"}, nodeName="c"))
    await cluster.put(cluster.cache.pods, labelled("db-0", {"app": "db"}, nodeName="c"))
    await nominate(cluster, labelled("db-1", {"app": "db"}, priority=100), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    wants_db = labelled("client", {"app": "client"}, priority=5, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"})]}})
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, wants_db))).node == "c"


async def test_host_ports_of_a_pod_nominated_to_the_node_are_taken() -> None:
    cluster = Cluster()
    await two_nodes(cluster)
    await nominate(cluster, serving("preemptor", {"containerPort": 80, "hostPort": 8080}, priority=100), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, serving("web", {"containerPort": 80, "hostPort": 8080})))).node == "b"


async def test_preemption_keeps_room_for_the_pods_nominated_to_the_node() -> None:
    """Removing victims does not help on a node where a nominated pod's anti-affinity would still
    keep the pod out: preemption picks the other node."""
    cluster = Cluster()
    for name in ("a", "b"):
        await cluster.put(cluster.cache.nodes, node(name, cpu="1"))
        await cluster.put(cluster.cache.pods, labelled(f"low-{name}", {"app": "batch"}, nodeName=name, priority=1, cpu="1"))
    await nominate(cluster, labelled("preemptor", {"app": "db"}, priority=100, affinity=anti_affinity(term({"app": "web"}))), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    incoming = await cluster.put(cluster.cache.pods, labelled("web", {"app": "web"}, priority=50, cpu="1", affinity=anti_affinity(term({"app": "none"}))))
    failure = failed(cycle.schedule(incoming))
    decision = Preemption(cycle).post_filter(incoming, failure)
    assert isinstance(decision, Preempt) and decision.nomination.node == "b"


async def test_the_explanation_counts_the_nominated_pods_as_the_cycle_does() -> None:
    cluster = Cluster()
    await two_nodes(cluster)
    await nominate(cluster, labelled("preemptor", {"app": "web"}, priority=100), "a", 100)
    cycle = SchedulingCycle(cluster.cache)
    replica = await cluster.put(cluster.cache.pods, labelled("replica", {"app": "web"}, priority=100, affinity=anti_affinity(term({"app": "web"}))))
    answer = Explainer(cluster.cache, cycle).explain(replica)
    assert answer["nodes"]["fitting"] == ["b"] == [placed(cycle.schedule(replica)).node], answer
    (group,) = answer["groups"]
    assert group["nodes"] == ["a"] and "anti-affinity" in str(group["reasons"]), group
