"""NodeAffinity's and TaintToleration's scores through the scheduling cycle: preferred node
affinity terms and PreferNoSchedule taints move the pod between nodes that all fit, with
upstream's weights (TaintToleration 3, NodeAffinity 2)."""

from __future__ import annotations

from typing import Any

from schedulers.cycle import SchedulingCycle
from schedulers.framework import default_normalize
from schedulers.plugins.nodeaffinity import preferred_terms
from tests.schedulers.cluster import Cluster, node, pod
from tests.schedulers.plugins.test_interpodaffinity import placed

SOFT_TAINT = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}


def preferring(name: str, *terms: tuple[int, dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A pod with preferred node affinity terms: (weight, {label: value}) each."""
    preferred = [
        {"weight": weight, "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in labels.items()]}}
        for weight, labels in terms
    ]
    return pod(name, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}, **spec)


async def nodes(cluster: Cluster, **labels_and_taints: dict[str, Any]) -> None:
    """Nodes a, b, c (a has no pods, b one, c two: without scores the cycle picks a)."""
    for name in ("a", "b", "c"):
        extra = labels_and_taints.get(name) or {}
        await cluster.put(cluster.cache.nodes, node(name, labels=extra.get("labels"), **({"taints": extra["taints"]} if "taints" in extra else {})))
    for i, name in enumerate(["b", "c", "c"]):
        await cluster.put(cluster.cache.pods, pod(f"filler-{i}", nodeName=name))


def test_default_normalize_scales_to_100_and_reverses() -> None:
    assert default_normalize([0, 5, 10]) == [0, 50, 100]
    assert default_normalize([0, 1, 3]) == [0, 33, 100]
    assert default_normalize([0, 1, 3], reverse=True) == [100, 67, 0]
    assert default_normalize([0, 0]) == [0, 0]
    assert default_normalize([0, 0], reverse=True) == [100, 100]


def test_preferred_terms_leave_out_weight_zero_and_empty_terms() -> None:
    p = preferring("p", (0, {"zone": "z1"}), (3, {"zone": "z2"}))
    p["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].append({"weight": 5, "preference": {}})
    assert [w for w, _ in preferred_terms(p)] == [3]


async def test_preferred_node_affinity_picks_the_node_with_the_highest_sum_of_weights() -> None:
    cluster = Cluster()
    await nodes(cluster, b={"labels": {"zone": "z1"}}, c={"labels": {"zone": "z2", "disk": "ssd"}})
    cycle = SchedulingCycle(cluster.cache)
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, pod("plain")))).node == "a"
    one = await cluster.put(cluster.cache.pods, preferring("one", (1, {"zone": "z1"})))
    assert placed(cycle.schedule(one)).node == "b"
    # c matches two terms (2 + 3) against b's one (4).
    two = await cluster.put(cluster.cache.pods, preferring("two", (4, {"zone": "z1"}), (2, {"zone": "z2"}), (3, {"disk": "ssd"})))
    assert placed(cycle.schedule(two)).node == "c"
    # Preferences only order the nodes that fit: a required selector still rules c out.
    required = preferring("required", (4, {"disk": "ssd"}), nodeSelector={"zone": "z1"})
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, required))).node == "b"


async def test_prefer_no_schedule_taints_push_pods_away_unless_tolerated() -> None:
    cluster = Cluster()
    await nodes(cluster, a={"taints": [SOFT_TAINT]}, b={"taints": [SOFT_TAINT, {**SOFT_TAINT, "key": "old"}]})
    cycle = SchedulingCycle(cluster.cache)
    # a and b have untolerated PreferNoSchedule taints: c, though the busiest, scores best.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, pod("plain")))).node == "c"
    tolerant = pod("tolerant", tolerations=[{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}])
    # Tolerating spot, a and c score the same: the node order (fewest pods) decides.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, tolerant))).node == "a"
    # A NoSchedule toleration does not count against PreferNoSchedule taints (upstream's rule).
    no_schedule = pod("no-schedule", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, no_schedule))).node == "c"


async def test_taint_toleration_weighs_three_to_node_affinity_two() -> None:
    cluster = Cluster()
    # a: the only node the pod prefers, and the only one with a PreferNoSchedule taint.
    await nodes(cluster, a={"labels": {"zone": "z1"}, "taints": [SOFT_TAINT]})
    cycle = SchedulingCycle(cluster.cache)
    # a: affinity 100 x 2, taints 0 x 3 = 200; b: 0 x 2 + 100 x 3 = 300 (b has fewer pods than c).
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, preferring("p", (1, {"zone": "z1"}))))).node == "b"


async def test_without_soft_taints_or_preferences_the_pod_is_not_scored() -> None:
    """The common case stays on the cheap path: nothing to score, no feasible nodes kept."""
    cluster = Cluster()
    await nodes(cluster, a={"taints": [{**SOFT_TAINT, "effect": "NoSchedule"}]})
    cycle = SchedulingCycle(cluster.cache)
    state = cycle.begin(await cluster.put(cluster.cache.pods, pod("plain")))
    assert not isinstance(state, (list, str)) and getattr(state, "scorers", None) == []
    await cluster.put(cluster.cache.nodes, node("d", taints=[SOFT_TAINT]))
    state = cycle.begin(await cluster.put(cluster.cache.pods, pod("plain2")))
    assert [p.name for p in getattr(state, "scorers", [])] == ["TaintToleration"]
