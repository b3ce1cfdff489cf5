"""The Job controller (upstream's pkg/controller/job): runs a Job's pods to completion and counts them.

Each sync claims the Job's pods (the ``batch.kubernetes.io/job-tracking`` finalizer goes on every
pod it creates or adopts), then:

- counts finished pods exactly once: a finished pod's UID goes to
  ``status.uncountedTerminatedPods`` first, its finalizer comes off, and only then is it added to
  ``succeeded`` or ``failed`` (so a pod deleted meanwhile is neither lost nor counted twice);
- decides whether the Job is over: enough successes (``SuccessCriteriaMet``, then ``Complete``
  with ``completionTime``), or a failure (``FailureTarget``, then ``Failed``): more failures than
  backoffLimit (``BackoffLimitExceeded``; with restartPolicy OnFailure, container restarts count),
  activeDeadlineSeconds passed (``DeadlineExceeded``), or a pod failure policy rule with action
  FailJob (``PodFailurePolicy``); rules with Ignore leave a failure uncounted. An ending Job's
  active pods are deleted and the terminal condition is written once they are gone;
- otherwise keeps min(parallelism, completions - succeeded) pods active: creates the missing ones
  in slow-start batches after the failure back-off (10 s doubling to 10 min since the last failure),
  deletes the surplus, and deletes all of them while the Job is suspended (``Suspended``). An
  Indexed Job gives each pod its completion index (annotation, label, hostname ``<job>-<i>``,
  ``JOB_COMPLETION_INDEX``) and records the succeeded ones in ``completedIndexes``.

Jobs whose ``spec.managedBy`` names another controller are left alone. The finalizer of a pod
whose Job is gone or finished is removed too.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Iterable
from typing import Any

from controllers.objects import controller_owner, metadata
from controllers.workloads import (
    BURST_REPLICAS,
    Claimer,
    ControllerOwners,
    Expectations,
    OwnerIndexKey,
    PodControl,
    key_of,
    labels_of,
    owned_and_orphans,
    owner_reference,
    parse_selector,
    pod_from_template,
    pods_to_delete,
    slow_start_batch,
)
from kube.client import KubeClient, resource_path
from kube.dra.pods import is_pod_active, is_pod_ready, is_pod_terminating
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.objects import Obj
from kube.timeutil import now_rfc3339, parse_time
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("job-controller")

GROUP, VERSION, KIND, PLURAL = "batch", "v1", "Job", "jobs"
COMPONENT = "job-controller"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"
# upstream's constants
SYNC_BATCH_PERIOD = 1.0
POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 600.0
MAX_UNCOUNTED = 500
MAX_GENERATED_NAME = 58


def job_path(namespace: str, name: str = "", subresource: str | None = None) -> str:
    return resource_path(GROUP, VERSION, PLURAL, namespace, name or None, subresource)


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def condition_true(job: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in _status(job).get("conditions") or [])


def is_finished(job: Obj) -> bool:
    return condition_true(job, "Complete") or condition_true(job, "Failed")


def is_indexed(job: Obj) -> bool:
    return _spec(job).get("completionMode") == "Indexed"


def has_finalizer(pod: Obj) -> bool:
    return TRACKING_FINALIZER in (metadata(pod).get("finalizers") or [])


def only_replace_failed(job: Obj) -> bool:
    return _spec(job).get("podReplacementPolicy") == "Failed" or _spec(job).get("podFailurePolicy") is not None


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    """A failed pod, or (unless only failed pods are replaced) one deleted before it succeeded."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return bool(metadata(pod).get("deletionTimestamp")) and phase != "Succeeded"


