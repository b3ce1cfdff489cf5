"""The Deployment controller (with the ReplicaSet controller and the garbage collector) in this
event loop against a real server, a stand-in kubelet readying pods: the first ReplicaSet, a
rolling update and a recreate, scaling through /scale, revision history, pausing, the progress
deadline, and cascading deletes, each as upstream's pkg/controller/deployment does it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.deployment import compute_hash, find_active_or_latest, resolve_fenceposts, rs_proportion
from controllers.workloadcontrollers import WorkloadControllers
from kube.client import KubeClient, resource_path
from tests.controllers.workload_helpers import kubelet, pods_path, running_controllers
from tests.processes import eventually_async, get_or_none

LABELS = {"app": "web"}


def d_path(ns: str, name: str = "", sub: str | None = None) -> str:
    return resource_path("apps", "v1", "deployments", ns, name or None, sub)


def rs_path(ns: str, name: str = "") -> str:
    return resource_path("apps", "v1", "replicasets", ns, name or None)


def deployment(name: str, replicas: int, image: str = "pause:1", **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": dict(LABELS)}, "spec": {"containers": [{"name": "main", "image": image}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": replicas, "selector": {"matchLabels": dict(LABELS)}, "template": template, **spec}}


@pytest.fixture
async def controllers(kube_client: KubeClient) -> AsyncIterator[WorkloadControllers]:
    async with running_controllers(kube_client) as workloads:
        yield workloads


async def replica_sets(client: KubeClient, ns: str) -> list[dict[str, Any]]:
    items = (await client.list(rs_path(ns)))["items"]
    return sorted(items, key=lambda rs: int(rs["metadata"]["annotations"].get("deployment.kubernetes.io/revision", "0")))


async def rolled_out(client: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    """What `kubectl rollout status` waits for: the generation observed, every replica updated and
    available, no old one left."""
    d = await client.get(d_path(ns, name))
    status, replicas = d.get("status") or {}, d["spec"]["replicas"]
    done = (
        status.get("observedGeneration", 0) >= d["metadata"]["generation"]
        and status.get("updatedReplicas", 0) == replicas
        and status.get("replicas", 0) == replicas
        and status.get("availableReplicas", 0) == replicas
    )
    return d if done else None


def condition(d: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in d["status"]["conditions"] if c["type"] == kind)


async def set_image(client: KubeClient, ns: str, name: str, image: str, **spec: Any) -> dict[str, Any]:
    """``kubectl set image``'s strategic merge patch (with ``spec``'s other fields): no
    resourceVersion, so the controller's status writes meanwhile cannot make it conflict."""
    template = {"spec": {"containers": [{"name": "main", "image": image}]}}
    return await client.patch(d_path(ns, name), {"spec": {**spec, "template": template}}, patch_type="strategic")


