"""DynamicResources in the binding cycle: Reserve, Unreserve, PreBind and PostFilter.

The filter half of the plugin (:mod:`schedulers.plugins.dynamicresources`) decides where the pod's
claims are allocated; this half makes it so, at upstream's extension points:

* *Reserve* (:meth:`DynamicResourcesBinding.reserve`): the new allocations are counted in the
  cache as in flight, so the next cycle (which starts before this pod's writes land) cannot hand
  out the same devices.
* *Unreserve* (:meth:`~DynamicResourcesBinding.unreserve` in memory, then
  :meth:`~DynamicResourcesBinding.release` on the server): the in-flight allocations go; the pod
  (or its PodGroup, when no other member is placed) leaves ``reservedFor``, and a claim nobody
  else reserves is deallocated; a special claim this attempt created is deleted. A finalizer
  already added stays, as upstream's, until the claim controller removes it. After a lost
  leadership only the memory is undone (the next leader finishes or undoes the writes).
* *PreBind* (:meth:`~DynamicResourcesBinding.pre_bind`): the special claim for extended resources
  is created; per claim the scheduler allocates, first the ``delete-protection`` finalizer (a normal
  update: a status write cannot change metadata), then ``status.allocation`` + ``reservedFor`` with
  the claim's resourceVersion (re-read and retry on 409), as upstream's bindClaim does, so nobody
  ever sees an allocated claim without the finalizer; claims allocated before only get the
  consumer in ``reservedFor``. Then the pod's claim statuses, and the wait for the devices'
  binding conditions. A claim that changed under the write is ``Unschedulable`` (the pod is tried
  again); a failed or timed-out binding is an ``Error`` the pod reports.
* *PostFilter* (:meth:`~DynamicResourcesBinding.post_filter`): when no node fits, allocated claims
  that pin the pod to nodes that do not fit and serve nobody else are deallocated, and a special
  claim an earlier attempt left behind is deleted; it runs before DefaultPreemption, as in
  upstream's default profile.

Every claim written goes into the cache's assume cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import httpx

from kube.apitypes import AllocationResult, ResourceClaim
from kube.client import record_event, resource_path
from kube.dra.podgroups import is_group_reference
from kube.errors import ApiError
from kube.informer import object_key
from kube.objects import Obj
from kube.timeutil import now_rfc3339
from schedulers.cache import RESOURCE, Key, SchedulerCache, is_pod_reference, meta
from schedulers.extended import SpecialClaim, is_in_memory
from schedulers.framework import CycleState, Placement, ScheduleFailure, Status

log = logging.getLogger("scheduler")

NAME = "DynamicResources"
PLACEMENT = NAME + "/placement"  # the cycle state's key of the placement the cycle chose
BINDING = NAME + "/binding"  # the cycle state's key of the binding's progress (from Reserve on)
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize
CLAIM_WRITE_ATTEMPTS = 10
DEFAULT_BINDING_TIMEOUT = 600.0  # upstream's DynamicResourcesArgs.bindingTimeout
BINDING_POLL = 0.25  # seconds between looks at the claims (the cache's copies) while waiting
# How long a pod waits for another member of its group to write the group claim's allocation.
GROUP_ALLOCATION_WAIT = 30.0
# Upstream's PostFilter reasons, in the pod's message before preemption's.
REASON_DEALLOCATED = "deallocation of ResourceClaim completed"
REASON_DELETED = "deletion of ResourceClaim completed"

# A claim to write for a pod: with the new allocation, or None to only add the consumer to
# reservedFor; the consumer is the pod, or the PodGroup reference given (KEP-5729).
ClaimWrite = tuple[Obj, Mapping[str, Any] | None, Obj | None]


class ClaimChanged(Exception):
    """A claim changed under the PreBind writes (replaced, deleted, allocated elsewhere)."""


class BindingFailed(Exception):
    """A device's binding failed or timed out (upstream's PreBind error)."""


@dataclass
class ClaimBinding:
    """One pod's binding as far as DynamicResources is concerned (its cycle-state entry from
    Reserve on): the claims to write, the claims reserved for the pod already (their binding
    conditions are waited for too), and what PreBind wrote and created."""

    node: str
    writes: list[ClaimWrite]
    reserved: list[Key]
    statuses: list[Obj]
    extended: SpecialClaim | None
    written: list[tuple[Obj, Obj | None]] = field(default_factory=list)
    created: Obj | None = None


def _go_quote(text: str) -> str:
    """A string as Go's %q writes it (for upstream's message texts)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def binding_state(claim: Mapping[str, Any]) -> bool | str:
    """Whether every device of the claim with binding conditions has them all True (True), one
    is still pending (False), or why its binding failed (a failure condition is True)."""
    status = cast(ResourceClaim, claim).get("status") or {}
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


