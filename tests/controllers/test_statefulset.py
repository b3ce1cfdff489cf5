"""The StatefulSet controller in this event loop against a real server, a stand-in kubelet
readying pods: stable names and identities, a claim per pod from the volume claim templates,
ordered and parallel creation, ordered scale-down, and a partitioned rolling update with its
revisions, as upstream's pkg/controller/statefulset."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.statefulset import parent_and_ordinal
from controllers.workloadcontrollers import WorkloadControllers
from kube.client import KubeClient, resource_path
from tests.controllers.workload_helpers import kubelet, pods_path, running_controllers
from tests.processes import eventually_async

LABELS = {"app": "db"}


def sts_path(ns: str, name: str = "", sub: str | None = None) -> str:
    return resource_path("apps", "v1", "statefulsets", ns, name or None, sub)


def stateful_set(name: str, replicas: int, image: str = "db:1", **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": dict(LABELS)}, "spec": {"containers": [{"name": "db", "image": image}]}}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": "db", "selector": {"matchLabels": dict(LABELS)}, "template": template, **spec},
    }  # fmt: skip


@pytest.fixture
async def controllers(kube_client: KubeClient) -> AsyncIterator[WorkloadControllers]:
    async with running_controllers(kube_client) as workloads:
        yield workloads


async def live_pods(client: KubeClient, ns: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in (await client.list(pods_path(ns)))["items"] if not p["metadata"].get("deletionTimestamp")}


async def test_ordered_pods_with_identity_and_claims(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    claim_template = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    await kube_client.create(sts_path(ns), stateful_set("web", 3, volumeClaimTemplates=[claim_template]))
    # OrderedReady: web-1 waits until web-0 is running and ready.
    await eventually_async(lambda: _names(kube_client, ns, {"web-0"}), what="web-0")
    await asyncio.sleep(0.5)
    assert set(await live_pods(kube_client, ns)) == {"web-0"}
    async with kubelet(kube_client, ns):
        await eventually_async(lambda: _names(kube_client, ns, {"web-0", "web-1", "web-2"}), what="three pods")

        async def ready() -> dict[str, Any] | None:
            status = (await kube_client.get(sts_path(ns, "web"))).get("status") or {}
            return status if status.get("readyReplicas") == 3 and status.get("availableReplicas") == 3 else None

        status = await eventually_async(ready, what="three ready")
    assert status["currentRevision"] == status["updateRevision"] and status["updatedReplicas"] == 3 and status["observedGeneration"] == 1
    pod = (await live_pods(kube_client, ns))["web-1"]
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-1", "db")
    assert pod["metadata"]["labels"] == {
        **LABELS, "statefulset.kubernetes.io/pod-name": "web-1", "apps.kubernetes.io/pod-index": "1", "controller-revision-hash": status["updateRevision"],
    }  # fmt: skip
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}]
    claims = {c["metadata"]["name"]: c for c in (await kube_client.list(resource_path("", "v1", "persistentvolumeclaims", ns)))["items"]}
    assert set(claims) == {"data-web-0", "data-web-1", "data-web-2"}
    assert claims["data-web-0"]["metadata"]["labels"] == LABELS
    revisions = (await kube_client.list(resource_path("apps", "v1", "controllerrevisions", ns)))["items"]
    assert [r["metadata"]["name"] for r in revisions] == [status["updateRevision"]]
    events = [e["message"] for e in (await kube_client.list(resource_path("", "v1", "events", ns)))["items"]]
    assert "create Pod web-0 in StatefulSet web successful" in events and "create Claim data-web-0 Pod web-0 in StatefulSet web success" in events


async def test_scale_down_and_partitioned_rolling_update(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    async with kubelet(kube_client, ns):
        await kube_client.create(sts_path(ns), stateful_set("web", 3, podManagementPolicy="Parallel"))
        await eventually_async(lambda: _ready(kube_client, ns, 3), what="three ready")
        sts = await kube_client.get(sts_path(ns, "web"))
        first_revision = sts["status"]["currentRevision"]
        sts["spec"]["template"]["spec"]["containers"][0]["image"] = "db:2"
        sts["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
        await kube_client.update(sts_path(ns, "web"), sts)

        async def partially_updated() -> dict[str, Any] | None:
            pods = await live_pods(kube_client, ns)
            images = {name: p["spec"]["containers"][0]["image"] for name, p in pods.items()}
            status = (await kube_client.get(sts_path(ns, "web"))).get("status") or {}
            done = images == {"web-0": "db:1", "web-1": "db:2", "web-2": "db:2"} and status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 3
            return status if done else None

        status = await eventually_async(partially_updated, what="ordinals from the partition updated")
        # Below the partition the current revision stays.
        assert status["currentRevision"] == first_revision != status["updateRevision"]
        await kube_client.patch(sts_path(ns, "web", "scale"), {"spec": {"replicas": 1}})
        await eventually_async(lambda: _names(kube_client, ns, {"web-0"}), what="scaled down to web-0")


async def _names(client: KubeClient, ns: str, names: set[str]) -> bool:
    return set(await live_pods(client, ns)) == names


async def _ready(client: KubeClient, ns: str, count: int) -> bool:
    status = (await client.get(sts_path(ns, "web"))).get("status") or {}
    return status.get("readyReplicas") == count


def test_ordinals_come_from_the_name() -> None:
    assert parent_and_ordinal({"metadata": {"name": "web-12"}}) == ("web", 12)
    assert parent_and_ordinal({"metadata": {"name": "my-db-0"}}) == ("my-db", 0)
    assert parent_and_ordinal({"metadata": {"name": "web"}}) == ("", -1)
