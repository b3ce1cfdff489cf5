"""The StatefulSet controller (upstream's pkg/controller/statefulset): pods with stable names
``<set>-<ordinal>`` (from spec.ordinals.start), created in order, each with its own claims.

Every pod is made from the template of its revision with its identity (hostname = its name,
subdomain = serviceName, the ``statefulset.kubernetes.io/pod-name`` and
``apps.kubernetes.io/pod-index`` labels, ``controller-revision-hash``) and, for each volume claim
template, its own PersistentVolumeClaim ``<template>-<set>-<ordinal>`` (made when missing, never
deleted: the claims are retained). Claims a pod's spec makes from a ResourceClaimTemplate are the
resource claim controller's: each pod gets its own too.

With OrderedReady the controller creates pod n only once pods 0..n-1 are Running and Ready, and
removes surplus pods from the highest ordinal one at a time while the others are healthy; Parallel
does both at once. Terminal pods are deleted and made again. Each template is a ControllerRevision;
RollingUpdate replaces pods from the highest ordinal down to the partition, maxUnavailable at a
time, while the rest are healthy (OnDelete only when they are deleted); when every pod is updated
the update revision becomes the current one. Old revisions beyond revisionHistoryLimit no pod uses
are deleted. The status counts replicas, ready, available, current and updated pods, with the
current and update revisions, observedGeneration and collisionCount.
"""

from __future__ import annotations

import copy
import logging
import re
import time

from controllers import history
from controllers.objects import controller_owner, metadata
from controllers.workloads import (
    Claimer,
    ControllerOwners,
    OwnerIndexKey,
    PodControl,
    key_of,
    owned_and_orphans,
    owner_reference,
    parse_selector,
    pod_from_template,
)
from kube.client import KubeClient, resource_path
from kube.dra.pods import is_pod_available, is_pod_ready
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.intstr import scaled_value
from kube.objects import Obj
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("statefulset-controller")

GROUP, VERSION, KIND, PLURAL = "apps", "v1", "StatefulSet", "statefulsets"
COMPONENT = "statefulset-controller"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def statefulset_path(namespace: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, PLURAL, namespace, name or None, subresource)


def claims_path(namespace: str, name: str = "") -> str:
    return resource_path("", "v1", "persistentvolumeclaims", namespace, name or None)


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def parent_and_ordinal(pod: Obj) -> tuple[str, int]:
    """getParentNameAndOrdinal: ``web-3`` -> (web, 3); (``""``, -1) for another name."""
    match = _ORDINAL.match(str(metadata(pod).get("name") or ""))
    return (match.group(1), int(match.group(2))) if match else ("", -1)


def start_ordinal(sts: Obj) -> int:
    return int((_spec(sts).get("ordinals") or {}).get("start") or 0)


def end_ordinal(sts: Obj) -> int:
    return start_ordinal(sts) + int(_spec(sts).get("replicas") or 0) - 1


def is_member(sts: Obj, pod: Obj) -> bool:
    return parent_and_ordinal(pod)[0] == metadata(sts).get("name")


def claim_name(sts: Obj, template: Obj, ordinal: int) -> str:
    return f"{metadata(template).get('name')}-{metadata(sts)['name']}-{ordinal}"