def has_binding_conditions(claim: Mapping[str, Any]) -> bool:
    """Whether a device allocated to the claim has binding conditions to wait for."""
    results = (((cast(ResourceClaim, claim).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    return any(r.get("bindingConditions") for r in results)


def _device_ids(allocation: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    results = ((cast("AllocationResult | None", allocation) or {}).get("devices") or {}).get("results") or []
    return sorted((r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results)


def reserved_uids(claim: Mapping[str, Any]) -> set[str]:
    """The uids of the claim's consumers (``status.reservedFor``)."""
    return {r.get("uid", "") for r in (cast(ResourceClaim, claim).get("status") or {}).get("reservedFor") or []}


def _claim_path(claim: Obj, subresource: str | None = None) -> str:
    ns, name = object_key(claim)
    return resource_path(RESOURCE, "v1", "resourceclaims", ns, name, subresource)


def _claim_name(claim: Obj) -> str:
    return "/".join(object_key(claim))


class DynamicResourcesBinding:
    """The binding cycle's extension points of the DynamicResources plugin (see the module
    docstring); the plugin class inherits them. Writes go through the cache's client."""

    name = NAME
    cache: SchedulerCache
    binding_timeout: float = DEFAULT_BINDING_TIMEOUT

    # --- Reserve / Unreserve ---

    def reserve(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        """Count the new allocations in the cache as in flight, and note what PreBind writes."""
        placement: Placement = state.data[PLACEMENT]
        pod_uid = meta(pod).get("uid", "")
        writes: list[ClaimWrite] = []
        for claim in placement.claims:
            uid = meta(claim).get("uid", "")
            allocation = placement.allocations.get(uid)
            group_ref = placement.group_refs.get(uid)
            if allocation is not None:
                self.cache.assume_allocation(claim, allocation, pod_uid)
                writes.append((claim, allocation, group_ref))
            elif (group_ref or {}).get("uid", pod_uid) not in reserved_uids(claim):
                writes.append((claim, None, group_ref))
        reserved = [object_key(c) for c in placement.claims if not any(c is w for w, _, _ in writes)]
        state.write(BINDING, ClaimBinding(node, writes, reserved, placement.statuses, placement.extended))
        return None

    def unreserve(self, state: CycleState, pod: Obj, node: str) -> None:
        """Undo :meth:`reserve` in the cache (idempotent)."""
        binding: ClaimBinding | None = state.data.get(BINDING)
        if binding is None:
            return
        pod_uid = meta(pod).get("uid", "")
        for claim, allocation, _ in binding.writes:
            if allocation is not None:
                self.cache.forget_allocation(claim, pod_uid)

    async def release(self, state: CycleState, pod: Obj, node: str) -> None:
        """Undo on the server what :meth:`pre_bind` wrote: the pod out of ``reservedFor`` (claims
        nobody else reserves are deallocated), the special claim it created deleted."""
        binding: ClaimBinding | None = state.data.get(BINDING)
        if binding is None:
            return
        created = binding.created
        for claim, group_ref in binding.written:
            if created is not None and meta(claim).get("uid") == meta(created).get("uid"):
                continue  # deleted below
            with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
                await self._drop_reservation(pod, claim, group_ref)
        if created is not None:
            await self.delete_special_claim(created)

    # --- PreBind ---

    async def pre_bind(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        """The claim writes, the pod's claim statuses, and the wait for binding conditions. API
        errors propagate (the binder logs them and tries the pod again)."""
        binding: ClaimBinding = state.data[BINDING]
        client = self.cache.client
        ns, name = object_key(pod)
        try:
            for i, (claim, allocation, group_ref) in enumerate(binding.writes):
                if allocation is not None and is_in_memory(claim):
                    binding.created = await self._create_special_claim(pod, claim, allocation)
                    binding.writes[i] = (binding.created, allocation, group_ref)
                    claim = binding.created
                binding.written.append((await self._write_claim(pod, claim, allocation, group_ref), group_ref))
            pod_status = pod.get("status") or {}
            patch_status: Obj = {}
            if binding.statuses or pod_status.get("nodeAllocatableResourceClaimStatuses"):
                # Merge patch replaces the whole list: a retried pod drops what an earlier attempt wrote.
                patch_status["nodeAllocatableResourceClaimStatuses"] = binding.statuses or None
            if binding.created is not None and binding.extended is not None:
                patch_status["extendedResourceClaimStatus"] = {
                    "requestMappings": binding.extended.mappings, "resourceClaimName": meta(binding.created).get("name", ""),
                }  # fmt: skip
            elif pod_status.get("extendedResourceClaimStatus"):
                patch_status["extendedResourceClaimStatus"] = None
            if patch_status:
                await client.patch(resource_path("", "v1", "pods", ns, name, "status"), {"status": patch_status}, patch_type="merge")
            if self.cache.features.binding_conditions:
                waiting = [object_key(c) for c, _ in binding.written] + list(binding.reserved)
                if any(has_binding_conditions(c) for key in waiting if (c := self.cache.claim(*key)) is not None):
                    await self._wait_for_binding_conditions(pod, node, waiting)
        except ClaimChanged as exc:
            return Status.unschedulable(str(exc), plugin=NAME)
        except BindingFailed as exc:
            return Status.as_error(exc, plugin=NAME)
        return None

    async def _create_special_claim(self, pod: Obj, claim: Obj, allocation: Mapping[str, Any]) -> Obj:
        """Create the in-memory special claim; its allocation moves to the created claim in the cache."""
        body = {**claim, "metadata": {k: v for k, v in meta(claim).items() if k not in ("name", "uid")}}
        ns = meta(claim).get("namespace", "")
        created = await self.cache.client.create(resource_path(RESOURCE, "v1", "resourceclaims", ns), body)
        pod_uid = meta(pod).get("uid", "")
        self.cache.assume_claim(created)
        self.cache.assume_allocation(created, allocation, pod_uid)
        self.cache.forget_allocation(claim, pod_uid)
        log.info("created claim for extended resources", extra={"pod": "/".join(object_key(pod)), "claim": _claim_name(created)})
        return created

    async def _write_claim(self, pod: Obj, claim: Obj, allocation: Mapping[str, Any] | None, group_ref: Obj | None = None) -> Obj:
        """For a new allocation the finalizer first, then the allocation + the consumer in
        reservedFor; retry on conflict. The consumer is the pod, or for a PodGroup claim the group
        (whose later pods write nothing)."""
        client, features = self.cache.client, self.cache.features
        pod_meta = meta(pod)
        entry = group_ref or {"resource": "pods", "name": pod_meta.get("name", ""), "uid": pod_meta.get("uid", "")}
        uid = meta(claim).get("uid", "")
        obj: Obj = self.cache.claim(*object_key(claim)) or claim
        if group_ref is not None and allocation is None:
            obj = await self._group_allocation(claim, obj)
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            obj_meta = meta(obj)
            if obj_meta.get("uid") != uid:
                raise ClaimChanged(f"claim {_claim_name(claim)} was replaced")
            if obj_meta.get("deletionTimestamp"):
                raise ClaimChanged(f"claim {_claim_name(claim)} is being deleted")
            status = obj.get("status") or {}
            current = status.get("allocation")
            if allocation is not None and current and _device_ids(current) != _device_ids(allocation):
                raise ClaimChanged(f"claim {_claim_name(claim)} got allocated elsewhere")
            if allocation is None and not current:
                raise ClaimChanged(f"claim {_claim_name(claim)} was deallocated")
            reserved = list(status.get("reservedFor") or [])
            workload = (obj.get("spec") or {}).get("reservedFor") if features.reserved_for_workloads else None
            if entry["uid"] in {r.get("uid") for r in reserved} or (
                # KEP-5194: a claim reserved for a workload serves any pod; pods are not listed.
                features.reserved_for_workloads and any(not is_pod_reference(r) and not is_group_reference(r) for r in reserved)
            ):
                # Reserved already (a new leader finishing an attempt, a later pod of a group).
                self.cache.assume_claim(obj)
                return obj
            if len(reserved) >= RESERVED_FOR_MAX:
                raise ClaimChanged(f"claim {_claim_name(claim)} is reserved for {RESERVED_FOR_MAX} consumers already")
            finalizers = list(obj_meta.get("finalizers") or [])
            if allocation is not None and DELETE_PROTECTION_FINALIZER not in finalizers:
                # Upstream's bindClaim: the finalizer guards the allocation before there is one.
                try:
                    obj = await client.update(_claim_path(obj), {**obj, "metadata": {**obj_meta, "finalizers": [*finalizers, DELETE_PROTECTION_FINALIZER]}})
                except ApiError as exc:
                    if exc.code != 409:
                        raise
                    obj = await client.get(_claim_path(claim))
                continue  # the checks again against what the server now holds, then the status
            new_allocation = cast("AllocationResult | None", current or allocation)
            if features.binding_conditions and new_allocation and not new_allocation.get("allocationTimestamp"):
                # Upstream's PreBind stamps every allocation; the binding timeout counts from it.
                new_allocation = {**new_allocation, "allocationTimestamp": now_rfc3339()}
            new_reserved = [*reserved, entry]
            if workload and not reserved:
                # The first pod reserves the claim for the workload the creator named, not for itself.
                new_allocation = {**(new_allocation or {}), "reservedForAnyPod": True}
                new_reserved = [workload]
            try:
                new_status = {**status, "allocation": new_allocation, "reservedFor": new_reserved}
                obj = await client.update(_claim_path(obj, "status"), {**obj, "status": new_status})
            except ApiError as exc:
                if exc.code != 409:
                    raise
                obj = await client.get(_claim_path(claim))
                continue
            self.cache.assume_claim(obj)
            return obj
        raise ClaimChanged(f"claim {_claim_name(claim)}: too many conflicts")

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
        await self._event(pod, "Normal", "BindingConditionsPending", f"waiting for binding conditions for device on node {node_name}")
        deadline = asyncio.get_running_loop().time() + self.binding_timeout
        while True:
            pending = False
            for key in keys:
                claim = self.cache.claim(*key)
                if claim is None:
                    raise ClaimChanged(f"claim {'/'.join(key)} is gone")
                state = binding_state(claim)
                if isinstance(state, str):
                    raise BindingFailed(state)
                pending = pending or not state
            if not pending:
                return
            if asyncio.get_running_loop().time() >= deadline:
                raise BindingFailed("device binding timeout")
            await asyncio.sleep(BINDING_POLL)

    async def _event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        try:
            await record_event(self.cache.client, {"apiVersion": "v1", "kind": "Pod", **pod}, reason, message, type_, component=self.cache.scheduler_name)
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.info("could not record event", extra={"pod": "/".join(object_key(pod)), "error": str(exc)})

    async def _drop_reservation(self, pod: Obj, claim: Obj, group_ref: Obj | None = None) -> None:
        """Undo: remove the pod (or its group, when no other pod of the group is placed) from
        reservedFor; deallocate when nobody else reserves the claim."""
        client = self.cache.client
        pod_uid = meta(pod).get("uid", "")
        if group_ref is not None:
            groups = self.cache.groups
            ns = object_key(pod)[0]
            if groups is None or groups.placed_count(ns, group_ref.get("name", ""), self.cache.is_binding) > 0:
                return
            pod_uid = group_ref.get("uid", "")
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            try:
                obj = await client.get(_claim_path(claim))
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
                written = await client.update(_claim_path(obj, "status"), {**obj, "status": status})
            except ApiError as exc:
                if exc.code == 409:
                    continue
                raise
            self.cache.assume_claim(written)
            return

    # --- PostFilter ---

    def post_filter(self, pod: Obj, failure: ScheduleFailure) -> tuple[Status | None, Coroutine[Any, Any, None] | None]:
        """When no node fits: what to free (upstream's DynamicResources PostFilter, before
        DefaultPreemption). Returns the status for the pod's message (None when there is nothing
        to free) and the writes, which the caller runs in the background; after deleting a stale
        special claim they put the pod back in the scheduling queue, to be tried afresh."""
        pod_uid = meta(pod).get("uid", "")
        stale = [c for c in failure.pinning_claims if reserved_uids(c) <= {pod_uid}]
        special = failure.stale_extended_claim
        if not stale and special is None:
            return None, None

        async def free() -> None:
            for claim in stale:
                log.info("deallocating claim that pins an unschedulable pod", extra={"claim": _claim_name(claim), "pod": "/".join(object_key(pod))})
                await self._deallocate(claim)
            if special is not None:
                log.info("deleting stale claim for extended resources", extra={"pod": "/".join(object_key(pod)), "claim": _claim_name(special)})
                await self.delete_special_claim(special)
                if self.cache.pods.get(*object_key(pod)) is not None:
                    self.cache.queue.retry(object_key(pod))

        return Status.unschedulable(REASON_DEALLOCATED if stale else REASON_DELETED, plugin=NAME), free()

    async def _deallocate(self, claim: Obj) -> None:
        client = self.cache.client
        with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
            obj = await client.get(_claim_path(claim))
            status = {k: v for k, v in (obj.get("status") or {}).items() if k not in ("allocation", "reservedFor", "devices")}
            written = await client.update(_claim_path(obj, "status"), {**obj, "status": status})
            self.cache.assume_claim(written)

    async def delete_special_claim(self, claim: Obj) -> None:
        """Delete a special claim this scheduler created (its finalizer first, so it goes at once)."""
        client = self.cache.client
        with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
            obj = await client.get(_claim_path(claim))
            if meta(obj).get("uid") != meta(claim).get("uid"):
                return
            finalizers = list(meta(obj).get("finalizers") or [])
            if DELETE_PROTECTION_FINALIZER in finalizers:
                finalizers.remove(DELETE_PROTECTION_FINALIZER)
                obj = await client.update(_claim_path(obj), {**obj, "metadata": {**meta(obj), "finalizers": finalizers}})
            await client.delete(_claim_path(obj), preconditions={"uid": meta(obj).get("uid", "")}, missing_ok=True)


__all__ = [
    "BINDING",
    "DEFAULT_BINDING_TIMEOUT",
    "DELETE_PROTECTION_FINALIZER",
    "PLACEMENT",
    "REASON_DEALLOCATED",
    "REASON_DELETED",
    "ClaimBinding",
    "DynamicResourcesBinding",
    "binding_state",
    "has_binding_conditions",
    "reserved_uids",
]