async def test_first_replica_set_and_a_rolling_update(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    async with kubelet(kube_client, ns):
        created = await kube_client.create(d_path(ns), deployment("web", 3))
        d = await eventually_async(lambda: rolled_out(kube_client, ns, "web"), what="rolled out")
        (rs,) = await replica_sets(kube_client, ns)
        template_hash = rs["metadata"]["labels"]["pod-template-hash"]
        assert rs["metadata"]["name"] == f"web-{template_hash}"
        assert rs["spec"]["selector"] == {"matchLabels": {**LABELS, "pod-template-hash": template_hash}}
        assert rs["spec"]["template"]["metadata"]["labels"] == {**LABELS, "pod-template-hash": template_hash}
        assert rs["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
        # 25% surge of 3 rounds up to 1: at most 4 pods.
        assert rs["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": "3", "deployment.kubernetes.io/max-replicas": "4"}
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        assert {k: d["status"][k] for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "observedGeneration")} == {
            "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 1,
        }  # fmt: skip
        assert (condition(d, "Available")["status"], condition(d, "Available")["reason"]) == ("True", "MinimumReplicasAvailable")
        progressing = condition(d, "Progressing")
        assert (progressing["status"], progressing["reason"], progressing["message"]) == ("True", "NewReplicaSetAvailable", f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.')

        # A new image: a second ReplicaSet takes over, the first is kept (empty) as history.
        updated = await set_image(kube_client, ns, "web", "pause:2")
        assert updated["metadata"]["generation"] == 2

        async def second_done() -> dict[str, Any] | None:
            done = await rolled_out(kube_client, ns, "web")
            return done if done and done["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2" else None

        await eventually_async(second_done, what="second rollout")
        old, new = await replica_sets(kube_client, ns)
        assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 3)
        assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "pause:2"
        assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        pods = [p for p in (await kube_client.list(pods_path(ns)))["items"] if not p["metadata"].get("deletionTimestamp")]
        assert {p["metadata"]["labels"]["pod-template-hash"] for p in pods} == {new["metadata"]["labels"]["pod-template-hash"]}
        events = [e["message"] for e in (await kube_client.list(resource_path("", "v1", "events", ns)))["items"] if e["reason"] == "ScalingReplicaSet"]
        assert f"Scaled up replica set {rs['metadata']['name']} from 0 to 3" in events
        assert any(m.startswith(f"Scaled down replica set {old['metadata']['name']} from ") for m in events)
        # Rolling back to the first template reuses its ReplicaSet, now revision 3.
        await set_image(kube_client, ns, "web", "pause:1")

        async def third() -> bool:
            sets = {r["metadata"]["name"]: r for r in await replica_sets(kube_client, ns)}
            first = sets[old["metadata"]["name"]]
            return first["spec"]["replicas"] == 3 and first["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"

        await eventually_async(third, what="the first ReplicaSet back as revision 3")
        first = (await kube_client.get(rs_path(ns, old["metadata"]["name"])))["metadata"]["annotations"]
        assert first["deployment.kubernetes.io/revision-history"] == "1"


async def test_scale_through_the_scale_subresource(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    async with kubelet(kube_client, ns):
        await kube_client.create(d_path(ns), deployment("web", 2))
        await eventually_async(lambda: rolled_out(kube_client, ns, "web"), what="rolled out")
        await kube_client.patch(d_path(ns, "web", "scale"), {"spec": {"replicas": 5}})
        d = await eventually_async(lambda: rolled_out(kube_client, ns, "web"), what="scaled to 5")
        assert d["status"]["availableReplicas"] == 5
        (rs,) = await replica_sets(kube_client, ns)
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "5"
        assert (await kube_client.get(d_path(ns, "web", "scale")))["status"] == {"replicas": 5, "selector": "app=web"}


async def test_recreate_removes_every_old_pod_before_the_new_ones(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    async with kubelet(kube_client, ns):
        await kube_client.create(d_path(ns), deployment("db", 2, strategy={"type": "Recreate"}))
        await eventually_async(lambda: rolled_out(kube_client, ns, "db"), what="rolled out")
        await set_image(kube_client, ns, "db", "pause:2")

        async def second() -> bool:
            done = await rolled_out(kube_client, ns, "db")
            return bool(done and done["metadata"]["annotations"].get("deployment.kubernetes.io/revision") == "2")

        await eventually_async(second, what="recreated")
    old, new = await replica_sets(kube_client, ns)
    events = sorted(
        (e for e in (await kube_client.list(resource_path("", "v1", "events", ns)))["items"] if e["reason"] == "ScalingReplicaSet"),
        key=lambda e: int(e["metadata"]["resourceVersion"]),
    )
    messages = [e["message"] for e in events]
    down = messages.index(f"Scaled down replica set {old['metadata']['name']} from 2 to 0")
    up = messages.index(f"Scaled up replica set {new['metadata']['name']} from 0 to 2")
    assert down < up


async def test_revision_history_limit_keeps_the_newest_old_sets(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    async with kubelet(kube_client, ns):
        await kube_client.create(d_path(ns), deployment("hist", 1, revisionHistoryLimit=1))
        for image in ("pause:2", "pause:3"):
            await eventually_async(lambda: rolled_out(kube_client, ns, "hist"), what="rolled out")
            await set_image(kube_client, ns, "hist", image)

        async def two_sets() -> bool:
            sets = await replica_sets(kube_client, ns)
            revisions = [s["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for s in sets]
            return revisions == ["2", "3"] and await rolled_out(kube_client, ns, "hist") is not None

        await eventually_async(two_sets, what="revision 1 cleaned up")


async def test_a_paused_deployment_does_not_roll_out(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    async with kubelet(kube_client, ns):
        await kube_client.create(d_path(ns), deployment("paused", 1))
        await eventually_async(lambda: rolled_out(kube_client, ns, "paused"), what="rolled out")
        await set_image(kube_client, ns, "paused", "pause:2", paused=True)

        async def paused() -> dict[str, Any] | None:
            current = await kube_client.get(d_path(ns, "paused"))
            cond = condition(current, "Progressing") if current.get("status", {}).get("conditions") else {}
            return current if cond.get("reason") == "DeploymentPaused" else None

        current = await eventually_async(paused, what="DeploymentPaused")
        assert condition(current, "Progressing")["status"] == "Unknown"
        assert len(await replica_sets(kube_client, ns)) == 1
        await kube_client.patch(d_path(ns, "paused"), {"spec": {"paused": False}})

        async def resumed() -> bool:
            return len(await replica_sets(kube_client, ns)) == 2 and await rolled_out(kube_client, ns, "paused") is not None

        await eventually_async(resumed, what="rolled out after resuming")


async def test_progress_deadline(kube_client: KubeClient, controllers: WorkloadControllers, ns: str) -> None:
    # Nothing readies the pods: no progress, and after progressDeadlineSeconds the Deployment says so.
    await kube_client.create(d_path(ns), deployment("stuck", 1, progressDeadlineSeconds=2))

    async def timed_out() -> dict[str, Any] | None:
        d = await kube_client.get(d_path(ns, "stuck"))
        conditions = {c["type"]: c for c in (d.get("status") or {}).get("conditions") or []}
        progressing = conditions.get("Progressing") or {}
        return progressing if progressing.get("reason") == "ProgressDeadlineExceeded" else None

    cond = await eventually_async(timed_out, what="ProgressDeadlineExceeded", timeout=20)
    assert cond["status"] == "False" and cond["message"].endswith("has timed out progressing.")


@pytest.mark.parametrize("policy", ["Foreground", "Background", "Orphan"])
async def test_deleting_a_deployment_cascades_as_asked(kube_client: KubeClient, controllers: WorkloadControllers, ns: str, policy: str) -> None:
    async with kubelet(kube_client, ns):
        await kube_client.create(d_path(ns), deployment("gone", 2))
        await eventually_async(lambda: rolled_out(kube_client, ns, "gone"), what="rolled out")
        (rs,) = await replica_sets(kube_client, ns)
        await kube_client.delete(d_path(ns, "gone"), propagation_policy=policy)
        if policy == "Foreground":
            # The Deployment waits, marked for deletion, until its ReplicaSet and pods are gone.
            marked = await get_or_none(kube_client, d_path(ns, "gone"))
            assert marked is None or marked["metadata"]["finalizers"] == ["foregroundDeletion"]

        async def settled() -> bool:
            if await get_or_none(kube_client, d_path(ns, "gone")) is not None:
                return False
            pods = (await kube_client.list(pods_path(ns)))["items"]
            remaining = await get_or_none(kube_client, rs_path(ns, rs["metadata"]["name"]))
            if policy == "Orphan":
                return remaining is not None and not remaining["metadata"].get("ownerReferences") and len(pods) == 2
            return remaining is None and not pods

        await eventually_async(settled, what=f"{policy} deletion")


# ---- pure parts ----------------------------------------------------------------------------------


def _d(replicas: int, surge: Any = "25%", unavailable: Any = "25%") -> dict[str, Any]:
    return {"metadata": {"generation": 1}, "spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}, "status": {}}


def test_fenceposts_round_surge_up_and_unavailability_down() -> None:
    assert resolve_fenceposts(_d(10)) == (3, 2)
    assert resolve_fenceposts(_d(1)) == (1, 0)
    # Both zero after rounding: one pod may be unavailable.
    assert resolve_fenceposts(_d(1, surge=0, unavailable="25%")) == (0, 1)


def test_proportional_scaling_share() -> None:
    rs = {"metadata": {"name": "a", "annotations": {"deployment.kubernetes.io/max-replicas": "13"}}, "spec": {"replicas": 5}}
    # The Deployment grows from 10 (+3 surge) to 20 (+5 surge): this set's share of 12 more.
    assert rs_proportion(rs, _d(20), 12, 0) == round(5 * 25 / 13) - 5


def test_active_or_latest() -> None:
    def rs(name: str, replicas: int, created: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {"replicas": replicas}}

    old, newer = rs("old", 0, "2026-01-01T00:00:00Z"), rs("newer", 0, "2026-02-01T00:00:00Z")
    assert find_active_or_latest(None, [old, newer]) is newer
    assert find_active_or_latest(None, [old, rs("busy", 2, "2026-01-02T00:00:00Z")])["metadata"]["name"] == "busy"  # type: ignore[index]
    assert find_active_or_latest(rs("n", 1, ""), [rs("busy", 2, "2026-01-02T00:00:00Z")]) is None


def test_template_hash_depends_on_the_template_and_the_collision_count() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    first = compute_hash(template)
    assert first == compute_hash(dict(reversed(list(template.items())))) and first != compute_hash(template, 1)
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(first) <= 10
