"""NodePorts through the scheduling cycle (docs/scheduler-plugins.md's worked example): host ports
taken on a node keep pods that want them out, in upstream's words; preemption frees them."""

from __future__ import annotations

from typing import Any

from schedulers.cycle import SchedulingCycle
from schedulers.explain import Explainer
from schedulers.plugins.nodeports import conflicts, host_ports
from schedulers.preemption import Preempt, Preemption
from tests.schedulers.cluster import Cluster, node, pod
from tests.schedulers.plugins.test_interpodaffinity import failed, placed


def serving(name: str, *ports: dict[str, Any], **spec: Any) -> dict[str, Any]:
    p = pod(name, **spec)
    p["spec"]["containers"][0]["ports"] = list(ports)
    return p


def test_host_ports_take_their_defaults_and_count_sidecars_only() -> None:
    p = serving("p", {"containerPort": 80, "hostPort": 8080}, {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}, {"containerPort": 9000})
    p["spec"]["initContainers"] = [
        {"name": "setup", "ports": [{"containerPort": 1, "hostPort": 1111}]},
        {"name": "sidecar", "restartPolicy": "Always", "ports": [{"containerPort": 2, "hostPort": 2222}]},
    ]
    assert host_ports(p) == [("0.0.0.0", "TCP", 2222), ("0.0.0.0", "TCP", 8080), ("10.0.0.1", "UDP", 53)]


def test_ports_conflict_on_the_same_address_or_on_all_addresses() -> None:
    assert conflicts(("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80))
    assert conflicts(("10.0.0.1", "TCP", 80), ("0.0.0.0", "TCP", 80))
    assert conflicts(("10.0.0.1", "TCP", 80), ("10.0.0.1", "TCP", 80))
    assert not conflicts(("10.0.0.1", "TCP", 80), ("10.0.0.2", "TCP", 80))
    assert not conflicts(("0.0.0.0", "UDP", 80), ("0.0.0.0", "TCP", 80))


async def test_a_taken_host_port_keeps_the_pod_off_the_node() -> None:
    cluster = Cluster()
    for name in ("a", "b"):
        await cluster.put(cluster.cache.nodes, node(name))
    await cluster.put(cluster.cache.pods, serving("web-0", {"containerPort": 80, "hostPort": 8080}, nodeName="a"))
    await cluster.put(cluster.cache.pods, pod("f0", nodeName="b"))
    await cluster.put(cluster.cache.pods, pod("f1", nodeName="b"))
    cycle = SchedulingCycle(cluster.cache)
    # Without ports a has the fewest pods; wanting 8080 it must be b.
    assert placed(cycle.schedule(await cluster.put(cluster.cache.pods, pod("plain")))).node == "a"
    web = await cluster.put(cluster.cache.pods, serving("web-1", {"containerPort": 80, "hostPort": 8080}))
    assert placed(cycle.schedule(web)).node == "b"
    other_port = await cluster.put(cluster.cache.pods, serving("dns", {"containerPort": 53, "hostPort": 8080, "protocol": "UDP"}))
    assert placed(cycle.schedule(other_port)).node == "a"
    await cluster.put(cluster.cache.pods, serving("web-1", {"containerPort": 80, "hostPort": 8080}, nodeName="b"))
    result = failed(cycle.schedule(await cluster.put(cluster.cache.pods, serving("web-2", {"containerPort": 80, "hostPort": 8080}))))
    assert result.fit_message == "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    assert sorted(result.potential) == ["a", "b"]
    out = Explainer(cluster.cache, cycle).explain(await cluster.put(cluster.cache.pods, serving("web-3", {"containerPort": 80, "hostPort": 8080})))
    details = sorted(d for g in out["groups"] for r in g["reasons"] for d in r.get("details", []))
    assert details == ["a: hostPort 8080/TCP on 0.0.0.0 is taken by pod web-0", "b: hostPort 8080/TCP on 0.0.0.0 is taken by pod web-1"]


async def test_preemption_frees_the_port_a_lower_priority_pod_holds() -> None:
    cluster = Cluster()
    await cluster.put(cluster.cache.nodes, node("a"))
    await cluster.put(cluster.cache.pods, serving("low", {"containerPort": 80, "hostPort": 8080}, nodeName="a", priority=1))
    await cluster.put(cluster.cache.pods, pod("bystander", nodeName="a", priority=1))
    cycle = SchedulingCycle(cluster.cache)
    high = await cluster.put(cluster.cache.pods, serving("high", {"containerPort": 80, "hostPort": 8080}, priority=100))
    decision = Preemption(cycle).post_filter(high, failed(cycle.schedule(high)))
    assert isinstance(decision, Preempt) and [v["metadata"]["name"] for v in decision.victims] == ["low"]
