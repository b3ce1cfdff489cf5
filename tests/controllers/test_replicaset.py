"""The ReplicaSet controller in this event loop against a real server, with the garbage collector
beside it: pods made from the template, counted in the status as upstream's controller counts them
(what upstream's e2e framework waits on: observedGeneration and availableReplicas), scaled down
to zero by an Update, claims of orphans and releases, a creation failure, and cascading deletes."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from controllers.workloadcontrollers import WorkloadControllers
from controllers.workloads import Expectations, pods_to_delete, slow_start_batch
from kube.client import KubeClient, resource_path
from tests.controllers.workload_helpers import make_ready, pods_path, running_controllers
from tests.processes import eventually_async, get_or_none

LABELS = {"app": "proxy"}


def rs_path(ns: str, name: str = "", sub: str | None = None) -> str:
    return resource_path("apps", "v1", "replicasets", ns, name or None, sub)


def replica_set(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"labels": dict(LABELS)}, "spec": {"containers": [{"name": "main", "image": "pause"}]}}
    template["spec"].update(spec.pop("pod", {}))
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name}, "spec": {"replicas": replicas, "selector": {"matchLabels": dict(LABELS)}, "template": template, **spec}}


@pytest.fixture
async def controllers(kube_client: KubeClient) -> AsyncIterator[WorkloadControllers]:
    async with running_controllers(kube_client) as workloads:
        yield workloads


async def owned_pods(client: KubeClient, ns: str) -> list[dict[str, Any]]:
    return [p for p in (await client.list(pods_path(ns)))["items"] if not p["metadata"].get("deletionTimestamp")]


async def wait_for_available(client: KubeClient, ns: str, rs: dict[str, Any], target: int) -> dict[str, Any]:
    """Upstream's WaitForReplicaSetTargetAvailableReplicas: observedGeneration >= the generation
    the caller saw, and availableReplicas == target."""
    generation = rs["metadata"]["generation"]

    async def check() -> dict[str, Any] | None:
        current = await client.get(rs_path(ns, rs["metadata"]["name"]))
        status = current.get("status") or {}
        return current if status.get("observedGeneration", 0) >= generation and status.get("availableReplicas", 0) == target else None

    result: dict[str, Any] = await eventually_async(check, what=f"availableReplicas == {target}")
    return result


async def test_pods_from_the_template_counted_then_scaled_to_zero_by_update(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    rs = await kube_client.create(rs_path(ns), replica_set("driver", 3))

    async def three() -> list[dict[str, Any]] | None:
        pods = await owned_pods(kube_client, ns)
        return pods if len(pods) == 3 else None

    pods = await eventually_async(three, what="three pods")
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith("driver-") and meta["generateName"] == "driver-" and meta["labels"] == LABELS
        assert meta["ownerReferences"] == [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "driver", "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        ]
    # Not ready yet: replicas counted, none available.

    async def counted() -> dict[str, Any] | None:
        status = (await kube_client.get(rs_path(ns, "driver")))["status"]
        return status if status.get("replicas") == 3 else None

    assert (await eventually_async(counted, what="three replicas counted")).get("availableReplicas", 0) == 0
    for pod in pods:
        await make_ready(kube_client, ns, pod)
    ready = await wait_for_available(kube_client, ns, rs, 3)
    assert ready["status"] == {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "terminatingReplicas": 0, "observedGeneration": 1}
    events = (await kube_client.list(resource_path("", "v1", "events", ns)))["items"]
    assert sorted(e["message"] for e in events if e["reason"] == "SuccessfulCreate") == sorted(f"Created pod: {p['metadata']['name']}" for p in pods)
    # The e2e framework's clean-up: an Update to zero replicas, then the same wait.
    ready["spec"]["replicas"] = 0
    scaled = await kube_client.update(rs_path(ns, "driver"), ready)
    assert scaled["metadata"]["generation"] == 2
    done = await wait_for_available(kube_client, ns, scaled, 0)
    assert done["status"]["replicas"] == 0 and done["status"]["observedGeneration"] == 2
    # Bound pods go gracefully (no kubelet here to finish them): terminating until then.
    assert {p["metadata"]["name"] for p in (await kube_client.list(pods_path(ns)))["items"]} == {p["metadata"]["name"] for p in pods}
    assert done["status"]["terminatingReplicas"] == 3


async def test_min_ready_seconds_delays_availability(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    rs = await kube_client.create(rs_path(ns), replica_set("slow", 1, minReadySeconds=2))
    pod = (await eventually_async(lambda: owned_pods(kube_client, ns), what="a pod"))[0]
    await make_ready(kube_client, ns, pod)

    async def ready_not_available() -> bool:
        status = (await kube_client.get(rs_path(ns, "slow"))).get("status") or {}
        return status.get("readyReplicas") == 1 and status.get("availableReplicas", 0) == 0

    await eventually_async(ready_not_available, what="ready but not yet available")
    await wait_for_available(kube_client, ns, rs, 1)
    # Available only once ready for minReadySeconds; the controller brings itself back then (no
    # pod event arrives at that moment).
    ready = (await kube_client.get(pods_path(ns, pod["metadata"]["name"])))["status"]["conditions"][0]["lastTransitionTime"]
    assert time.time() >= datetime.fromisoformat(ready.replace("Z", "+00:00")).timestamp() + 2


async def test_orphans_are_adopted_and_mismatching_pods_released(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    orphan = await kube_client.create(pods_path(ns), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "labels": LABELS}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    rs = await kube_client.create(rs_path(ns), replica_set("adopter", 1))

    async def adopted() -> bool:
        refs = (await kube_client.get(pods_path(ns, "orphan")))["metadata"].get("ownerReferences") or []
        return [r["uid"] for r in refs] == [rs["metadata"]["uid"]]

    await eventually_async(adopted, what="the orphan adopted")
    # It counts as the one replica: nothing else is created.
    assert [p["metadata"]["name"] for p in await owned_pods(kube_client, ns)] == ["orphan"]
    # Relabelled out of the selector: released, and replaced.
    await kube_client.patch(pods_path(ns, "orphan"), {"metadata": {"labels": {"app": "elsewhere"}}})

    async def released_and_replaced() -> bool:
        pods = {p["metadata"]["name"]: p for p in await owned_pods(kube_client, ns)}
        return len(pods) == 2 and not pods["orphan"]["metadata"].get("ownerReferences")

    await eventually_async(released_and_replaced, what="released and replaced")
    assert orphan["metadata"]["uid"] == (await kube_client.get(pods_path(ns, "orphan")))["metadata"]["uid"]


async def test_failed_creations_are_reported_and_not_repeated_at_once(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    # Priority admission refuses pods naming a missing PriorityClass: every create fails alike.
    await kube_client.create(rs_path(ns), replica_set("doomed", 5, pod={"priorityClassName": f"missing-{uuid.uuid4().hex[:6]}"}))

    async def failing() -> dict[str, Any] | None:
        status = (await kube_client.get(rs_path(ns, "doomed"))).get("status") or {}
        conditions = [c for c in status.get("conditions") or [] if c["type"] == "ReplicaFailure"]
        return conditions[0] if conditions else None

    condition = await eventually_async(failing, what="ReplicaFailure")
    assert (condition["status"], condition["reason"]) == ("True", "FailedCreate")
    assert "no PriorityClass with name" in condition["message"]
    events = [e for e in (await kube_client.list(resource_path("", "v1", "events", ns)))["items"] if e["reason"] == "FailedCreate"]
    assert events and events[0]["type"] == "Warning" and events[0]["message"].startswith("Error creating: ")
    assert await owned_pods(kube_client, ns) == []


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
async def test_deleting_a_replica_set_cascades_as_asked(kube_client: KubeClient, controllers: WorkloadControllers, ns: str, policy: str) -> None:
    await kube_client.create(rs_path(ns), replica_set("cascade", 2))
    await eventually_async(lambda: _count(kube_client, ns, 2), what="two pods")
    await kube_client.delete(rs_path(ns, "cascade"), propagation_policy=policy)
    await eventually_async(lambda: _gone(kube_client, rs_path(ns, "cascade")), what="the ReplicaSet gone")
    pods = (await kube_client.list(pods_path(ns)))["items"]
    if policy == "Orphan":
        assert len(pods) == 2 and all(not p["metadata"].get("ownerReferences") and not p["metadata"].get("deletionTimestamp") for p in pods)
    else:
        # Unscheduled pods go at once (nothing runs them).
        await eventually_async(lambda: _count(kube_client, ns, 0, including_deleting=True), what="the pods deleted")


async def _count(client: KubeClient, ns: str, n: int, including_deleting: bool = False) -> bool:
    items = (await client.list(pods_path(ns)))["items"]
    return len(items if including_deleting else [p for p in items if not p["metadata"].get("deletionTimestamp")]) == n


async def _gone(client: KubeClient, path: str) -> bool:
    return await get_or_none(client, path) is None


# ---- pure parts ----------------------------------------------------------------------------------


def _pod(name: str, node: str = "", phase: str = "Pending", ready_at: str = "", created: str = "2026-01-01T00:00:00Z", **annotations: str) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}] if ready_at else []
    meta: dict[str, Any] = {"name": name, "uid": name, "creationTimestamp": created, "annotations": annotations}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase, "conditions": conditions}}


def test_deletion_order_follows_upstream_ranking() -> None:
    now = time.time()
    running_old = _pod("running-old", "n1", "Running", "2026-01-01T00:00:00Z")
    running_new = _pod("running-new", "n2", "Running", "2026-06-01T00:00:00Z", created="2026-05-01T00:00:00Z")
    pending = _pod("pending", "n1", "Pending")
    unscheduled = _pod("unscheduled")
    cheap = _pod("cheap", "n3", "Running", "2026-01-01T00:00:00Z", **{"controller.kubernetes.io/pod-deletion-cost": "-10"})
    pods = [running_old, running_new, pending, unscheduled, cheap]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods, pods, 4, now)]
    assert order[:3] == ["unscheduled", "pending", "cheap"]
    # Among ready ones, the one sharing a node with more related pods goes first (n1 has two).
    assert order[3] == "running-old"
    assert [p["metadata"]["name"] for p in pods_to_delete(pods, pods, 2, now)] == ["unscheduled", "pending"]


async def test_slow_start_batches_double_and_stop_at_the_first_failed_batch() -> None:
    calls = 0

    async def succeed() -> None:
        nonlocal calls
        calls += 1

    assert await slow_start_batch(10, succeed) == (10, None)
    assert calls == 10
    calls = 0

    async def fail_after_three() -> None:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise RuntimeError("quota")

    # Batches of 1 and 2 succeed; the batch of 4 fails, and the remaining 13 are never tried.
    successes, error = await slow_start_batch(20, fail_after_three)
    assert (calls, successes, str(error)) == (7, 3, "quota")


def test_expectations() -> None:
    expectations = Expectations(timeout=60)
    assert expectations.satisfied("ns/rs")
    expectations.expect_creations("ns/rs", 2)
    assert not expectations.satisfied("ns/rs")
    expectations.creation_observed("ns/rs")
    expectations.creation_observed("ns/rs")
    assert expectations.satisfied("ns/rs")
    expectations.expect_deletions("ns/rs", ["ns/a", "ns/b"])
    expectations.deletion_observed("ns/rs", "ns/a")
    expectations.deletion_observed("ns/rs", "ns/a")  # each pod counts once
    assert expectations.pending("ns/rs") == (0, 1)
    expectations.deletion_observed("ns/rs", "ns/b")
    assert expectations.satisfied("ns/rs")
    expired = Expectations(timeout=0)
    expired.expect_creations("ns/rs", 1)
    time.sleep(0.01)
    assert expired.satisfied("ns/rs")
