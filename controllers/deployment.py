"""The Deployment controller (upstream's pkg/controller/deployment): a ReplicaSet per pod template,
rolled from the old ones to the new one.

A Deployment's ReplicaSets are those it controls (orphans whose labels its selector matches are
adopted). The new one is the one whose template equals the Deployment's but for the
``pod-template-hash`` label; it is created when missing, named ``<deployment>-<hash>``, with the
Deployment's annotations, the next ``deployment.kubernetes.io/revision`` and the
desired/max-replicas annotations. A RollingUpdate scales the new one up within maxSurge and the
old ones down within maxUnavailable, counting available pods; Recreate scales the old ones to zero
and waits for their pods to go before it scales the new one up. A change of spec.replicas alone
scales every active ReplicaSet in proportion; a paused Deployment only scales. Old ReplicaSets
beyond revisionHistoryLimit are deleted once empty. The status adds up the ReplicaSets', with the
Available, Progressing (progressDeadlineSeconds) and ReplicaFailure conditions.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from controllers.objects import controller_owner, metadata
from controllers.replicaset import replicas_of
from controllers.workloads import (
    Claimer,
    ControllerOwners,
    OwnerIndexKey,
    compute_hash,
    key_of,
    labels_of,
    owner_reference,
    parse_selector,
)
from kube.client import KubeClient, record_event, resource_path
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.intstr import scaled_value
from kube.objects import Obj
from kube.timeutil import now_rfc3339, parse_time
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("deployment-controller")

GROUP, VERSION, KIND, PLURAL = "apps", "v1", "Deployment", "deployments"
COMPONENT = "deployment-controller"
HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Annotations of a Deployment not copied to its ReplicaSets.
SKIPPED_ANNOTATIONS = frozenset(
    {"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, "deprecated.deployment.rollback.to"}
)
MAX_REVISION_HISTORY_CHARS = 2000
MAX_NAME = 253
INT32_MAX = 2**31 - 1
# Condition reasons (deployment_util.go).
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
FAILED_RS_CREATE = "ReplicaSetCreateError"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"


def deployment_path(namespace: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, PLURAL, namespace, name or None, subresource)


def rs_path(namespace: str, name: str = "") -> str:
    return resource_path("apps", "v1", "replicasets", namespace, name or None)


def _rs_object_path(rs: Obj) -> str:
    meta = metadata(rs)
    return rs_path(str(meta.get("namespace") or ""), str(meta["name"]))


# ---- the arithmetic of a rollout (deployment_util.go) -------------------------------------------------


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def _count(obj: Obj | None, name: str) -> int:
    return int(_status(obj).get(name) or 0) if obj is not None else 0


def is_rolling(d: Obj) -> bool:
    return (_spec(d).get("strategy") or {}).get("type") == "RollingUpdate"


def resolve_fenceposts(d: Obj) -> tuple[int, int]:
    """ResolveFenceposts: (maxSurge, maxUnavailable) for the desired replicas; never both 0."""
    rolling = (_spec(d).get("strategy") or {}).get("rollingUpdate") or {}
    desired = replicas_of(d)
    surge = scaled_value(rolling.get("maxSurge", 0), desired, round_up=True)
    unavailable = scaled_value(rolling.get("maxUnavailable", 0), desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Obj) -> int:
    return resolve_fenceposts(d)[0] if is_rolling(d) else 0


def max_unavailable(d: Obj) -> int:
    if not is_rolling(d) or replicas_of(d) == 0:
        return 0
    return min(resolve_fenceposts(d)[1], replicas_of(d))


def revision_of(rs: Obj) -> int | None:
    """The revision annotation as a number (0 without one, None when it is not a number)."""
    value = (metadata(rs).get("annotations") or {}).get(REVISION)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return None


def _created(obj: Obj) -> tuple[str, str]:
    meta = metadata(obj)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def _template_without_hash(template: Any) -> Any:
    template = copy.deepcopy(template) if isinstance(template, dict) else {}
    meta = template.get("metadata")
    if isinstance(meta, dict):
        labels = dict(meta.get("labels") or {})
        labels.pop(HASH_LABEL, None)
        if labels:
            meta["labels"] = labels
        else:
            meta.pop("labels", None)
        if not meta:
            template.pop("metadata")
    return template


def equal_ignoring_hash(a: Any, b: Any) -> bool:
    """EqualIgnoreHash: the same template but for the pod-template-hash label."""
    return bool(_template_without_hash(a) == _template_without_hash(b))


def find_new_rs(d: Obj, rs_list: list[Obj]) -> Obj | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template is the Deployment's."""
    for rs in sorted(rs_list, key=_created):
        if equal_ignoring_hash(_spec(rs).get("template"), _spec(d).get("template")):
            return rs
    return None


