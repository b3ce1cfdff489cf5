"""InterPodAffinity through the scheduling cycle: where pods go given the pods already placed,
upstream's messages for where they do not, what preemption makes of it, and the queue's hints."""

from __future__ import annotations

from typing import Any

from kube.dra.pods import merge_pod_affinity_label_keys
from schedulers.cycle import Placement, ScheduleFailure, SchedulingCycle
from schedulers.explain import Explainer
from schedulers.preemption import NoPreemption, Preempt, Preemption
from tests.schedulers.cluster import NS, Cluster, node, pod

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NOT_HELPFUL = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


def labelled(name: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    p = pod(name, **spec)
    p["metadata"]["labels"] = labels
    return p


def term(labels: dict[str, str], key: str = HOSTNAME, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def anti_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def placed(result: object) -> Placement:
    assert isinstance(result, Placement), result
    return result


def failed(result: object) -> ScheduleFailure:
    assert isinstance(result, ScheduleFailure), result
    return result


async def zones(cluster: Cluster, layout: dict[str, str]) -> None:
    for name, zone in layout.items():
        await cluster.put(cluster.cache.nodes, node(name, labels={ZONE: zone}))


async def bind(cluster: Cluster, cycle: SchedulingCycle, p: dict[str, Any]) -> str:
    """Schedule ``p`` and record it bound where the cycle put it."""
    p = await cluster.put(cluster.cache.pods, p)
    where = placed(cycle.schedule(p)).node
    await cluster.put(cluster.cache.pods, {**p, "spec": {**p["spec"], "nodeName": where}})
    return where


async def test_required_anti_affinity_on_the_hostname_puts_replicas_on_different_nodes() -> None:
    """Upstream's DRA e2e test driver: a ReplicaSet whose pods must not share a node."""
    cluster = Cluster()
    await zones(cluster, {"a": "z1", "b": "z1"})
    cycle = SchedulingCycle(cluster.cache)
    spec = {"affinity": anti_affinity(term({"app": "driver"}))}
    first = await bind(cluster, cycle, labelled("driver-1", {"app": "driver"}, **spec))
    second = await bind(cluster, cycle, labelled("driver-2", {"app": "driver"}, **spec))
    assert {first, second} == {"a", "b"}
    third = await cluster.put(cluster.cache.pods, labelled("driver-3", {"app": "driver"}, **spec))
    result = failed(cycle.schedule(third))
    assert result.fit_message == "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    assert sorted(result.potential) == ["a", "b"]  # Unschedulable: preemption may remove the other replica
    # A pod the placed replicas' terms do not select goes anywhere.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("other", {"app": "web"})))).node in ("a", "b")


async def test_existing_pods_anti_affinity_keeps_the_incoming_pod_out_of_their_zone() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "a2": "z1", "b1": "z2"})
    lonely = labelled("lonely", {"app": "db"}, nodeName="a1", affinity=anti_affinity(term({"app": "web"}, ZONE)))
    await cluster.put(cluster.cache.pods, lonely)
    cycle = SchedulingCycle(cluster.cache)
    web = await cluster.put(cluster.cache.pods, labelled("web", {"app": "web"}))
    assert placed(cycle.schedule(web)).node == "b1"
    await cluster.put(cluster.cache.nodes, node("b1", labels={ZONE: "z2"}, cpu="0"))
    result = failed(cycle.schedule(web))
    assert result.fit_message == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy existing pods anti-affinity rules."


async def test_required_affinity_needs_a_matching_pod_in_the_domain_except_for_the_first_of_a_group() -> None:
    cluster = Cluster()
    await zones(cluster, {"a1": "z1", "b1": "z2"})
    await cluster.put(cluster.cache.nodes, node("unzoned"))
    cycle = SchedulingCycle(cluster.cache)
    group = {"affinity": affinity(term({"app": "cache"}, ZONE))}
    # The first of a group that wants to be with its kind: nothing matches anywhere and it matches
    # itself, so any node with the zone label takes it (the fewest pods, then the name: a1).
    assert await bind(cluster, cycle, labelled("cache-1", {"app": "cache"}, **group)) == "a1"
    # The next one follows it into z1, though b1 has fewer pods.
    assert await bind(cluster, cycle, labelled("cache-2", {"app": "cache"}, **group)) == "a1"
    # A pod that wants to be near the cache but is not one: z1's only node is full.
    await cluster.put(cluster.cache.nodes, node("a1", labels={ZONE: "z1"}, cpu="0"))
    client = await cluster.put(cluster.cache.pods, labelled("client", {"app": "client"}, **group))
    failure = failed(cycle.schedule(client))
    assert failure.fit_message == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod affinity rules."
    assert failure.potential == ["a1"]  # affinity is unresolvable: only the full node may be helped
    await cluster.put(cluster.cache.nodes, node("a2", labels={ZONE: "z1"}))
    assert placed(cycle.schedule(client)).node == "a2"


