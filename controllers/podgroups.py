"""PodGroups in the controller process (GenericWorkload; claims with DRAWorkloadResourceClaims).

- Protection: a PodGroup is created with the ``scheduling.k8s.io/podgroup-protection``
  finalizer; once it is being deleted and no active pod (not Succeeded or Failed) names it, the
  finalizer goes (upstream's podgroupprotection controller).
- Claims (KEP-5729): for every ``spec.resourceClaims`` entry that names a template, one
  ResourceClaim is made for the group (owned by the PodGroup, annotated with the entry's name) and
  recorded in ``status.resourceClaimStatuses``. The claim controller asks :meth:`claim_for` which
  pod claim entries are the group's (it records the group's claim in the pod's status instead of
  making one per pod), and :meth:`reference_alive` whether a PodGroup in a claim's ``reservedFor``
  still exists (the reference goes once the group is deleted, and with it the allocation).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controllers.objects import get_live, metadata, set_finalizers
from controllers.resourceclaim import claim_from_template, generated_claim
from kube.client import KubeClient, record_event, resource_path
from kube.dra import podgroups
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.objects import Obj
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("podgroup-controller")

Key = tuple[str, str]

COMPONENT = "resource-claim-controller"
RESOURCE_GROUP = "resource.k8s.io"


def _active_group_key(pod: Obj) -> list[Key]:
    """(namespace, group) of a pod that names a group and has not finished."""
    name = podgroups.pod_group_name(pod)
    if name is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return []
    return [(str(metadata(pod).get("namespace") or ""), name)]


def _group_path(namespace: str, name: str | None = None, subresource: str | None = None) -> str:
    return resource_path(podgroups.GROUP, podgroups.VERSION, podgroups.PLURAL, namespace, name, subresource)


class PodGroupController:
    """The PodGroup informer and its work queue; shares the claim controller's pod and claim informers."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        claims: Informer,
        templates: Informer,
        claims_by_owner: Index[str],
        claims_by_reserved: Index[str],
        claim_queue: WorkQueue[tuple[str, str, str]],
        claims_enabled: bool,
        workers: int = 4,
        watch_timeout_seconds: int | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        self.claims_enabled = claims_enabled
        self.pods = pods
        self.claims = claims
        self.templates = templates
        self.claims_by_owner = claims_by_owner
        self.claims_by_reserved = claims_by_reserved
        self.claim_queue = claim_queue
        self.groups = Informer(client, _group_path(""), name="podgroups", watch_timeout_seconds=watch_timeout_seconds)
        self.active_pods: Index[Key] = Index(pods, _active_group_key)
        self.queue: WorkQueue[Key] = WorkQueue()
        self._created: dict[tuple[str, str], str] = {}  # (group uid, entry) -> claim made by this process
        self.groups.on_add(self._group_changed)
        self.groups.on_update(self._group_updated)
        self.groups.on_delete(self._group_deleted)
        pods.on_update(lambda old, new: self._pod_changed(old))
        pods.on_delete(self._pod_changed)

    @property
    def informers(self) -> list[Informer]:
        return [self.groups]

    # ---- events ----------------------------------------------------------------------

    def _group_changed(self, group: Obj) -> None:
        m = metadata(group)
        self.queue.add((m.get("namespace", ""), m["name"]))
        if self.claims_enabled:
            self._pods_decide(group)

    def _group_updated(self, old: Obj, group: Obj) -> None:
        self.queue.add((metadata(group).get("namespace", ""), metadata(group)["name"]))
        if self.claims_enabled and (old.get("status") or {}).get("resourceClaimStatuses") != (group.get("status") or {}).get("resourceClaimStatuses"):
            self._pods_decide(group)

    def _pods_decide(self, group: Obj) -> None:
        """The group's pods that waited for it (or for its claims) can record their claims now."""
        m = metadata(group)
        for pod in self.pods_of(m.get("namespace", ""), m["name"]):
            self.claim_queue.add(("pod", m.get("namespace", ""), metadata(pod)["name"]))

    def _group_deleted(self, group: Obj) -> None:
        # Claims reserved for the group lose that reservation (and are deallocated when it was the last).
        m = metadata(group)
        for claim in self.claims_by_reserved.get(str(m.get("uid") or "")):
            self.claim_queue.add(("claim", m.get("namespace", ""), metadata(claim)["name"]))

    def _pod_changed(self, pod: Obj) -> None:
        # A pod that finished or went away may have been the last one holding its group.
        name = podgroups.pod_group_name(pod)
        if name is not None:
            self.queue.add((str(metadata(pod).get("namespace") or ""), name))

    def pods_of(self, namespace: str, name: str) -> list[Obj]:
        """The active pods that name the group."""
        return self.active_pods.get((namespace, name))

    # ---- what the claim controller asks ---------------------------------------------------

    def claim_for(self, pod: Obj, entry: Obj) -> tuple[bool, str | None]:
        """(whether the pod claim entry is its group's claim, the claim's name once known). Until
        the pod's group exists nobody can tell, so the entry waits like one of the group's."""
        if not self.claims_enabled:
            return False, None
        name = podgroups.pod_group_name(pod)
        if name is None:
            return False, None
        group = self.groups.get(str(metadata(pod).get("namespace") or ""), name)
        if group is None:
            return True, None
        found = podgroups.matching_group_claim(entry, group)
        if found is None:
            return False, None
        return True, podgroups.group_claim_name(found, group)

    async def reference_alive(self, namespace: str, ref: Mapping[str, Any]) -> bool:
        """Whether the PodGroup a ``reservedFor`` entry names still exists (same UID)."""
        name, uid = str(ref.get("name") or ""), str(ref.get("uid") or "")
        return await get_live(self.client, self.groups, _group_path(namespace, name), namespace, name, uid) is not None

    # ---- running ---------------------------------------------------------------------------

    async def process(self) -> None:
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, namespace: str, name: str) -> bool:
        group = self.groups.get(namespace, name)
        if group is None:
            return True
        meta = metadata(group)
        if meta.get("deletionTimestamp"):
            return await self._release(group)
        if self.claims_enabled:
            return await self._make_claims(group)
        return True

    async def _release(self, group: Obj) -> bool:
        meta = metadata(group)
        finalizers = list(meta.get("finalizers") or [])
        if podgroups.PROTECTION_FINALIZER not in finalizers or self.pods_of(meta.get("namespace", ""), meta["name"]):
            return True
        remaining = [f for f in finalizers if f != podgroups.PROTECTION_FINALIZER]
        written = await set_finalizers(self.client, _group_path(meta.get("namespace", ""), meta["name"]), group, remaining)
        if written is not None:
            log.info("released podgroup", extra={"podgroup": f"{meta.get('namespace')}/{meta['name']}"})
        return written is not None

    async def _make_claims(self, group: Obj) -> bool:
        meta = metadata(group)
        namespace = meta.get("namespace", "")
        recorded = {s.get("name"): s for s in (group.get("status") or {}).get("resourceClaimStatuses") or []}
        statuses = list(recorded.values())
        changed = False
        for entry in ((group.get("spec") or {}).get("resourceClaims") or []):
            if not entry.get("resourceClaimTemplateName") or (recorded.get(entry["name"]) or {}).get("resourceClaimName"):
                continue
            claim_name = (
                generated_claim(self.claims_by_owner, group, entry["name"])
                or self._created.get((str(meta.get("uid") or ""), entry["name"]))
                or await self._create_claim(group, entry)
            )
            if claim_name is None:
                continue  # template missing: its arrival brings us back
            statuses = [s for s in statuses if s.get("name") != entry["name"]] + [{"name": entry["name"], "resourceClaimName": claim_name}]
            changed = True
        if not changed:
            return True
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"resourceClaimStatuses": statuses}}
        try:
            await self.client.patch(_group_path(namespace, meta["name"], "status"), patch)
        except ApiError as exc:
            if exc.code == 409:
                return False  # changed meanwhile; the claim is found again by owner and annotation
            if exc.code != 404:
                raise
        return True

    async def _create_claim(self, group: Obj, entry: Obj) -> str | None:
        meta = metadata(group)
        namespace, template_name = meta.get("namespace", ""), entry["resourceClaimTemplateName"]
        path = resource_path(RESOURCE_GROUP, "v1", "resourceclaimtemplates", namespace, template_name)
        template = await get_live(self.client, self.templates, path, namespace, template_name, "")
        if template is None:
            message = f'PodGroupResourceClaim {entry["name"]}: resource claim template "{template_name}": not found'
            await record_event(self.client, {"kind": podgroups.KIND, "apiVersion": podgroups.API_VERSION, "metadata": meta}, "FailedResourceClaimCreation", message, "Warning", COMPONENT)
            return None
        owner = {"apiVersion": podgroups.API_VERSION, "kind": podgroups.KIND, "name": meta["name"], "uid": meta["uid"]}
        body = claim_from_template(template, owner, entry["name"])
        created = await self.client.create(resource_path(RESOURCE_GROUP, "v1", "resourceclaims", namespace), body)
        claim_name = str(metadata(created)["name"])
        self._created[(meta["uid"], entry["name"])] = claim_name
        log.info("created podgroup claim", extra={"podgroup": f"{namespace}/{meta['name']}", "claim": claim_name})
        return claim_name