def new_rs_replicas(d: Obj, all_rss: list[Obj], new_rs: Obj) -> int:
    """NewRSNewReplicas: how far the new ReplicaSet may grow now."""
    desired = replicas_of(d)
    if not is_rolling(d):
        return desired
    current = sum(replicas_of(rs) for rs in all_rss)
    max_total = desired + max_surge(d)
    if current >= max_total:
        return replicas_of(new_rs)
    return replicas_of(new_rs) + min(max_total - current, desired - replicas_of(new_rs))


def _annotation_int(rs: Obj, key: str) -> int | None:
    value = (metadata(rs).get("annotations") or {}).get(key)
    try:
        number = int(value) if value is not None and value.isdigit() else None
    except ValueError:
        return None
    return number if number is not None and number <= INT32_MAX else None


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    """IsSaturated: the ReplicaSet has all the Deployment's replicas, desired and available."""
    if rs is None:
        return False
    return replicas_of(rs) == replicas_of(d) and _annotation_int(rs, DESIRED_REPLICAS) == replicas_of(d) and _count(rs, "availableReplicas") == replicas_of(d)


def find_active_or_latest(new_rs: Obj | None, old_rss: list[Obj]) -> Obj | None:
    """FindActiveOrLatest: the only ReplicaSet with replicas, or the newest when none has any."""
    if new_rs is None and not old_rss:
        return None
    old_sorted = sorted(old_rss, key=_created, reverse=True)
    active = [rs for rs in [*old_sorted, new_rs] if rs is not None and replicas_of(rs) > 0]
    if not active:
        return new_rs if new_rs is not None else old_sorted[0]
    return active[0] if len(active) == 1 else None


def rs_proportion(rs: Obj, d: Obj, to_add: int, added: int) -> int:
    """GetReplicaSetProportion: this ReplicaSet's share of a change of the Deployment's size."""
    if replicas_of(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    allowed = to_add - added
    if replicas_of(d) == 0:
        fraction = -replicas_of(rs)
    else:
        before = _annotation_int(rs, MAX_REPLICAS) or _count(d, "replicas")
        if not before:
            fraction = 0
        else:
            # integer.RoundToInt32: half away from zero.
            exact = replicas_of(rs) * (replicas_of(d) + max_surge(d)) / before
            fraction = int(exact + 0.5) if exact >= 0 else -int(-exact + 0.5)
            fraction -= replicas_of(rs)
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _terminating(rss: list[Obj]) -> int | None:
    total = 0
    for rs in rss:
        status = _status(rs)
        if not status.get("observedGeneration") and status.get("terminatingReplicas") is None:
            continue
        if status.get("terminatingReplicas") is None:
            return None
        total += int(status["terminatingReplicas"])
    return total


def deployment_complete(d: Obj, status: Obj) -> bool:
    desired = replicas_of(d)
    return (
        int(status.get("updatedReplicas") or 0) == desired
        and int(status.get("replicas") or 0) == desired
        and int(status.get("availableReplicas") or 0) == desired
        and int(status.get("observedGeneration") or 0) >= int(metadata(d).get("generation") or 0)
    )


def deployment_progressing(d: Obj, status: Obj) -> bool:
    old = _status(d)

    def n(source: Obj, key: str) -> int:
        return int(source.get(key) or 0)

    return (
        n(status, "updatedReplicas") > n(old, "updatedReplicas")
        or n(status, "replicas") - n(status, "updatedReplicas") < n(old, "replicas") - n(old, "updatedReplicas")
        or n(status, "readyReplicas") > n(old, "readyReplicas")
        or n(status, "availableReplicas") > n(old, "availableReplicas")
    )


def has_progress_deadline(d: Obj) -> bool:
    deadline = _spec(d).get("progressDeadlineSeconds")
    return deadline is not None and deadline != INT32_MAX


def _condition(status: Obj, kind: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def new_condition(kind: str, status: str, reason: str, message: str) -> Obj:
    now = now_rfc3339()
    return {"type": kind, "status": status, "lastUpdateTime": now, "lastTransitionTime": now, "reason": reason, "message": message}


def set_condition(status: Obj, condition: Obj) -> None:
    """SetDeploymentCondition: a condition of the same status and reason is left as it is; one of
    the same status keeps its transition time."""
    current = _condition(status, condition["type"])
    if current is not None and current.get("status") == condition["status"] and current.get("reason") == condition["reason"]:
        return
    if current is not None and current.get("status") == condition["status"]:
        condition = {**condition, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]] + [condition]


def remove_condition(status: Obj, kind: str) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != kind]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def timed_out(d: Obj, status: Obj, now: float) -> bool:
    """DeploymentTimedOut: no progress since progressDeadlineSeconds."""
    if not has_progress_deadline(d):
        return False
    condition = _condition(status, "Progressing")
    if condition is None or condition.get("reason") == NEW_RS_AVAILABLE:
        return False
    if condition.get("reason") == TIMED_OUT:
        return True
    since = parse_time(str(condition.get("lastUpdateTime") or ""))
    return since is not None and since.timestamp() + int(_spec(d).get("progressDeadlineSeconds") or 0) < now


