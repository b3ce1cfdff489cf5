"""The ResourceClaim controller, driven by informers (upstream's resourceclaim controller's job).

- It creates a ResourceClaim from a ResourceClaimTemplate for each pod claim entry that names a
  template, and records it in ``pod.status.resourceClaimStatuses``;
- it removes deleted or finished pods from ``claim.status.reservedFor`` and deallocates claims
  that nobody reserves any more; the ``delete-protection`` finalizer goes only from claims
  it deallocated itself, or that are being deleted and unused (the scheduler adds the finalizer
  first and writes the allocation after it, so an unallocated, unreserved claim that carries the
  finalizer may be about to get its allocation: that alone is not a reason);
- it deletes claims generated for pods that are gone or finished, once unreserved (and the
  scheduler's claims for pods' extended resources the same way).

Lookups go through indexes over the informer caches (pods by the claims and templates they
reference, claims by owner UID and by reserving pod UID), never through cache scans. Other
controllers share its pod and claim informers and indexes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol, cast

from controllers.objects import (
    controller_owner,
    get_live,
    metadata,
    owner_uids,
    pod_claim_keys,
    pod_template_keys,
    reserved_uids,
    set_finalizers,
)
from kube.apitypes import ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus
from kube.client import KubeClient, record_event, resource_path
from kube.dra.claims import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from kube.dra.podgroups import is_group_reference
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer, run_with_informers
from kube.objects import Obj
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("resourceclaim-controller")

Key = tuple[str, str, str]  # (kind, namespace, name); kind is "pod" or "claim"

COMPONENT = "resource-claim-controller"
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
RESOURCE_GROUP = "resource.k8s.io"
MAX_GENERATE_BASE = 57  # 63 minus a hyphen and the 5 random characters the server appends


def pod_done(pod: Obj) -> bool:
    """A pod that will never run (again): terminal phase, or deleted before it was scheduled."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return True
    return bool(metadata(pod).get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


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
    if not entries or metadata(pod).get("deletionTimestamp") or pod_done(pod):
        return []  # no new claims for pods that will not run
    recorded = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    return [e for e in entries if not recorded.get(e["name"])]


def claim_from_template(template: Obj, owner: Obj, entry: str) -> Obj:
    """The claim a template makes for ``owner`` (a pod or a PodGroup: apiVersion, kind, name, uid):
    controlled by it, annotated with the owner's claim entry, named ``<owner>-<entry>-<random>``."""
    tspec = template.get("spec") or {}
    tmeta = tspec.get("metadata") or {}
    claim_meta: Obj = {
        "generateName": generate_name(owner["name"], entry),
        "namespace": metadata(template).get("namespace", ""),
        "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: entry},
        "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
    }
    if tmeta.get("labels"):
        claim_meta["labels"] = dict(tmeta["labels"])
    # The template's spec is only serialised, never changed.
    return {"apiVersion": f"{RESOURCE_GROUP}/v1", "kind": "ResourceClaim", "metadata": claim_meta, "spec": tspec.get("spec") or {}}


def generated_claim(claims_by_owner: Index[str], owner: Obj, entry: str) -> str | None:
    """The name of the claim made from a template for ``owner``'s claim entry, if the cache has it."""
    meta = metadata(owner)
    uid = meta.get("uid", "")
    for claim in claims_by_owner.get(uid):
        cmeta = metadata(claim)
        controller = controller_owner(claim)
        if (
            cmeta.get("namespace") == meta.get("namespace")
            and controller is not None
            and controller.get("uid") == uid
            and (cmeta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == entry
        ):
            return str(cmeta["name"])
    return None


class GroupClaims(Protocol):
    """What the PodGroup side tells this controller (``controllers.podgroups``, KEP-5729)."""

    def claim_for(self, pod: Obj, entry: Obj) -> tuple[bool, str | None]:
        """(whether the pod claim entry is its group's claim, that claim's name once known);
        (True, None) also while the pod's group does not exist yet."""

    async def reference_alive(self, namespace: str, ref: Mapping[str, Any]) -> bool:
        """Whether the PodGroup a reservedFor entry names still exists."""


class ClaimController:
    """Informers + indexes + one work queue; ``run()`` until cancelled."""

    def __init__(self, client: KubeClient, *, workers: int = 4, watch_timeout_seconds: int | None = None) -> None:
        self.client = client
        self.workers = workers
        kw: Any = {"watch_timeout_seconds": watch_timeout_seconds}
        self.pods = Informer(client, resource_path("", "v1", "pods"), name="pods", **kw)
        self.claims = Informer(client, resource_path(RESOURCE_GROUP, "v1", "resourceclaims"), name="resourceclaims", **kw)
        self.templates = Informer(client, resource_path(RESOURCE_GROUP, "v1", "resourceclaimtemplates"), name="resourceclaimtemplates", **kw)
        # Indexes first: their handlers must run before the handlers that read them.
        self.pods_by_claim: Index[tuple[str, str]] = Index(self.pods, pod_claim_keys)
        self.pods_by_template: Index[tuple[str, str]] = Index(self.pods, pod_template_keys)
        self.claims_by_owner: Index[str] = Index(self.claims, owner_uids)
        self.claims_by_reserved: Index[str] = Index(self.claims, reserved_uids)
        self.queue: WorkQueue[Key] = WorkQueue()
        # Claims this process created, by (pod uid, claim entry): covers the informer's lag after a create.
        self._created: dict[tuple[str, str], str] = {}
        # Set with DRAWorkloadResourceClaims: which entries are PodGroup claims, which groups are gone.
        self.groups: GroupClaims | None = None
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        """Every informer this controller reads (others may share the pod and claim informers)."""
        return [self.pods, self.claims, self.templates]

    # ---- event wiring -------------------------------------------------------------

    def _wire(self) -> None:
        self.pods.on_add(self._pod_changed)
        self.pods.on_update(lambda _old, new: self._pod_changed(new))
        self.pods.on_delete(self._enqueue_claims_of_pod)
        self.claims.on_add(self._claim_changed)
        self.claims.on_update(lambda _old, new: self._claim_changed(new))
        self.templates.on_add(self._template_changed)
        self.templates.on_update(lambda _old, new: self._template_changed(new))

    def _pod_changed(self, pod: Obj) -> None:
        m = metadata(pod)
        # Most pod updates (scheduling, status) leave nothing to create; sync_pod would return at once.
        if _missing_claim_entries(pod):
            self.queue.add(("pod", m.get("namespace", ""), m["name"]))
        if pod_done(pod):
            self._enqueue_claims_of_pod(pod)

    def _claim_changed(self, claim: Obj) -> None:
        m = metadata(claim)
        self.queue.add(("claim", m.get("namespace", ""), m["name"]))

    def _template_changed(self, template: Obj) -> None:
        # A pod may have been waiting for this template.
        m = metadata(template)
        for pod in self.pods_by_template.get((m.get("namespace", ""), m.get("name", ""))):
            self.queue.add(("pod", m.get("namespace", ""), metadata(pod)["name"]))

    def _enqueue_claims_of_pod(self, pod: Obj) -> None:
        m = metadata(pod)
        uid = str(m.get("uid") or "")
        namespace = m.get("namespace", "")
        for claim in [*self.claims_by_owner.get(uid), *self.claims_by_reserved.get(uid)]:
            cmeta = metadata(claim)
            if cmeta.get("namespace") == namespace:
                self.queue.add(("claim", namespace, cmeta["name"]))

    # ---- running ------------------------------------------------------------------

    async def run(self) -> None:
        """Start the informers, wait for them to sync, then process the queue until cancelled."""
        await run_with_informers(self.informers, self.process())

    async def process(self) -> None:
        """Process the queue until cancelled (the informers must have synced)."""
        log.info("caches synced, processing")
        await self.queue.run(self._sync, self.workers, log_failures(log))

    async def _sync(self, key: Key) -> bool:
        kind, namespace, name = key
        if kind == "pod":
            return await self.sync_pod(namespace, name)
        return await self.sync_claim(namespace, name)

    # ---- lookups ------------------------------------------------------------------

    async def _pod(self, namespace: str, name: str, uid: str) -> Obj | None:
        return await get_live(self.client, self.pods, resource_path("", "v1", "pods", namespace, name), namespace, name, uid)

    def _claim_path(self, namespace: str, name: str = "", subresource: str | None = None) -> str:
        return resource_path(RESOURCE_GROUP, "v1", "resourceclaims", namespace, name or None, subresource)

    # ---- pods: template -> claim ---------------------------------------------------

    def _find_generated(self, pod: Obj, entry: str) -> str | None:
        return generated_claim(self.claims_by_owner, pod, entry) or self._created.get((metadata(pod).get("uid", ""), entry))

    async def sync_pod(self, namespace: str, name: str) -> bool:
        """Create missing claims from templates and record them in the pod status."""
        pod = self.pods.get(namespace, name)
        if pod is None:
            return True
        meta = metadata(pod)
        entries = _missing_claim_entries(pod)
        if not entries:
            return True
        statuses: list[Obj] = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        changed = False
        for entry in entries:
            entry_name = entry["name"]
            if self.groups is not None:
                is_group_claim, group_claim = self.groups.claim_for(pod, entry)
                if is_group_claim:
                    if group_claim is None:
                        continue  # the group or its claim is not there yet; the group's events bring us back
                    statuses = [s for s in statuses if s.get("name") != entry_name] + [{"name": entry_name, "resourceClaimName": group_claim}]
                    changed = True
                    continue
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
        meta = metadata(pod)
        namespace = meta["namespace"]
        template_name = entry["resourceClaimTemplateName"]
        template = await get_live(
            self.client, self.templates, resource_path(RESOURCE_GROUP, "v1", "resourceclaimtemplates", namespace, template_name), namespace, template_name, ""
        )
        if template is None:
            log.info("template missing", extra={"pod": f"{namespace}/{meta['name']}", "template": template_name})
            await record_event(self.client, {"kind": "Pod", "apiVersion": "v1", **{"metadata": meta}}, "FailedResourceClaimCreation",
                               f'PodResourceClaim {entry["name"]}: resource claim template "{template_name}": not found', "Warning", COMPONENT)
            return None
        body = claim_from_template(template, {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}, entry["name"])
        created = await self.client.create(self._claim_path(namespace), body)
        claim_name = str(metadata(created)["name"])
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
        meta = metadata(claim)
        namespace, name = meta.get("namespace", ""), meta["name"]
        # The informer's JSON, typed from here on (kube/apitypes.pyi).
        status: ResourceClaimStatus = cast(ResourceClaim, claim).get("status") or {}
        reserved: list[ResourceClaimConsumerReference] = status.get("reservedFor") or []
        valid: list[ResourceClaimConsumerReference] = []
        for ref in reserved:
            if ref.get("resource") == "pods" and not ref.get("apiGroup"):
                pod = await self._pod(namespace, ref.get("name", ""), ref.get("uid", ""))
                if pod is None or pod_done(pod):
                    continue
            elif is_group_reference(ref) and self.groups is not None and not await self.groups.reference_alive(namespace, ref):
                continue  # the PodGroup is gone (without the gate, such references stay as they are)
            valid.append(ref)
        allocated = status.get("allocation") is not None
        being_deleted = bool(meta.get("deletionTimestamp"))
        # An allocation nobody reserves is released, whoever removed the last reference (pods
        # leaving, or a workload's controller dropping its reference, KEP-5194). The scheduler
        # writes allocation and reservedFor in one update, so this never races a fresh allocation.
        deallocate = not valid and allocated
        if len(valid) < len(reserved) or deallocate:
            new_status: ResourceClaimStatus = {**status}
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
        meta = metadata(claim)
        finalizers: list[str] = list(meta.get("finalizers") or [])
        # The finalizer guards an allocation. It goes when this controller deallocated the claim, or
        # the claim is being deleted and unused; never merely because a claim is unallocated and
        # unreserved: the scheduler adds the finalizer before it writes the allocation, so such a
        # claim may be between the two writes.
        unprotect = DELETE_PROTECTION_FINALIZER in finalizers and not valid and not allocated and (deallocated or being_deleted)
        if unprotect and await set_finalizers(self.client, self._claim_path(namespace, name), claim, [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]) is None:
            return None, deallocated
        owner = controller_owner(claim)
        annotations = meta.get("annotations") or {}
        # Claims from a pod's templates, and the scheduler's claim for its extended resources.
        generated = annotations.get(POD_CLAIM_NAME_ANNOTATION) is not None or annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
        if owner and owner.get("kind") == "Pod" and generated and not valid and not meta.get("deletionTimestamp"):
            pod = await self._pod(namespace, owner.get("name", ""), owner.get("uid", ""))
            if pod is None or pod_done(pod):
                await self.client.delete(
                    self._claim_path(namespace, name), preconditions={"uid": meta["uid"]}, propagation_policy="Background", missing_ok=True
                )
                log.info("deleted generated claim", extra={"claim": f"{namespace}/{name}", "pod": owner.get("name")})
        return True, deallocated
