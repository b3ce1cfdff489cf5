"""What the workload controller tests share: the controllers and the garbage collector in this
event loop, and a stand-in for scheduler and kubelet that binds pods, reports them Running and
Ready, and finishes the deletion of the ones being deleted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from controllers.garbagecollector import GarbageCollector
from controllers.objects import owner_uids
from controllers.workloadcontrollers import WorkloadControllers
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer, run_with_informers
from kube.timeutil import now_rfc3339
from tests.processes import in_background


def pods_path(ns: str, name: str = "", sub: str | None = None) -> str:
    return resource_path("", "v1", "pods", ns, name or None, sub)


@contextlib.asynccontextmanager
async def running_controllers(client: KubeClient) -> AsyncIterator[WorkloadControllers]:
    pods = Informer(client, resource_path("", "v1", "pods"), name="pods")
    claims = Informer(client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims")
    workloads = WorkloadControllers(lambda _key: client, pods, workers=4)
    collector = GarbageCollector(client, pods=pods, claims=claims, claims_by_owner=Index(claims, owner_uids), workers=2, more=workloads.collected)
    informers = [*collector.informers, *workloads.informers]
    work = run_with_informers(informers, collector.process(), *(process() for process in workloads.processes))
    async with in_background(work, synced=informers):
        yield workloads


def affinity_node(pod: dict[str, Any]) -> str | None:
    """The node a pod's required node affinity names by metadata.name (a daemon pod's), if any."""
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and len(field.get("values") or []) == 1:
                return str(field["values"][0])
    return None


async def make_ready(client: KubeClient, ns: str, pod: dict[str, Any], node: str = "node-a") -> None:
    """Bind the pod (when it is not bound: to the node its affinity names, else ``node``) and
    report it Running and Ready."""
    name = pod["metadata"]["name"]
    node = affinity_node(pod) or node
    if not (pod.get("spec") or {}).get("nodeName"):
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
        await client.post_raw(pods_path(ns, name, "binding"), binding)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()}]}
    await client.patch(pods_path(ns, name, "status"), {"status": status})


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


async def finish(client: KubeClient, ns: str, pod: dict[str, Any], exit_code: int = 0) -> None:
    """Report the pod's containers ended with ``exit_code``: Succeeded on 0, else Failed."""
    now = now_rfc3339()
    containers = [
        {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "startedAt": now, "finishedAt": now}}}
        for c in pod["spec"]["containers"]
    ]  # fmt: skip
    status = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now, "reason": "PodCompleted"}],
        "containerStatuses": containers,
    }
    await client.patch(pods_path(ns, pod["metadata"]["name"], "status"), {"status": status})


async def kubelet_loop(client: KubeClient, ns: str, *, ready: bool = True, exit_code: int | None = None, interval: float = 0.1) -> None:
    """Until cancelled: ready every new pod of the namespace (when ``ready``), or (with
    ``exit_code``) end it so, and finish the graceful deletion of the pods being deleted."""
    while True:
        for pod in (await client.list(pods_path(ns)))["items"]:
            meta = pod["metadata"]
            try:
                if meta.get("deletionTimestamp"):
                    await client.delete(pods_path(ns, meta["name"]), grace_period_seconds=0, missing_ok=True)
                elif (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                elif exit_code is not None:
                    if not (pod.get("spec") or {}).get("nodeName"):
                        await make_ready(client, ns, pod)
                        pod = await client.get(pods_path(ns, meta["name"]))
                    await finish(client, ns, pod, exit_code)
                elif ready and not is_ready(pod):
                    await make_ready(client, ns, pod)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def kubelet(client: KubeClient, ns: str, *, ready: bool = True, exit_code: int | None = None) -> AsyncIterator[None]:
    task = asyncio.create_task(kubelet_loop(client, ns, ready=ready, exit_code=exit_code))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
