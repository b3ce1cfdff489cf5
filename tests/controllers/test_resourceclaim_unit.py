"""ClaimController in this event loop against a real server: claims from templates, reservedFor
cleanup, deallocation and the deletion of generated claims. (test_resourceclaim.py runs the
whole controller process.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.resourceclaim import ClaimController, generate_name
from kube.client import KubeClient, resource_path
from tests.processes import eventually_async, get_or_none, in_background

PROTECTION = "resource.kubernetes.io/delete-protection"
REQUESTS = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "pool", "device": "dev-0"}]}}


def claims_path(ns: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path("resource.k8s.io", "v1", "resourceclaims", ns, name or None, subresource)


def pods_path(ns: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path("", "v1", "pods", ns, name or None, subresource)


def pod(name: str, claims: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], "resourceClaims": claims},
    }


def template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "from the template"}}, "spec": REQUESTS},
    }


@pytest.fixture
async def controller(kube_client: KubeClient) -> AsyncIterator[ClaimController]:
    claims = ClaimController(kube_client, workers=2)
    async with in_background(claims.run(), synced=claims.informers):
        yield claims


async def claims_in(kube_client: KubeClient, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await kube_client.list(claims_path(ns)))["items"]
    return items


async def allocated_claim(kube_client: KubeClient, ns: str, name: str, reserved_for: list[dict[str, Any]], **meta: Any) -> None:
    created = await kube_client.create(claims_path(ns), {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, **meta}, "spec": REQUESTS})
    created["status"] = {"allocation": ALLOCATION, "reservedFor": reserved_for}
    await kube_client.update(claims_path(ns, name, "status"), created)


def reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {"resource": "pods", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}


def test_generated_names_keep_both_parts() -> None:
    assert generate_name("web", "gpu") == "web-gpu-"
    # 57 characters at most (the server appends 5); both parts are shortened in proportion, with no
    # trailing hyphen then, as upstream does.
    assert generate_name("p" * 60, "gpu-claim") == "p" * 48 + "-gpu-cla"


async def test_claim_from_template_is_created_and_recorded(kube_client: KubeClient, controller: ClaimController, ns: str) -> None:
    await kube_client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", ns), template("gpu-template"))
    owner = await kube_client.create(pods_path(ns), pod("web", [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]))

    [claim] = await eventually_async(lambda: claims_in(kube_client, ns), what="a claim from the template")
    meta = claim["metadata"]
    assert meta["generateName"] == "web-gpu-" and meta["name"].startswith("web-gpu-")
    assert meta["annotations"] == {"note": "from the template", "resource.kubernetes.io/pod-claim-name": "gpu"}
    assert meta["labels"] == {"team": "a"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]
    [request] = claim["spec"]["devices"]["requests"]  # the template's spec, with the server's defaults
    assert request["name"] == "gpu" and request["exactly"]["deviceClassName"] == "gpu.example.com"

    async def recorded() -> Any:
        return ((await kube_client.get(pods_path(ns, "web"))).get("status") or {}).get("resourceClaimStatuses")

    assert await eventually_async(recorded, what="the claim in the pod status") == [{"name": "gpu", "resourceClaimName": meta["name"]}]
    # Later pod updates create nothing more.
    await kube_client.patch(pods_path(ns, "web"), {"metadata": {"labels": {"poke": "1"}}})
    await asyncio.sleep(0.5)
    assert [c["metadata"]["name"] for c in await claims_in(kube_client, ns)] == [meta["name"]]


async def test_missing_template_is_reported_and_created_when_it_appears(kube_client: KubeClient, controller: ClaimController, ns: str) -> None:
    await kube_client.create(pods_path(ns), pod("waits", [{"name": "gpu", "resourceClaimTemplateName": "later"}]))

    async def warning() -> list[dict[str, Any]]:
        events = (await kube_client.list(resource_path("", "v1", "events", ns)))["items"]
        return [e for e in events if e["reason"] == "FailedResourceClaimCreation"]

    [event] = await eventually_async(warning, what="FailedResourceClaimCreation event")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "waits"
    assert event["message"] == 'PodResourceClaim gpu: resource claim template "later": not found'
    assert await claims_in(kube_client, ns) == []

    await kube_client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", ns), template("later"))
    [claim] = await eventually_async(lambda: claims_in(kube_client, ns), what="a claim once the template exists")
    assert claim["metadata"]["generateName"] == "waits-gpu-"


async def test_finished_pods_leave_reserved_for_and_the_last_one_deallocates(kube_client: KubeClient, controller: ClaimController, ns: str) -> None:
    stays = await kube_client.create(pods_path(ns), pod("stays", [{"name": "gpu", "resourceClaimName": "shared"}]))
    leaves = await kube_client.create(pods_path(ns), pod("leaves", [{"name": "gpu", "resourceClaimName": "shared"}]))
    await allocated_claim(kube_client, ns, "shared", [reference(stays), reference(leaves)], finalizers=[PROTECTION])

    await kube_client.patch(pods_path(ns, "leaves", "status"), {"status": {"phase": "Succeeded"}})

    async def reserved() -> list[str]:
        status = (await kube_client.get(claims_path(ns, "shared"))).get("status") or {}
        return [r["name"] for r in status.get("reservedFor") or []]

    assert await eventually_async(lambda: _equals(reserved(), ["stays"]), what="the finished pod's reservation gone")
    claim = await kube_client.get(claims_path(ns, "shared"))
    # Still in use: allocated, and protected.
    assert claim["status"]["allocation"] == ALLOCATION and claim["metadata"]["finalizers"] == [PROTECTION]

    await kube_client.delete(pods_path(ns, "stays"), grace_period_seconds=0)

    async def released() -> dict[str, Any] | None:
        claim = await kube_client.get(claims_path(ns, "shared"))
        status = claim.get("status") or {}
        done = "reservedFor" not in status and "allocation" not in status and PROTECTION not in (claim["metadata"].get("finalizers") or [])
        return claim if done else None

    await eventually_async(released, what="claim deallocated and unprotected")
    # A claim the user created outlives its users.
    assert await get_or_none(kube_client, claims_path(ns, "shared")) is not None


async def test_a_claim_of_a_live_pod_is_left_alone(kube_client: KubeClient, controller: ClaimController, ns: str) -> None:
    user = await kube_client.create(pods_path(ns), pod("user", [{"name": "gpu", "resourceClaimName": "mine"}]))
    await allocated_claim(kube_client, ns, "mine", [reference(user)], finalizers=[PROTECTION])
    before = await kube_client.get(claims_path(ns, "mine"))
    await asyncio.sleep(1.0)
    after = await kube_client.get(claims_path(ns, "mine"))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_generated_claim_goes_with_its_finished_pod(kube_client: KubeClient, controller: ClaimController, ns: str) -> None:
    await kube_client.create(resource_path("resource.k8s.io", "v1", "resourceclaimtemplates", ns), template("gpu-template"))
    await kube_client.create(pods_path(ns), pod("job", [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]))
    [claim] = await eventually_async(lambda: claims_in(kube_client, ns), what="a generated claim")
    name = claim["metadata"]["name"]

    async def recorded() -> Any:
        return ((await kube_client.get(pods_path(ns, "job"))).get("status") or {}).get("resourceClaimStatuses")

    await eventually_async(recorded, what="the claim in the pod status")
    await kube_client.patch(pods_path(ns, "job", "status"), {"status": {"phase": "Succeeded"}})
    await eventually_async(lambda: _missing(kube_client, claims_path(ns, name)), what="the generated claim deleted")
    # The pod itself stays: finishing is not deleting.
    assert await get_or_none(kube_client, pods_path(ns, "job")) is not None


async def _equals(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


async def _missing(kube_client: KubeClient, path: str) -> bool:
    return await get_or_none(kube_client, path) is None
