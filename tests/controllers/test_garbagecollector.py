"""The garbage collector in this event loop against a real server: dangling and remaining owners,
owners it cannot look up, and foreground and orphan deletion of owners."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controllers.garbagecollector import GarbageCollector
from controllers.objects import owner_uids
from kube.client import KubeClient, resource_path
from kube.indexer import Index
from kube.informer import Informer, run_with_informers
from tests.processes import eventually_async, get_or_none, in_background

GHOST = {"apiVersion": "v1", "kind": "Pod", "name": "ghost", "uid": "00000000-0000-0000-0000-00000000dead"}


def claims_path(ns: str, name: str = "") -> str:
    return resource_path("resource.k8s.io", "v1", "resourceclaims", ns, name or None)


def pods_path(ns: str, name: str = "") -> str:
    return resource_path("", "v1", "pods", ns, name or None)


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "pause"}]}}


def claim(name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "ownerReferences": list(owners)},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }


def ref(owner: dict[str, Any], *, block: bool = False) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], **({"blockOwnerDeletion": True} if block else {})}


@pytest.fixture
async def collector(kube_client: KubeClient) -> AsyncIterator[GarbageCollector]:
    pods = Informer(kube_client, resource_path("", "v1", "pods"), name="pods")
    claims = Informer(kube_client, resource_path("resource.k8s.io", "v1", "resourceclaims"), name="resourceclaims")
    gc = GarbageCollector(kube_client, pods=pods, claims=claims, claims_by_owner=Index(claims, owner_uids), workers=2)
    async with in_background(run_with_informers(gc.informers, gc.process()), synced=gc.informers):
        yield gc


async def gone(kube_client: KubeClient, path: str) -> bool:
    return await get_or_none(kube_client, path) is None


async def test_an_object_whose_owners_are_all_gone_is_deleted(kube_client: KubeClient, collector: GarbageCollector, ns: str) -> None:
    await kube_client.create(claims_path(ns), claim("orphaned", GHOST))
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "orphaned-event", "ownerReferences": [GHOST]},
        "involvedObject": {"kind": "Pod", "name": "ghost", "namespace": ns},
        "reason": "Test",
        "message": "owned by a pod that never existed",
    }
    await kube_client.create(resource_path("", "v1", "events", ns), event)
    await eventually_async(lambda: gone(kube_client, claims_path(ns, "orphaned")), what="claim collected")
    await eventually_async(lambda: gone(kube_client, resource_path("", "v1", "events", ns, "orphaned-event")), what="event collected")


async def test_only_references_to_gone_owners_are_dropped(kube_client: KubeClient, collector: GarbageCollector, ns: str) -> None:
    keeper = await kube_client.create(pods_path(ns), pod("keeper"))
    await kube_client.create(claims_path(ns), claim("half", GHOST, ref(keeper)))

    async def owners() -> list[dict[str, Any]] | None:
        refs: list[dict[str, Any]] = (await kube_client.get(claims_path(ns, "half")))["metadata"].get("ownerReferences") or []
        return refs if len(refs) == 1 else None

    assert await eventually_async(owners, what="the dangling reference dropped") == [ref(keeper)]


async def test_owners_of_kinds_it_cannot_look_up_keep_their_dependents(kube_client: KubeClient, collector: GarbageCollector, ns: str) -> None:
    unknown = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "00000000-0000-0000-0000-0000000000ab"}
    await kube_client.create(claims_path(ns), claim("kept", unknown))
    # Control: a dependent of a gone pod, created after it, is collected meanwhile.
    await kube_client.create(claims_path(ns), claim("control", GHOST))
    await eventually_async(lambda: gone(kube_client, claims_path(ns, "control")), what="control collected")
    assert (await kube_client.get(claims_path(ns, "kept")))["metadata"]["ownerReferences"] == [unknown]


async def test_a_deleted_owner_takes_its_dependents_along(kube_client: KubeClient, collector: GarbageCollector, ns: str) -> None:
    owner = await kube_client.create(pods_path(ns), pod("owner"))
    await kube_client.create(claims_path(ns), claim("dependent", ref(owner)))
    await asyncio.sleep(0.3)
    assert not await gone(kube_client, claims_path(ns, "dependent"))  # the owner lives
    await kube_client.delete(pods_path(ns, "owner"), grace_period_seconds=0)
    await eventually_async(lambda: gone(kube_client, claims_path(ns, "dependent")), what="dependent collected after its owner")


async def test_foreground_deletion_waits_for_blocking_dependents(kube_client: KubeClient, collector: GarbageCollector, ns: str) -> None:
    leaver = await kube_client.create(pods_path(ns), pod("leaver"))
    keeper = await kube_client.create(pods_path(ns), pod("keeper"))
    await kube_client.create(claims_path(ns), claim("only-leaver", ref(leaver, block=True)))
    await kube_client.create(claims_path(ns), claim("shared", ref(leaver, block=True), ref(keeper)))
    await kube_client.delete(pods_path(ns, "leaver"), grace_period_seconds=0, propagation_policy="Foreground")
    await eventually_async(lambda: gone(kube_client, pods_path(ns, "leaver")), what="the owner gone")
    # It went only after its own dependent; the one another owner keeps just lost the reference.
    assert await gone(kube_client, claims_path(ns, "only-leaver"))
    shared = await kube_client.get(claims_path(ns, "shared"))
    assert shared["metadata"]["ownerReferences"] == [ref(keeper)] and not shared["metadata"].get("deletionTimestamp")


async def test_orphan_deletion_releases_the_dependents(kube_client: KubeClient, collector: GarbageCollector, ns: str) -> None:
    owner = await kube_client.create(pods_path(ns), pod("owner"))
    await kube_client.create(claims_path(ns), claim("dependent", ref(owner, block=True)))
    await kube_client.delete(pods_path(ns, "owner"), grace_period_seconds=0, propagation_policy="Orphan")
    await eventually_async(lambda: gone(kube_client, pods_path(ns, "owner")), what="the owner gone")
    dependent = await kube_client.get(claims_path(ns, "dependent"))
    assert not dependent["metadata"].get("ownerReferences") and not dependent["metadata"].get("deletionTimestamp")
