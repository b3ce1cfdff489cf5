"""The binder: reserve a placement in the cache, write the claims and the binding, report outcomes.

1. *Reserve*: the new allocations go into the cache as in flight and the pod's requests are
   charged to the node, so the next cycle (which starts before this pod's writes land) cannot
   hand out the same devices or cpu.
2. *PreBind/Bind* (an asyncio task per pod, so writes of different pods overlap): per claim the
   scheduler allocates, first the ``delete-protection`` finalizer (a normal update: a status
   write cannot change metadata), then ``status.allocation`` + ``reservedFor`` with the claim's
   resourceVersion (re-read and retry on 409), as upstream's bindClaim does, so nobody ever sees
   an allocated claim without the finalizer; claims allocated before only get the pod in
   ``reservedFor``. Then POST ``pods/binding``. Any failure undoes the reservation (in memory,
   and reservedFor on the server; a finalizer already added stays, as upstream's, until the
   claim controller removes it from a claim being deleted) and retries the pod with backoff.
   Every claim written goes into the cache's assume cache.
3. *Reporting*: a pod no node fits gets a ``PodScheduled=False`` condition and a
   ``FailedScheduling`` event (once per distinct message); a bound pod a ``Scheduled`` event.
4. *Preemption* (:meth:`Binder.preempt`): the preemptor's nomination is held in the cache at
   once and its ``status.nominatedNodeName`` names the node; then each victim gets a
   ``DisruptionTarget`` condition, is deleted gracefully and gets a ``Preempted`` event.

Crash safety: claim writes happen before the binding, so a new leader may find a pending pod
whose claims are already allocated and reserved for it. Its cycle then sees allocated claims,
whose node selector only admits the node of their devices, and binds the pod there without
writing them again. If that node no longer fits, the claims reserved for nobody but this pod are
deallocated (upstream's PostFilter, :meth:`Binder.deallocate_stale`) and the pod is tried again
from scratch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from kube.client import KubeClient, record_event, resource_path
from kube.errors import ApiError
from kube.informer import object_key
from kube.podgroups import is_group_reference, pod_group_name
from kube.tasks import cancel_and_wait
from kube.timeutil import now_rfc3339
from schedulers.allocator import AllocatorFeatures
from schedulers.cache import RESOURCE, Key, Obj, SchedulerCache, is_pod_reference, meta
from schedulers.cycle import Placement
from schedulers.extended import SpecialClaim, is_in_memory
from schedulers.preemption import Preempt
from schedulers.queue import SchedulingQueue

log = logging.getLogger("scheduler")

DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize
CLAIM_WRITE_ATTEMPTS = 10
DEFAULT_BINDING_TIMEOUT = 600.0  # upstream's DynamicResourcesArgs.bindingTimeout
BINDING_POLL = 0.25  # seconds between looks at the claims (the cache's copies) while waiting
PREBIND = 'running PreBind plugin "DynamicResources"'

# A claim to write for a pod: with the new allocation, or None to only add the consumer to
# reservedFor; the consumer is the pod, or the PodGroup reference given (KEP-5729).
ClaimWrite = tuple[Obj, Mapping[str, Any] | None, Obj | None]
# How long a pod waits for another member of its group to write the group claim's allocation.
GROUP_ALLOCATION_WAIT = 30.0


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
    """A PreBind check failed (claim changed under us); the pod is retried."""


class _BindingConditionsFailed(_BindFailure):
    """A device's binding failed or timed out: reported on the pod, then the pod is retried."""


