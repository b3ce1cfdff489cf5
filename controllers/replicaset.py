"""The ReplicaSet controller (upstream's pkg/controller/replicaset): keeps spec.replicas pods of a
ReplicaSet's template, and reports them in its status.

Each sync of a ReplicaSet claims its pods (adopting matching orphans, releasing pods its selector
no longer matches), creates the missing ones in slow-start batches or deletes the surplus (the
least useful first), but only once the informer has shown the pods its last sync created and
deleted (expectations). Its status counts the active pods (replicas), those with the template's
labels (fullyLabeledReplicas), the ready ones, the ones ready for minReadySeconds (available) and
those being deleted (terminatingReplicas), with observedGeneration and a ReplicaFailure
condition while creating or deleting fails. A pod that is ready but not yet available brings the
ReplicaSet back when it will be.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time

from controllers.objects import controller_owner, get_live, metadata
from controllers.workloads import (
    BURST_REPLICAS,
    Claimer,
    ControllerOwners,
    Expectations,
    OwnerIndexKey,
    PodControl,
    generate_name_prefix,
    is_controlled_by,
    key_of,
    labels_of,
    next_availability_check,
    owned_and_orphans,
    owner_reference,
    parse_selector,
    pod_from_template,
    pod_key,
    pods_to_delete,
    slow_start_batch,
)
from kube.client import KubeClient, resource_path
from kube.dra.pods import is_pod_active, is_pod_available, is_pod_ready, is_pod_terminating
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.objects import Obj
from kube.timeutil import now_rfc3339
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("replicaset-controller")

GROUP, VERSION, KIND, PLURAL = "apps", "v1", "ReplicaSet", "replicasets"
COMPONENT = "replicaset-controller"
# upstream's statusUpdateRetries: one more try after a conflict, with a fresh read.
STATUS_UPDATE_RETRIES = 1
REPLICA_FAILURE = "ReplicaFailure"


def replica_set_path(namespace: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, PLURAL, namespace, name or None, subresource)


def replicas_of(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas") or 0)


def calculate_status(rs: Obj, active: list[Obj], terminating: list[Obj], failure: Exception | None, now: float) -> Obj:
    """calculateStatus: the counters of a ReplicaSet's pods and its ReplicaFailure condition."""
    status: Obj = copy.deepcopy(rs.get("status") or {})
    spec = rs.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    fully_labeled = sum(1 for pod in active if template_labels.items() <= labels_of(pod).items())
    ready = [pod for pod in active if is_pod_ready(pod)]
    available = sum(1 for pod in ready if is_pod_available(pod, min_ready, now))
    conditions: list[Obj] = list(status.get("conditions") or [])
    current = next((c for c in conditions if c.get("type") == REPLICA_FAILURE), None)
    if failure is not None and current is None:
        diff = len(active) - replicas_of(rs)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        message = failure.message if isinstance(failure, ApiError) else str(failure)
        conditions.append({"type": REPLICA_FAILURE, "status": "True", "lastTransitionTime": now_rfc3339(), "reason": reason, "message": message})
    elif failure is None and current is not None:
        conditions = [c for c in conditions if c.get("type") != REPLICA_FAILURE]
    status.update(
        replicas=len(active), fullyLabeledReplicas=fully_labeled, readyReplicas=len(ready), availableReplicas=available, terminatingReplicas=len(terminating)
    )
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    return status


_COUNTERS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "terminatingReplicas")


def status_unchanged(rs: Obj, status: Obj) -> bool:
    """The steady state: same counters and conditions, and the generation already observed."""
    old = rs.get("status") or {}
    meta = metadata(rs)
    return (
        all(int(old.get(k) or 0) == int(status.get(k) or 0) for k in _COUNTERS)
        and (old.get("terminatingReplicas") is None) == (status.get("terminatingReplicas") is None)
        and int(old.get("observedGeneration") or 0) == int(meta.get("generation") or 0)
        and (old.get("conditions") or []) == (status.get("conditions") or [])
    )


