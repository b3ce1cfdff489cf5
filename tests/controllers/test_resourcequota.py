"""The ResourceQuota controller (upstream's pkg/controller/resourcequota): the status it publishes
for a new quota (every limit, used counted from what exists), recounts when objects go
(replenishment) or limits change, on demand watches of the other resources quotas count, the
periodic resync that undoes an overcharge, and the controller process acting as upstream's
``resourcequota-controller`` account."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controllers.resourcequota import ResourceQuotaController, changes_use, parse_count_name
from devtools.server import REPO_ROOT, stop_process
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer, run_with_informers
from kube.objects import Obj
from kube.tasks import cancel_and_wait
from tests.authcluster import AuthCluster, audit_writers
from tests.helpers import claim, pod
from tests.processes import eventually, eventually_async

COUNT = "count/resourceclaims.resource.k8s.io"
CLAIMS = ("resource.k8s.io", "v1", "resourceclaims")


def quotas(namespace: str, name: str = "") -> str:
    return resource_path("", "v1", "resourcequotas", namespace, name or None)


def claims(namespace: str, name: str = "") -> str:
    return resource_path(*CLAIMS, namespace, name or None)


async def new_namespace(client: KubeClient) -> str:
    created = await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": "quota-"}})
    return str(created["metadata"]["name"])


async def status_of(client: KubeClient, namespace: str, name: str) -> Obj:
    found: Obj = (await client.get(quotas(namespace, name))).get("status") or {}
    return found


def has_status(client: KubeClient, namespace: str, name: str, expected: Obj) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await status_of(client, namespace, name) == expected

    return check


ControllerRunner = Callable[..., Awaitable[ResourceQuotaController]]


@pytest.fixture
async def run_controller(kube_client: KubeClient) -> AsyncIterator[ControllerRunner]:
    """Start the controller in this event loop, with its own pod and claim informers."""
    tasks: list[asyncio.Task[None]] = []

    async def start(**options: Any) -> ResourceQuotaController:
        pods = Informer(kube_client, resource_path("", "v1", "pods"), name="pods")
        claim_informer = Informer(kube_client, resource_path(*CLAIMS), name="resourceclaims")
        controller = ResourceQuotaController(kube_client, pods=pods, claims=claim_informer, **options)
        tasks.append(asyncio.create_task(run_with_informers([pods, claim_informer], controller.process())))
        return controller

    yield start
    for task in tasks:
        await cancel_and_wait(task)


async def test_a_new_quota_gets_its_status_and_then_limits_claims(kube_client: KubeClient, run_controller: ControllerRunner) -> None:
    # Upstream's e2e "supports count/resourceclaims.resource.k8s.io ResourceQuota".
    namespace = await new_namespace(kube_client)
    await kube_client.create(claims(namespace), claim("claim-0"))
    await run_controller(sync_period=0)
    hard = {COUNT: "1", "pods": "2", "requests.cpu": "1", "count/resourceclaimtemplates.resource.k8s.io": "1"}
    await kube_client.create(quotas(namespace), {"metadata": {"name": "object-count"}, "spec": {"hard": hard}})
    expected = {"hard": hard, "used": {COUNT: "1", "pods": "0", "requests.cpu": "0", "count/resourceclaimtemplates.resource.k8s.io": "0"}}
    await eventually_async(has_status(kube_client, namespace, "object-count", expected), what="the quota's first status")
    with pytest.raises(ApiError) as refused:
        await kube_client.create(claims(namespace), claim(generate_name="claim-1-"))
    assert refused.value.code == 403
    assert f"exceeded quota: object-count, requested: {COUNT}=1, used: {COUNT}=1, limited: {COUNT}=1" in refused.value.message


async def test_deleted_objects_give_their_share_back_at_once(kube_client: KubeClient, run_controller: ControllerRunner) -> None:
    namespace = await new_namespace(kube_client)
    await run_controller(sync_period=0)  # no resync: only replenishment can count again
    hard = {COUNT: "1", "pods": "1"}
    await kube_client.create(quotas(namespace), {"metadata": {"name": "q"}, "spec": {"hard": hard}})
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": {COUNT: "0", "pods": "0"}}), what="the first status")
    await kube_client.create(claims(namespace), claim("c"))
    await kube_client.create(resource_path("", "v1", "pods", namespace), pod("p"))
    assert await status_of(kube_client, namespace, "q") == {"hard": hard, "used": {COUNT: "1", "pods": "1"}}  # charged by admission
    await kube_client.delete(claims(namespace, "c"))
    await kube_client.delete(resource_path("", "v1", "pods", namespace, "p"), grace_period_seconds=0)
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": {COUNT: "0", "pods": "0"}}), what="the shares given back")
    # A pod that finishes gives back what it uses, though it stays.
    await kube_client.create(resource_path("", "v1", "pods", namespace), pod("done"))
    await kube_client.patch(resource_path("", "v1", "pods", namespace, "done", "status"), {"status": {"phase": "Succeeded"}})
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": {COUNT: "0", "pods": "0"}}), what="the finished pod's share")


async def test_new_limits_and_other_resources_are_counted_when_a_quota_names_them(kube_client: KubeClient, run_controller: ControllerRunner) -> None:
    namespace = await new_namespace(kube_client)
    await kube_client.create(resource_path("", "v1", "configmaps", namespace), {"metadata": {"name": "settings"}})
    await kube_client.create(resource_path("", "v1", "services", namespace), {"metadata": {"name": "web"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
    await kube_client.create(resource_path("apps", "v1", "replicasets", namespace), {
        "metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})  # fmt: skip
    await run_controller(sync_period=0)
    await kube_client.create(quotas(namespace), {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "3"}}})
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": {"pods": "3"}, "used": {"pods": "0"}}), what="the first status")
    hard = {"pods": "3", "configmaps": "5", "services.nodeports": "4", "count/replicasets.apps": "2", "count/widgets.example.com": "1"}
    await kube_client.patch(quotas(namespace, "q"), {"spec": {"hard": hard}})
    # An unserved resource is left out, as no evaluator counts it.
    used = {"pods": "0", "configmaps": "1", "services.nodeports": "1", "count/replicasets.apps": "1"}
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": used}), what="the new limits counted")
    await kube_client.delete(resource_path("apps", "v1", "replicasets", namespace, "rs"))
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": {**used, "count/replicasets.apps": "0"}}), what="the replica set's share back")


async def test_a_resync_undoes_what_a_failed_write_was_charged(kube_client: KubeClient, run_controller: ControllerRunner) -> None:
    namespace = await new_namespace(kube_client)
    await run_controller(sync_period=0.5)
    hard = {COUNT: "5"}
    await kube_client.create(quotas(namespace), {"metadata": {"name": "q"}, "spec": {"hard": hard}})
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": {COUNT: "0"}}), what="the first status")
    await kube_client.create(claims(namespace), claim("same"))
    # Charged before the name was found taken (upstream's order), as upstream's admission does.
    with pytest.raises(ApiError) as taken:
        await kube_client.create(claims(namespace), claim("same"))
    assert taken.value.code == 409
    await eventually_async(has_status(kube_client, namespace, "q", {"hard": hard, "used": {COUNT: "1"}}), what="the recount")


def test_what_counts_again_on_updates() -> None:
    running, finished = pod("p"), {**pod("p"), "status": {"phase": "Failed"}}
    assert changes_use("", "pods", running, finished)
    assert not changes_use("", "pods", finished, finished)
    assert changes_use("", "pods", running, {**running, "spec": {**running["spec"], "activeDeadlineSeconds": 3}})
    assert changes_use("", "services", {"spec": {"type": "ClusterIP"}}, {"spec": {"type": "LoadBalancer"}})
    assert not changes_use("", "services", {"spec": {}}, {"spec": {"type": "ClusterIP"}})
    assert changes_use("", "persistentvolumeclaims", {"status": {}}, {"status": {"allocatedResources": {"storage": "1Gi"}}})
    assert not changes_use("resource.k8s.io", "resourceclaims", claim("a"), {**claim("a"), "status": {"allocation": {}}})
    assert parse_count_name("count/deployments.apps") == ("apps", "deployments")
    assert parse_count_name("count/pods") == ("", "pods")
    assert parse_count_name("pods") is None


# ---- the process, as its own service account ---------------------------------------------------


@pytest.fixture
def controller_process(auth_cluster: AuthCluster, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = open(tmp_path / "controller.log", "ab")  # noqa: SIM115 - handed to the child
    process = subprocess.Popen(
        [sys.executable, "-m", "controllers", *auth_cluster.credentials.worker_flags("controller"), "--use-service-account-credentials",
         "--lease-duration", "2", "--log-level", "debug"],
        cwd=REPO_ROOT, stdout=log, stderr=log,
    )  # fmt: skip
    log.close()
    yield process
    stop_process(process)


def test_the_controller_writes_status_as_its_own_account(auth_cluster: AuthCluster, controller_process: subprocess.Popen[bytes]) -> None:
    with auth_cluster.admin() as admin:
        namespace = admin.post("/api/v1/namespaces", json={"metadata": {"generateName": "quota-"}}).json()["metadata"]["name"]
        created = admin.post(quotas(namespace), json={"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}})
        assert created.status_code == 201, created.text

        def counted() -> bool:
            return admin.get(quotas(namespace, "q")).json().get("status") == {"hard": {"pods": "1"}, "used": {"pods": "0"}}

        eventually(counted, what="the quota's status", timeout=60)
    assert "system:serviceaccount:kube-system:resourcequota-controller" in audit_writers(auth_cluster.audit_log)[("resourcequotas", "status")]
