"""The Job and TTL-after-finished controllers (with the garbage collector) in this event loop
against a real server, a stand-in kubelet ending pods: completions and parallelism, the tracking
finalizer and uncounted pods, backoffLimit, a pod failure policy, Indexed jobs, suspension,
activeDeadlineSeconds, ttlSecondsAfterFinished and orphaning, as upstream's pkg/controller/job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.job import Backoff, first_pending_indexes, format_indexes, parse_indexes, with_indexes
from controllers.workloadcontrollers import WorkloadControllers
from kube.client import KubeClient, resource_path
from tests.controllers.workload_helpers import finish, kubelet, make_ready, pods_path, running_controllers
from tests.processes import eventually_async, get_or_none

TRACKING = "batch.kubernetes.io/job-tracking"


def jobs_path(ns: str, name: str = "", sub: str | None = None) -> str:
    return resource_path("batch", "v1", "jobs", ns, name or None, sub)


def job(name: str, **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template, **spec}}


@pytest.fixture
async def controllers(kube_client: KubeClient) -> AsyncIterator[WorkloadControllers]:
    async with running_controllers(kube_client) as workloads:
        yield workloads


def conditions(j: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (j.get("status") or {}).get("conditions") or []}


async def finished(client: KubeClient, ns: str, name: str, kind: str = "Complete") -> dict[str, Any] | None:
    current = await client.get(jobs_path(ns, name))
    return current if conditions(current).get(kind, {}).get("status") == "True" else None


async def pods_of(client: KubeClient, ns: str) -> list[dict[str, Any]]:
    return (await client.list(pods_path(ns)))["items"]


async def test_completions_and_parallelism(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    created = await kube_client.create(jobs_path(ns), job("pi", completions=3, parallelism=2))

    async def two_active() -> list[dict[str, Any]] | None:
        pods = await pods_of(kube_client, ns)
        return pods if len(pods) == 2 else None

    pods = await eventually_async(two_active, what="parallelism 2")
    uid = created["metadata"]["uid"]
    for pod in pods:
        meta = pod["metadata"]
        assert meta["finalizers"] == [TRACKING] and meta["generateName"] == "pi-"
        assert meta["labels"]["batch.kubernetes.io/job-name"] == "pi" and meta["labels"]["controller-uid"] == uid
        assert meta["ownerReferences"][0]["kind"] == "Job" and meta["ownerReferences"][0]["controller"] is True

    async def counted() -> dict[str, Any] | None:
        # The controller writes the status after it created the pods: wait for that write.
        current = await kube_client.get(jobs_path(ns, "pi"))
        return current if current.get("status", {}).get("active") == 2 else None

    started = await eventually_async(counted, what="status.active 2")
    assert started["status"]["startTime"]
    async with kubelet(kube_client, ns, exit_code=0):
        done = await eventually_async(lambda: finished(kube_client, ns, "pi"), what="Complete")
    status = done["status"]
    assert (status["succeeded"], status.get("failed", 0), status.get("active", 0), status["ready"], status["terminating"]) == (3, 0, 0, 0, 0)
    assert status["uncountedTerminatedPods"] == {} and status["completionTime"] >= status["startTime"]
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert conditions(done)["Complete"]["reason"] == "CompletionsReached"
    # Every pod counted once, its finalizer gone.
    pods = await pods_of(kube_client, ns)
    assert len(pods) == 3 and all(not p["metadata"].get("finalizers") for p in pods)

    async def events_recorded() -> bool:  # the Completed event is recorded after the status write
        events = {e["reason"] for e in (await kube_client.list(resource_path("", "v1", "events", ns)))["items"]}
        return {"SuccessfulCreate", "Completed"} <= events

    await eventually_async(events_recorded, what="the job's events")


async def test_backoff_limit(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    await kube_client.create(jobs_path(ns), job("failing", backoffLimit=0))
    async with kubelet(kube_client, ns, exit_code=1):
        failed = await eventually_async(lambda: finished(kube_client, ns, "failing", "Failed"), what="Failed")
    assert (failed["status"]["failed"], conditions(failed)["Failed"]["reason"]) == (1, "BackoffLimitExceeded")
    assert conditions(failed)["FailureTarget"]["message"] == "Job has reached the specified backoff limit"
    assert "completionTime" not in failed["status"]


async def test_pod_failure_policy(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    rules = [
        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}},
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
    ]
    await kube_client.create(jobs_path(ns), job("policy", backoffLimit=0, podFailurePolicy={"rules": rules}))
    pod = (await eventually_async(lambda: pods_of(kube_client, ns), what="a pod"))[0]
    await make_ready(kube_client, ns, pod)
    await finish(kube_client, ns, await kube_client.get(pods_path(ns, pod["metadata"]["name"])), exit_code=7)

    async def ignored() -> bool:
        current = await kube_client.get(jobs_path(ns, "policy"))
        released = not (await kube_client.get(pods_path(ns, pod["metadata"]["name"])))["metadata"].get("finalizers")
        return released and not (current.get("status") or {}).get("failed") and "Failed" not in conditions(current)

    # Ignored: not counted against backoffLimit 0, and the Job goes on (after the failure back-off).
    await eventually_async(ignored, what="the failure ignored")

    async def replacement() -> dict[str, Any] | None:
        pods = [p for p in await pods_of(kube_client, ns) if p["metadata"]["name"] != pod["metadata"]["name"]]
        return pods[0] if pods else None

    second = await eventually_async(replacement, what="a replacement after the back-off", timeout=30)
    await make_ready(kube_client, ns, second)
    await finish(kube_client, ns, await kube_client.get(pods_path(ns, second["metadata"]["name"])), exit_code=42)
    failed = await eventually_async(lambda: finished(kube_client, ns, "policy", "Failed"), what="Failed by the policy")
    message = f"Container main for pod {ns}/{second['metadata']['name']} failed with exit code 42 matching FailJob rule at index 1"
    assert (conditions(failed)["Failed"]["reason"], conditions(failed)["Failed"]["message"]) == ("PodFailurePolicy", message)


async def test_indexed_job(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    await kube_client.create(jobs_path(ns), job("idx", completions=3, parallelism=3, completionMode="Indexed"))

    async def three() -> list[dict[str, Any]] | None:
        pods = await pods_of(kube_client, ns)
        return pods if len(pods) == 3 else None

    pods = sorted(await eventually_async(three, what="three pods"), key=lambda p: p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
    for index, pod in enumerate(pods):
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == str(index)
        assert pod["metadata"]["generateName"] == f"idx-{index}-" and pod["spec"]["hostname"] == f"idx-{index}"
        env = pod["spec"]["containers"][0]["env"]
        assert env == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}]
    async with kubelet(kube_client, ns, exit_code=0):
        done = await eventually_async(lambda: finished(kube_client, ns, "idx"), what="Complete")
    assert (done["status"]["completedIndexes"], done["status"]["succeeded"]) == ("0-2", 3)


async def test_suspend_and_resume(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    await kube_client.create(jobs_path(ns), job("later", suspend=True, parallelism=2, completions=2))

    async def suspended() -> dict[str, Any] | None:
        current = await kube_client.get(jobs_path(ns, "later"))
        return current if conditions(current).get("Suspended", {}).get("status") == "True" else None

    current = await eventually_async(suspended, what="Suspended")
    assert conditions(current)["Suspended"]["reason"] == "JobSuspended" and "startTime" not in current["status"]
    assert await pods_of(kube_client, ns) == []
    await kube_client.patch(jobs_path(ns, "later"), {"spec": {"suspend": False}})
    await eventually_async(lambda: _count(kube_client, ns, 2), what="pods after resuming")

    async def resumed() -> dict[str, Any] | None:
        current = await kube_client.get(jobs_path(ns, "later"))
        return current if conditions(current)["Suspended"]["status"] == "False" else None

    current = await eventually_async(resumed, what="resumed")
    assert conditions(current)["Suspended"]["reason"] == "JobResumed" and current["status"]["startTime"]
    # Suspending again deletes the active pods.
    async with kubelet(kube_client, ns):
        await kube_client.patch(jobs_path(ns, "later"), {"spec": {"suspend": True}})
        await eventually_async(lambda: _count(kube_client, ns, 0), what="pods deleted while suspended")


async def test_active_deadline(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    await kube_client.create(jobs_path(ns), job("slow", activeDeadlineSeconds=1))
    async with kubelet(kube_client, ns):
        failed = await eventually_async(lambda: finished(kube_client, ns, "slow", "Failed"), what="DeadlineExceeded")
        assert conditions(failed)["Failed"]["reason"] == "DeadlineExceeded"
        await eventually_async(lambda: _count(kube_client, ns, 0), what="its pod deleted")


async def test_ttl_after_finished_deletes_the_job_and_its_pods(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    await kube_client.create(jobs_path(ns), job("brief", ttlSecondsAfterFinished=1))
    async with kubelet(kube_client, ns, exit_code=0):
        await eventually_async(lambda: finished(kube_client, ns, "brief"), what="Complete")
        await eventually_async(lambda: _gone(kube_client, jobs_path(ns, "brief")), what="deleted after its TTL")
        await eventually_async(lambda: _count(kube_client, ns, 0), what="its pods deleted with it")


async def test_deleting_a_job_orphans_its_pods_by_default(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    await kube_client.create(jobs_path(ns), job("left", parallelism=2, completions=2))
    await eventually_async(lambda: _count(kube_client, ns, 2), what="two pods")
    await kube_client.delete(jobs_path(ns, "left"))
    await eventually_async(lambda: _gone(kube_client, jobs_path(ns, "left")), what="the Job gone")

    async def released() -> bool:
        pods = await pods_of(kube_client, ns)
        return len(pods) == 2 and all(not p["metadata"].get("ownerReferences") and not p["metadata"].get("finalizers") for p in pods)

    # The collector drops the owner references, the Job controller the tracking finalizers.
    await eventually_async(released, what="orphaned without finalizers")


async def _count(client: KubeClient, ns: str, n: int) -> bool:
    return len(await pods_of(client, ns)) == n


async def _gone(client: KubeClient, path: str) -> bool:
    return await get_or_none(client, path) is None


# ---- pure parts ----------------------------------------------------------------------------------


def test_index_intervals() -> None:
    assert parse_indexes("0-2,4,6,7", 10) == [(0, 2), (4, 4), (6, 7)]
    assert parse_indexes("0-20", 5) == [(0, 4)]
    assert format_indexes(with_indexes([(0, 2), (6, 7)], [3, 5, 9])) == "0-3,5-7,9"
    assert format_indexes([(1, 2)]) == "1,2"
    indexed = {"spec": {"completions": 5, "completionMode": "Indexed"}}
    running = [{"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": "1"}}}]
    assert first_pending_indexes(indexed, [(0, 0)], running, [], 2) == [2, 3]


async def test_failure_backoff_doubles() -> None:
    backoff = Backoff(failures=1, last_failure=100.0)
    assert backoff.remaining(105.0) == 5.0
    assert Backoff(3, 100.0).remaining(100.0) == 40.0
    assert Backoff(20, 100.0).remaining(100.0) == 600.0
    await asyncio.sleep(0)
