"""A garbage collector for the kinds created with owners: pods, ResourceClaims and Events, and the
workloads' own (ReplicaSets of Deployments, ControllerRevisions, and the workloads themselves, which
may be dependents and are owners that can be deleted in the foreground or orphaning).

It does upstream's collector's job for these kinds:

- an object whose owners are all gone is deleted (in the foreground when an owner waits for
  it and it has dependents of its own, otherwise as its own finalizers ask);
- an object that still has an owner only loses its references to the owners that are gone, or
  that are being deleted in the foreground;
- an owner being deleted with the ``orphan`` finalizer releases its dependents (their
  references to it go) before the finalizer goes; one with ``foregroundDeletion`` waits until
  no dependent with ``blockOwnerDeletion`` is left.

Owners of other kinds are looked up on the server (an owner of a kind it cannot look up at all
keeps its dependents). Dependents are found through indexes of objects by owner UID.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from controllers.objects import get_live, group_of, metadata, owner_uids, set_finalizers
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.objects import Obj
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("garbage-collector")

Key = tuple[str, str, str]  # (plural, namespace, name)

RESOURCE_GROUP = "resource.k8s.io"

# Resources the collector looks after: plural -> (group, version).
COLLECTED = {"pods": ("", "v1"), "resourceclaims": (RESOURCE_GROUP, "v1"), "events": ("", "v1")}
# Owner kinds the collector can look up: (apiVersion group, kind) -> (group, version, plural, namespaced).
OWNER_KINDS: dict[tuple[str, str], tuple[str, str, str, bool]] = {
    ("", "Pod"): ("", "v1", "pods", True),
    ("", "Node"): ("", "v1", "nodes", False),
    ("", "Namespace"): ("", "v1", "namespaces", False),
    ("", "Event"): ("", "v1", "events", True),
    (RESOURCE_GROUP, "ResourceClaim"): (RESOURCE_GROUP, "v1", "resourceclaims", True),
    (RESOURCE_GROUP, "ResourceClaimTemplate"): (RESOURCE_GROUP, "v1", "resourceclaimtemplates", True),
    (RESOURCE_GROUP, "DeviceClass"): (RESOURCE_GROUP, "v1", "deviceclasses", False),
    (RESOURCE_GROUP, "ResourceSlice"): (RESOURCE_GROUP, "v1", "resourceslices", False),
    ("coordination.k8s.io", "Lease"): ("coordination.k8s.io", "v1", "leases", True),
}
# Owner kinds the collector has informers for: their deletion re-queues the dependents.
WATCHED_OWNER_KINDS = {("", "Pod"), (RESOURCE_GROUP, "ResourceClaim"), ("", "Event")}


@dataclass(frozen=True)
class Collected:
    """A further resource the collector looks after, read through a shared informer."""

    group: str
    version: str
    plural: str
    kind: str
    informer: Informer


class _Unknown:
    """Marker: an owner of a kind the collector cannot look up."""


UNKNOWN = _Unknown()


def _unchanged(old: Obj, new: Obj, watched: set[tuple[str, str]]) -> bool:
    """An update the collector need not look at: same owners, deletion and finalizers, all owners of
    kinds whose deletion it watches (others are re-checked on every update)."""
    refs = new.get("ownerReferences") or []
    return (
        refs == (old.get("ownerReferences") or [])
        and new.get("deletionTimestamp") == old.get("deletionTimestamp")
        and new.get("finalizers") == old.get("finalizers")
        and all((group_of(r.get("apiVersion", "")), r.get("kind", "")) in watched for r in refs)
    )


class GarbageCollector:
    """Informer handlers queue candidates; ``process()`` collects them until cancelled.

    ``pods`` and ``claims`` (and ``claims_by_owner``, claims by owner UID) are shared with the
    claim controller; the collector adds its own Event informer and owner indexes. ``more`` are
    further resources (the workloads'), read through their controllers' informers.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        claims: Informer,
        claims_by_owner: Index[str],
        workers: int = 4,
        watch_timeout_seconds: int | None = None,
        more: Sequence[Collected] = (),
    ) -> None:
        self.client = client
        # OWNER_KINDS plus the kinds of gated APIs found served at start (PodGroups with GenericWorkload).
        self.owner_kinds = dict(OWNER_KINDS)
        self.resources = dict(COLLECTED)
        self.watched = set(WATCHED_OWNER_KINDS)
        self.workers = workers
        self.pods = pods
        self.claims = claims
        self.events = Informer(client, resource_path("", "v1", "events"), name="events", watch_timeout_seconds=watch_timeout_seconds)
        self.by_plural = {"pods": pods, "resourceclaims": claims, "events": self.events}
        # Indexes first: their handlers must run before the handlers that read them.
        self.by_owner: dict[str, Index[str]] = {
            "pods": Index(pods, owner_uids),
            "resourceclaims": claims_by_owner,
            "events": Index(self.events, owner_uids),
        }
        for resource in more:
            self.resources[resource.plural] = (resource.group, resource.version)
            self.owner_kinds[(resource.group, resource.kind)] = (resource.group, resource.version, resource.plural, True)
            self.watched.add((resource.group, resource.kind))
            self.by_plural[resource.plural] = resource.informer
            self.by_owner[resource.plural] = Index(resource.informer, owner_uids)
        self.queue: WorkQueue[Key] = WorkQueue()
        for plural, informer in self.by_plural.items():
            self._wire(plural, informer)

    @property
    def informers(self) -> list[Informer]:
        """Every informer the collector reads (all but its Event informer are shared)."""
        return list(self.by_plural.values())

    def _path(self, plural: str, obj: Obj) -> str:
        group, version = self.resources[plural]
        m = metadata(obj)
        return resource_path(group, version, plural, m.get("namespace") or None, m["name"])

    # ---- event handlers -------------------------------------------------------------

    def _wire(self, plural: str, informer: Informer) -> None:
        informer.on_add(lambda obj: self._candidate(plural, obj))
        informer.on_update(lambda old, new: self._candidate(plural, new, old))
        informer.on_delete(self.owner_deleted)

    def _candidate(self, plural: str, obj: Obj, old: Obj | None = None) -> None:
        m = metadata(obj)
        if not (m.get("ownerReferences") or m.get("deletionTimestamp")):
            return
        if old is not None and _unchanged(metadata(old), m, self.watched):
            return  # owners and deletion as before: their own events already queued what they decide
        self.queue.add((plural, m.get("namespace", ""), m.get("name", "")))

    def owner_deleted(self, owner: Obj) -> None:
        # Dependents may now be orphans whose owners are all gone.
        for plural, dependent in self.dependents(str(metadata(owner).get("uid") or "")):
            self._candidate(plural, dependent)

    def dependents(self, uid: str) -> list[tuple[str, Obj]]:
        """(plural, object) of every cached object that names ``uid`` as an owner."""
        return [(plural, obj) for plural, index in self.by_owner.items() for obj in index.get(uid)] if uid else []

    # ---- running ----------------------------------------------------------------------

    async def process(self) -> None:
        """Process the queue until cancelled (the informers must have synced)."""
        log.info("caches synced, processing")
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, plural: str, namespace: str, name: str) -> bool:
        """Collect an object whose owners are gone; finish a foreground or orphan deletion of an owner."""
        obj = self.by_plural[plural].get(namespace, name)
        if obj is None:
            return True
        m = metadata(obj)
        finalizers: list[str] = list(m.get("finalizers") or [])
        if m.get("deletionTimestamp") and ("foregroundDeletion" in finalizers or "orphan" in finalizers):
            return await self._finish_owner_deletion(plural, obj, finalizers)
        if not m.get("ownerReferences") or m.get("deletionTimestamp"):
            return True
        return await self._attempt_to_delete(plural, obj) is not None

    # ---- collecting -------------------------------------------------------------------

    async def _owner(self, dependent: Obj, ref: Obj) -> Obj | _Unknown | None:
        """The live owner a reference points to (matching UID), None when gone, UNKNOWN for kinds the collector cannot look up."""
        kind = self.owner_kinds.get((group_of(ref.get("apiVersion", "")), ref.get("kind", "")))
        if kind is None:
            return UNKNOWN
        group, version, plural, namespaced = kind
        namespace = metadata(dependent).get("namespace", "") if namespaced else ""
        path = resource_path(group, version, plural, namespace or None, ref.get("name", ""))
        return await get_live(self.client, self.by_plural.get(plural), path, namespace, ref.get("name", ""), ref.get("uid", ""))

    async def _attempt_to_delete(self, plural: str, obj: Obj) -> bool | None:
        """Upstream's attemptToDeleteItem: True if the object was (or is being) deleted, False if it
        stays (it may have lost references to owners that are gone), None on a conflict.

        Owners are solid (exist), dangling (gone) or waiting (being deleted in the foreground).
        With a solid owner the object stays and only the dangling and waiting references go;
        otherwise it is deleted, in the foreground when an owner waits for it and it has
        dependents of its own, else as its own finalizers ask (orphan, foreground, background).
        """
        m = metadata(obj)
        solid: list[Obj] = []
        stale: list[Obj] = []
        waiting = False
        for ref in m.get("ownerReferences") or []:
            owner = await self._owner(obj, ref)
            if owner is None:
                stale.append(ref)
            elif isinstance(owner, _Unknown):
                solid.append(ref)  # a kind the collector does not know: never delete on its account
            elif metadata(owner).get("deletionTimestamp") and "foregroundDeletion" in (metadata(owner).get("finalizers") or []):
                stale.append(ref)
                waiting = True
            else:
                solid.append(ref)
        path = self._path(plural, obj)
        if solid:
            if not stale:
                return False
            gone = {r.get("uid") for r in stale}
            remaining = [r for r in m.get("ownerReferences") or [] if r.get("uid") not in gone]
            patch = {"metadata": {"ownerReferences": remaining, "resourceVersion": m["resourceVersion"]}}
            try:
                await self.client.patch(path, patch)
            except ApiError as exc:
                if exc.code == 409:
                    return None
                if exc.code != 404:
                    raise
            log.info("removed owner references", extra={"resource": plural, "object": f"{m.get('namespace', '')}/{m['name']}", "owners": sorted(str(u) for u in gone)})
            return False
        finalizers = m.get("finalizers") or []
        if waiting and self.dependents(str(m.get("uid") or "")):
            policy = "Foreground"
        elif "orphan" in finalizers:
            policy = "Orphan"
        elif "foregroundDeletion" in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        await self.client.delete(path, preconditions={"uid": m["uid"]}, propagation_policy=policy, missing_ok=True)
        log.info("garbage collected", extra={"resource": plural, "object": f"{m.get('namespace', '')}/{m['name']}", "propagation": policy})
        return True

    async def _finish_owner_deletion(self, owner_plural: str, owner: Obj, finalizers: list[str]) -> bool:
        path = self._path(owner_plural, owner)
        uid = metadata(owner)["uid"]
        dependents = self.dependents(uid)
        if "orphan" in finalizers:
            for plural, dependent in dependents:
                dmeta = metadata(dependent)
                remaining = [r for r in dmeta.get("ownerReferences") or [] if r.get("uid") != uid]
                patch = {"metadata": {"ownerReferences": remaining or None, "resourceVersion": dmeta["resourceVersion"]}}
                try:
                    await self.client.patch(self._path(plural, dependent), patch)
                except ApiError as exc:
                    if exc.code == 409:
                        return False
                    if exc.code != 404:
                        raise
            return await set_finalizers(self.client, path, owner, [f for f in finalizers if f != "orphan"]) is not None
        # Foreground: every dependent is collected (or, if another owner keeps it, loses its
        # reference to this owner); the owner goes once no dependent blocks it any more.
        blocking = False
        for plural, dependent in dependents:
            dmeta = metadata(dependent)
            ref = next(r for r in dmeta.get("ownerReferences") or [] if r.get("uid") == uid)
            if dmeta.get("deletionTimestamp"):
                blocking = blocking or bool(ref.get("blockOwnerDeletion"))
                continue
            outcome = await self._attempt_to_delete(plural, dependent)
            if outcome is None:
                return False
            if outcome:
                blocking = blocking or bool(ref.get("blockOwnerDeletion"))
        if blocking:
            # Dependents' deletions come back through the informers and re-queue the owner.
            self.queue.add_after((owner_plural, metadata(owner).get("namespace", ""), metadata(owner)["name"]), 0.5)
            return True
        return await set_finalizers(self.client, path, owner, [f for f in finalizers if f != "foregroundDeletion"]) is not None