def completion_index(pod: Obj) -> int | None:
    value = (metadata(pod).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        index = int(value) if value is not None else -1
    except ValueError:
        return None
    return index if index >= 0 else None


def new_condition(kind: str, status: str, reason: str, message: str) -> Obj:
    now = now_rfc3339()
    return {"type": kind, "status": status, "lastProbeTime": now, "lastTransitionTime": now, "reason": reason, "message": message}


# ---- pod failure policy -----------------------------------------------------------------------------


def match_pod_failure_policy(job: Obj, pod: Obj) -> tuple[str | None, bool, str | None]:
    """matchPodFailurePolicy: (the FailJob message, whether the failure counts, the action)."""
    policy = _spec(job).get("podFailurePolicy")
    if not isinstance(policy, dict):
        return None, True, None
    meta, status = metadata(pod), pod.get("status") or {}
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        matched: str | None = None
        codes = rule.get("onExitCodes")
        if codes is not None:
            container = _matching_container(status, codes)
            if container is not None:
                exit_code = container["state"]["terminated"].get("exitCode")
                matched = f"Container {container.get('name')} for pod {meta.get('namespace')}/{meta.get('name')} failed with exit code {exit_code} matching {action} rule at index {index}"
        elif rule.get("onPodConditions") is not None:
            condition = _matching_condition(status, rule["onPodConditions"])
            if condition is not None:
                matched = f"Pod {meta.get('namespace')}/{meta.get('name')} has condition {condition.get('type')} matching {action} rule at index {index}"
        if matched is None:
            continue
        if action == "Ignore":
            return None, False, action
        if action == "FailJob":
            return matched, True, action
        return None, True, action
    return None, True, None


def _matching_container(status: Obj, codes: Obj) -> Obj | None:
    for key in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(key) or []:
            terminated = (container.get("state") or {}).get("terminated")
            if terminated is None:
                continue
            if codes.get("containerName") not in (None, container.get("name")):
                continue
            code = int(terminated.get("exitCode") or 0)
            if code == 0:
                continue
            values = codes.get("values") or []
            if (codes.get("operator") == "In" and code in values) or (codes.get("operator") == "NotIn" and code not in values):
                return dict(container)
    return None


def _matching_condition(status: Obj, patterns: list[Obj]) -> Obj | None:
    for condition in status.get("conditions") or []:
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") and condition.get("status") == pattern.get("status", "True"):
                return dict(condition)
    return None


# ---- indexes ------------------------------------------------------------------------------------------


Intervals = list[tuple[int, int]]


def parse_indexes(text: str, completions: int) -> Intervals:
    """parseIndexesFromString: ``1,3-5`` as merged intervals below ``completions``."""
    result: Intervals = []
    for part in text.split(",") if text else []:
        bounds = part.split("-")
        try:
            first = int(bounds[0])
            last = int(bounds[1]) if len(bounds) > 1 else first
        except ValueError:
            continue
        if first >= completions:
            break
        last = min(last, completions - 1)
        if result and result[-1][1] == first - 1:
            result[-1] = (result[-1][0], last)
        else:
            result.append((first, last))
    return result


def with_indexes(intervals: Intervals, indexes: Iterable[int]) -> Intervals:
    """orderedIntervals.withOrderedIndexes: the intervals with these indexes merged in."""
    merged: Intervals = []
    for first, last in sorted([*intervals, *((i, i) for i in set(indexes))]):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def format_indexes(intervals: Intervals) -> str:
    """orderedIntervals.String: ``0-2,4,6,7``."""
    parts = []
    for first, last in intervals:
        if last == first:
            parts.append(str(first))
        elif last == first + 1:
            parts.append(f"{first},{last}")
        else:
            parts.append(f"{first}-{last}")
    return ",".join(parts)


def indexes_total(intervals: Intervals) -> int:
    return sum(last - first + 1 for first, last in intervals)


def has_index(intervals: Intervals, index: int) -> bool:
    return any(first <= index <= last for first, last in intervals)


def first_pending_indexes(job: Obj, succeeded: Intervals, active: list[Obj], terminating: list[Obj], count: int) -> list[int]:
    """firstPendingIndexes: the lowest indexes neither succeeded nor running."""
    completions = int(_spec(job).get("completions") or 0)
    busy = [i for i in (completion_index(p) for p in active) if i is not None]
    if only_replace_failed(job):
        busy += [i for i in (completion_index(p) for p in terminating) if i is not None]
    taken = with_indexes(succeeded, busy)
    result: list[int] = []
    candidate = 0
    while candidate < completions and len(result) < count:
        if has_index(taken, candidate):
            candidate += 1
            continue
        result.append(candidate)
        candidate += 1
    return result


def generate_name_with_index(job_name: str, index: int) -> str:
    suffix = f"-{index}-"
    prefix = job_name + suffix
    return prefix if len(prefix) <= MAX_GENERATED_NAME else prefix[: MAX_GENERATED_NAME - len(suffix)] + suffix


def indexed_pods_for_removal(job: Obj, pods: list[Obj], at_least: int) -> list[Obj]:
    """activePodsForRemoval: pods of an index beyond completions or of a repeated index first
    (keeping the best of each index), then the least useful."""
    completions = int(_spec(job).get("completions") or 0)
    remove: list[Obj] = []
    keep: list[Obj] = []
    if is_indexed(job):
        by_index: dict[int | None, list[Obj]] = {}
        for pod in pods:
            index = completion_index(pod)
            by_index.setdefault(index if index is None or index < completions else -1, []).append(pod)
        for index, group in by_index.items():
            if index is None or index == -1:
                remove.extend(group)
            elif len(group) == 1:
                keep.append(group[0])
            else:
                ordered = pods_to_delete(group, [], len(group) - 1)
                remove.extend(ordered)
                keep.extend(p for p in group if p not in ordered)
    else:
        keep = list(pods)
    if len(remove) < at_least:
        remove.extend(pods_to_delete(keep, [], at_least - len(remove)))
    return remove


# ---- back-off ----------------------------------------------------------------------------------------


def finished_at(pod: Obj) -> float:
    """getFinishedTime: the last container's end, else the Ready=False transition, else the deletion, else now."""
    status = pod.get("status") or {}
    ends = [
        parse_time(str(((c.get("state") or {}).get("terminated") or {}).get("finishedAt") or ""))
        for key in ("containerStatuses", "initContainerStatuses")
        for c in status.get(key) or []
    ]
    times = [t.timestamp() for t in ends if t is not None]
    if times:
        return max(times)
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") == "False":
            at = parse_time(str(condition.get("lastTransitionTime") or ""))
            if at is not None:
                return at.timestamp()
    deleted = parse_time(str(metadata(pod).get("deletionTimestamp") or ""))
    return deleted.timestamp() if deleted is not None else time.time()


class Backoff:
    """A Job's failures since its last success and when the last one happened (upstream's backoffRecord)."""

    def __init__(self, failures: int = 0, last_failure: float | None = None) -> None:
        self.failures = failures
        self.last_failure = last_failure

    def after(self, succeeded: list[Obj], failed: list[Obj]) -> Backoff:
        """newBackoffRecord: this record with newly finished pods."""
        if not succeeded:
            if not failed:
                return Backoff(self.failures, self.last_failure)
            return Backoff(self.failures + len(failed), max(finished_at(p) for p in failed))
        last_success = max(finished_at(p) for p in succeeded)
        later = sorted(t for t in (finished_at(p) for p in failed) if t > last_success)
        return Backoff(len(later), later[-1] if later else None)

    def remaining(self, now: float) -> float:
        """How long pod creation waits: 10 s doubled per failure after the first, at most 10 min."""
        if self.failures == 0 or self.last_failure is None:
            return 0.0
        delay = min(POD_FAILURE_BACKOFF * 2 ** (self.failures - 1), MAX_POD_FAILURE_BACKOFF)
        return max(0.0, self.last_failure + delay - now)


# ---- the controller ---------------------------------------------------------------------------------------


class JobController:
    """Informer handlers queue Jobs (and pods whose finalizer must go); ``process()`` syncs them until cancelled."""

    def __init__(
        self, client: KubeClient, *, pods: Informer, pods_by_controller: Index[OwnerIndexKey], workers: int = 4, watch_timeout_seconds: int | None = None
    ) -> None:
        self.client = client
        self.workers = workers
        self.pods = pods
        self.pods_by_controller = pods_by_controller
        self.jobs = Informer(client, resource_path(GROUP, VERSION, PLURAL), name=PLURAL, watch_timeout_seconds=watch_timeout_seconds)
        self.owners = ControllerOwners(self.jobs, KIND)
        self.expectations = Expectations()
        # The pods whose tracking finalizer this controller removes and the informer has not shown yet, per Job.
        self.finalizers_pending: dict[str, set[str]] = {}
        self.backoff: dict[str, Backoff] = {}
        self.queue: WorkQueue[tuple[str, str, str]] = WorkQueue()
        self.pod_control = PodControl(client, COMPONENT)
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        return [self.jobs, self.pods]

    # ---- event handlers ------------------------------------------------------------------------

    def _wire(self) -> None:
        self.jobs.on_add(lambda job: self.enqueue(job, 0.0))
        self.jobs.on_update(self._job_updated)
        self.jobs.on_delete(self._job_deleted)
        self.pods.on_add(self._pod_added)
        self.pods.on_update(self._pod_updated)
        self.pods.on_delete(self._pod_deleted)

    def enqueue(self, job: Obj, delay: float = SYNC_BATCH_PERIOD) -> None:
        namespace, name = key_of(job)
        self.queue.add_after(("job", namespace, name), delay)

    def _enqueue_orphan(self, pod: Obj) -> None:
        namespace, name = key_of(pod)
        self.queue.add(("pod", namespace, name))

    def _job_updated(self, old: Obj, new: Obj) -> None:
        if is_finished(new):
            self._enqueue_selected(new)
            return
        same_generation = metadata(old).get("generation") == metadata(new).get("generation")
        self.enqueue(new, SYNC_BATCH_PERIOD if same_generation else 0.0)

    def _job_deleted(self, job: Obj) -> None:
        key = "/".join(key_of(job))
        self.expectations.forget(key)
        self.finalizers_pending.pop(key, None)
        self.backoff.pop(key, None)
        self._enqueue_selected(job)

    def _enqueue_selected(self, job: Obj) -> None:
        """Pods the Job selects may keep a finalizer nobody removes now: look at each."""
        selector = parse_selector(_spec(job).get("selector"))
        if selector is None:
            return
        for pod in [*owned_and_orphans(self.pods_by_controller, job)]:
            if has_finalizer(pod) and selector.matches(labels_of(pod)):
                self._enqueue_orphan(pod)

    def _pod_added(self, pod: Obj) -> None:
        if metadata(pod).get("deletionTimestamp"):
            self._pod_deleted(pod, final=False)
            return
        ref = controller_owner(pod)
        if ref is not None:
            job = self.owners.owner_of(pod, ref)
            if job is not None:
                self.expectations.creation_observed("/".join(key_of(job)))
                self.enqueue(job)
            return
        if has_finalizer(pod):
            self._enqueue_orphan(pod)
        for job in self.owners.matching(pod):
            self.enqueue(job)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        if metadata(old).get("resourceVersion") == metadata(new).get("resourceVersion"):
            return
        if metadata(new).get("deletionTimestamp"):
            self._pod_deleted(new, final=False)
            return
        removed = not has_finalizer(new)
        old_ref, new_ref = controller_owner(old), controller_owner(new)
        if old_ref != new_ref and old_ref is not None:
            previous = self.owners.owner_of(old, old_ref)
            if previous is not None:
                if removed:
                    self._finalizer_gone(previous, new)
                self.enqueue(previous)
        if new_ref is not None:
            job = self.owners.owner_of(new, new_ref)
            if job is None:
                if has_finalizer(new):
                    self._enqueue_orphan(new)
                return
            if removed:
                self._finalizer_gone(job, new)
            self.enqueue(job)
            return
        if has_finalizer(new):
            self._enqueue_orphan(new)
        if labels_of(old) != labels_of(new) or old_ref != new_ref:
            for job in self.owners.matching(new):
                self.enqueue(job)

    def _pod_deleted(self, pod: Obj, final: bool = True) -> None:
        ref = controller_owner(pod)
        job = self.owners.owner_of(pod, ref) if ref is not None else None
        if job is None or is_finished(job):
            if has_finalizer(pod):
                self._enqueue_orphan(pod)
            return
        key = "/".join(key_of(job))
        self.expectations.deletion_observed(key, "/".join(key_of(pod)))
        if final or not has_finalizer(pod):
            self._finalizer_gone(job, pod)
        self.enqueue(job)

    def _finalizer_gone(self, job: Obj, pod: Obj) -> None:
        pending = self.finalizers_pending.get("/".join(key_of(job)))
        if pending is not None:
            pending.discard(str(metadata(pod).get("uid") or ""))

    # ---- running ----------------------------------------------------------------------------------

    async def process(self) -> None:
        log.info("caches synced, processing")
        await self.queue.run(self._sync, self.workers, log_failures(log))

    async def _sync(self, key: tuple[str, str, str]) -> bool:
        kind, namespace, name = key
        if kind == "pod":
            await self.sync_orphan_pod(namespace, name)
            return True
        await self.sync(namespace, name)
        return True

    async def sync_orphan_pod(self, namespace: str, name: str) -> None:
        """handleSingleOrphanPod: a pod whose Job is gone or finished loses the tracking finalizer."""
        pod = self.pods.get(namespace, name)
        if pod is None or not has_finalizer(pod):
            return
        ref = controller_owner(pod)
        if ref is not None:
            if ref.get("kind") != KIND or ref.get("apiVersion") != f"{GROUP}/{VERSION}":
                return
            job = self.owners.owner_of(pod, ref)
            if job is not None and (_managed_elsewhere(job) or not is_finished(job)):
                return
        await self._remove_finalizer(pod)

    async def _remove_finalizer(self, pod: Obj) -> None:
        meta = metadata(pod)
        path = resource_path("", "v1", "pods", meta.get("namespace"), meta["name"])
        try:
            await self.client.patch(path, {"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}, patch_type="strategic")
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def sync(self, namespace: str, name: str) -> None:
        """syncJob."""
        key = f"{namespace}/{name}"
        cached = self.jobs.get(namespace, name)
        if cached is None:
            self.expectations.forget(key)
            self.finalizers_pending.pop(key, None)
            self.backoff.pop(key, None)
            return
        if _managed_elsewhere(cached):
            return
        if is_finished(cached):
            self.backoff.pop(key, None)
            return
        await _JobSync(self, copy.deepcopy(cached), key).run()


def _managed_elsewhere(job: Obj) -> bool:
    managed_by = _spec(job).get("managedBy")
    return managed_by is not None and managed_by != JOB_CONTROLLER_NAME


class _JobSync:
    """One sync of one Job; ``job`` is a private copy, ``status`` the status it will write."""

    def __init__(self, controller: JobController, job: Obj, key: str) -> None:
        self.c = controller
        self.client = controller.client
        self.job = job
        self.key = key
        meta = metadata(job)
        self.namespace, self.name = str(meta.get("namespace") or ""), str(meta["name"])
        self.status: Obj = copy.deepcopy(_status(job))
        self.pending = set(controller.finalizers_pending.get(key, set()))

    async def run(self) -> None:
        job, status, spec = self.job, self.status, _spec(self.job)
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        satisfied = self.c.expectations.satisfied(self.key)
        pods = await self.claim_pods()
        active = [p for p in pods if is_pod_active(p)]
        terminating = sum(1 for p in pods if is_pod_terminating(p))
        ready = sum(1 for p in active if is_pod_ready(p))
        uncounted_succeeded, uncounted_failed = set(uncounted.get("succeeded") or []), set(uncounted.get("failed") or [])
        new_succeeded = self._newly_finished(pods, uncounted_succeeded, lambda p: (p.get("status") or {}).get("phase") == "Succeeded")
        new_failed = self._newly_finished(pods, uncounted_failed, lambda p: is_pod_failed(p, job))
        succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(uncounted_succeeded)
        failed = int(status.get("failed") or 0) + sum(1 for p in new_failed if match_pod_failure_policy(job, p)[1]) + len(uncounted_failed)
        suspended = spec.get("suspend") is True
        if status.get("startTime") is None and not suspended:
            status["startTime"] = now_rfc3339()
        backoff = self.c.backoff.get(self.key, Backoff()).after(new_succeeded, new_failed)
        finished: Obj | None = None
        if condition_true(job, "SuccessCriteriaMet"):
            finished = _existing(job, "SuccessCriteriaMet")
        elif condition_true(job, "FailureTarget"):
            target = _existing(job, "FailureTarget")
            finished = new_condition("Failed", "True", str(target.get("reason") or ""), str(target.get("message") or ""))
        else:
            message = next((m for m in (match_pod_failure_policy(job, p)[0] for p in pods if is_pod_failed(p, job)) if m), None)
            if message is not None:
                finished = new_condition("FailureTarget", "True", "PodFailurePolicy", message)
        if finished is None:
            if failed > int(spec.get("backoffLimit") or 0) or self._past_backoff_limit_on_failure(pods):
                finished = new_condition("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            elif self._past_deadline():
                finished = new_condition("FailureTarget", "True", "DeadlineExceeded", "Job was active longer than specified deadline")
            elif spec.get("activeDeadlineSeconds") is not None and not suspended:
                start = parse_time(str(status.get("startTime") or ""))
                if start is not None:
                    self.c.queue.add_after(("job", self.namespace, self.name), max(0.0, start.timestamp() + int(spec["activeDeadlineSeconds"]) - time.time()))
        succeeded_indexes: Intervals = []
        previous_indexes: Intervals = []
        if is_indexed(job):
            completions = int(spec.get("completions") or 0)
            previous_indexes = parse_indexes(str(status.get("completedIndexes") or ""), completions)
            new_indexes = [
                i for p in pods
                if (p.get("status") or {}).get("phase") == "Succeeded" and has_finalizer(p)
                and (i := completion_index(p)) is not None and i < completions
            ]  # fmt: skip
            succeeded_indexes = with_indexes(previous_indexes, new_indexes)
            succeeded = indexes_total(succeeded_indexes)
        manage_error: Exception | None = None
        suspend_changed = False
        active_count = len(active)
        if finished is not None:
            deleted_ready, deleted, manage_error = await self.delete_pods(active, remove_finalizer=False)
            if deleted != active_count or not satisfied:
                finished = None
            active_count -= deleted
            terminating += deleted
            ready -= deleted_ready
        else:
            managed = False
            if satisfied and not metadata(job).get("deletionTimestamp"):
                active_count, terminating, ready, manage_error = await self.manage(pods, active, terminating, ready, succeeded, succeeded_indexes, backoff)
                managed = True
            wanted = spec.get("completions")
            complete = (succeeded > 0 and active_count == 0) if wanted is None else (succeeded >= int(wanted) and active_count == 0)
            if complete:
                finished = new_condition("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods")
            elif managed:
                suspend_changed = await self._suspension(suspended)
        status["active"], status["ready"], status["terminating"] = active_count, ready, terminating
        self.c.backoff[self.key] = backoff
        await self.track(pods, finished, succeeded_indexes, previous_indexes, needs_flush=suspend_changed or self._counters_changed())
        if manage_error is not None:
            raise manage_error

    # ---- pods ---------------------------------------------------------------------------------------

    async def claim_pods(self) -> list[Obj]:
        """getPodsForJob: every pod the Job controls or adopts (finished ones too); adoption adds
        the tracking finalizer."""
        selector = parse_selector(_spec(self.job).get("selector"))
        if selector is None:
            return []
        ref = owner_reference(self.job, f"{GROUP}/{VERSION}", KIND)

        async def fresh() -> Obj | None:
            try:
                return await self.client.get(job_path(self.namespace, self.name))
            except ApiError as exc:
                if exc.code == 404:
                    return None
                raise

        claimer = Claimer(self.client, self.job, ref, selector, fresh, finalizers=[TRACKING_FINALIZER])
        return await claimer.claim(owned_and_orphans(self.c.pods_by_controller, self.job))

    def _newly_finished(self, pods: list[Obj], uncounted: set[str], finished: Any) -> list[Obj]:
        """getValidPodsWithFilter: finished pods still tracked and not counted yet."""
        result = []
        completions = int(_spec(self.job).get("completions") or 0)
        for pod in pods:
            uid = str(metadata(pod).get("uid") or "")
            if not has_finalizer(pod) or uid in uncounted or uid in self.pending:
                continue
            if is_indexed(self.job):
                index = completion_index(pod)
                if index is None or index >= completions:
                    continue
            if finished(pod):
                result.append(pod)
        return result

    def _past_backoff_limit_on_failure(self, pods: list[Obj]) -> bool:
        """With restartPolicy OnFailure, containers' restarts count against backoffLimit."""
        template = _spec(self.job).get("template") or {}
        if (template.get("spec") or {}).get("restartPolicy") != "OnFailure":
            return False
        restarts = 0
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") in ("Running", "Pending"):
                for key in ("initContainerStatuses", "containerStatuses"):
                    restarts += sum(int(c.get("restartCount") or 0) for c in status.get(key) or [])
        limit = int(_spec(self.job).get("backoffLimit") or 0)
        return restarts > 0 if limit == 0 else restarts >= limit

    def _past_deadline(self) -> bool:
        deadline = _spec(self.job).get("activeDeadlineSeconds")
        start = parse_time(str(self.status.get("startTime") or ""))
        if deadline is None or start is None or _spec(self.job).get("suspend") is True:
            return False
        return time.time() - start.timestamp() >= int(deadline)

    async def manage(
        self, pods: list[Obj], active: list[Obj], terminating: int, ready: int, succeeded: int, succeeded_indexes: Intervals, backoff: Backoff
    ) -> tuple[int, int, int, Exception | None]:
        """manageJob: the pods the Job should have active now, made or removed."""
        job, spec = self.job, _spec(self.job)
        count = len(active)
        parallelism = int(spec.get("parallelism") or 0)
        error: Exception | None = None
        if spec.get("suspend") is True:
            doomed = indexed_pods_for_removal(job, active, count)
            self.c.expectations.expect_deletions(self.key, ["/".join(key_of(p)) for p in doomed])
            removed_ready, removed, error = await self.delete_pods(doomed, remove_finalizer=True)
            count -= removed
            terminating += removed
            ready -= removed_ready
            active = [p for p in active if p not in doomed]
        completions = spec.get("completions")
        # Without completions the Job is done once a pod succeeded: nothing more is started then.
        want = (count if succeeded > 0 else parallelism) if completions is None else max(0, min(int(completions) - succeeded, parallelism))
        surplus = max(0, count - want)
        doomed = indexed_pods_for_removal(job, active, surplus)[:BURST_REPLICAS]
        if doomed:
            self.c.expectations.expect_deletions(self.key, ["/".join(key_of(p)) for p in doomed])
            removed_ready, removed, delete_error = await self.delete_pods(doomed, remove_finalizer=True)
            error = error or delete_error
            count -= removed
            terminating += removed
            ready -= removed_ready
        waiting_on = terminating if only_replace_failed(job) else 0
        missing = want - waiting_on - count
        if missing <= 0 or spec.get("suspend") is True:
            return count, terminating, ready, error
        remaining = backoff.remaining(time.time())
        if remaining > 0:
            self.c.queue.add_after(("job", self.namespace, self.name), max(remaining, SYNC_BATCH_PERIOD))
            return count, terminating, ready, error
        missing = min(missing, BURST_REPLICAS)
        indexes: list[int] = []
        if is_indexed(job):
            still_active = [p for p in active if p not in doomed]
            terminating_pods = [p for p in pods if is_pod_terminating(p)]
            indexes = first_pending_indexes(job, succeeded_indexes, still_active, terminating_pods, missing)
            missing = len(indexes)
        self.c.expectations.expect_creations(self.key, missing)
        template = copy.deepcopy(spec.get("template") or {})
        tmeta = template.setdefault("metadata", {})
        if TRACKING_FINALIZER not in (tmeta.get("finalizers") or []):
            tmeta["finalizers"] = [*(tmeta.get("finalizers") or []), TRACKING_FINALIZER]
        if is_indexed(job):
            _add_index_env(template)
        ref = owner_reference(job, f"{GROUP}/{VERSION}", KIND)
        pending = list(indexes)

        async def create() -> None:
            pod_template = template
            generate_name = f"{self.name}-"
            if pending:
                index = pending.pop(0)
                pod_template = copy.deepcopy(template)
                pod_template["metadata"]["annotations"] = {**(pod_template["metadata"].get("annotations") or {}), COMPLETION_INDEX: str(index)}
                pod_template["metadata"]["labels"] = {**(pod_template["metadata"].get("labels") or {}), COMPLETION_INDEX: str(index)}
                pod_template.setdefault("spec", {})["hostname"] = f"{self.name}-{index}"
                generate_name = generate_name_with_index(self.name, index)
            await self.c.pod_control.create(self.namespace, pod_from_template(pod_template, ref, generate_name), {**job, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND})

        successes, create_error = await slow_start_batch(missing, create)
        for _ in range(missing - successes):
            self.c.expectations.creation_observed(self.key)
        return count + successes, terminating, ready, error or create_error

    async def delete_pods(self, pods: list[Obj], remove_finalizer: bool) -> tuple[int, int, Exception | None]:
        """deleteJobPods / deleteActivePods: (ready ones deleted, deleted, the first error)."""
        owner = {**self.job, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}

        async def delete(pod: Obj) -> None:
            if remove_finalizer and has_finalizer(pod):
                await self.c._remove_finalizer(pod)
            await self.c.pod_control.delete(self.namespace, str(metadata(pod)["name"]), owner)

        results = await asyncio.gather(*(delete(p) for p in pods), return_exceptions=True)
        deleted, deleted_ready, error = len(pods), 0, None
        for pod, result in zip(pods, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
            if isinstance(result, Exception):
                self.c.expectations.deletion_observed(self.key, "/".join(key_of(pod)))
                if not (isinstance(result, ApiError) and result.code == 404):
                    deleted -= 1
                    error = error or result
            if is_pod_ready(pod):
                deleted_ready += 1
        return deleted_ready, deleted, error

    async def _suspension(self, suspended: bool) -> bool:
        """The Suspended condition follows spec.suspend (with events); a resumed Job starts anew."""
        conditions: list[Obj] = self.status.setdefault("conditions", [])
        current = next((c for c in conditions if c.get("type") == "Suspended"), None)
        if suspended:
            wanted = ("True", "JobSuspended", "Job suspended")
        else:
            if current is None:
                return False
            wanted = ("False", "JobResumed", "Job resumed")
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == wanted:
            return False
        condition = new_condition("Suspended", *wanted)
        self.status["conditions"] = [c for c in conditions if c.get("type") != "Suspended"] + [condition]
        owner = {**self.job, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}
        if suspended:
            await self.c.pod_control.event(owner, "Suspended", "Job suspended")
            self.status.pop("startTime", None)
        else:
            await self.c.pod_control.event(owner, "Resumed", "Job resumed")
            self.status["startTime"] = now_rfc3339()
        return True

    def _counters_changed(self) -> bool:
        old = _status(self.job)
        # active is omitted at 0; ready and terminating are pointers: unset differs from 0.
        return int(old.get("active") or 0) != int(self.status.get("active") or 0) or any(old.get(k) != self.status.get(k) for k in ("ready", "terminating"))

    # ---- status ----------------------------------------------------------------------------------

    async def track(self, pods: list[Obj], finished: Obj | None, succeeded_indexes: Intervals, previous_indexes: Intervals, needs_flush: bool) -> None:
        """trackJobStatusAndRemoveFinalizers: finished pods into uncountedTerminatedPods, their
        finalizers off, then into the counters; and the Job's end written once nothing is left."""
        job, status = self.job, self.status
        uncounted = status["uncountedTerminatedPods"]
        with_finalizer = {str(metadata(p).get("uid")) for p in pods if has_finalizer(p) and str(metadata(p).get("uid")) not in self.pending}
        needs_flush = _clean_uncounted(status, with_finalizer) or needs_flush
        to_release: list[Obj] = []
        new_indexes: list[int] = []
        completions = int(_spec(job).get("completions") or 0)
        for pod in sorted(pods, key=lambda p: completion_index(p) or 0) if is_indexed(job) else pods:
            uid = str(metadata(pod).get("uid") or "")
            if not has_finalizer(pod) or uid in self.pending:
                continue
            failed_now = is_pod_failed(pod, job)
            phase = (pod.get("status") or {}).get("phase")
            if not (metadata(job).get("deletionTimestamp") or finished is not None or phase == "Succeeded" or failed_now):
                continue
            to_release.append(pod)
            if phase == "Succeeded" and uid not in (uncounted.get("failed") or []):
                if is_indexed(job):
                    index = completion_index(pod)
                    if index is not None and index < completions and not has_index(previous_indexes, index):
                        new_indexes.append(index)
                        needs_flush = True
                elif uid not in (uncounted.get("succeeded") or []):
                    uncounted.setdefault("succeeded", []).append(uid)
                    needs_flush = True
            elif failed_now or (finished is not None and finished["type"] != "SuccessCriteriaMet"):
                index = completion_index(pod)
                countable = uid not in (uncounted.get("failed") or []) and (not is_indexed(job) or (index is not None and index < completions))
                # A failure a pod failure policy rule ignores is never counted.
                if countable and match_pod_failure_policy(job, pod)[1]:
                    uncounted.setdefault("failed", []).append(uid)
                    needs_flush = True
            if len(new_indexes) + len(uncounted.get("succeeded") or []) + len(uncounted.get("failed") or []) >= MAX_UNCOUNTED:
                break
        if is_indexed(job):
            succeeded_indexes = with_indexes(succeeded_indexes, new_indexes)
            text = format_indexes(succeeded_indexes)
            if text != (status.get("completedIndexes") or ""):
                needs_flush = True
            status["succeeded"] = indexes_total(succeeded_indexes)
            status["completedIndexes"] = text
        if finished is not None and finished["type"] == "FailureTarget":
            status.setdefault("conditions", []).append(finished)
            needs_flush = True
            finished = new_condition("Failed", "True", finished["reason"], finished["message"])
        if finished is not None and finished["type"] == "SuccessCriteriaMet":
            if not condition_true({"status": status}, "SuccessCriteriaMet"):
                status.setdefault("conditions", []).append(finished)
                needs_flush = True
            finished = new_condition("Complete", "True", finished["reason"], finished["message"])
        if needs_flush:
            await self.write_status()
            needs_flush = False
        if to_release:
            pending = self.c.finalizers_pending.setdefault(self.key, set())
            released = await self._release(to_release, pending)
            with_finalizer -= released
        if _clean_uncounted(self.status, with_finalizer):
            needs_flush = True
        done = finished is not None and self._enact_finished(finished)
        if needs_flush or done:
            await self.write_status()
            if done and finished is not None:
                owner = {**self.job, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}
                if finished["type"] == "Complete":
                    await self.c.pod_control.event(owner, "Completed", "Job completed")
                else:
                    await self.c.pod_control.event(owner, str(finished["reason"]), str(finished["message"]), "Warning")

    async def _release(self, pods: list[Obj], pending: set[str]) -> set[str]:
        """Remove the tracking finalizer from finished pods: the UIDs it came off."""
        uids = [str(metadata(p).get("uid") or "") for p in pods]
        pending.update(uids)
        results = await asyncio.gather(*(self.c._remove_finalizer(p) for p in pods), return_exceptions=True)
        released: set[str] = set()
        first: Exception | None = None
        for uid, result in zip(uids, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
            if isinstance(result, Exception):
                pending.discard(uid)
                first = first or result
            else:
                released.add(uid)
        if first is not None:
            if _clean_uncounted(self.status, {u for u in uids if u not in released}):
                await self.write_status()
            raise first
        return released

    def _enact_finished(self, finished: Obj) -> bool:
        """enactJobFinished: the terminal condition, once no pod is uncounted or terminating."""
        uncounted = self.status.get("uncountedTerminatedPods") or {}
        if uncounted.get("succeeded") or uncounted.get("failed") or int(self.status.get("terminating") or 0) > 0:
            return False
        conditions = [c for c in self.status.get("conditions") or [] if c.get("type") != finished["type"]]
        self.status["conditions"] = [*conditions, finished]
        if finished["type"] == "Complete":
            self.status["completionTime"] = finished["lastTransitionTime"]
        return True

    async def write_status(self) -> None:
        """UpdateStatus; the Job this sync continues with is the answer."""
        status = {k: v for k, v in self.status.items() if not (k == "conditions" and not v)}
        uncounted = status.get("uncountedTerminatedPods") or {}
        status["uncountedTerminatedPods"] = {k: v for k, v in uncounted.items() if v}
        body = {**self.job, "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "status": status}
        self.job = await self.client.update(job_path(self.namespace, self.name, "status"), body)
        self.status = copy.deepcopy(_status(self.job))
        self.status.setdefault("uncountedTerminatedPods", {})


def _existing(job: Obj, kind: str) -> Obj:
    return next(c for c in _status(job).get("conditions") or [] if c.get("type") == kind)


def _clean_uncounted(status: Obj, with_finalizer: set[str]) -> bool:
    """cleanUncountedPodsWithoutFinalizers: uncounted pods whose finalizer is gone are counted."""
    uncounted = status.setdefault("uncountedTerminatedPods", {})
    changed = False
    for key, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        uids = list(uncounted.get(key) or [])
        kept = [u for u in uids if u in with_finalizer]
        if len(kept) != len(uids):
            changed = True
            status[counter] = int(status.get(counter) or 0) + len(uids) - len(kept)
            uncounted[key] = kept
    return changed


def _add_index_env(template: Obj) -> None:
    """addCompletionIndexEnvVariables: JOB_COMPLETION_INDEX from the pod's index label."""
    spec = template.setdefault("spec", {})
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            env = container.setdefault("env", [])
            if any(e.get("name") == COMPLETION_INDEX_ENV for e in env):
                continue
            env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}})