def calculate_status(all_rss: list[Obj], new_rs: Obj | None, d: Obj) -> Obj:
    """calculateStatus: the ReplicaSets' counters added up, and the Available condition."""
    available = sum(_count(rs, "availableReplicas") for rs in all_rss)
    total = sum(replicas_of(rs) for rs in all_rss)
    old = _status(d)
    status: Obj = {
        "observedGeneration": int(metadata(d).get("generation") or 0),
        "replicas": sum(_count(rs, "replicas") for rs in all_rss),
        "updatedReplicas": _count(new_rs, "replicas"),
        "readyReplicas": sum(_count(rs, "readyReplicas") for rs in all_rss),
        "availableReplicas": available,
        "unavailableReplicas": max(total - available, 0),
    }
    terminating = _terminating(all_rss)
    if terminating is not None:
        status["terminatingReplicas"] = terminating
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    status["conditions"] = copy.deepcopy(old.get("conditions") or [])
    if available >= replicas_of(d) - max_unavailable(d):
        set_condition(status, new_condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."))
    else:
        set_condition(status, new_condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."))
    return status


_ZERO_OMITTED = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas")


def stored_form(status: Obj) -> Obj:
    """A status as the server stores it (zero counters omitted), to compare with the stored one."""
    return {k: v for k, v in status.items() if not (k in _ZERO_OMITTED and not v) and not (k == "conditions" and not v)}


def set_new_rs_annotations(d: Obj, rs: Obj, revision: int, exists: bool) -> bool:
    """SetNewReplicaSetAnnotations: the Deployment's annotations, the revision (the old one moved
    to revision-history), and for a new ReplicaSet the desired and max replicas."""
    annotations = metadata(rs).setdefault("annotations", {})
    changed = False
    for key, value in (metadata(d).get("annotations") or {}).items():
        if key in SKIPPED_ANNOTATIONS or annotations.get(key) == value:
            continue
        annotations[key] = value
        changed = True
    old_text = annotations.get(REVISION)
    had_revision = old_text is not None
    try:
        old = int(old_text) if old_text else 0
    except ValueError:
        return False
    if old < revision:
        annotations[REVISION] = str(revision)
        changed = True
        if had_revision:
            history = annotations.get(REVISION_HISTORY, "")
            parts = history.split(",") if history else []
            if not parts:
                annotations[REVISION_HISTORY] = str(old_text)
            else:
                total, start = len(history) + len(str(old_text)) + 1, 0
                while total > MAX_REVISION_HISTORY_CHARS and start < len(parts):
                    total -= len(parts[start]) + 1
                    start += 1
                if total <= MAX_REVISION_HISTORY_CHARS:
                    annotations[REVISION_HISTORY] = ",".join([*parts[start:], str(old_text)])
    if not exists and set_replicas_annotations(rs, replicas_of(d), replicas_of(d) + max_surge(d)):
        changed = True
    return changed


def set_replicas_annotations(rs: Obj, desired: int, maximum: int) -> bool:
    annotations = metadata(rs).setdefault("annotations", {})
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(maximum))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: Obj, desired: int, maximum: int) -> bool:
    annotations = metadata(rs).get("annotations") or {}
    return bool(annotations.get(DESIRED_REPLICAS) != str(desired) or annotations.get(MAX_REPLICAS) != str(maximum))


def rs_name(deployment: str, template_hash: str) -> str:
    """generateReplicaSetName: ``<deployment>-<hash>``, the name cut to leave room for the hash."""
    room = MAX_NAME - 1 - len(template_hash)
    return f"{deployment[:room] if len(deployment) > room > 0 else deployment}-{template_hash}"


# ---- the controller ------------------------------------------------------------------------------