class ReplicaSetController:
    """Informer handlers queue ReplicaSets; ``process()`` syncs them until cancelled.

    The pod informer and its index by controller are shared with the other workload controllers;
    the ReplicaSet informer is this controller's (the Deployment controller reads it too).
    """

    def __init__(
        self, client: KubeClient, *, pods: Informer, pods_by_controller: Index[OwnerIndexKey], workers: int = 4, watch_timeout_seconds: int | None = None
    ) -> None:
        self.client = client
        self.workers = workers
        self.pods = pods
        self.pods_by_controller = pods_by_controller
        self.replica_sets = Informer(client, resource_path(GROUP, VERSION, PLURAL), name=PLURAL, watch_timeout_seconds=watch_timeout_seconds)
        self.owners = ControllerOwners(self.replica_sets, KIND)
        self.expectations = Expectations()
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self.pod_control = PodControl(client, COMPONENT)
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        return [self.pods, self.replica_sets]

    # ---- event handlers -------------------------------------------------------------------

    def _wire(self) -> None:
        self.replica_sets.on_add(self.enqueue)
        self.replica_sets.on_update(lambda _old, new: self.enqueue(new))
        self.replica_sets.on_delete(self.enqueue)
        self.pods.on_add(self._pod_added)
        self.pods.on_update(self._pod_updated)
        self.pods.on_delete(self._pod_deleted)

    def enqueue(self, rs: Obj) -> None:
        self.queue.add(key_of(rs))

    def _pod_added(self, pod: Obj) -> None:
        if metadata(pod).get("deletionTimestamp"):
            # Seen for the first time while being deleted (a re-list): a deletion, not a creation.
            self._pod_deleted(pod)
            return
        ref = controller_owner(pod)
        if ref is not None:
            rs = self.owners.owner_of(pod, ref)
            if rs is not None:
                self.expectations.creation_observed("/".join(key_of(rs)))
                self.enqueue(rs)
            return
        for rs in self.owners.matching(pod):
            self.enqueue(rs)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if metadata(old).get("resourceVersion") == metadata(new).get("resourceVersion"):
            return
        labels_changed = labels_of(old) != labels_of(new)
        if metadata(new).get("deletionTimestamp"):
            # The pod's deletion is underway: count it as observed now, so a replacement is not
            # held up by the kubelet's grace period.
            self._pod_deleted(new)
            if labels_changed:
                self._pod_deleted(old)
            return
        old_ref, new_ref = controller_owner(old), controller_owner(new)
        ref_changed = (old_ref or {}).get("uid") != (new_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            previous = self.owners.owner_of(old, old_ref)
            if previous is not None:
                self.enqueue(previous)
        if new_ref is not None:
            rs = self.owners.owner_of(new, new_ref)
            if rs is None:
                return
            self.enqueue(rs)
            min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(new):
                # It becomes available after minReadySeconds: look again then.
                self.queue.add_after(key_of(rs), float(min_ready))
            return
        if labels_changed or ref_changed:
            for rs in self.owners.matching(new):
                self.enqueue(rs)

    def _pod_deleted(self, pod: Obj) -> None:
        rs = self.owners.owner_of(pod)
        if rs is None:
            return
        self.expectations.deletion_observed("/".join(key_of(rs)), pod_key(pod))
        self.enqueue(rs)

    # ---- running -------------------------------------------------------------------------------

    async def process(self) -> None:
        log.info("caches synced, processing")
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, namespace: str, name: str) -> bool:
        """syncReplicaSet: claim pods, create or delete what the spec asks, write the status."""
        key = f"{namespace}/{name}"
        rs = self.replica_sets.get(namespace, name)
        if rs is None:
            self.expectations.forget(key)
            return True
        needs_sync = self.expectations.satisfied(key)
        spec = rs.get("spec") or {}
        selector = parse_selector(spec.get("selector"))
        if selector is None:
            log.warning("selector cannot be parsed", extra={"replicaSet": key})
            return True
        candidates = owned_and_orphans(self.pods_by_controller, rs)
        active_candidates = [pod for pod in candidates if is_pod_active(pod)]
        claimer = Claimer(self.client, rs, owner_reference(rs, f"{GROUP}/{VERSION}", KIND), selector, lambda: self._fresh(namespace, name))
        active = await claimer.claim(active_candidates)
        terminating = [pod for pod in candidates if is_pod_terminating(pod) and is_controlled_by(pod, rs) and selector.matches(labels_of(pod))]
        failure: Exception | None = None
        if needs_sync and not metadata(rs).get("deletionTimestamp"):
            failure = await self.manage_replicas(rs, key, active)
        now = time.time()
        status = calculate_status(rs, active, terminating, failure, now)
        updated = await self._write_status(rs, status)
        if failure is not None:
            raise failure
        if updated is not None:
            min_ready = int((updated.get("spec") or {}).get("minReadySeconds") or 0)
            ustatus = updated.get("status") or {}
            if min_ready > 0 and int(ustatus.get("readyReplicas") or 0) != int(ustatus.get("availableReplicas") or 0):
                wait = next_availability_check(active, min_ready, time.time())
                self.queue.add_after((namespace, name), float(min_ready) if wait is None else wait)
        return True

    async def _fresh(self, namespace: str, name: str) -> Obj | None:
        """An uncached read of the ReplicaSet (before adopting, upstream's RecheckDeletionTimestamp)."""
        try:
            return await self.client.get(replica_set_path(namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    async def manage_replicas(self, rs: Obj, key: str, active: list[Obj]) -> Exception | None:
        """manageReplicas: create the missing pods (at most 500 a sync) or delete the surplus."""
        meta = metadata(rs)
        namespace = str(meta.get("namespace") or "")
        diff = len(active) - replicas_of(rs)
        if diff < 0:
            count = min(-diff, BURST_REPLICAS)
            self.expectations.expect_creations(key, count)
            template = (rs.get("spec") or {}).get("template") or {}
            ref = owner_reference(rs, f"{GROUP}/{VERSION}", KIND)
            owner = {**rs, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}

            async def create() -> None:
                await self.pod_control.create(namespace, pod_from_template(template, ref, generate_name_prefix(meta["name"])), owner)

            log.info("too few replicas", extra={"replicaSet": key, "need": replicas_of(rs), "creating": count})
            successes, error = await slow_start_batch(count, create)
            if error is not None:
                log.info("slow-start failure, skipping the remaining creations", extra={"replicaSet": key, "skipped": count - successes, "error": str(error)})
            for _ in range(count - successes):
                # Creations never attempted (or failed) will not show up in the informer.
                self.expectations.creation_observed(key)
            return error
        if diff > 0:
            count = min(diff, BURST_REPLICAS)
            doomed = pods_to_delete(active, self._related_pods(rs), count)
            self.expectations.expect_deletions(key, [pod_key(p) for p in doomed])
            log.info("too many replicas", extra={"replicaSet": key, "need": replicas_of(rs), "deleting": count})
            owner = {**rs, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}
            results = await asyncio.gather(*(self._delete(key, pod, owner) for pod in doomed), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, Exception):
                    raise result
            errors = [r for r in results if isinstance(r, Exception)]
            return errors[0] if errors else None
        return None

    async def _delete(self, key: str, pod: Obj, owner: Obj) -> None:
        meta = metadata(pod)
        try:
            await self.pod_control.delete(str(meta.get("namespace") or ""), str(meta["name"]), owner)
        except ApiError as exc:
            # Not deleted: the informer will not show its deletion.
            self.expectations.deletion_observed(key, pod_key(pod))
            if exc.code != 404:
                raise

    def _related_pods(self, rs: Obj) -> list[Obj]:
        """getIndirectlyRelatedPods: the pods of every ReplicaSet with the same controller (a
        Deployment's old and new ones), whose placement ranks which pod goes first."""
        owner = controller_owner(rs)
        sets = [rs]
        if owner is not None:
            sets = [other for other in self.owners.by_namespace.get(str(metadata(rs).get("namespace") or "")) if (controller_owner(other) or {}).get("uid") == owner.get("uid")]
        related: list[Obj] = []
        for replica_set in sets:
            related.extend(self.pods_by_controller.get(("uid", str(metadata(replica_set).get("uid") or ""))))
        return related

    async def _write_status(self, rs: Obj, status: Obj) -> Obj | None:
        """updateReplicaSetStatus: PUT the status with observedGeneration, once more on a conflict.
        Returns the ReplicaSet as written (as it was when nothing changed), None when it is gone."""
        if status_unchanged(rs, status):
            return rs
        meta = metadata(rs)
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        current = rs
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            body = {**current, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "status": {**status, "observedGeneration": metadata(current).get("generation") or 0}}
            try:
                return await self.client.update(replica_set_path(namespace, name, "status"), body)
            except ApiError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 409 or attempt == STATUS_UPDATE_RETRIES:
                    raise
            fresh = await get_live(self.client, None, replica_set_path(namespace, name), namespace, name, str(meta.get("uid") or ""))
            if fresh is None:
                return None
            current = fresh
        return None