async def test_no_matching_pod_anywhere_and_not_matching_itself_fits_nowhere() -> None:
    cluster = Cluster()
    await zones(cluster, {"a": "z1"})
    p = await cluster.put(cluster.cache.pods, labelled("p", {"app": "client"}, affinity=affinity(term({"app": "cache"}, ZONE))))
    result = failed(SchedulingCycle(cluster.cache).schedule(p))
    assert result.fit_message == "0/1 nodes are available: 1 node(s) didn't match pod affinity rules." and result.potential == []


async def test_namespaces_and_namespace_selectors_choose_whose_pods_count() -> None:
    cluster = Cluster()
    await zones(cluster, {"a": "z1", "b": "z1"})
    await cluster.put(cluster.cache.namespaces, {"metadata": {"name": "team-x", "labels": {"team": "x"}}})
    await cluster.put(cluster.cache.namespaces, {"metadata": {"name": "team-y", "labels": {"team": "y"}}})
    other = labelled("other", {"app": "noisy"}, nodeName="a")
    other["metadata"]["namespace"] = "team-x"
    await cluster.put(cluster.cache.pods, other)
    for filler in ("f1", "f2"):  # left alone, pods go to a (fewer pods)
        await cluster.put(cluster.cache.pods, labelled(filler, {}, nodeName="b"))
    cycle = SchedulingCycle(cluster.cache)
    own_namespace = await cluster.put(cluster.cache.pods, labelled("p1", {}, affinity=anti_affinity(term({"app": "noisy"}))))
    assert placed(cycle.schedule(own_namespace)).node == "a"  # only the pod's own namespace by default
    selected = await cluster.put(
        cluster.cache.pods, labelled("p2", {}, affinity=anti_affinity(term({"app": "noisy"}, namespaceSelector={"matchLabels": {"team": "x"}})))
    )
    assert placed(cycle.schedule(selected)).node == "b"
    named = await cluster.put(cluster.cache.pods, labelled("p3", {}, affinity=anti_affinity(term({"app": "noisy"}, namespaces=["team-y"]))))
    assert placed(cycle.schedule(named)).node == "a"
    everywhere = await cluster.put(cluster.cache.pods, labelled("p4", {}, affinity=anti_affinity(term({"app": "noisy"}, namespaceSelector={}))))
    assert placed(cycle.schedule(everywhere)).node == "b"


async def test_match_and_mismatch_label_keys_take_the_pods_own_values() -> None:
    """The API server merges the label keys into the selectors when it creates a pod (pods are
    stored so); the scheduler takes the selectors as stored, like upstream's."""
    cluster = Cluster()
    await zones(cluster, {"a": "z1", "b": "z1"})
    await cluster.put(cluster.cache.pods, labelled("v1", {"app": "web", "version": "1"}, nodeName="a"))
    for filler in ("f1", "f2"):  # left alone, pods go to a (fewer pods)
        await cluster.put(cluster.cache.pods, labelled(filler, {}, nodeName="b"))
    cycle = SchedulingCycle(cluster.cache)

    async def created(name: str, labels: dict[str, str], affinity: dict[str, Any]) -> dict[str, Any]:
        p = labelled(name, labels, affinity=affinity)
        merge_pod_affinity_label_keys(p)
        return await cluster.put(cluster.cache.pods, p)

    same_version = anti_affinity(term({"app": "web"}, matchLabelKeys=["version"]))
    assert placed(cycle.schedule(await created("n1", {"app": "web", "version": "1"}, same_version))).node == "b"
    assert placed(cycle.schedule(await created("n2", {"app": "web", "version": "2"}, same_version))).node == "a"
    other_version = anti_affinity(term({"app": "web"}, mismatchLabelKeys=["version"]))
    assert placed(cycle.schedule(await created("n3", {"app": "web", "version": "2"}, other_version))).node == "b"
    # Relabelled after its creation, a pod's terms still select by the values it was created with.
    relabelled = await created("n4", {"app": "web", "version": "1"}, anti_affinity(term({"app": "web"}, matchLabelKeys=["version"])))
    relabelled = await cluster.put(cluster.cache.pods, {**relabelled, "metadata": {**relabelled["metadata"], "labels": {"app": "web", "version": "2"}}})
    assert placed(cycle.schedule(relabelled)).node == "b"


