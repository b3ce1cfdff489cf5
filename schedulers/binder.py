"""The binder: the binding cycle of a placement, preemption's evictions, and the reports on pods.

1. *Reserve*: the pod's requests are charged to the node in the cache (upstream's assume), then
   each Reserve plugin takes its part (DynamicResources: the new allocations, as in flight), so
   the next cycle (which starts before this pod's writes land) cannot hand out the same devices
   or cpu.
2. *Permit, PreBind, Bind* (an asyncio task per pod, so writes of different pods overlap): a gang
   pod waits for its group's minimum; each PreBind plugin writes what it must (DynamicResources:
   the special claim, the finalizer then the allocation of each claim, the pod's claim statuses,
   the wait for binding conditions; see :mod:`schedulers.plugins.dynamicresources_binding`); then
   POST ``pods/binding``. Any failure runs the Reserve plugins' Unreserve in reverse order (in
   memory, then on the server) and retries the pod with backoff; a PreBind ``Error`` is reported
   on the pod first.
3. *Reporting*: a pod no node fits gets a ``PodScheduled=False`` condition and a
   ``FailedScheduling`` event (once per distinct message); a bound pod a ``Scheduled`` event.
4. *Preemption* (:meth:`Binder.preempt`): the preemptor's nomination is held in the cache at
   once and its ``status.nominatedNodeName`` names the node; then each victim gets a
   ``DisruptionTarget`` condition, is deleted gracefully and gets a ``Preempted`` event.

Crash safety: claim writes happen before the binding, so a new leader may find a pending pod
whose claims are already allocated and reserved for it. Its cycle then sees allocated claims,
whose node selector only admits the node of their devices, and binds the pod there without
writing them again. If that node no longer fits, the claims reserved for nobody but this pod are
deallocated (DynamicResources' PostFilter) and the pod is tried again from scratch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import httpx

from kube.client import KubeClient, record_event, resource_path
from kube.dra.podgroups import pod_group_name
from kube.errors import ApiError
from kube.informer import object_key
from kube.tasks import cancel_and_wait
from kube.timeutil import now_rfc3339
from schedulers.allocator import AllocatorFeatures
from schedulers.cache import Key, Obj, SchedulerCache, meta
from schedulers.cycle import Placement
from schedulers.framework import CycleState, Status
from schedulers.preemption import Preempt
from schedulers.queue import SchedulingQueue

log = logging.getLogger("scheduler")

@dataclass
class SchedulerStats:
    """Counters for logs and tests."""

    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    bind_failures: int = 0
    preemptions: int = 0
    victims: int = 0


class _BindFailure(Exception):
    """A step of the binding cycle refused the placement; the pod is retried."""


class _PreBindFailed(_BindFailure):
    """A PreBind plugin answered with a status (an ``Error`` is reported on the pod)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class Binder:
    """Writes placements to the server in background tasks; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        cache: SchedulerCache,
        queue: SchedulingQueue[Key, Key],
        *,
        stats: SchedulerStats | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.queue = queue
        self.features: AllocatorFeatures = cache.features
        self.component = cache.scheduler_name  # events are recorded in the scheduler's name
        self.stats = stats or SchedulerStats()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reported: dict[str, str] = {}  # pod uid -> last FailedScheduling message

    # ------------------------------------------------------------------ tasks

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as one of the binder's background writes (waited for by :meth:`wait`, cancelled by :meth:`cancel`)."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        """Wait until every write started so far has finished (including the ones they start)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel the writes under way (leadership ended) and wait until they have undone themselves."""
        await cancel_and_wait(*self._tasks)

    # ------------------------------------------------------------------ reserve

    def reserve(self, pod: Obj, placement: Placement) -> None:
        """Charge the pod to the node, run the Reserve plugins, then start the binding task."""
        state = placement.state
        if state is None:
            raise ValueError("a placement without its cycle state: the binding cycle's plugins would not run")
        node = placement.node
        self.cache.assume_pod(pod, node, placement.requests)
        for i, plugin in enumerate(state.reservers):
            status = plugin.reserve(state, pod, node)
            if status is not None:
                log.warning("reserve failed", extra={"pod": "/".join(object_key(pod)), "node": node, "plugin": plugin.name, "why": status.message})
                self._unreserve(state, pod, node, upto=i + 1)
                self.queue.retry(object_key(pod))
                return
        self.queue.done(object_key(pod))
        if placement.gang is not None and self.cache.groups is not None:
            self.cache.groups.placed(placement.gang[:2])
        self.spawn(self._bind(pod, node, state, placement.gang))

    def _unreserve(self, state: CycleState, pod: Obj, node: str, upto: int | None = None) -> None:
        """The Reserve plugins' Unreserve in memory, in reverse order, and the pod's charge."""
        for plugin in reversed(state.reservers[:upto]):
            plugin.unreserve(state, pod, node)
        self.cache.forget_pod(pod)

    # ------------------------------------------------------------------ writes

    async def _bind(self, pod: Obj, node_name: str, state: CycleState, gang: tuple[str, str, int] | None = None) -> None:
        """Permit (a gang waits for its minimum), the PreBind plugins and Bind; Unreserve on failure."""
        key = object_key(pod)
        ns, name = key
        try:
            if gang is not None and self.cache.groups is not None:
                groups, (group_ns, group_name, need) = self.cache.groups, gang
                if not await groups.permit((group_ns, group_name), need, lambda: groups.placed_count(group_ns, group_name, self.cache.is_binding)):
                    message = f"PodGroup {group_ns}/{group_name}: fewer than {need} pods could be placed together"
                    self._report_group(pod, False, "Unschedulable", message)
                    raise _BindFailure(message)
            for pre_binder in state.pre_binders:
                status = await pre_binder.pre_bind(state, pod, node_name)
                if status is not None:
                    raise _PreBindFailed(status)
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns}, "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
            await self.client.post_raw(resource_path("", "v1", "pods", ns, name, "binding"), binding)
        except asyncio.CancelledError:
            # Leadership ended mid-write; the next leader finishes or undoes it (see module docstring;
            # a special claim left behind is deleted by the next attempt).
            self._unreserve(state, pod, node_name)
            raise
        except (ApiError, httpx.HTTPError, OSError, _BindFailure) as exc:
            self.stats.bind_failures += 1
            log.warning("binding failed", extra={"pod": f"{ns}/{name}", "node": node_name, "error": str(exc)})
            if isinstance(exc, _PreBindFailed) and exc.status.is_error:
                # Upstream's PreBind error: the pod says why; the writes are undone below.
                message = f'running PreBind plugin "{exc.status.plugin}": {exc.status.message}'
                self._reported[meta(pod).get("uid", "")] = message
                await self._report(pod, message, "SchedulerError")
            self._unreserve(state, pod, node_name)
            if gang is not None and self.cache.groups is not None:
                self.cache.groups.placed(gang[:2])
            for plugin in reversed(state.reservers):
                await plugin.release(state, pod, node_name)
            if self.cache.pods.get(ns, name) is not None:
                self.queue.retry(key)
            return
        self.cache.finish_binding(pod)
        self.queue.succeeded(key)
        self.stats.scheduled += 1
        self._report_group(pod, True, "Scheduled")
        log.info("scheduled", extra={"pod": f"{ns}/{name}", "node": node_name})
        self.spawn(self._event(pod, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node_name}"))

    # ------------------------------------------------------------------ reporting

    def unschedulable(
        self, pod: Obj, message: str, reason: str = "Unschedulable", *, clear_nomination: bool = False, plugins: frozenset[str] = frozenset()
    ) -> None:
        """Park the pod and record why (condition + event, only when the message changes).
        ``clear_nomination``: preemption cannot help any more, the pod's nominated node goes;
        ``plugins``: the ones that rejected it (their events bring it back)."""
        key = object_key(pod)
        self.stats.unschedulable += 1
        self.queue.unschedulable(key, plugins)
        uid = meta(pod).get("uid", "")
        log.info("pod unschedulable", extra={"pod": "/".join(key), "why": message})
        nominated: str | None = None
        if clear_nomination:
            self.cache.forget_nomination(uid)
            nominated = ""
        if self._reported.get(uid) == message and nominated is None:
            return
        self._reported[uid] = message
        self.spawn(self._report(pod, message, reason, nominated))
        self._report_group(pod, False, "SchedulerError" if reason == "SchedulerError" else "Unschedulable", message)

    def _report_group(self, pod: Obj, scheduled: bool, reason: str, message: str = "") -> None:
        """The outcome for the pod's PodGroup too (its PodGroupInitiallyScheduled condition)."""
        name = pod_group_name(pod)
        if name is not None and self.cache.groups is not None:
            self.spawn(self.cache.groups.report((object_key(pod)[0], name), scheduled, reason, message))

    # ------------------------------------------------------------------ preemption

    def preempt(self, pod: Obj, plan: Preempt) -> None:
        """Hold the nomination, park the pod, and evict the victims in a task of their own."""
        key = object_key(pod)
        uid = meta(pod).get("uid", "")
        self.stats.unschedulable += 1
        self.stats.preemptions += 1
        self.cache.nominate(plan.nomination, uid)
        self.queue.unschedulable(key)
        self._reported[uid] = plan.message
        self.spawn(self._preempt(pod, plan))
        self._report_group(pod, False, "Unschedulable", plan.message)

    async def _preempt(self, pod: Obj, plan: Preempt) -> None:
        node = plan.nomination.node
        uid = meta(pod).get("uid", "")
        scheduler = (pod.get("spec") or {}).get("schedulerName") or self.component
        # The nomination first: once the victims go, the preemptor may be bound at any moment,
        # and a PodScheduled=False written after its binding would be wrong.
        await self._report(pod, plan.message, "Unschedulable", node)
        try:
            for victim in plan.victims:
                if meta(victim).get("deletionTimestamp"):
                    continue  # graceful deletion already under way
                await self._evict(victim, scheduler)
                self.stats.victims += 1
                self.spawn(self._event(victim, "Normal", "Preempted", f"Preempted by pod {uid} on node {node}"))
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.warning("preemption failed", extra={"pod": "/".join(object_key(pod)), "node": node, "error": str(exc)})
            self.cache.forget_nomination(uid)
            if self.cache.pods.get(*object_key(pod)) is not None:
                self.queue.retry(object_key(pod))
            return
        # Lower-priority pods nominated on that node may not fit there any more: they look again.
        for other_uid in list(self.cache.nominated_on.get(node, ())):
            other = self.cache.nominations.get(other_uid)
            if other is not None and other.priority < plan.nomination.priority:
                self.cache.forget_nomination(other_uid)
                with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
                    await self.client.patch(resource_path("", "v1", "pods", *other.pod, "status"), {"status": {"nominatedNodeName": None}}, patch_type="merge")
                self.queue.add(other.pod, other.priority)

    async def _evict(self, victim: Obj, scheduler: str) -> None:
        """Upstream's PreemptPod: the DisruptionTarget condition, then a graceful delete."""
        ns, name = object_key(victim)
        condition = {
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": f"{scheduler}: preempting to accommodate a higher priority pod", "lastProbeTime": None, "lastTransitionTime": now_rfc3339(),
        }  # fmt: skip
        try:
            await self.client.patch(resource_path("", "v1", "pods", ns, name, "status"), {"status": {"conditions": [condition]}}, patch_type="strategic")
            await self.client.delete(resource_path("", "v1", "pods", ns, name), preconditions={"uid": meta(victim).get("uid", "")})
        except ApiError as exc:
            if exc.code != 404:
                raise

    def forget_reports(self, pod: Obj) -> None:
        """The pod is gone: a new pod of the same name is reported afresh."""
        self._reported.pop(meta(pod).get("uid", ""), None)

    async def _report(self, pod: Obj, message: str, reason: str, nominated: str | None = None) -> None:
        """The PodScheduled=False condition (and ``status.nominatedNodeName`` when ``nominated`` is
        given; "" clears it) and a FailedScheduling event."""
        ns, name = object_key(pod)
        condition = {
            "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": now_rfc3339(),
        }
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                condition["lastTransitionTime"] = c.get("lastTransitionTime") or condition["lastTransitionTime"]
        status: Obj = {"conditions": [condition]}
        if nominated is not None:
            status["nominatedNodeName"] = nominated or None
        try:
            await self.client.patch(resource_path("", "v1", "pods", ns, name, "status"), {"status": status}, patch_type="strategic")
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.info("could not update pod condition", extra={"pod": f"{ns}/{name}", "error": str(exc)})
        await self._event(pod, "Warning", "FailedScheduling", message)

    async def _event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        try:
            await record_event(self.client, {"apiVersion": "v1", "kind": "Pod", **pod}, reason, message, type_, component=self.component)
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.info("could not record event", extra={"pod": "/".join(object_key(pod)), "error": str(exc)})
