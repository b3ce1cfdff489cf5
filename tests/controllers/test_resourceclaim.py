"""The claim controller as a real process against a real server."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devtools.server import REPO_ROOT, ServerProcess, stop_process
from tests.processes import eventually

RESOURCE = "/apis/resource.k8s.io/v1"


class ControllerProcess:
    """``python -m controllers`` with its log in a file."""

    def __init__(self, server_url: str, log_path: Path, *extra: str) -> None:
        self.server_url = server_url
        self.log_path = log_path
        self.extra = list(extra)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ControllerProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            [sys.executable, "-m", "controllers", "--server", self.server_url, "--lease-duration", "2", "--log-level", "debug", *self.extra],
            cwd=REPO_ROOT, stdout=log, stderr=log,
        )
        log.close()
        return self

    def stop(self) -> None:
        stop_process(self.process)


@pytest.fixture(scope="module")
def controller(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    proc = ControllerProcess(server.url, tmp_path_factory.mktemp("controller") / "controller.log").start()
    yield proc
    proc.stop()


def _template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "metadata": {"labels": {"from": "template"}, "annotations": {"note": "x"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        },
    }


def _pod(name: str, claims: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], "resourceClaims": claims},
    }


def _claims(api: httpx.Client, ns: str) -> list[dict[str, Any]]:
    response = api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims")
    assert response.status_code == 200, response.text
    return response.json()["items"]  # type: ignore[no-any-return]


def test_template_claim_lifecycle_and_restart(api: httpx.Client, ns: str, controller: ControllerProcess) -> None:
    assert api.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=_template("gpu-template")).status_code == 201
    long_pod = "p" * 60
    response = api.post(f"/api/v1/namespaces/{ns}/pods", json=_pod(long_pod, [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]))
    assert response.status_code == 201, response.text
    pod = response.json()

    claims = eventually(lambda: _claims(api, ns))
    assert len(claims) == 1
    claim = claims[0]
    meta = claim["metadata"]
    # Both parts shortened in proportion, so the claim name survives a long pod name.
    assert meta["generateName"] == "p" * 52 + "-gp" and meta["name"].startswith(meta["generateName"])
    assert meta["annotations"] == {"note": "x", "resource.kubernetes.io/pod-claim-name": "gpu"}
    assert meta["labels"] == {"from": "template"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": long_pod, "uid": pod["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"

    def statuses() -> Any:
        return api.get(f"/api/v1/namespaces/{ns}/pods/{long_pod}").json().get("status", {}).get("resourceClaimStatuses")

    assert eventually(statuses) == [{"name": "gpu", "resourceClaimName": meta["name"]}]

    # A restarted controller finds the claim by annotation + owner and creates nothing new.
    controller.stop()
    controller.start()
    api.patch(f"/api/v1/namespaces/{ns}/pods/{long_pod}", json={"metadata": {"labels": {"poke": "1"}}},
              headers={"Content-Type": "application/merge-patch+json"})
    time.sleep(3)
    assert [c["metadata"]["name"] for c in _claims(api, ns)] == [meta["name"]]

    # Deleting the pod deletes its generated claim.
    assert api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{long_pod}", json={"gracePeriodSeconds": 0}).status_code == 200
    eventually(lambda: _claims(api, ns) == [], timeout=20)


def test_reserved_for_deleted_pod_is_removed_and_claim_deallocated(api: httpx.Client, ns: str, controller: ControllerProcess) -> None:
    pod = api.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("user", [{"name": "gpu", "resourceClaimName": "shared"}])).json()
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }
    created = api.post(f"{RESOURCE}/namespaces/{ns}/resourceclaims", json=claim).json()
    created["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "pool", "device": "dev-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "user", "uid": pod["metadata"]["uid"]}],
    }
    response = api.put(f"{RESOURCE}/namespaces/{ns}/resourceclaims/shared/status", json=created)
    assert response.status_code == 200, response.text
    time.sleep(1)  # the controller must leave a claim alone while its pod lives
    assert api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/shared").json()["status"]["reservedFor"]

    assert api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/user", json={"gracePeriodSeconds": 0}).status_code == 200

    def released() -> bool:
        status = api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/shared").json().get("status") or {}
        return "reservedFor" not in status and "allocation" not in status

    eventually(released)
    # The claim is the user's, not generated: it stays.
    assert api.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/shared").status_code == 200


def test_garbage_collection_background_and_foreground(api: httpx.Client, ns: str, controller: ControllerProcess) -> None:
    def owned_claim(name: str, owner: dict[str, Any]) -> dict[str, Any]:
        ref = {"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "ownerReferences": [ref]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
        }

    def exists(path: str) -> bool:
        return api.get(path).status_code == 200

    claims = f"{RESOURCE}/namespaces/{ns}/resourceclaims"
    ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}}
    assert api.post(claims, json=owned_claim("orphaned", ghost)).status_code == 201
    eventually(lambda: not exists(f"{claims}/orphaned"))

    owner = api.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("owner", [])).json()
    assert api.post(claims, json=owned_claim("dependent", owner)).status_code == 201
    response = api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/owner", json={"gracePeriodSeconds": 0, "propagationPolicy": "Foreground"})
    assert response.status_code == 200, response.text
    # The dependent goes first, then the collector drops foregroundDeletion and the owner goes too.
    eventually(lambda: not exists(f"{claims}/dependent") and not exists(f"/api/v1/namespaces/{ns}/pods/owner"))


async def test_leader_election_standby_takes_over(server: ServerProcess) -> None:
    import asyncio
    import uuid

    from kube.client import KubeClient
    from kube.leaderelection import LeaderElector

    client = KubeClient(server.url, user_agent="test-leader")
    name = f"lease-{uuid.uuid4().hex[:6]}"
    timing = {"lease_duration": 1.0, "renew_deadline": 0.7, "retry_period": 0.1, "release_on_cancel": False}
    first = LeaderElector(client, name=name, identity="first", **timing)  # type: ignore[arg-type]
    second = LeaderElector(client, name=name, identity="second", **timing)  # type: ignore[arg-type]
    leading: list[str] = []

    def work(who: str) -> Callable[[], Any]:
        async def lead() -> None:
            leading.append(who)
            await asyncio.Event().wait()

        return lead

    task1 = asyncio.create_task(first.run(work("first")))
    while not leading:
        await asyncio.sleep(0.02)
    task2 = asyncio.create_task(second.run(work("second")))
    await asyncio.sleep(1.5)
    assert leading == ["first"] and not second.is_leader  # the lease is renewed: no takeover
    task1.cancel()  # a crash: the lease is not released, the standby waits for it to expire
    while len(leading) < 2:
        await asyncio.sleep(0.02)
    lease = await client.get(first.path)
    assert lease["spec"]["holderIdentity"] == "second" and lease["spec"]["leaseTransitions"] == 1
    task2.cancel()
    await asyncio.gather(task1, task2, return_exceptions=True)
    await client.close()


def _claim(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, **meta},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }


def test_delete_protection_finalizer_stays_until_deallocated_or_deleted(api: httpx.Client, ns: str, controller: ControllerProcess) -> None:
    claims = f"{RESOURCE}/namespaces/{ns}/resourceclaims"
    protection = "resource.kubernetes.io/delete-protection"
    # Unallocated and unreserved, with the finalizer (the scheduler may add it around its allocation): it stays.
    assert api.post(claims, json=_claim("waiting", finalizers=[protection])).status_code == 201
    # Control: a claim the controller deallocates itself loses the finalizer.
    pod = api.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("user", [{"name": "gpu", "resourceClaimName": "used"}])).json()
    created = api.post(claims, json=_claim("used", finalizers=[protection])).json()
    created["status"] = {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "pool", "device": "dev-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "user", "uid": pod["metadata"]["uid"]}],
    }
    assert api.put(f"{claims}/used/status", json=created).status_code == 200
    assert api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/user", json={"gracePeriodSeconds": 0}).status_code == 200

    def released() -> bool:
        claim = api.get(f"{claims}/used").json()
        return "allocation" not in (claim.get("status") or {}) and protection not in (claim["metadata"].get("finalizers") or [])

    eventually(released)
    time.sleep(0.5)  # the queue is FIFO: "waiting" was handled before "used"; give its sync time to finish
    assert api.get(f"{claims}/waiting").json()["metadata"]["finalizers"] == [protection]

    # Being deleted and unused: the finalizer goes, and so does the claim.
    assert api.delete(f"{claims}/waiting").status_code == 200
    eventually(lambda: api.get(f"{claims}/waiting").status_code == 404)


def test_garbage_collection_drops_only_references_to_gone_owners(api: httpx.Client, ns: str, controller: ControllerProcess) -> None:
    claims = f"{RESOURCE}/namespaces/{ns}/resourceclaims"

    def ref(owner: dict[str, Any], block: bool = False) -> dict[str, Any]:
        meta = owner["metadata"]
        return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], **({"blockOwnerDeletion": True} if block else {})}

    keeper = api.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("keeper", [])).json()
    leaver = api.post(f"/api/v1/namespaces/{ns}/pods", json=_pod("leaver", [])).json()
    ghost = {"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000001"}}

    # One owner is gone, another remains: only the dangling reference goes.
    assert api.post(claims, json=_claim("half-orphaned", ownerReferences=[ref(ghost), ref(keeper)])).status_code == 201
    refs = eventually(lambda: (r := api.get(f"{claims}/half-orphaned").json()["metadata"].get("ownerReferences")) and len(r) == 1 and r)
    assert refs == [ref(keeper)]

    # Foreground deletion of one owner: a dependent another owner keeps loses that reference, and
    # the owner goes; a dependent with no other owner is deleted first.
    assert api.post(claims, json=_claim("shared", ownerReferences=[ref(leaver, block=True), ref(keeper)])).status_code == 201
    assert api.post(claims, json=_claim("only-leaver", ownerReferences=[ref(leaver, block=True)])).status_code == 201
    response = api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/leaver", json={"gracePeriodSeconds": 0, "propagationPolicy": "Foreground"})
    assert response.status_code == 200, response.text
    eventually(lambda: api.get(f"/api/v1/namespaces/{ns}/pods/leaver").status_code == 404)
    assert api.get(f"{claims}/only-leaver").status_code == 404
    shared = api.get(f"{claims}/shared").json()
    assert shared["metadata"]["ownerReferences"] == [ref(keeper)] and not shared["metadata"].get("deletionTimestamp")
