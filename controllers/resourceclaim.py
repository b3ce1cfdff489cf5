"""The ResourceClaim controller and a small garbage collector, driven by informers.

What it does (the upstream resourceclaim controller's job, plus the parts of the garbage
collector DRA needs):

- creates a ResourceClaim from a ResourceClaimTemplate for each pod claim entry that names a
  template, and records it in ``pod.status.resourceClaimStatuses``;
- removes deleted or finished pods from ``claim.status.reservedFor`` and deallocates claims
  that nobody reserves any more; the ``delete-protection`` finalizer goes only from claims
  it deallocated itself, or that are being deleted and unused (the scheduler may write the
  allocation before the finalizer, so an unallocated claim without users is not a reason);
- deletes claims generated for pods that are gone or finished, once unreserved;
- garbage-collects pods, claims and events as upstream's collector does: an object whose
  owners are all gone is deleted; one that still has an owner only loses the references to
  the owners that are gone (or are being deleted in the foreground); and it handles the
  ``foregroundDeletion`` / ``orphan`` finalizers of those kinds.

Lookups go through indexes over the informer caches (pods by the claims and templates they
reference, objects by owner UID, claims by reserving pod UID), never through cache scans.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

import httpx

from controllers.index import Index, owner_uids, pod_claim_keys, pod_template_keys, reserved_uids
from controllers.workqueue import WorkQueue
from kube.client import KubeClient, record_event, resource_path
from kube.errors import ApiError
from kube.informer import Informer

log = logging.getLogger("resourceclaim-controller")

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace, name); kind is "pod", "claim", "gc-pods", ...

COMPONENT = "resource-claim-controller"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
RESOURCE_GROUP = "resource.k8s.io"
MAX_GENERATE_BASE = 57  # 63 minus a hyphen and the 5 random characters the server appends

# Resources the garbage collector looks after: plural -> (group, version).
GC_RESOURCES = {"pods": ("", "v1"), "resourceclaims": (RESOURCE_GROUP, "v1"), "events": ("", "v1")}
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


# Owner kinds this controller has informers for: their deletion re-queues the dependents.
WATCHED_OWNER_KINDS = {("", "Pod"), (RESOURCE_GROUP, "ResourceClaim"), ("", "Event")}


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.get("metadata") or {}
    return meta


def pod_done(pod: Obj) -> bool:
    """A pod that will never run (again): terminal phase, or deleted before it was scheduled."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return True
    return bool(_meta(pod).get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


def generate_name(pod_name: str, claim_name: str) -> str:
    """``<pod>-<claim>-``; when too long, both parts are shortened in proportion (as upstream does)."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) <= MAX_GENERATE_BASE:
        return base
    # Truncating only the end (what the server would do) would lose the claim name for long pod names.
    total = len(base)
    return f"{pod_name[: len(pod_name) * MAX_GENERATE_BASE // total]}-{claim_name[: len(claim_name) * MAX_GENERATE_BASE // total]}"


def _missing_claim_entries(pod: Obj) -> list[Obj]:
    """Template entries of a pod that will run whose claim is not recorded in its status yet."""
    entries = [e for e in (pod.get("spec") or {}).get("resourceClaims") or [] if e.get("resourceClaimTemplateName")]
    if not entries or _meta(pod).get("deletionTimestamp") or pod_done(pod):
        return []  # no new claims for pods that will not run
    recorded = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return [e for e in entries if not recorded.get(e["name"])]


def _gc_unchanged(old: Obj, new: Obj) -> bool:
    """An update the collector need not look at: same owners, deletion and finalizers, all owners of
    kinds whose deletion this controller watches (others are re-checked on every update)."""
    refs = new.get("ownerReferences") or []
    return (
        refs == (old.get("ownerReferences") or [])
        and new.get("deletionTimestamp") == old.get("deletionTimestamp")
        and new.get("finalizers") == old.get("finalizers")
        and all((_group_of(r.get("apiVersion", "")), r.get("kind", "")) in WATCHED_OWNER_KINDS for r in refs)
    )


def controller_owner(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


class ClaimController:
    """Informers + indexes + one work queue; ``run()`` until cancelled."""

    def __init__(self, client: KubeClient, *, workers: int = 4, watch_timeout_seconds: int | None = None) -> None:
        self.client = client
        self.workers = workers
        kw: Any = {"watch_timeout_seconds": watch_timeout_seconds}
        self.pods = Informer(client, resource_path("", "v1", "pods"), name="pods", **kw)
        self.claims = Informer(client, resource_path(RESOURCE_GROUP, "v1", "resourceclaims"), name="resourceclaims", **kw)
        self.templates = Informer(client, resource_path(RESOURCE_GROUP, "v1", "resourceclaimtemplates"), name="resourceclaimtemplates", **kw)
        self.events = Informer(client, resource_path("", "v1", "events"), name="events", **kw)
        self.by_plural = {"pods": self.pods, "resourceclaims": self.claims, "events": self.events}
        # Indexes first: their handlers must run before the handlers that read them.
        self.pods_by_claim: Index[tuple[str, str]] = Index(self.pods, pod_claim_keys)
        self.pods_by_template: Index[tuple[str, str]] = Index(self.pods, pod_template_keys)
        self.claims_by_reserved: Index[str] = Index(self.claims, reserved_uids)
        self.by_owner: dict[str, Index[str]] = {plural: Index(informer, owner_uids) for plural, informer in self.by_plural.items()}
        self.queue: WorkQueue[Key] = WorkQueue()
        # Claims this process created, by (pod uid, claim entry): covers the informer's lag after a create.
        self._created: dict[tuple[str, str], str] = {}
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        """Every informer this controller reads (others may share the pod and claim informers)."""
        return [self.pods, self.claims, self.templates, self.events]

    # ---- event wiring -------------------------------------------------------------

    def _wire(self) -> None:
        self.pods.on_add(self._pod_changed)
        self.pods.on_update(lambda old, new: self._pod_changed(new, old))
        self.pods.on_delete(self._pod_deleted)
        self.claims.on_add(self._claim_changed)
        self.claims.on_update(lambda old, new: self._claim_changed(new, old))
        self.claims.on_delete(self._owner_deleted)
        self.templates.on_add(self._template_changed)
        self.templates.on_update(lambda _old, new: self._template_changed(new))
        self.events.on_add(lambda obj: self._gc_candidate("events", obj))
        self.events.on_update(lambda old, new: self._gc_candidate("events", new, old))
        self.events.on_delete(self._owner_deleted)

    def _gc_candidate(self, plural: str, obj: Obj, old: Obj | None = None) -> None:
        meta = _meta(obj)
        if not (meta.get("ownerReferences") or meta.get("deletionTimestamp")):
            return
        if old is not None and _gc_unchanged(_meta(old), meta):
            return  # owners and deletion as before: their own events already queued what they decide
        self.queue.add((f"gc-{plural}", meta.get("namespace", ""), meta.get("name", "")))

    def _pod_changed(self, pod: Obj, old: Obj | None = None) -> None:
        meta = _meta(pod)
        # Most pod updates (scheduling, status) leave nothing to create; sync_pod would return at once.
        if _missing_claim_entries(pod):
            self.queue.add(("pod", meta.get("namespace", ""), meta["name"]))
        self._gc_candidate("pods", pod, old)
        if pod_done(pod):
            self._enqueue_claims_of_pod(pod)

    def _pod_deleted(self, pod: Obj) -> None:
        self._enqueue_claims_of_pod(pod)
        self._owner_deleted(pod)

    def _claim_changed(self, claim: Obj, old: Obj | None = None) -> None:
        meta = _meta(claim)
        self.queue.add(("claim", meta.get("namespace", ""), meta["name"]))
        self._gc_candidate("resourceclaims", claim, old)

    def _template_changed(self, template: Obj) -> None:
        # A pod may have been waiting for this template.
        meta = _meta(template)
        for pod in self.pods_by_template.get((meta.get("namespace", ""), meta.get("name", ""))):
            self.queue.add(("pod", meta.get("namespace", ""), _meta(pod)["name"]))

    def _enqueue_claims_of_pod(self, pod: Obj) -> None:
        meta = _meta(pod)
        uid = str(meta.get("uid") or "")
        namespace = meta.get("namespace", "")
        for claim in [*self.by_owner["resourceclaims"].get(uid), *self.claims_by_reserved.get(uid)]:
            cmeta = _meta(claim)
            if cmeta.get("namespace") == namespace:
                self.queue.add(("claim", namespace, cmeta["name"]))

    def _owner_deleted(self, owner: Obj) -> None:
        # Dependents may now be orphans whose owners are all gone.
        for plural, dep in self._dependents(str(_meta(owner).get("uid") or "")):
            self._gc_candidate(plural, dep)

    def _dependents(self, uid: str) -> list[tuple[str, Obj]]:
        return [(plural, obj) for plural, index in self.by_owner.items() for obj in index.get(uid)] if uid else []

    # ---- running ------------------------------------------------------------------

    async def run(self) -> None:
        """Start the informers, wait for them to sync, then process the queue until cancelled."""
        await run_with_informers(self.informers, self.process())

    async def process(self) -> None:
        """Process the queue until cancelled (the informers must have synced)."""
        log.info("caches synced, processing")
        await asyncio.gather(*(self.queue.worker(self._handle) for _ in range(self.workers)))

    async def _handle(self, key: Key) -> bool:
        kind, namespace, name = key
        try:
            if kind == "pod":
                return await self.sync_pod(namespace, name)
            if kind == "claim":
                return await self.sync_claim(namespace, name)
            if kind.startswith("gc-"):
                return await self.sync_gc(kind[3:], namespace, name)
            return True
        except (ApiError, httpx.TransportError, OSError) as exc:
            log.warning("sync failed, will retry", extra={"key": "/".join(key), "error": str(exc)})
            return False
        except Exception:
            log.exception("sync crashed, will retry", extra={"key": "/".join(key)})
            return False

    # ---- lookups ------------------------------------------------------------------

    async def _live(self, informer: Informer, path: str, namespace: str, name: str, uid: str) -> Obj | None:
        """The object with this uid, from the cache, or from the server when the cache does not have it (it may lag)."""
        cached = informer.get(namespace, name)
        if cached is not None and (not uid or _meta(cached).get("uid") == uid):
            return cached
        try:
            obj = await self.client.get(path)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return obj if not uid or _meta(obj).get("uid") == uid else None

    async def _pod(self, namespace: str, name: str, uid: str) -> Obj | None:
        return await self._live(self.pods, resource_path("", "v1", "pods", namespace, name), namespace, name, uid)

    def _claim_path(self, namespace: str, name: str = "", subresource: str | None = None) -> str:
        return resource_path(RESOURCE_GROUP, "v1", "resourceclaims", namespace, name or None, subresource)

    # ---- pods: template -> claim ---------------------------------------------------

    def _find_generated(self, pod: Obj, entry: str) -> str | None:
        meta = _meta(pod)
        uid = meta.get("uid", "")
        for claim in self.by_owner["resourceclaims"].get(uid):
            cmeta = _meta(claim)
            if cmeta.get("namespace") != meta.get("namespace"):
                continue
            owner = controller_owner(claim)
            if owner and owner.get("uid") == uid and (cmeta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == entry:
                return str(cmeta["name"])
        return self._created.get((uid, entry))

    async def sync_pod(self, namespace: str, name: str) -> bool:
        """Create missing claims from templates and record them in the pod status."""
        pod = self.pods.get(namespace, name)
        if pod is None:
            return True
        meta = _meta(pod)
        entries = _missing_claim_entries(pod)
        if not entries:
            return True
        statuses: list[Obj] = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        changed = False
        for entry in entries:
            entry_name = entry["name"]
            claim_name = self._find_generated(pod, entry_name)
            if claim_name is None:
                claim_name = await self._create_claim(pod, entry)
                if claim_name is None:
                    return True  # template missing: its arrival re-queues the pod
            statuses = [s for s in statuses if s.get("name") != entry_name] + [{"name": entry_name, "resourceClaimName": claim_name}]
            changed = True
        if changed:
            patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"resourceClaimStatuses": statuses}}
            try:
                await self.client.patch(resource_path("", "v1", "pods", namespace, name, "status"), patch)
            except ApiError as exc:
                if exc.code == 409:
                    return False  # pod changed meanwhile; the claim is found again by annotation + owner
                if exc.code == 404:
                    return True
                raise
        return True

    async def _create_claim(self, pod: Obj, entry: Obj) -> str | None:
        meta = _meta(pod)
        namespace = meta["namespace"]
        template_name = entry["resourceClaimTemplateName"]
        template = await self._live(
            self.templates, resource_path(RESOURCE_GROUP, "v1", "resourceclaimtemplates", namespace, template_name), namespace, template_name, ""
        )
        if template is None:
            log.info("template missing", extra={"pod": f"{namespace}/{meta['name']}", "template": template_name})
            await record_event(self.client, {"kind": "Pod", "apiVersion": "v1", **{"metadata": meta}}, "FailedResourceClaimCreation",
                               f'PodResourceClaim {entry["name"]}: resource claim template "{template_name}": not found', "Warning", COMPONENT)
            return None
        tspec = template.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        annotations[POD_CLAIM_NAME_ANNOTATION] = entry["name"]
        claim_meta: Obj = {
            "generateName": generate_name(meta["name"], entry["name"]),
            "namespace": namespace,
            "annotations": annotations,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
            ],
        }
        if tmeta.get("labels"):
            claim_meta["labels"] = dict(tmeta["labels"])
        body = {"apiVersion": f"{RESOURCE_GROUP}/v1", "kind": "ResourceClaim", "metadata": claim_meta, "spec": tspec.get("spec") or {}}  # only serialised, never changed
        created = await self.client.create(self._claim_path(namespace), body)
        claim_name = str(_meta(created)["name"])
        self._created[(meta["uid"], entry["name"])] = claim_name
        log.info("created claim", extra={"pod": f"{namespace}/{meta['name']}", "claim": claim_name})
        return claim_name

    # ---- claims: reservedFor, deallocation, deletion ---------------------------------

    async def sync_claim(self, namespace: str, name: str) -> bool:
        """Drop stale pod reservations, deallocate unreserved claims, delete generated claims of gone pods."""
        claim = self.claims.get(namespace, name)
        if claim is None:
            return True
        deallocated = False
        for _attempt in range(5):
            outcome, deallocated = await self._sync_claim_once(claim, deallocated)
            if outcome is not None:
                return outcome
            # 409: re-read the newest version and decide again.
            try:
                claim = await self.client.get(self._claim_path(namespace, name))
            except ApiError as exc:
                if exc.code == 404:
                    return True
                raise
        return False

    async def _sync_claim_once(self, claim: Obj, deallocated: bool) -> tuple[bool | None, bool]:
        """(True when done or None on a conflict, whether this sync deallocated the claim)."""
        meta = _meta(claim)
        namespace, name = meta.get("namespace", ""), meta["name"]
        status: Obj = claim.get("status") or {}
        reserved: list[Obj] = status.get("reservedFor") or []
        valid: list[Obj] = []
        for ref in reserved:
            if ref.get("resource") == "pods" and not ref.get("apiGroup"):
                pod = await self._pod(namespace, ref.get("name", ""), ref.get("uid", ""))
                if pod is None or pod_done(pod):
                    continue
            valid.append(ref)
        allocated = status.get("allocation") is not None
        being_deleted = bool(meta.get("deletionTimestamp"))
        # An allocation nobody reserves is released, whoever removed the last reference (pods
        # leaving, or a workload's controller dropping its reference, KEP-5194). The scheduler
        # writes allocation and reservedFor in one update, so this never races a fresh allocation.
        deallocate = not valid and allocated
        if len(valid) < len(reserved) or deallocate:
            new_status = dict(status)
            if valid:
                new_status["reservedFor"] = valid
            else:
                new_status.pop("reservedFor", None)
            if deallocate:
                new_status.pop("allocation", None)
                new_status.pop("devices", None)
            body = {**claim, "status": new_status}
            try:
                claim = await self.client.update(self._claim_path(namespace, name, "status"), body)
            except ApiError as exc:
                if exc.code == 409:
                    return None, deallocated
                if exc.code == 404:
                    return True, deallocated
                raise
            allocated = not deallocate and allocated
            deallocated = deallocated or deallocate
            log.info("updated claim reservations", extra={"claim": f"{namespace}/{name}", "reservedFor": len(valid), "deallocated": deallocate})
        meta = _meta(claim)
        finalizers: list[str] = list(meta.get("finalizers") or [])
        # The finalizer guards an allocation. It goes when this controller deallocated the claim, or
        # the claim is being deleted and unused; never merely because a claim is unallocated and
        # unreserved, since the scheduler may write the allocation first and the finalizer after.
        unprotect = DELETE_PROTECTION_FINALIZER in finalizers and not valid and not allocated and (deallocated or being_deleted)
        if unprotect and await self._set_finalizers(self._claim_path(namespace, name), claim, [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]) is None:
            return None, deallocated
        owner = controller_owner(claim)
        generated = (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) is not None
        if owner and owner.get("kind") == "Pod" and generated and not valid and not meta.get("deletionTimestamp"):
            pod = await self._pod(namespace, owner.get("name", ""), owner.get("uid", ""))
            if pod is None or pod_done(pod):
                await self.client.delete(
                    self._claim_path(namespace, name), preconditions={"uid": meta["uid"]}, propagation_policy="Background", missing_ok=True
                )
                log.info("deleted generated claim", extra={"claim": f"{namespace}/{name}", "pod": owner.get("name")})
        return True, deallocated

    async def _set_finalizers(self, path: str, obj: Obj, finalizers: list[str]) -> Obj | None:
        """Write metadata.finalizers with a resourceVersion precondition; None on conflict."""
        patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": _meta(obj)["resourceVersion"]}}
        try:
            return await self.client.patch(path, patch)
        except ApiError as exc:
            if exc.code == 409:
                return None
            if exc.code == 404:
                return obj
            raise

    # ---- garbage collection --------------------------------------------------------

    async def _owner(self, dependent: Obj, ref: Obj) -> Obj | _Unknown | None:
        """The live owner a reference points to (matching UID), None when gone, UNKNOWN for kinds this collector cannot look up."""
        kind = OWNER_KINDS.get((_group_of(ref.get("apiVersion", "")), ref.get("kind", "")))
        if kind is None:
            return UNKNOWN
        group, version, plural, namespaced = kind
        namespace = _meta(dependent).get("namespace", "") if namespaced else ""
        path = resource_path(group, version, plural, namespace or None, ref.get("name", ""))
        informer = self.by_plural.get(plural)
        if informer is not None:
            return await self._live(informer, path, namespace, ref.get("name", ""), ref.get("uid", ""))
        try:
            owner = await self.client.get(path)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return owner if _meta(owner).get("uid") == ref.get("uid") else None

    async def sync_gc(self, plural: str, namespace: str, name: str) -> bool:
        """Collect an object whose owners are gone; finish foreground/orphan deletions of owners."""
        informer = self.by_plural[plural]
        obj = informer.get(namespace, name)
        if obj is None:
            return True
        meta = _meta(obj)
        finalizers: list[str] = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") and ("foregroundDeletion" in finalizers or "orphan" in finalizers):
            return await self._finish_owner_deletion(plural, obj, self._path(plural, obj), finalizers)
        if not meta.get("ownerReferences") or meta.get("deletionTimestamp"):
            return True
        return await self._attempt_to_delete(plural, obj) is not None

    def _path(self, plural: str, obj: Obj) -> str:
        group, version = GC_RESOURCES[plural]
        meta = _meta(obj)
        return resource_path(group, version, plural, meta.get("namespace") or None, meta["name"])

    async def _attempt_to_delete(self, plural: str, obj: Obj) -> bool | None:
        """Upstream's attemptToDeleteItem: True if the object was (or is being) deleted, False if it
        stays (it may have lost references to owners that are gone), None on a conflict.

        Owners are solid (exist), dangling (gone) or waiting (being deleted in the foreground).
        With a solid owner the object stays and only the dangling and waiting references go;
        otherwise it is deleted, in the foreground when an owner waits for it and it has
        dependents of its own, else as its own finalizers ask (orphan, foreground, background).
        """
        meta = _meta(obj)
        solid: list[Obj] = []
        stale: list[Obj] = []
        waiting = False
        for ref in meta.get("ownerReferences") or []:
            owner = await self._owner(obj, ref)
            if owner is None:
                stale.append(ref)
            elif isinstance(owner, _Unknown):
                solid.append(ref)  # a kind this collector does not know: never delete on its account
            elif _meta(owner).get("deletionTimestamp") and "foregroundDeletion" in (_meta(owner).get("finalizers") or []):
                stale.append(ref)
                waiting = True
            else:
                solid.append(ref)
        path = self._path(plural, obj)
        if solid:
            if not stale:
                return False
            gone = {r.get("uid") for r in stale}
            remaining = [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in gone]
            patch = {"metadata": {"ownerReferences": remaining, "resourceVersion": meta["resourceVersion"]}}
            try:
                await self.client.patch(path, patch)
            except ApiError as exc:
                if exc.code == 409:
                    return None
                if exc.code != 404:
                    raise
            log.info("removed owner references", extra={"resource": plural, "object": f"{meta.get('namespace', '')}/{meta['name']}", "owners": sorted(str(u) for u in gone)})
            return False
        finalizers = meta.get("finalizers") or []
        if waiting and self._dependents(str(meta.get("uid") or "")):
            policy = "Foreground"
        elif "orphan" in finalizers:
            policy = "Orphan"
        elif "foregroundDeletion" in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        await self.client.delete(path, preconditions={"uid": meta["uid"]}, propagation_policy=policy, missing_ok=True)
        log.info("garbage collected", extra={"resource": plural, "object": f"{meta.get('namespace', '')}/{meta['name']}", "propagation": policy})
        return True

    async def _finish_owner_deletion(self, owner_plural: str, owner: Obj, path: str, finalizers: list[str]) -> bool:
        uid = _meta(owner)["uid"]
        dependents = self._dependents(uid)
        if "orphan" in finalizers:
            for plural, dep in dependents:
                dmeta = _meta(dep)
                remaining = [r for r in dmeta.get("ownerReferences") or [] if r.get("uid") != uid]
                patch = {"metadata": {"ownerReferences": remaining or None, "resourceVersion": dmeta["resourceVersion"]}}
                try:
                    await self.client.patch(self._path(plural, dep), patch)
                except ApiError as exc:
                    if exc.code == 409:
                        return False
                    if exc.code != 404:
                        raise
            result = await self._set_finalizers(path, owner, [f for f in finalizers if f != "orphan"])
            return result is not None
        # Foreground: every dependent is collected (or, if another owner keeps it, loses its
        # reference to this owner); the owner goes once no dependent blocks it any more.
        blocking = False
        for plural, dep in dependents:
            dmeta = _meta(dep)
            ref = next(r for r in dmeta.get("ownerReferences") or [] if r.get("uid") == uid)
            if dmeta.get("deletionTimestamp"):
                blocking = blocking or bool(ref.get("blockOwnerDeletion"))
                continue
            outcome = await self._attempt_to_delete(plural, dep)
            if outcome is None:
                return False
            if outcome:
                blocking = blocking or bool(ref.get("blockOwnerDeletion"))
        if blocking:
            # Dependents' deletions come back through the informers and re-queue the owner.
            self.queue.add_after(("gc-" + owner_plural, _meta(owner).get("namespace", ""), _meta(owner)["name"]), 0.5)
            return True
        result = await self._set_finalizers(path, owner, [f for f in finalizers if f != "foregroundDeletion"])
        return result is not None


class _Unknown:
    """Marker: an owner of a kind the collector cannot look up."""


UNKNOWN = _Unknown()


async def run_with_informers(informers: Sequence[Informer], *work: Awaitable[Any]) -> None:
    """Start ``informers`` (each once), wait for them to sync, then run ``work`` until cancelled; stop the informers after."""
    unique = list({id(i): i for i in informers}.values())
    for informer in unique:
        informer.start()
    try:
        for informer in unique:
            await informer.wait_synced()
        await asyncio.gather(*work)
    finally:
        for informer in unique:
            await informer.stop()