def _go_quote(text: str) -> str:
    """A string as Go's %q writes it (for upstream's message texts)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _binding_state(claim: Mapping[str, Any]) -> bool | str:
    """Whether every device of the claim with binding conditions has them all True (True), one
    is still pending (False), or why its binding failed (a failure condition is True)."""
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    if not allocation:
        return False
    reported = {(d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID")): d for d in status.get("devices") or []}
    for result in (allocation.get("devices") or {}).get("results") or []:
        wanted = result.get("bindingConditions") or []
        if not wanted:
            continue
        device = reported.get((result.get("driver"), result.get("pool"), result.get("device"), result.get("shareID")))
        if device is None:
            return False
        conditions = {c.get("type"): c for c in device.get("conditions") or []}
        for failure in result.get("bindingFailureConditions") or []:
            c = conditions.get(failure)
            if c is not None and c.get("status") == "True":
                return f"claim {meta(claim).get('name', '')} binding failed: reason={c.get('reason', '')}, message={_go_quote(str(c.get('message', '')))}"
        if any((conditions.get(w) or {}).get("status") != "True" for w in wanted):
            return False
    return True


def _has_binding_conditions(claim: Mapping[str, Any]) -> bool:
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return any(r.get("bindingConditions") for r in results)


def _device_ids(allocation: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return sorted((r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results)


def _reserved_uids(claim: Mapping[str, Any]) -> set[str]:
    return {r.get("uid", "") for r in (claim.get("status") or {}).get("reservedFor") or []}


def _claim_path(claim: Obj, subresource: str | None = None) -> str:
    ns, name = object_key(claim)
    return resource_path(RESOURCE, "v1", "resourceclaims", ns, name, subresource)


def _claim_name(claim: Obj) -> str:
    return "/".join(object_key(claim))


class Binder:
    """Writes placements to the server in background tasks; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        cache: SchedulerCache,
        queue: SchedulingQueue[Key, Key],
        *,
        stats: SchedulerStats | None = None,
        binding_timeout: float = DEFAULT_BINDING_TIMEOUT,
    ) -> None:
        self.client = client
        self.binding_timeout = binding_timeout
        self.cache = cache
        self.queue = queue
        self.features: AllocatorFeatures = cache.features
        self.component = cache.scheduler_name  # events are recorded in the scheduler's name
        self.stats = stats or SchedulerStats()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reported: dict[str, str] = {}  # pod uid -> last FailedScheduling message

    # ------------------------------------------------------------------ tasks

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
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
        """Take the devices and node resources in the cache, then start the binding task."""
        pod_uid = meta(pod).get("uid", "")
        to_write: list[ClaimWrite] = []
        for claim in placement.claims:
            uid = meta(claim).get("uid", "")
            allocation = placement.allocations.get(uid)
            group_ref = placement.group_refs.get(uid)
            if allocation is not None:
                self.cache.assume_allocation(claim, allocation, pod_uid)
                to_write.append((claim, allocation, group_ref))
            elif (group_ref or {}).get("uid", pod_uid) not in _reserved_uids(claim):
                to_write.append((claim, None, group_ref))
        self.cache.assume_pod(pod, placement.node, placement.requests)
        self.queue.done(object_key(pod))
        if placement.gang is not None and self.cache.groups is not None:
            self.cache.groups.placed(placement.gang[:2])
        others = [object_key(c) for c in placement.claims if not any(c is w for w, _, _ in to_write)]
        self._spawn(self._bind(pod, placement.node, to_write, placement.statuses, placement.extended, others, placement.gang))

    def _unreserve(self, pod: Obj, claims: list[ClaimWrite]) -> None:
        pod_uid = meta(pod).get("uid", "")
        for claim, allocation, _ in claims:
            if allocation is not None:
                self.cache.forget_allocation(claim, pod_uid)
        self.cache.forget_pod(pod)

    async def _create_special_claim(self, pod: Obj, claim: Obj, allocation: Mapping[str, Any]) -> Obj:
        """Create the in-memory special claim; its allocation moves to the created claim in the cache."""
        body = {**claim, "metadata": {k: v for k, v in meta(claim).items() if k not in ("name", "uid")}}
        ns = meta(claim).get("namespace", "")
        created = await self.client.create(resource_path(RESOURCE, "v1", "resourceclaims", ns), body)
        pod_uid = meta(pod).get("uid", "")
        self.cache.assume_claim(created)
        self.cache.assume_allocation(created, allocation, pod_uid)
        self.cache.forget_allocation(claim, pod_uid)
        log.info("created claim for extended resources", extra={"pod": "/".join(object_key(pod)), "claim": _claim_name(created)})
        return created

    async def _delete_special_claim(self, claim: Obj) -> None:
        """Delete a special claim this scheduler created (its finalizer first, so it goes at once)."""
        with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
            obj = await self.client.get(_claim_path(claim))
            if meta(obj).get("uid") != meta(claim).get("uid"):
                return
            finalizers = list(meta(obj).get("finalizers") or [])
            if DELETE_PROTECTION_FINALIZER in finalizers:
                finalizers.remove(DELETE_PROTECTION_FINALIZER)
                obj = await self.client.update(_claim_path(obj), {**obj, "metadata": {**meta(obj), "finalizers": finalizers}})
            await self.client.delete(_claim_path(obj), preconditions={"uid": meta(obj).get("uid", "")}, missing_ok=True)

    def delete_stale_special_claim(self, pod: Obj, claim: Obj) -> None:
        """PostFilter for a special claim an earlier attempt left: delete it, then try the pod again."""
        log.info("deleting stale claim for extended resources", extra={"pod": "/".join(object_key(pod)), "claim": _claim_name(claim)})

        async def delete_and_retry() -> None:
            await self._delete_special_claim(claim)
            if self.cache.pods.get(*object_key(pod)) is not None:
                self.queue.retry(object_key(pod))

        self._spawn(delete_and_retry())

    # ------------------------------------------------------------------ writes

    async def _bind(
        self,
        pod: Obj,
        node_name: str,
        claims: list[ClaimWrite],
        statuses: list[Obj],
        extended: SpecialClaim | None = None,
        reserved: Sequence[Key] = (),
        gang: tuple[str, str, int] | None = None,
    ) -> None:
        """Permit (a gang waits for its minimum), PreBind (claim status writes, the special claim,
        the pod's claim statuses, the wait for binding conditions) and Bind; undo everything on
        failure. ``reserved``: the pod's claims that were reserved for it already (a new leader
        finishing an attempt waits for them too)."""
        key = object_key(pod)
        ns, name = key
        written: list[tuple[Obj, Obj | None]] = []
        created: Obj | None = None
        try:
            if gang is not None and self.cache.groups is not None:
                groups, (group_ns, group_name, need) = self.cache.groups, gang
                if not await groups.permit((group_ns, group_name), need, lambda: groups.placed_count(group_ns, group_name, self.cache.is_binding)):
                    message = f"PodGroup {group_ns}/{group_name}: fewer than {need} pods could be placed together"
                    self._report_group(pod, False, "Unschedulable", message)
                    raise _BindFailure(message)
            for i, (claim, allocation, group_ref) in enumerate(claims):
                if allocation is not None and is_in_memory(claim):
                    created = await self._create_special_claim(pod, claim, allocation)
                    claims[i] = (created, allocation, group_ref)
                    claim = created
                written.append((await self._write_claim(pod, claim, allocation, group_ref), group_ref))
            pod_status = pod.get("status") or {}
            patch_status: Obj = {}
            if statuses or pod_status.get("nodeAllocatableResourceClaimStatuses"):
                # Merge patch replaces the whole list: a retried pod drops what an earlier attempt wrote.
                patch_status["nodeAllocatableResourceClaimStatuses"] = statuses or None
            if created is not None and extended is not None:
                patch_status["extendedResourceClaimStatus"] = {"requestMappings": extended.mappings, "resourceClaimName": meta(created).get("name", "")}
            elif pod_status.get("extendedResourceClaimStatus"):
                patch_status["extendedResourceClaimStatus"] = None
            if patch_status:
                await self.client.patch(resource_path("", "v1", "pods", ns, name, "status"), {"status": patch_status}, patch_type="merge")
            if self.features.binding_conditions:
                waiting = [object_key(c) for c, _ in written] + list(reserved)
                if any(_has_binding_conditions(c) for key in waiting if (c := self.cache.claim(*key)) is not None):
                    await self._wait_for_binding_conditions(pod, node_name, waiting)
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns}, "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
            await self.client.post_raw(resource_path("", "v1", "pods", ns, name, "binding"), binding)
        except asyncio.CancelledError:
            # Leadership ended mid-write; the next leader finishes or undoes it (see module docstring;
            # a special claim left behind is deleted by the next attempt).
            self._unreserve(pod, claims)
            raise
        except (ApiError, httpx.HTTPError, OSError, _BindFailure) as exc:
            self.stats.bind_failures += 1
            log.warning("binding failed", extra={"pod": f"{ns}/{name}", "node": node_name, "error": str(exc)})
            if isinstance(exc, _BindingConditionsFailed):
                # Upstream's PreBind error: the pod says why; the claims are released below.
                message = f"{PREBIND}: {exc}"
                self._reported[meta(pod).get("uid", "")] = message
                await self._report(pod, message, "SchedulerError")
            self._unreserve(pod, claims)
            if gang is not None and self.cache.groups is not None:
                self.cache.groups.placed(gang[:2])
            for claim, group_ref in written:
                if created is not None and meta(claim).get("uid") == meta(created).get("uid"):
                    continue  # deleted below
                with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
                    await self._drop_reservation(pod, claim, group_ref)
            if created is not None:
                await self._delete_special_claim(created)
            if self.cache.pods.get(ns, name) is not None:
                self.queue.retry(key)
            return
        self.cache.finish_binding(pod)
        self.queue.succeeded(key)
        self.stats.scheduled += 1
        self._report_group(pod, True, "Scheduled")
        log.info("scheduled", extra={"pod": f"{ns}/{name}", "node": node_name, "claims": len(claims)})
        self._spawn(self._event(pod, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node_name}"))

    async def _write_claim(self, pod: Obj, claim: Obj, allocation: Mapping[str, Any] | None, group_ref: Obj | None = None) -> Obj:
        """For a new allocation the finalizer first, then the allocation + the consumer in
        reservedFor; retry on conflict. The consumer is the pod, or for a PodGroup claim the group
        (whose later pods write nothing)."""
        pod_meta = meta(pod)
        entry = group_ref or {"resource": "pods", "name": pod_meta.get("name", ""), "uid": pod_meta.get("uid", "")}
        uid = meta(claim).get("uid", "")
        obj: Obj = self.cache.claim(*object_key(claim)) or claim
        if group_ref is not None and allocation is None:
            obj = await self._group_allocation(claim, obj)
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            obj_meta = meta(obj)
            if obj_meta.get("uid") != uid:
                raise _BindFailure(f"claim {_claim_name(claim)} was replaced")
            if obj_meta.get("deletionTimestamp"):
                raise _BindFailure(f"claim {_claim_name(claim)} is being deleted")
            status = obj.get("status") or {}
            current = status.get("allocation")
            if allocation is not None and current and _device_ids(current) != _device_ids(allocation):
                raise _BindFailure(f"claim {_claim_name(claim)} got allocated elsewhere")
            if allocation is None and not current:
                raise _BindFailure(f"claim {_claim_name(claim)} was deallocated")
            reserved = list(status.get("reservedFor") or [])
            workload = (obj.get("spec") or {}).get("reservedFor") if self.features.reserved_for_workloads else None
            if entry["uid"] in {r.get("uid") for r in reserved} or (
                # KEP-5194: a claim reserved for a workload serves any pod; pods are not listed.
                self.features.reserved_for_workloads and any(not is_pod_reference(r) and not is_group_reference(r) for r in reserved)
            ):
                # Reserved already (a new leader finishing an attempt, a later pod of a group).
                self.cache.assume_claim(obj)
                return obj
            if len(reserved) >= RESERVED_FOR_MAX:
                raise _BindFailure(f"claim {_claim_name(claim)} is reserved for {RESERVED_FOR_MAX} consumers already")
            finalizers = list(obj_meta.get("finalizers") or [])
            if allocation is not None and DELETE_PROTECTION_FINALIZER not in finalizers:
                # Upstream's bindClaim: the finalizer guards the allocation before there is one.
                try:
                    obj = await self.client.update(_claim_path(obj), {**obj, "metadata": {**obj_meta, "finalizers": [*finalizers, DELETE_PROTECTION_FINALIZER]}})
                except ApiError as exc:
                    if exc.code != 409:
                        raise
                    obj = await self.client.get(_claim_path(claim))
                continue  # the checks again against what the server now holds, then the status
            new_allocation = current or allocation
            if self.features.binding_conditions and new_allocation and not new_allocation.get("allocationTimestamp"):
                # Upstream's PreBind stamps every allocation; the binding timeout counts from it.
                new_allocation = {**new_allocation, "allocationTimestamp": now_rfc3339()}
            new_reserved = [*reserved, entry]
            if workload and not reserved:
                # The first pod reserves the claim for the workload the creator named, not for itself.
                new_allocation = {**(new_allocation or {}), "reservedForAnyPod": True}
                new_reserved = [workload]
            try:
                new_status = {**status, "allocation": new_allocation, "reservedFor": new_reserved}
                obj = await self.client.update(_claim_path(obj, "status"), {**obj, "status": new_status})
            except ApiError as exc:
                if exc.code != 409:
                    raise
                obj = await self.client.get(_claim_path(claim))
                continue
            self.cache.assume_claim(obj)
            return obj
        raise _BindFailure(f"claim {_claim_name(claim)}: too many conflicts")

    async def _group_allocation(self, claim: Obj, obj: Obj) -> Obj:
        """The claim once the member of the group that allocates it has written the allocation."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GROUP_ALLOCATION_WAIT
        uid = meta(claim).get("uid", "")
        while not (obj.get("status") or {}).get("allocation") and self.cache.allocating_pod(uid) is not None and loop.time() < deadline:
            await asyncio.sleep(0.05)
            obj = self.cache.claim(*object_key(claim)) or obj
        return obj

    async def _wait_for_binding_conditions(self, pod: Obj, node_name: str, keys: list[Key]) -> None:
        """Upstream's PreBind wait: until every binding condition of the pod's devices is True in
        the claims' status.devices; a True failure condition or the binding timeout ends it."""
        self._spawn(self._event(pod, "Normal", "BindingConditionsPending", f"waiting for binding conditions for device on node {node_name}"))
        deadline = asyncio.get_running_loop().time() + self.binding_timeout
        while True:
            pending = False
            for key in keys:
                claim = self.cache.claim(*key)
                if claim is None:
                    raise _BindFailure(f"claim {'/'.join(key)} is gone")
                state = _binding_state(claim)
                if isinstance(state, str):
                    raise _BindingConditionsFailed(state)
                pending = pending or not state
            if not pending:
                return
            if asyncio.get_running_loop().time() >= deadline:
                raise _BindingConditionsFailed("device binding timeout")
            await asyncio.sleep(BINDING_POLL)

    async def _drop_reservation(self, pod: Obj, claim: Obj, group_ref: Obj | None = None) -> None:
        """Undo: remove the pod (or its group, when no other pod of the group is placed) from
        reservedFor; deallocate when nobody else reserves the claim."""
        pod_uid = meta(pod).get("uid", "")
        if group_ref is not None:
            groups = self.cache.groups
            ns = object_key(pod)[0]
            if groups is None or groups.placed_count(ns, group_ref.get("name", ""), self.cache.is_binding) > 0:
                return
            pod_uid = group_ref.get("uid", "")
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            try:
                obj = await self.client.get(_claim_path(claim))
            except ApiError as exc:
                if exc.code == 404:
                    return
                raise
            status = dict(obj.get("status") or {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod_uid]
            if len(reserved) == len(status.get("reservedFor") or []):
                return
            if reserved:
                status["reservedFor"] = reserved
            else:
                status.pop("reservedFor", None)
                status.pop("allocation", None)
                status.pop("devices", None)
            try:
                written = await self.client.update(_claim_path(obj, "status"), {**obj, "status": status})
            except ApiError as exc:
                if exc.code == 409:
                    continue
                raise
            self.cache.assume_claim(written)
            return

    def deallocate_stale(self, pod: Obj, claims: Sequence[Obj]) -> None:
        """PostFilter: free allocated claims that pin the pod to unfit nodes and serve only it."""
        pod_uid = meta(pod).get("uid", "")
        for claim in claims:
            if _reserved_uids(claim) <= {pod_uid}:
                log.info("deallocating claim that pins an unschedulable pod", extra={"claim": _claim_name(claim), "pod": "/".join(object_key(pod))})
                self._spawn(self._deallocate(claim))

    async def _deallocate(self, claim: Obj) -> None:
        with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
            obj = await self.client.get(_claim_path(claim))
            status = {k: v for k, v in (obj.get("status") or {}).items() if k not in ("allocation", "reservedFor", "devices")}
            written = await self.client.update(_claim_path(obj, "status"), {**obj, "status": status})
            self.cache.assume_claim(written)

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
        self._spawn(self._report(pod, message, reason, nominated))
        self._report_group(pod, False, "SchedulerError" if reason == "SchedulerError" else "Unschedulable", message)

    def _report_group(self, pod: Obj, scheduled: bool, reason: str, message: str = "") -> None:
        """The outcome for the pod's PodGroup too (its PodGroupInitiallyScheduled condition)."""
        name = pod_group_name(pod)
        if name is not None and self.cache.groups is not None:
            self._spawn(self.cache.groups.report((object_key(pod)[0], name), scheduled, reason, message))

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
        self._spawn(self._preempt(pod, plan))
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
                self._spawn(self._event(victim, "Normal", "Preempted", f"Preempted by pod {uid} on node {node}"))
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
