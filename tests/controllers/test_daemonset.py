"""The DaemonSet controller (with the garbage collector) in this event loop against a real
server, a stand-in kubelet readying pods: which nodes get a pod (node selector, node affinity,
taints and tolerations), the pod each gets (node affinity on metadata.name, the daemon
tolerations, revision labels), ControllerRevisions, a rolling update, and node changes, as
upstream's pkg/controller/daemon."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.daemonset import DAEMON_TOLERATIONS, should_run
from controllers.workloadcontrollers import WorkloadControllers
from kube.client import KubeClient, resource_path
from tests.controllers.workload_helpers import affinity_node, kubelet, pods_path, running_controllers
from tests.processes import eventually_async

LABELS = {"app": "agent"}


def ds_path(ns: str, name: str = "", sub: str | None = None) -> str:
    return resource_path("apps", "v1", "daemonsets", ns, name or None, sub)


def nodes_path(name: str = "") -> str:
    return resource_path("", "v1", "nodes", None, name or None)


def daemon_set(name: str, pool: str, image: str = "agent:1", **pod_spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": dict(LABELS)}, "spec": {"nodeSelector": {"pool": pool}, "containers": [{"name": "agent", "image": image}], **pod_spec}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": {"selector": {"matchLabels": dict(LABELS)}, "template": template}}


@pytest.fixture
async def controllers(kube_client: KubeClient) -> AsyncIterator[WorkloadControllers]:
    async with running_controllers(kube_client) as workloads:
        yield workloads


@pytest.fixture
async def pool(kube_client: KubeClient) -> AsyncIterator[str]:
    """A label value only this test's nodes carry; the nodes go at the end."""
    name = f"p{uuid.uuid4().hex[:8]}"
    yield name
    for node in (await kube_client.list(nodes_path()))["items"]:
        if node["metadata"]["name"].startswith(name):
            await kube_client.delete(nodes_path(node["metadata"]["name"]), missing_ok=True)


async def add_node(client: KubeClient, pool: str, suffix: str, labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None) -> str:
    name = f"{pool}-{suffix}"
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": pool, **(labels or {})}}, "spec": {}}
    if taints:
        body["spec"]["taints"] = taints
    await client.create(nodes_path(), body)
    return name


async def daemon_pods(client: KubeClient, ns: str) -> dict[str, dict[str, Any]]:
    """Live (not deleting) daemon pods by the node their affinity names."""
    pods = (await client.list(pods_path(ns)))["items"]
    return {str(affinity_node(p)): p for p in pods if not p["metadata"].get("deletionTimestamp")}