class DeploymentController:
    """Informer handlers queue Deployments; ``process()`` syncs them until cancelled. It reads the
    ReplicaSet controller's ReplicaSets (``replica_sets``) and the shared pod index."""

    def __init__(
        self,
        client: KubeClient,
        *,
        replica_sets: ControllerOwners,
        pods: Informer,
        pods_by_controller: Index[OwnerIndexKey],
        workers: int = 4,
        watch_timeout_seconds: int | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        # The ReplicaSet controller's informer, with its index by namespace.
        self.rs_owners = replica_sets
        self.replica_sets = replica_sets.informer
        self.pods = pods
        self.pods_by_controller = pods_by_controller
        self.deployments = Informer(client, resource_path(GROUP, VERSION, PLURAL), name=PLURAL, watch_timeout_seconds=watch_timeout_seconds)
        self.owners = ControllerOwners(self.deployments, KIND)
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        return [self.deployments, self.replica_sets, self.pods]

    # ---- event handlers -----------------------------------------------------------------------

    def _wire(self) -> None:
        self.deployments.on_add(self.enqueue)
        self.deployments.on_update(lambda _old, new: self.enqueue(new))
        self.deployments.on_delete(self.enqueue)
        self.replica_sets.on_add(self._rs_added)
        self.replica_sets.on_update(self._rs_updated)
        self.replica_sets.on_delete(self._rs_deleted)
        self.pods.on_delete(self._pod_deleted)

    def enqueue(self, d: Obj) -> None:
        self.queue.add(key_of(d))

    def _matching(self, rs: Obj) -> list[Obj]:
        """getDeploymentsForReplicaSet: none for a ReplicaSet without labels."""
        return self.owners.matching(rs) if labels_of(rs) else []

    def _rs_added(self, rs: Obj) -> None:
        if metadata(rs).get("deletionTimestamp"):
            self._rs_deleted(rs)
            return
        ref = controller_owner(rs)
        if ref is not None:
            d = self.owners.owner_of(rs, ref)
            if d is not None:
                self.enqueue(d)
            return
        for d in self._matching(rs):
            self.enqueue(d)

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        if metadata(old).get("resourceVersion") == metadata(new).get("resourceVersion"):
            return
        old_ref, new_ref = controller_owner(old), controller_owner(new)
        ref_changed = (old_ref or {}).get("uid") != (new_ref or {}).get("uid")
        if ref_changed and old_ref is not None:
            previous = self.owners.owner_of(old, old_ref)
            if previous is not None:
                self.enqueue(previous)
        if new_ref is not None:
            d = self.owners.owner_of(new, new_ref)
            if d is not None:
                self.enqueue(d)
            return
        if labels_of(old) != labels_of(new) or ref_changed:
            for d in self._matching(new):
                self.enqueue(d)

    def _rs_deleted(self, rs: Obj) -> None:
        d = self.owners.owner_of(rs)
        if d is not None:
            self.enqueue(d)

    def _pod_deleted(self, pod: Obj) -> None:
        """A Recreate rollout waits for the old pods to be gone: their deletion brings it back."""
        rs = self.rs_owners.owner_of(pod)
        d = self.owners.owner_of(rs) if rs is not None else None
        if d is not None and (_spec(d).get("strategy") or {}).get("type") == "Recreate":
            self.enqueue(d)

    # ---- running ----------------------------------------------------------------------------------

    async def process(self) -> None:
        log.info("caches synced, processing")
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, namespace: str, name: str) -> bool:
        """syncDeployment."""
        cached = self.deployments.get(namespace, name)
        if cached is None:
            return True
        rollout = _Rollout(self, copy.deepcopy(cached))
        await rollout.run()
        return True

    async def event(self, d: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        try:
            await record_event(self.client, {**d, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}, reason, message, kind, COMPONENT)
        except Exception as exc:
            log.debug("event not recorded", extra={"reason": reason, "error": str(exc)})


class _Rollout:
    """One sync of one Deployment: ``d`` is a private copy, kept current with every status write."""

    def __init__(self, controller: DeploymentController, d: Obj) -> None:
        self.c = controller
        self.client = controller.client
        self.d = d
        meta = metadata(d)
        self.namespace, self.name = str(meta.get("namespace") or ""), str(meta["name"])

    async def run(self) -> None:
        d = self.d
        if _spec(d).get("selector") == {}:
            await self.c.event(d, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.", "Warning")
            if int(_status(d).get("observedGeneration") or 0) < int(metadata(d).get("generation") or 0):
                await self.write_status({**_status(d), "observedGeneration": metadata(d).get("generation")})
            return
        rs_list = await self.replica_sets()
        if metadata(d).get("deletionTimestamp"):
            new_rs, old_rss = await self.new_and_old(rs_list, create=False)
            await self.sync_status(old_rss, new_rs)
            return
        await self.check_paused()
        if _spec(d).get("paused"):
            await self.scale_only(rs_list)
            return
        if await self.is_scaling_event(rs_list):
            await self.scale_only(rs_list)
            return
        if (_spec(d).get("strategy") or {}).get("type") == "Recreate":
            await self.rollout_recreate(rs_list)
        else:
            await self.rollout_rolling(rs_list)

    # ---- reads and writes -------------------------------------------------------------------------

    async def replica_sets(self) -> list[Obj]:
        """getReplicaSetsForDeployment: the namespace's ReplicaSets it controls or adopts."""
        selector = parse_selector(_spec(self.d).get("selector"))
        if selector is None:
            return []

        async def fresh() -> Obj | None:
            try:
                return await self.client.get(deployment_path(self.namespace, self.name))
            except ApiError as exc:
                if exc.code == 404:
                    return None
                raise

        claimer = Claimer(self.client, self.d, owner_reference(self.d, f"{GROUP}/{VERSION}", KIND), selector, fresh, _rs_object_path)
        return [copy.deepcopy(rs) for rs in await claimer.claim(self.c.rs_owners.by_namespace.get(self.namespace))]

    async def write_status(self, status: Obj) -> None:
        """UpdateStatus with the Deployment as this sync has it (annotations included); ``d`` becomes the answer."""
        body = {**self.d, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "status": status}
        self.d = await self.client.update(deployment_path(self.namespace, self.name, "status"), body)

    async def update_rs(self, rs: Obj) -> Obj:
        return await self.client.update(_rs_object_path(rs), {**rs, "apiVersion": "apps/v1", "kind": "ReplicaSet"})

    # ---- the new ReplicaSet and the old ones -----------------------------------------------------------

    async def new_and_old(self, rs_list: list[Obj], create: bool) -> tuple[Obj | None, list[Obj]]:
        """getAllReplicaSetsAndSyncRevision."""
        new = find_new_rs(self.d, rs_list)
        old = [rs for rs in rs_list if new is None or metadata(rs).get("uid") != metadata(new).get("uid")]
        return await self.new_rs(rs_list, old, create), old

    async def new_rs(self, rs_list: list[Obj], old_rss: list[Obj], create: bool) -> Obj | None:
        """getNewReplicaSet: the existing one brought up to date (annotations, minReadySeconds,
        the Deployment's revision), or (``create``) a new one."""
        d = self.d
        existing = find_new_rs(d, rs_list)
        revision = max((r for r in (revision_of(rs) for rs in old_rss) if r is not None), default=0) + 1
        min_ready = int(_spec(d).get("minReadySeconds") or 0)
        if existing is not None:
            rs = copy.deepcopy(existing)
            annotations_changed = set_new_rs_annotations(d, rs, revision, exists=True)
            if annotations_changed or int(_spec(rs).get("minReadySeconds") or 0) != min_ready:
                rs["spec"]["minReadySeconds"] = min_ready
                return await self.update_rs(rs)
            status = copy.deepcopy(_status(d))
            needs_update = self._set_revision(str((metadata(rs).get("annotations") or {}).get(REVISION, "")))
            if has_progress_deadline(d) and _condition(status, "Progressing") is None:
                set_condition(status, new_condition("Progressing", "True", FOUND_NEW_RS, f'Found new replica set "{metadata(rs)["name"]}"'))
                needs_update = True
            if needs_update:
                await self.write_status(status)
            return rs
        if not create:
            return None
        template = copy.deepcopy(_spec(d).get("template") or {})
        collision = _status(d).get("collisionCount")
        template_hash = compute_hash(template, collision)
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: template_hash}
        selector = copy.deepcopy(_spec(d).get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: template_hash}
        name = rs_name(self.name, template_hash)
        fresh_rs: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": self.namespace, "labels": dict(tmeta["labels"]), "ownerReferences": [owner_reference(d, f"{GROUP}/{VERSION}", KIND)]},
            "spec": {"replicas": 0, "minReadySeconds": min_ready, "selector": selector, "template": template},
        }
        replicas = new_rs_replicas(d, [*old_rss, fresh_rs], fresh_rs)
        fresh_rs["spec"]["replicas"] = replicas
        set_new_rs_annotations(d, fresh_rs, revision, exists=False)
        already = False
        try:
            created = await self.client.create(rs_path(self.namespace), fresh_rs)
        except ApiError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                already = True
                found = self.c.replica_sets.get(self.namespace, name)
                if found is None:
                    raise
                ref = controller_owner(found)
                if ref is not None and ref.get("uid") == metadata(d).get("uid") and equal_ignoring_hash(_spec(d).get("template"), _spec(found).get("template")):
                    created = copy.deepcopy(found)
                else:
                    # A hash collision: another template's ReplicaSet has the name; try the next hash.
                    status = copy.deepcopy(_status(d))
                    status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
                    await self.write_status(status)
                    log.info("hash collision, collisionCount bumped", extra={"deployment": f"{self.namespace}/{self.name}", "collisionCount": status["collisionCount"]})
                    raise
            elif _terminating_namespace(exc):
                raise
            else:
                message = f'Failed to create new replica set "{name}": {exc.message}'
                if has_progress_deadline(d):
                    status = copy.deepcopy(_status(d))
                    set_condition(status, new_condition("Progressing", "False", FAILED_RS_CREATE, message))
                    try:
                        await self.write_status(status)
                    except ApiError:
                        pass
                await self.c.event(d, FAILED_RS_CREATE, message, "Warning")
                raise
        if not already and replicas > 0:
            await self.c.event(d, "ScalingReplicaSet", f"Scaled up replica set {metadata(created)['name']} from 0 to {replicas}")
        needs_update = self._set_revision(str(revision))
        status = copy.deepcopy(_status(self.d))
        if not already and has_progress_deadline(d):
            set_condition(status, new_condition("Progressing", "True", NEW_RS_CREATED, f'Created new replica set "{metadata(created)["name"]}"'))
            needs_update = True
        if needs_update:
            await self.write_status(status)
        return created

    def _set_revision(self, revision: str) -> bool:
        """SetDeploymentRevision, on this sync's copy (written with the next status update)."""
        annotations = metadata(self.d).setdefault("annotations", {})
        if annotations.get(REVISION) == revision:
            return False
        annotations[REVISION] = revision
        return True

    # ---- scaling ----------------------------------------------------------------------------------------

    async def scale_rs(self, rs: Obj, size: int, force: bool = False) -> tuple[bool, Obj]:
        """scaleReplicaSet: set the size (and the desired/max annotations); an event when the size moved."""
        d = self.d
        if not force and replicas_of(rs) == size:
            return False, rs
        desired, maximum = replicas_of(d), replicas_of(d) + max_surge(d)
        size_changed = replicas_of(rs) != size
        if not size_changed and not replicas_annotations_need_update(rs, desired, maximum):
            return False, rs
        before = replicas_of(rs)
        updated = copy.deepcopy(rs)
        updated["spec"]["replicas"] = size
        set_replicas_annotations(updated, desired, maximum)
        written = await self.update_rs(updated)
        if size_changed:
            direction = "up" if before < size else "down"
            await self.c.event(d, "ScalingReplicaSet", f"Scaled {direction} replica set {metadata(written)['name']} from {before} to {size}")
        return size_changed, written

    async def is_scaling_event(self, rs_list: list[Obj]) -> bool:
        """isScalingEvent: an active ReplicaSet's desired-replicas annotation is not the Deployment's size."""
        new_rs, old_rss = await self.new_and_old(rs_list, create=False)
        for rs in [*old_rss, new_rs]:
            if rs is None or replicas_of(rs) <= 0:
                continue
            desired = _annotation_int(rs, DESIRED_REPLICAS)
            if desired is not None and desired != replicas_of(self.d):
                return True
        return False

    async def scale_only(self, rs_list: list[Obj]) -> None:
        """sync: scale to the Deployment's size (a paused Deployment, or a size change) and write the status."""
        new_rs, old_rss = await self.new_and_old(rs_list, create=False)
        await self.scale(new_rs, old_rss)
        if _spec(self.d).get("paused"):
            await self.cleanup(old_rss)
        await self.sync_status(old_rss, new_rs)

    async def scale(self, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        """scale: the one active ReplicaSet takes the whole size; a saturated new one empties the old
        ones; otherwise a RollingUpdate's change of size is shared in proportion."""
        d = self.d
        desired = replicas_of(d)
        only = find_active_or_latest(new_rs, old_rss)
        if only is not None:
            if replicas_of(only) != desired:
                await self.scale_rs(only, desired)
            return
        if is_saturated(d, new_rs):
            for old in [rs for rs in old_rss if replicas_of(rs) > 0]:
                await self.scale_rs(old, 0)
            return
        if not is_rolling(d):
            return
        active = [rs for rs in [*old_rss, new_rs] if rs is not None and replicas_of(rs) > 0]
        allowed = desired + max_surge(d) if desired > 0 else 0
        to_add = allowed - sum(replicas_of(rs) for rs in active)
        if to_add != 0:
            # Larger first; among equals the newer first when growing (ReplicaSetsBySizeNewer), the
            # older first when shrinking (ReplicaSetsBySizeOlder).
            active.sort(key=_created, reverse=to_add > 0)
            active.sort(key=lambda rs: -replicas_of(rs))
        added = 0
        sizes: dict[str, int] = {}
        for rs in active:
            if to_add != 0:
                share = rs_proportion(rs, d, to_add, added)
                sizes[metadata(rs)["name"]] = replicas_of(rs) + share
                added += share
            else:
                sizes[metadata(rs)["name"]] = replicas_of(rs)
        for index, rs in enumerate(active):
            name = metadata(rs)["name"]
            if index == 0 and to_add != 0:
                sizes[name] = max(sizes[name] + to_add - added, 0)
            await self.scale_rs(rs, sizes[name], force=True)

    async def cleanup(self, old_rss: list[Obj]) -> None:
        """cleanupDeployment: delete the oldest empty ReplicaSets beyond revisionHistoryLimit."""
        limit = _spec(self.d).get("revisionHistoryLimit")
        if limit is None or limit == INT32_MAX:
            return
        alive = [rs for rs in old_rss if not metadata(rs).get("deletionTimestamp")]
        extra = len(alive) - int(limit)
        if extra <= 0:
            return

        def by_revision(rs: Obj) -> tuple[int, tuple[str, str]]:
            revision = revision_of(rs)
            return (revision if revision is not None else 0, _created(rs))

        for rs in sorted(alive, key=by_revision)[:extra]:
            if _count(rs, "replicas") or replicas_of(rs) or int(metadata(rs).get("generation") or 0) > int(_status(rs).get("observedGeneration") or 0):
                continue
            try:
                await self.client.delete(_rs_object_path(rs))
            except ApiError as exc:
                if exc.code != 404:
                    raise

    # ---- rollouts ---------------------------------------------------------------------------------------

    async def rollout_rolling(self, rs_list: list[Obj]) -> None:
        """rolloutRolling: grow the new ReplicaSet, then shrink the old ones, a step per sync."""
        new_rs, old_rss = await self.new_and_old(rs_list, create=True)
        assert new_rs is not None
        all_rss = [*old_rss, new_rs]
        if await self.reconcile_new(all_rss, new_rs):
            await self.sync_rollout_status(old_rss, new_rs)
            return
        if await self.reconcile_old(all_rss, [rs for rs in old_rss if replicas_of(rs) > 0], new_rs):
            await self.sync_rollout_status(old_rss, new_rs)
            return
        if deployment_complete(self.d, _status(self.d)):
            await self.cleanup(old_rss)
        await self.sync_rollout_status(old_rss, new_rs)

    async def reconcile_new(self, all_rss: list[Obj], new_rs: Obj) -> bool:
        desired = replicas_of(self.d)
        if replicas_of(new_rs) == desired:
            return False
        if replicas_of(new_rs) > desired:
            return (await self.scale_rs(new_rs, desired))[0]
        return (await self.scale_rs(new_rs, new_rs_replicas(self.d, all_rss, new_rs)))[0]

    async def reconcile_old(self, all_rss: list[Obj], old_rss: list[Obj], new_rs: Obj) -> bool:
        """reconcileOldReplicaSets: shrink unhealthy old pods first, then old ones beyond minAvailable."""
        if sum(replicas_of(rs) for rs in old_rss) == 0:
            return False
        d = self.d
        min_available = replicas_of(d) - max_unavailable(d)
        new_unavailable = replicas_of(new_rs) - _count(new_rs, "availableReplicas")
        max_scaled_down = sum(replicas_of(rs) for rs in all_rss) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        old_rss = sorted(old_rss, key=_created)
        cleaned = 0
        for index, rs in enumerate(old_rss):
            if cleaned >= max_scaled_down:
                break
            if replicas_of(rs) == 0 or replicas_of(rs) == _count(rs, "availableReplicas"):
                continue
            down = min(max_scaled_down - cleaned, replicas_of(rs) - _count(rs, "availableReplicas"))
            _changed, old_rss[index] = await self.scale_rs(rs, replicas_of(rs) - down)
            cleaned += down
        available = sum(_count(rs, "availableReplicas") for rs in [*old_rss, new_rs])
        scaled = 0
        if available > min_available:
            total = available - min_available
            for rs in old_rss:
                if scaled >= total:
                    break
                if replicas_of(rs) == 0:
                    continue
                down = min(replicas_of(rs), total - scaled)
                await self.scale_rs(rs, replicas_of(rs) - down)
                scaled += down
        return cleaned + scaled > 0

    async def rollout_recreate(self, rs_list: list[Obj]) -> None:
        """rolloutRecreate: every old pod gone first, then the new ReplicaSet at full size."""
        new_rs, old_rss = await self.new_and_old(rs_list, create=False)
        scaled = False
        for index, rs in enumerate(old_rss):
            if replicas_of(rs) > 0:
                changed, old_rss[index] = await self.scale_rs(rs, 0)
                scaled = scaled or changed
        if scaled or self._old_pods_running(new_rs, old_rss):
            await self.sync_rollout_status(old_rss, new_rs)
            return
        if new_rs is None:
            new_rs, old_rss = await self.new_and_old(rs_list, create=True)
        assert new_rs is not None
        await self.scale_rs(new_rs, replicas_of(self.d))
        if deployment_complete(self.d, _status(self.d)):
            await self.cleanup(old_rss)
        await self.sync_rollout_status(old_rss, new_rs)

    def _old_pods_running(self, new_rs: Obj | None, old_rss: list[Obj]) -> bool:
        if sum(_count(rs, "replicas") for rs in old_rss) > 0:
            return True
        for rs in old_rss:
            for pod in self.c.pods_by_controller.get(("uid", str(metadata(rs).get("uid") or ""))):
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    return True
        return False

    # ---- status -----------------------------------------------------------------------------------------

    async def check_paused(self) -> None:
        """checkPausedConditions: Progressing Unknown while paused, and when resumed."""
        d = self.d
        if not has_progress_deadline(d):
            return
        status = copy.deepcopy(_status(d))
        condition = _condition(status, "Progressing")
        if condition is not None and condition.get("reason") == TIMED_OUT:
            return
        paused_before = condition is not None and condition.get("reason") == PAUSED
        if _spec(d).get("paused") and not paused_before:
            set_condition(status, new_condition("Progressing", "Unknown", PAUSED, "Deployment is paused"))
        elif not _spec(d).get("paused") and paused_before:
            set_condition(status, new_condition("Progressing", "Unknown", RESUMED, "Deployment is resumed"))
        else:
            return
        await self.write_status(status)

    async def sync_status(self, old_rss: list[Obj], new_rs: Obj | None) -> None:
        """syncDeploymentStatus."""
        status = calculate_status([*old_rss, *([new_rs] if new_rs is not None else [])], new_rs, self.d)
        if stored_form(status) != stored_form(_status(self.d)):
            await self.write_status(stored_form(status))

    async def sync_rollout_status(self, old_rss: list[Obj], new_rs: Obj | None) -> None:
        """syncRolloutStatus: the status with the Progressing and ReplicaFailure conditions; a
        Deployment still in progress is looked at again when its deadline passes."""
        d = self.d
        all_rss = [*old_rss, *([new_rs] if new_rs is not None else [])]
        status = calculate_status(all_rss, new_rs, d)
        if not has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = _condition(_status(d), "Progressing")
        complete = status["replicas"] == status["updatedReplicas"] and current is not None and current.get("reason") == NEW_RS_AVAILABLE
        subject = f'ReplicaSet "{metadata(new_rs)["name"]}"' if new_rs is not None else f'Deployment "{self.name}"'
        if has_progress_deadline(d) and not complete:
            if deployment_complete(d, status):
                set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE, f"{subject} has successfully progressed."))
            elif deployment_progressing(d, status):
                condition = new_condition("Progressing", "True", RS_UPDATED, f"{subject} is progressing.")
                if current is not None:
                    if current.get("status") == "True":
                        condition["lastTransitionTime"] = current.get("lastTransitionTime")
                    remove_condition(status, "Progressing")
                set_condition(status, condition)
            elif timed_out(d, status, time.time()):
                set_condition(status, new_condition("Progressing", "False", TIMED_OUT, f"{subject} has timed out progressing."))
        failures = [c for c in _status(new_rs).get("conditions") or [] if c.get("type") == "ReplicaFailure"] if new_rs is not None else []
        if not failures:
            failures = [c for rs in all_rss for c in _status(rs).get("conditions") or [] if c.get("type") == "ReplicaFailure"]
        if failures:
            first = failures[0]
            set_condition(status, {
                "type": "ReplicaFailure", "status": first.get("status"), "lastUpdateTime": first.get("lastTransitionTime"),
                "lastTransitionTime": first.get("lastTransitionTime"), "reason": first.get("reason"), "message": first.get("message"),
            })  # fmt: skip
        else:
            remove_condition(status, "ReplicaFailure")
        stored = stored_form(status)
        if stored == stored_form(_status(d)):
            self.requeue_if_stuck(stored)
            return
        await self.write_status(stored)

    def requeue_if_stuck(self, status: Obj) -> None:
        """requeueStuckDeployment: look again when the progress deadline passes."""
        d = self.d
        current = _condition(_status(d), "Progressing")
        if not has_progress_deadline(d) or current is None or deployment_complete(d, status) or current.get("reason") == TIMED_OUT:
            return
        since = parse_time(str(current.get("lastUpdateTime") or ""))
        if since is None:
            return
        after = since.timestamp() + int(_spec(d).get("progressDeadlineSeconds") or 0) - time.time()
        key = (self.namespace, self.name)
        if after < 1:
            self.c.queue.add_rate_limited(key)
        else:
            self.c.queue.add_after(key, after + 1)


def _terminating_namespace(exc: ApiError) -> bool:
    details = exc.details if isinstance(exc.details, dict) else {}
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in details.get("causes") or [])
