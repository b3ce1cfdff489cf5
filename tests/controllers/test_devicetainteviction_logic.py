"""The eviction controller's decisions, driven through its informer handlers without a server.

The process-level behaviour is in test_taint_eviction.py; this covers the matching and timing
rules in detail: which tolerations count, the shortest tolerationSeconds, pool generations,
rule selectors and the index of pods by claim.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.devicetainteviction import DeviceTaintEvictionController, rule_matches, tolerates
from controllers.objects import pod_claim_keys
from kube.client import KubeClient
from kube.indexer import Index
from kube.informer import Informer

T0 = "2030-01-01T00:00:00Z"
T0_EPOCH = 1893456000.0
TAINT = {"key": "example.com/bad", "value": "yes", "effect": "NoExecute", "timeAdded": T0}


def test_toleration_matching() -> None:
    assert tolerates({"operator": "Exists"}, TAINT)  # empty key and effect: everything
    assert tolerates({"key": "example.com/bad", "operator": "Exists", "effect": "NoExecute"}, TAINT)
    assert tolerates({"key": "example.com/bad", "value": "yes"}, TAINT)  # operator defaults to Equal
    assert not tolerates({"key": "example.com/bad", "value": "no", "operator": "Equal"}, TAINT)
    assert not tolerates({"key": "example.com/other", "operator": "Exists"}, TAINT)
    assert not tolerates({"key": "example.com/bad", "operator": "Exists", "effect": "NoSchedule"}, TAINT)
    assert not tolerates({"key": "example.com/bad", "operator": "Gt"}, TAINT)


def test_rule_selector() -> None:
    def rule(selector: Any) -> dict[str, Any]:
        return {"spec": {"deviceSelector": selector, "taint": TAINT}} if selector is not None else {"spec": {"taint": TAINT}}

    assert not rule_matches(rule(None), "d", "p", "x")  # no selector: nothing
    assert rule_matches(rule({}), "d", "p", "x")  # empty selector: everything
    assert rule_matches(rule({"driver": "d", "device": "x"}), "d", "p", "x")
    assert not rule_matches(rule({"driver": "d", "pool": "q"}), "d", "p", "x")


class Harness:
    def __init__(self, controller: DeviceTaintEvictionController, pods: Informer, claims: Informer) -> None:
        self.controller = controller
        self.pods = pods
        self.claims = claims

    async def add(self, informer: Informer, obj: dict[str, Any]) -> None:
        """Feed an object to an informer as a watch event would."""
        await informer.apply({"type": "ADDED", "object": obj})

    async def pod_with_claim(self, name: str, tolerations: list[dict[str, Any]] | None = None, device: str = "dev-0") -> None:
        uid = f"uid-{name}"
        await self.add(self.pods, {
            "metadata": {"namespace": "ns", "name": name, "uid": uid, "resourceVersion": "1"},
            "spec": {"nodeName": "node", "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]},
        })  # fmt: skip
        result: dict[str, Any] = {"request": "gpu", "driver": "drv", "pool": "pool", "device": device}
        if tolerations is not None:
            result["tolerations"] = tolerations
        await self.add(self.claims, {
            "metadata": {"namespace": "ns", "name": name, "uid": f"claim-{name}", "resourceVersion": "1"},
            "status": {"allocation": {"devices": {"results": [result]}}, "reservedFor": [{"resource": "pods", "name": name, "uid": uid}]},
        })  # fmt: skip

    async def slice_(self, name: str, generation: int, taints: list[dict[str, Any]], devices: tuple[str, ...] = ("dev-0",)) -> None:
        await self.add(self.controller.slices, {
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"driver": "drv", "pool": {"name": "pool", "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": d, "taints": taints} for d in devices]},
        })  # fmt: skip

    def evict_at(self, name: str) -> float | None:
        eviction = self.controller._evict_at.get(("ns", name, f"uid-{name}"))
        return None if eviction is None else eviction.when - T0_EPOCH


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    client = KubeClient("http://127.0.0.1:9", user_agent="test")  # never contacted
    pods = Informer(client, "/api/v1/pods")
    claims = Informer(client, "/apis/resource.k8s.io/v1/resourceclaims")
    controller = DeviceTaintEvictionController(client, pods=pods, claims=claims, pods_by_claim=Index(pods, pod_claim_keys))
    yield Harness(controller, pods, claims)
    for task in controller._background:
        task.cancel()
    await asyncio.sleep(0)
    await client.close()


async def test_shortest_toleration_seconds_counts_from_time_added(harness: Harness) -> None:
    await harness.slice_("s", 1, [TAINT])
    noexec = {"key": "example.com/bad", "operator": "Exists", "effect": "NoExecute"}
    await harness.pod_with_claim("two-tolerations", [{**noexec, "tolerationSeconds": 30}, {**noexec, "tolerationSeconds": 10}])
    await harness.pod_with_claim("negative", [{**noexec, "tolerationSeconds": -5}])
    await harness.pod_with_claim("forever", [noexec, {**noexec, "tolerationSeconds": 10}])
    await harness.pod_with_claim("none", [])
    # Upstream only counts tolerations whose effect is NoExecute against eviction.
    await harness.pod_with_claim("any-effect", [{"key": "example.com/bad", "operator": "Exists"}])
    assert harness.evict_at("two-tolerations") == 10
    assert harness.evict_at("negative") == 0
    assert harness.evict_at("forever") is None
    assert harness.evict_at("none") == 0
    assert harness.evict_at("any-effect") == 0


async def test_only_the_newest_pool_generation_counts(harness: Harness) -> None:
    await harness.pod_with_claim("p")
    await harness.slice_("old", 1, [TAINT])
    assert harness.evict_at("p") == 0
    await harness.slice_("new", 2, [])  # a newer generation without the taint: eviction cancelled
    assert harness.evict_at("p") is None


async def test_rules_and_slice_taints_combine(harness: Harness) -> None:
    await harness.pod_with_claim("p", [{"key": "example.com/bad", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}])
    assert harness.controller.rules is not None
    later = "2030-01-01T00:00:30Z"
    await harness.add(harness.controller.rules, {
        "metadata": {"name": "r", "uid": "rule-uid", "generation": 1, "resourceVersion": "1"},
        "spec": {"deviceSelector": {"driver": "drv", "device": "dev-0"}, "taint": {**TAINT, "key": "example.com/rule", "timeAdded": later}},
    })  # fmt: skip
    assert harness.evict_at("p") == 30  # the rule's taint is not tolerated: it evicts at its timeAdded
    await harness.slice_("s", 1, [TAINT])
    eviction = harness.controller._evict_at[("ns", "p", "uid-p")]
    assert eviction.when - T0_EPOCH == 30 and {r[0] for r in eviction.reasons} == {"rule", "slice"}
    await harness.add(harness.controller.rules, {
        "metadata": {"name": "r", "uid": "rule-uid", "generation": 2, "resourceVersion": "2"},
        "spec": {"deviceSelector": {"driver": "drv", "device": "dev-0"}, "taint": {**TAINT, "key": "example.com/rule", "effect": "NoSchedule"}},
    })  # fmt: skip
    assert harness.evict_at("p") == 60  # only the tolerated slice taint is left


async def test_unscheduled_or_unreserved_pods_are_not_evicted(harness: Harness) -> None:
    await harness.slice_("s", 1, [TAINT])
    await harness.pod_with_claim("p")
    assert harness.evict_at("p") == 0
    pod = harness.pods.get("ns", "p")
    assert pod is not None
    await harness.pods.apply({"type": "MODIFIED", "object": {**pod, "metadata": {**pod["metadata"], "resourceVersion": "2"}, "spec": {**pod["spec"], "nodeName": ""}}})
    assert harness.evict_at("p") is None
    claim = harness.claims.get("ns", "p")
    assert claim is not None
    await harness.pods.apply({"type": "MODIFIED", "object": pod})
    assert harness.evict_at("p") == 0
    await harness.claims.apply({"type": "MODIFIED", "object": {**claim, "status": {**claim["status"], "reservedFor": [{"resource": "pods", "name": "other", "uid": "x"}]}}})
    assert harness.evict_at("p") is None
    # Reserved for a workload rather than pod by pod: pods referencing the claim use it.
    workload = [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "g"}]
    await harness.claims.apply({"type": "MODIFIED", "object": {**claim, "status": {**claim["status"], "reservedFor": workload}}})
    assert harness.evict_at("p") == 0