async def test_one_pod_per_eligible_node(kube_client: KubeClient, controllers: WorkloadControllers, ns: str, pool: str) -> None:
    plain = await add_node(kube_client, pool, "plain")
    tainted = await add_node(kube_client, pool, "gpu", taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    await add_node(kube_client, "other" + pool, "elsewhere")  # another pool: its label does not match
    cordoned = await add_node(kube_client, pool, "cordoned", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    created = await kube_client.create(ds_path(ns), daemon_set("agent", pool))

    async def placed() -> dict[str, dict[str, Any]] | None:
        pods = await daemon_pods(kube_client, ns)
        return pods if set(pods) == {plain, cordoned} else None

    # The gpu taint is not tolerated; unschedulable is, by every daemon pod.
    pods = await eventually_async(placed, what="pods on the plain and cordoned nodes")
    pod = pods[plain]
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [plain]}]}]
    }
    assert not pod["spec"].get("nodeName")  # the scheduler binds it
    assert [t for t in pod["spec"]["tolerations"] if t in DAEMON_TOLERATIONS] == list(DAEMON_TOLERATIONS)
    (revision,) = (await kube_client.list(resource_path("apps", "v1", "controllerrevisions", ns)))["items"]
    revision_hash = revision["metadata"]["labels"]["controller-revision-hash"]
    assert revision["metadata"]["name"] == f"agent-{revision_hash}" and revision["revision"] == 1
    assert revision["data"]["spec"]["template"]["$patch"] == "replace"
    assert revision["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert pod["metadata"]["labels"] == {**LABELS, "controller-revision-hash": revision_hash, "pod-template-generation": "1"}
    async with kubelet(kube_client, ns):

        async def counted() -> dict[str, Any] | None:
            status = (await kube_client.get(ds_path(ns, "agent"))).get("status") or {}
            return status if status.get("numberAvailable") == 2 else None

        status = await eventually_async(counted, what="two available")
    assert {k: status[k] for k in ("desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled", "numberMisscheduled")} == {
        "desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2, "numberMisscheduled": 0,
    }  # fmt: skip
    # Tolerating the gpu taint adds that node.
    ds = await kube_client.get(ds_path(ns, "agent"))
    ds["spec"]["template"]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    await kube_client.update(ds_path(ns, "agent"), ds)

    async def three() -> bool:
        return set(await daemon_pods(kube_client, ns)) == {plain, cordoned, tainted}

    async with kubelet(kube_client, ns):
        await eventually_async(three, what="a pod on the tolerated node too")


async def test_rolling_update_and_node_changes(kube_client: KubeClient, controllers: WorkloadControllers, ns: str, pool: str) -> None:
    first = await add_node(kube_client, pool, "a")
    second = await add_node(kube_client, pool, "b")
    await kube_client.create(ds_path(ns), daemon_set("agent", pool))
    async with kubelet(kube_client, ns):
        await eventually_async(lambda: _all_available(kube_client, ns, 2), what="two available")
        ds = await kube_client.get(ds_path(ns, "agent"))
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
        updated = await kube_client.update(ds_path(ns, "agent"), ds)
        assert updated["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"

        async def rolled() -> bool:
            pods = await daemon_pods(kube_client, ns)
            images = {p["spec"]["containers"][0]["image"] for p in pods.values()}
            return set(pods) == {first, second} and images == {"agent:2"} and await _all_available(kube_client, ns, 2, updated=2)

        await eventually_async(rolled, what="every node on the new template")
        revisions = sorted(r["revision"] for r in (await kube_client.list(resource_path("apps", "v1", "controllerrevisions", ns)))["items"])
        assert revisions == [1, 2]
        # A NoExecute taint it does not tolerate evicts the daemon pod; a node leaving the pool too.
        await kube_client.patch(nodes_path(first), {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
        await kube_client.patch(nodes_path(second), {"metadata": {"labels": {"pool": "elsewhere"}}})
        await eventually_async(lambda: _no_pods(kube_client, ns), what="both pods removed")

        async def none_desired() -> bool:
            # The taint manager evicts the first pod; the controller's status follows that event.
            return (await kube_client.get(ds_path(ns, "agent")))["status"]["desiredNumberScheduled"] == 0

        await eventually_async(none_desired, what="status.desiredNumberScheduled 0")


async def _all_available(client: KubeClient, ns: str, count: int, updated: int | None = None) -> bool:
    status = (await client.get(ds_path(ns, "agent"))).get("status") or {}
    ok = status.get("numberAvailable") == count and status.get("desiredNumberScheduled") == count
    return ok and (updated is None or status.get("updatedNumberScheduled") == updated)


async def _no_pods(client: KubeClient, ns: str) -> bool:
    return not await daemon_pods(client, ns)


def test_eligibility() -> None:
    ds = daemon_set("d", "p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}})

    def node(labels: dict[str, str], taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"metadata": {"name": "n", "labels": {"pool": "p", **labels}}, "spec": {"taints": taints or []}}

    assert should_run(node({"zone": "a"}), ds) == (True, True)
    assert should_run(node({"zone": "b"}), ds) == (False, False)
    assert should_run(node({"zone": "a"}, [{"key": "x", "effect": "NoSchedule"}]), ds) == (False, True)
    assert should_run(node({"zone": "a"}, [{"key": "x", "effect": "NoExecute"}]), ds) == (False, False)
    # not-ready is tolerated by every daemon pod
    assert should_run(node({"zone": "a"}, [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]), ds) == (True, True)
    named = daemon_set("d", "p", nodeName="other")
    assert should_run(node({}), named) == (False, False)