async def test_preferred_terms_score_the_domains_of_matching_pods() -> None:
    cluster = Cluster()
    await zones(cluster, {"a": "z1", "b": "z2", "c": "z3"})
    await cluster.put(cluster.cache.pods, labelled("cache", {"app": "cache"}, nodeName="c"))
    await cluster.put(cluster.cache.pods, labelled("noisy", {"app": "noisy"}, nodeName="a"))
    cycle = SchedulingCycle(cluster.cache)
    # Without preferences the fewest pods win: b.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("plain", {})))).node == "b"
    near = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term({"app": "cache"}, ZONE)}]}}
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("near", {}, affinity=near)))).node == "c"
    away = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": term({"app": "cache"}, ZONE)}, {"weight": 50, "podAffinityTerm": term({"app": "noisy"}, ZONE)}]}}
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("away", {}, affinity=away)))).node == "b"


async def test_placed_pods_preferences_and_required_affinity_draw_the_incoming_pod() -> None:
    cluster = Cluster()
    await zones(cluster, {"a": "z1", "b": "z2"})
    wants_web = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 20, "podAffinityTerm": term({"app": "web"}, ZONE)}]}}
    await cluster.put(cluster.cache.pods, labelled("lb", {"app": "lb"}, nodeName="b", affinity=wants_web))
    await cluster.put(cluster.cache.pods, labelled("x", {}, nodeName="a"))  # the fewest pods alone would say b anyway
    await cluster.put(cluster.cache.pods, labelled("y", {}, nodeName="b"))
    await cluster.put(cluster.cache.pods, labelled("z", {}, nodeName="b"))
    cycle = SchedulingCycle(cluster.cache)
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("plain", {})))).node == "a"
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, labelled("web", {"app": "web"})))).node == "b"


async def test_preemption_removes_the_pod_the_anti_affinity_stands_against() -> None:
    cluster = Cluster()
    await zones(cluster, {"only": "z1"})
    low = labelled("low", {"app": "driver"}, nodeName="only", priority=10)
    await cluster.put(cluster.cache.pods, low)
    await cluster.put(cluster.cache.pods, labelled("bystander", {"app": "other"}, nodeName="only", priority=10))
    cycle = SchedulingCycle(cluster.cache)
    high = await cluster.put(cluster.cache.pods, labelled("high", {"app": "driver"}, priority=100, affinity=anti_affinity(term({"app": "driver"}))))
    failure = failed(cycle.schedule(high))
    assert failure.potential == ["only"]
    decision = Preemption(cycle).post_filter(high, failure)
    assert isinstance(decision, Preempt) and [v["metadata"]["name"] for v in decision.victims] == ["low"]
    # Of the same priority nothing may go.
    peer = await cluster.put(cluster.cache.pods, labelled("peer", {"app": "driver"}, priority=10, affinity=anti_affinity(term({"app": "driver"}))))
    decision = Preemption(cycle).post_filter(peer, failed(cycle.schedule(peer)))
    assert isinstance(decision, NoPreemption)
    assert decision.message == (
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


async def test_the_explanation_names_the_affinity_reasons() -> None:
    cluster = Cluster()
    await zones(cluster, {"a": "z1", "b": "z1"})
    await cluster.put(cluster.cache.pods, labelled("one", {"app": "driver"}, nodeName="a"))
    cycle = SchedulingCycle(cluster.cache)
    p = await cluster.put(cluster.cache.pods, labelled("two", {"app": "driver"}, affinity=anti_affinity(term({"app": "driver"}))))
    out = Explainer(cluster.cache, cycle).explain(p)
    assert out["nodes"]["fitting"] == ["b"]
    assert [(g["nodes"], [r["message"] for r in g["reasons"]]) for g in out["groups"]] == [(["a"], ["node(s) didn't match pod anti-affinity rules"])]


async def test_a_pod_placed_where_the_affinity_wants_brings_the_waiting_pod_back() -> None:
    """Upstream's queueing hint: an assigned pod that matches the waiting pod's affinity terms
    moves it; one that does not leaves it parked."""
    cluster = Cluster()
    await zones(cluster, {"a": "z1"})
    key = (NS, "client")
    await cluster.put(cluster.cache.pods, labelled("client", {}, affinity=affinity(term({"app": "cache"}, ZONE))))
    assert await cluster.queue.pop() == key
    cluster.queue.unschedulable(key, ["InterPodAffinity"])
    await cluster.put(cluster.cache.pods, labelled("unrelated", {"app": "web"}, nodeName="a"))
    assert cluster.queue.state(key) == "unschedulable"
    await cluster.put(cluster.cache.pods, labelled("cache", {"app": "cache"}, nodeName="a"))
    assert cluster.queue.state(key) in ("backoff", "active")