def revision_data(sts: Obj) -> Obj:
    """getPatch: the template as a replacing patch, the data of a StatefulSet's revision."""
    template = copy.deepcopy(_spec(sts).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def template_of(revision: Obj) -> Obj:
    """ApplyRevision: the template a revision records."""
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def new_pod(sts: Obj, template: Obj, ordinal: int, revision_name: str) -> Obj:
    """newStatefulSetPod: the template's pod with its identity, its claims' volumes and its revision."""
    meta = metadata(sts)
    name = f"{meta['name']}-{ordinal}"
    pod = pod_from_template(template, owner_reference(sts, f"{GROUP}/{VERSION}", KIND), "")
    pod["metadata"].pop("generateName", None)
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"].update({POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal), history.HASH_LABEL: revision_name})
    spec = pod["spec"]
    spec["hostname"] = name
    if _spec(sts).get("serviceName"):
        spec["subdomain"] = _spec(sts)["serviceName"]
    claim_volumes = {
        str(metadata(t).get("name")): {"name": metadata(t).get("name"), "persistentVolumeClaim": {"claimName": claim_name(sts, t, ordinal)}}
        for t in _spec(sts).get("volumeClaimTemplates") or []
    }
    if claim_volumes:
        others = [v for v in spec.get("volumes") or [] if v.get("name") not in claim_volumes]
        spec["volumes"] = [*claim_volumes.values(), *others]
    return pod


def running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_pod_ready(pod)


class StatefulSetController:
    """Informer handlers queue StatefulSets; ``process()`` syncs them until cancelled."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        pods_by_controller: Index[OwnerIndexKey],
        revisions: Informer,
        revisions_by_namespace: Index[str],
        workers: int = 4,
        watch_timeout_seconds: int | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        self.pods = pods
        self.pods_by_controller = pods_by_controller
        self.revisions = revisions
        self.revisions_by_namespace = revisions_by_namespace
        self.stateful_sets = Informer(client, resource_path(GROUP, VERSION, PLURAL), name=PLURAL, watch_timeout_seconds=watch_timeout_seconds)
        self.owners = ControllerOwners(self.stateful_sets, KIND)
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.pod_control = PodControl(client, COMPONENT)
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        return [self.stateful_sets, self.pods, self.revisions]

    def _wire(self) -> None:
        self.stateful_sets.on_add(self.enqueue)
        self.stateful_sets.on_update(lambda _old, new: self.enqueue(new))
        self.stateful_sets.on_delete(self.enqueue)
        self.pods.on_add(self._pod_changed)
        self.pods.on_update(self._pod_updated)
        self.pods.on_delete(self._pod_changed)
        self.revisions.on_add(self._revision_changed)
        self.revisions.on_delete(self._revision_changed)

    def enqueue(self, sts: Obj) -> None:
        self.queue.add(key_of(sts))

    def _pod_changed(self, pod: Obj) -> None:
        ref = controller_owner(pod)
        if ref is not None:
            sts = self.owners.owner_of(pod, ref)
            if sts is not None:
                self.enqueue(sts)
            return
        for sts in self.owners.matching(pod):
            self.enqueue(sts)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if metadata(old).get("resourceVersion") == metadata(new).get("resourceVersion"):
            return
        if controller_owner(old) != controller_owner(new):
            self._pod_changed(old)
        self._pod_changed(new)
        sts = self.owners.owner_of(new)
        min_ready = int(_spec(sts).get("minReadySeconds") or 0) if sts is not None else 0
        if sts is not None and min_ready > 0 and not is_pod_ready(old) and is_pod_ready(new):
            self.queue.add_after(key_of(sts), float(min_ready))

    def _revision_changed(self, revision: Obj) -> None:
        sts = self.owners.owner_of(revision)
        if sts is not None:
            self.enqueue(sts)

    async def process(self) -> None:
        log.info("caches synced, processing")
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, namespace: str, name: str) -> bool:
        cached = self.stateful_sets.get(namespace, name)
        if cached is None or metadata(cached).get("deletionTimestamp"):
            return True
        await _SetSync(self, copy.deepcopy(cached)).run()
        return True


class _SetSync:
    """One sync of one StatefulSet (upstream's updateStatefulSet and its status)."""

    def __init__(self, controller: StatefulSetController, sts: Obj) -> None:
        self.c = controller
        self.client = controller.client
        self.sts = sts
        meta = metadata(sts)
        self.namespace, self.name = str(meta.get("namespace") or ""), str(meta["name"])
        self.owner = {**sts, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}

    async def _fresh(self) -> Obj | None:
        try:
            return await self.client.get(statefulset_path(self.namespace, self.name))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    async def run(self) -> None:
        sts = self.sts
        revisions = await history.controlled_revisions(self.client, self.c.revisions_by_namespace, sts, f"{GROUP}/{VERSION}", KIND, self._fresh)
        current, update, collision = await self.revisions(revisions)
        pods = await self.claim_pods()
        status = await self.update(pods, current, update)
        status["collisionCount"] = collision
        status["observedGeneration"] = int(metadata(sts).get("generation") or 0)
        await self.write_status(status)
        await self.truncate_history(revisions, current, update)

    # ---- revisions ------------------------------------------------------------------------------

    async def revisions(self, revisions: list[Obj]) -> tuple[Obj, Obj, int]:
        """getStatefulSetRevisions: (current revision, update revision, collision count)."""
        sts = self.sts
        collision = int(_status(sts).get("collisionCount") or 0)
        data = revision_data(sts)
        number = history.max_revision(revisions) + 1
        equal = [r for r in revisions if r.get("data") == data]
        if equal:
            update = equal[-1]
            if history.revision_number(update) != history.max_revision(revisions):
                update = await history.update_revision_number(self.client, update, number)
        else:
            update, collision = await self.create_revision(data, number, collision)
        current_name = _status(sts).get("currentRevision")
        current = next((r for r in revisions if metadata(r).get("name") == current_name), update)
        return current, update, collision

    async def create_revision(self, data: Obj, number: int, collision: int) -> tuple[Obj, int]:
        """CreateControllerRevision: named by the data's hash; a name taken by other data moves the
        collision count until a free one is found."""
        template_labels = ((_spec(self.sts).get("template") or {}).get("metadata") or {}).get("labels") or {}
        while True:
            revision_hash = history.hash_revision(data, collision)
            name = history.revision_name(self.name, revision_hash)
            body: Obj = {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": name, "namespace": self.namespace, "labels": {**template_labels, history.HASH_LABEL: revision_hash},
                    "ownerReferences": [owner_reference(self.sts, f"{GROUP}/{VERSION}", KIND)],
                },
                "data": data,
                "revision": number,
            }  # fmt: skip
            try:
                return await self.client.create(history.revisions_path(self.namespace), body), collision
            except ApiError as exc:
                if exc.code != 409 or exc.reason != "AlreadyExists":
                    raise
            existing = await self.client.get(history.revisions_path(self.namespace, name))
            if existing.get("data") == data:
                return existing, collision
            collision += 1

    async def truncate_history(self, revisions: list[Obj], current: Obj, update: Obj) -> None:
        """truncateHistory: revisions no live pod uses, beyond revisionHistoryLimit, oldest first."""
        live = {metadata(current).get("name"), metadata(update).get("name")}
        for pod in owned_and_orphans(self.c.pods_by_controller, self.sts):
            live.add((metadata(pod).get("labels") or {}).get(history.HASH_LABEL))
        unused = sorted((r for r in revisions if metadata(r).get("name") not in live), key=history.revision_number)
        extra = len(unused) - int(_spec(self.sts).get("revisionHistoryLimit") or 0)
        for revision in unused[: max(extra, 0)]:
            await history.delete_revision(self.client, revision)

    # ---- pods --------------------------------------------------------------------------------------

    async def claim_pods(self) -> list[Obj]:
        """getPodsForStatefulSet: the pods it controls or adopts (named after it)."""
        selector = parse_selector(_spec(self.sts).get("selector"))
        if selector is None:
            return []
        claimer = Claimer(self.client, self.sts, owner_reference(self.sts, f"{GROUP}/{VERSION}", KIND), selector, self._fresh)
        return await claimer.claim(owned_and_orphans(self.c.pods_by_controller, self.sts), match=lambda pod: is_member(self.sts, pod))

    def _template_for(self, ordinal: int, current: Obj, update: Obj) -> tuple[Obj, str]:
        """newVersionedStatefulSetPod: ordinals below the partition keep the current revision."""
        strategy = _spec(self.sts).get("updateStrategy") or {}
        rolling = strategy.get("rollingUpdate")
        if strategy.get("type") == "RollingUpdate":
            partition = int((rolling or {}).get("partition") or 0) if rolling is not None else int(_status(self.sts).get("currentReplicas") or 0)
            if ordinal < start_ordinal(self.sts) + partition:
                return template_of(current), str(metadata(current)["name"])
        return template_of(update), str(metadata(update)["name"])

    async def create_pod(self, ordinal: int, current: Obj, update: Obj) -> None:
        template, revision_name = self._template_for(ordinal, current, update)
        pod = new_pod(self.sts, template, ordinal, revision_name)
        for claim_template in _spec(self.sts).get("volumeClaimTemplates") or []:
            await self.ensure_claim(claim_template, ordinal, str(pod["metadata"]["name"]))
        try:
            await self.client.create(resource_path("", "v1", "pods", self.namespace), pod)
        except ApiError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                return
            await self.c.pod_control.event(self.owner, "FailedCreate", f"create Pod {pod['metadata']['name']} in StatefulSet {self.name} failed error: {exc.message}", "Warning")
            raise
        await self.c.pod_control.event(self.owner, "SuccessfulCreate", f"create Pod {pod['metadata']['name']} in StatefulSet {self.name} successful")

    async def ensure_claim(self, template: Obj, ordinal: int, pod_name: str) -> None:
        """createPersistentVolumeClaims: the pod's claim from the template, unless it exists."""
        name = claim_name(self.sts, template, ordinal)
        try:
            await self.client.get(claims_path(self.namespace, name))
            return
        except ApiError as exc:
            if exc.code != 404:
                raise
        claim = copy.deepcopy(template)
        meta = claim.setdefault("metadata", {})
        meta.update(name=name, namespace=self.namespace)
        meta["labels"] = {**(meta.get("labels") or {}), **((_spec(self.sts).get("selector") or {}).get("matchLabels") or {})}
        claim.update(apiVersion="v1", kind="PersistentVolumeClaim")
        claim.pop("status", None)
        try:
            await self.client.create(claims_path(self.namespace), claim)
        except ApiError as exc:
            if exc.code != 409:
                await self.c.pod_control.event(self.owner, "FailedCreate", f"create Claim {name} for Pod {pod_name} in StatefulSet {self.name} failed error: {exc.message}", "Warning")
                raise
            return
        await self.c.pod_control.event(self.owner, "SuccessfulCreate", f"create Claim {name} Pod {pod_name} in StatefulSet {self.name} success")

    async def delete_pod(self, pod: Obj) -> None:
        name = str(metadata(pod)["name"])
        try:
            await self.client.delete(resource_path("", "v1", "pods", self.namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return
            await self.c.pod_control.event(self.owner, "FailedDelete", f"delete Pod {name} in StatefulSet {self.name} failed error: {exc.message}", "Warning")
            raise
        await self.c.pod_control.event(self.owner, "SuccessfulDelete", f"delete Pod {name} in StatefulSet {self.name} successful")

    async def update(self, pods: list[Obj], current: Obj, update: Obj) -> Obj:
        """updateStatefulSet: make, replace and remove pods as the ordering allows; the new status."""
        sts = self.sts
        first, last = start_ordinal(sts), end_ordinal(sts)
        by_ordinal: dict[int, Obj] = {}
        condemned: list[Obj] = []
        for pod in pods:
            ordinal = parent_and_ordinal(pod)[1]
            if first <= ordinal <= last:
                by_ordinal[ordinal] = pod
            else:
                condemned.append(pod)
        condemned.sort(key=lambda p: parent_and_ordinal(p)[1], reverse=True)
        parallel = _spec(sts).get("podManagementPolicy") == "Parallel"
        min_ready = int(_spec(sts).get("minReadySeconds") or 0)
        for ordinal in range(first, last + 1):
            member = by_ordinal.get(ordinal)
            if member is None:
                await self.create_pod(ordinal, current, update)
                if not parallel:
                    return self.status(pods, current, update)
                continue
            if (member.get("status") or {}).get("phase") in ("Failed", "Succeeded") and not metadata(member).get("deletionTimestamp"):
                # A finished pod is deleted, and made again by a later sync.
                await self.delete_pod(member)
                if not parallel:
                    return self.status(pods, current, update)
                continue
            if not parallel and (metadata(member).get("deletionTimestamp") or not running_and_ready(member) or not is_pod_available(member, min_ready, time.time())):
                # OrderedReady: the next pod waits for this one.
                return self.status(pods, current, update)
        for doomed in condemned:
            if metadata(doomed).get("deletionTimestamp"):
                if not parallel:
                    return self.status(pods, current, update)
                continue
            await self.delete_pod(doomed)
            if not parallel:
                return self.status(pods, current, update)
        strategy = _spec(sts).get("updateStrategy") or {}
        if strategy.get("type") == "RollingUpdate":
            await self.rolling_update(by_ordinal, update, strategy.get("rollingUpdate") or {}, min_ready)
        return self.status(pods, current, update)

    async def rolling_update(self, by_ordinal: dict[int, Obj], update: Obj, rolling: Obj, min_ready: int) -> None:
        """From the highest ordinal down to the partition: outdated pods deleted, maxUnavailable at a time."""
        replicas = int(_spec(self.sts).get("replicas") or 0)
        max_unavailable = max(scaled_value(rolling.get("maxUnavailable", 1), replicas, round_up=False), 1)
        partition = start_ordinal(self.sts) + int(rolling.get("partition") or 0)
        now = time.time()
        unavailable = sum(1 for p in by_ordinal.values() if metadata(p).get("deletionTimestamp") or not is_pod_available(p, min_ready, now))
        update_name = metadata(update).get("name")
        for ordinal in sorted(by_ordinal, reverse=True):
            if ordinal < partition or unavailable >= max_unavailable:
                break
            pod = by_ordinal[ordinal]
            if (metadata(pod).get("labels") or {}).get(history.HASH_LABEL) != update_name and not metadata(pod).get("deletionTimestamp"):
                await self.delete_pod(pod)
                unavailable += 1

    def status(self, pods: list[Obj], current: Obj, update: Obj) -> Obj:
        """The counts of the set's pods (computeReplicaStatus), and completeUpdate."""
        min_ready = int(_spec(self.sts).get("minReadySeconds") or 0)
        now = time.time()
        current_name, update_name = str(metadata(current)["name"]), str(metadata(update)["name"])
        status: Obj = {
            "replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0,
            "currentRevision": current_name, "updateRevision": update_name,
        }  # fmt: skip
        for pod in pods:
            if not (pod.get("status") or {}).get("phase"):
                continue
            status["replicas"] += 1
            if running_and_ready(pod):
                status["readyReplicas"] += 1
                if is_pod_available(pod, min_ready, now):
                    status["availableReplicas"] += 1
            if not metadata(pod).get("deletionTimestamp"):
                revision = (metadata(pod).get("labels") or {}).get(history.HASH_LABEL)
                status["currentReplicas"] += revision == current_name
                status["updatedReplicas"] += revision == update_name
        replicas = int(_spec(self.sts).get("replicas") or 0)
        if status["updatedReplicas"] == replicas and status["readyReplicas"] == replicas and status["replicas"] == replicas:
            status["currentReplicas"], status["currentRevision"] = status["updatedReplicas"], update_name
        if min_ready > 0 and status["readyReplicas"] != status["availableReplicas"]:
            self.c.queue.add_after((self.namespace, self.name), float(min_ready))
        return status

    async def write_status(self, status: Obj) -> None:
        old = _status(self.sts)
        merged = {**old, **status}
        if _stored_form(merged) == _stored_form(old):
            return
        try:
            await self.client.update(statefulset_path(self.namespace, self.name, "status"), {**self.owner, "status": merged})
        except ApiError as exc:
            if exc.code != 404:
                raise


# StatefulSetStatus counters with omitempty: the server leaves them out at 0.
_OMITTED_AT_ZERO = ("observedGeneration", "readyReplicas", "currentReplicas", "updatedReplicas")


def _stored_form(status: Obj) -> Obj:
    return {k: v for k, v in status.items() if not (k in _OMITTED_AT_ZERO and v == 0)}
