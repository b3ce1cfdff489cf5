"""DynamicResources: the pod's ResourceClaims (upstream's DynamicResources plugin).

* *PreEnqueue* (:meth:`DynamicResources.pre_enqueue`): resolve the pod's claims (template claims
  via ``pod.status.resourceClaimStatuses``, PodGroup claims via the group). A claim that does not
  exist yet, or that another pod is allocating right now, makes the pod wait (without retries)
  until that claim shows up or changes.
* *PreFilter*: the node selectors of the claims already allocated, the extended resources some
  DeviceClass serves with devices, a special claim an earlier attempt left behind, and one
  :class:`~schedulers.allocator.Allocator` for the cycle when something is to be allocated.
* *Filter*: allocated claims must be available on the node; the unallocated ones (plus the
  special claim on nodes that do not advertise the extended resources) are allocated there,
  against the devices other preemptors hold on it too; with DRANodeAllocatableResources the node
  must declare the feature and have room for what the devices charge.
* *Score*: the cycle's node order (:meth:`DynamicResources.node_order`): fewest free devices left
  after the allocation (packs devices, so big requests still find empty nodes); pods without claims
  to allocate go by the node's pod count instead (spread).
* *Reserve*, *Unreserve*, *PreBind* and *PostFilter*: the claim writes and what undoes them, in
  :mod:`schedulers.plugins.dynamicresources_binding` (the class inherits them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from kube.apitypes import Pod, PodResourceClaim
from kube.dra import podgroups
from kube.dra.pods import Resources, pod_priority, pod_requests
from kube.features import Gate
from kube.informer import object_key
from kube.labels import node_selector_matches
from kube.objects import Obj
from schedulers.allocator import (
    CANNOT_ALLOCATE,
    Allocated,
    AllocatedState,
    AllocationError,
    Allocator,
    Unschedulable,
    has_node_allocatable_mapping,
    node_allocatable_claim_status,
)
from schedulers.cache import Key, SchedulerCache, is_pod_reference, meta
from schedulers.extended import STALE_CLAIM, SpecialClaim, extended_requests, names_extended_resources, needed_on_node, special_claim
from schedulers.framework import SKIP, CycleState, ExplainContext, Placement, Reason, Status, WaitForClaims
from schedulers.plugins.dynamicresources_binding import NAME, PLACEMENT, DynamicResourcesBinding
from schedulers.plugins.noderesources import resources_may_free
from schedulers.podgroups import wait_key

log = logging.getLogger("scheduler")

REASON_CLAIM_NOT_ON_NODE = "resourceclaim not available on the node"
NODE_ALLOCATABLE_FEATURE = Gate.DRANodeAllocatableResources
REASON_FEATURE_NOT_DECLARED = f"node(s) did not declare the {NODE_ALLOCATABLE_FEATURE} feature"
DEFAULT_FILTER_TIMEOUT = 10.0  # upstream's DynamicResources filterTimeout
CLAIM_ON_OTHER_NODE = "ClaimAllocatedElsewhere"  # an explanation's reason kind

_NOT_ON_NODE = Status.unresolvable(REASON_CLAIM_NOT_ON_NODE, plugin=NAME)
_STALE = Status.unresolvable(STALE_CLAIM, plugin=NAME)


class PodClaims:
    """The pod's claims split into allocated (with node selectors) and to-be-allocated ones."""

    __slots__ = ("allocated", "claims", "entry_names", "gang", "group_refs", "unallocated")

    def __init__(self) -> None:
        self.claims: list[Obj] = []
        self.allocated: list[Obj] = []
        self.unallocated: list[Obj] = []
        self.entry_names: dict[str, str] = {}  # claim uid -> the pod's claim entry name
        self.group_refs: dict[str, Obj] = {}  # claim uid -> PodGroup reference (group claims)
        self.gang: tuple[str, str, int] | None = None


class DRAState:
    """What PreFilter worked out for the cycle: the claims, the node selectors of the allocated
    ones, the extended resources devices serve, and the cycle's allocator."""

    __slots__ = ("_special", "allocator", "claims", "extended", "selectors", "stale")

    def __init__(self, claims: PodClaims) -> None:
        self.claims = claims
        self.selectors: list[Any] = []  # node selectors of the pod's allocated claims
        self.extended: dict[str, int] = {}  # extended resources some class serves with devices
        self.allocator: Allocator | None = None
        self.stale: Obj | None = None  # a special claim an earlier attempt left behind
        self._special: dict[frozenset[tuple[str, int]], tuple[list[Obj], SpecialClaim]] = {}

    def claims_for(self, pod: Obj, allocatable: Resources, mapping: Mapping[str, str]) -> tuple[list[Obj], SpecialClaim | None]:
        """The claims to allocate on a node with this allocatable: the unallocated ones, plus the
        special claim for the extended resources the node does not advertise (one list object per
        distinct need, so the allocator's per-list signature is worked out once)."""
        needed = needed_on_node(self.extended, allocatable) if self.extended else {}
        if not needed:
            return self.claims.unallocated, None
        key = frozenset(needed.items())
        known = self._special.get(key)
        if known is None:
            special = special_claim(pod, needed, mapping)
            known = self._special[key] = ([*self.claims.unallocated, special.claim], special)
        return known


class NodeResult:
    """What the filter worked out for a node that fits: the allocation (of the unallocated claims,
    then the special claim if any), and the pod's node-allocatable claim statuses.

    It holds no claim objects, so a what-if may reuse a node's result for the next copy of a pod."""

    __slots__ = ("outcome", "special", "statuses")

    def __init__(self, outcome: Allocated | None, special: SpecialClaim | None, statuses: list[Obj]) -> None:
        self.outcome = outcome
        self.special = special
        self.statuses = statuses


# What the filter leaves for a node that fits: the allocation alone (the common case, nothing
# else to carry), a NodeResult when a special claim or node-allocatable statuses come with it, or
# None when nothing was allocated there.
NodeOutcome = NodeResult | Allocated | None


def outcome_parts(result: NodeOutcome) -> tuple[Allocated | None, SpecialClaim | None, list[Obj]]:
    """(allocation, special claim, node-allocatable statuses) of a node's outcome."""
    if result is None:
        return None, None, []
    if isinstance(result, Allocated):
        return result, None, []
    return result.outcome, result.special, result.statuses


def dra_state(state: CycleState) -> DRAState:
    """This plugin's PreEnqueue/PreFilter result."""
    dra: DRAState = state.read(NAME)
    return dra


def _claim_containers(pod: Mapping[str, Any], entry_name: str) -> list[str]:
    """Names of the pod's containers (init first) whose resources.claims name this pod claim entry."""
    spec = pod.get("spec") or {}
    return [
        c.get("name", "")
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        if any(r.get("name") == entry_name for r in (c.get("resources") or {}).get("claims") or [])
    ]


def _requests_with(pod: Obj, statuses: list[Obj]) -> Resources:
    """The pod's requests once ``statuses`` are its node-allocatable claim statuses (the one shared rule)."""
    return pod_requests({**pod, "status": {**(pod.get("status") or {}), "nodeAllocatableResourceClaimStatuses": statuses}})


class DynamicResources(DynamicResourcesBinding):
    """The plugin; see the module docstring. ``filter_timeout`` bounds one node's device search,
    ``binding_timeout`` the wait for the devices' binding conditions."""

    name = NAME
    not_on_node = _NOT_ON_NODE  # the status of a node an allocated claim of the pod is not available on

    def __init__(self, cache: SchedulerCache, filter_timeout: float | None = DEFAULT_FILTER_TIMEOUT) -> None:
        self.cache = cache
        self.features = cache.features
        self.filter_timeout = filter_timeout
        self._index = cache.index
        self._node_pods = cache.node_pods
        self._nominated_on = cache.nominated_on  # the cache's own dict, kept current by it
        self._node_allocatable = self.features.node_allocatable_resources
        self._statuses: dict[str, Status] = {}

    def allocator(self, state: AllocatedState | None = None) -> Allocator:
        """An allocator against the cache's allocated state, or against ``state`` (a what-if, not cached)."""
        return Allocator(
            self._index,
            state if state is not None else self.cache.allocated_state(),
            self.features,
            namespace_labels=self.cache.namespace_labels,
            timeout=self.filter_timeout,
            cache=self.cache.search_cache if state is None else None,
        )

    # --- PreEnqueue ---

    def pre_enqueue(self, state: CycleState, pod: Obj) -> WaitForClaims | Status | None:
        """Resolve the pod's claims into ``state``; what to wait for; or why no node can take it."""
        resolved = self.resolve_claims(pod)
        if isinstance(resolved, (WaitForClaims, str)):
            return Status.unresolvable(resolved, plugin=NAME) if isinstance(resolved, str) else resolved
        state.write(NAME, DRAState(resolved))
        return None

    def resolve_claims(self, pod: Obj) -> PodClaims | WaitForClaims | str:
        """The pod's claims, a reason to wait for some of them, or an unschedulable message."""
        ns, _ = object_key(pod)
        pod_uid = meta(pod).get("uid", "")
        typed = cast(Pod, pod)  # the informer's JSON, typed from here on (kube/apitypes.pyi)
        statuses = {s.get("name"): s for s in (typed.get("status") or {}).get("resourceClaimStatuses") or []}
        out = PodClaims()
        waiting: list[Key] = []
        why = ""
        group = self._pod_group(pod, out)
        if isinstance(group, WaitForClaims):
            return group
        for entry in (typed.get("spec") or {}).get("resourceClaims") or []:
            if group is not None and self.features.workload_resource_claims:
                group_claim = podgroups.matching_group_claim(entry, group)
                if group_claim is not None:
                    outcome = self._group_claim(pod, entry, group, group_claim, out)
                    if isinstance(outcome, str):
                        return outcome
                    if outcome is not None:
                        waiting += outcome.claims
                        why = outcome.why
                    continue
            name = entry.get("resourceClaimName")
            template = not name and bool(entry.get("resourceClaimTemplateName"))
            if template:
                status = statuses.get(entry.get("name"))
                if status is None:
                    # The controller has not created the claim yet; the pod update will requeue us.
                    waiting.append((ns, f"<pod {pod_uid} entry {entry.get('name')}>"))
                    why = f"waiting for resource claim of entry {entry.get('name')}"
                    continue
                name = status.get("resourceClaimName")
                if not name:
                    continue  # intentionally no claim
            if not name:
                continue
            claim = self.cache.claim(ns, name)
            if claim is None:
                waiting.append((ns, name))
                why = f"waiting for resourceclaim {name!r} to be created"
                continue
            claim_meta = meta(claim)
            if claim_meta.get("deletionTimestamp"):
                return f'resourceclaim "{name}" is being deleted'
            if template and not any(o.get("uid") == pod_uid and o.get("controller") for o in claim_meta.get("ownerReferences") or []):
                return f'ResourceClaim {ns}/{name} was not created for pod {meta(pod).get("name")} (pod is not owner)'
            uid = claim_meta.get("uid", "")
            allocating = self.cache.allocating_pod(uid)
            if allocating is not None and allocating != pod_uid:
                # Another pod's allocation of this claim is being written; use it once it lands.
                waiting.append((ns, name))
                why = f"resource claim {ns}/{name} is in the process of being allocated"
                continue
            out.claims.append(claim)
            out.entry_names[uid] = entry.get("name", "")
            if (claim.get("status") or {}).get("allocation"):
                out.allocated.append(claim)
            else:
                out.unallocated.append(claim)
        if waiting:
            return WaitForClaims(waiting, why)
        return out

    # --- PodGroups (GenericWorkload) and their claims (KEP-5729, DRAWorkloadResourceClaims) ---

    def _pod_group(self, pod: Obj, out: PodClaims) -> Obj | WaitForClaims | None:
        """The pod's PodGroup; the pod waits until the group exists and, for a gang, has its minimum of pods."""
        name = podgroups.pod_group_name(pod)
        groups = self.cache.groups
        if name is None or groups is None:
            return None
        ns, _ = object_key(pod)
        group = groups.group(ns, name)
        if group is None:
            return WaitForClaims([wait_key(ns, name)], f'waiting for PodGroup "{name}" to be created')
        need = podgroups.gang_min_count(group)
        if need:
            have = len(groups.member_uids(ns, name))
            if have < need:
                return WaitForClaims([wait_key(ns, name)], f"waiting for minCount pods of PodGroup {name!r}: {have} of {need}")
            out.gang = (ns, name, need)
        return group

    def _group_claim(self, pod: Obj, entry: PodResourceClaim, group: Obj, group_claim: Obj, out: PodClaims) -> WaitForClaims | str | None:
        """Resolve a pod claim entry that is its group's claim: None when resolved (added to ``out``),
        what to wait for, or an unschedulable message."""
        ns, _ = object_key(pod)
        group_name = meta(group).get("name", "")
        name = podgroups.group_claim_name(group_claim, group)
        if name is None:
            return WaitForClaims([wait_key(ns, group_name)], f"waiting for the claim of PodGroup {group_name!r} entry {entry.get('name')!r}")
        if group_claim.get("resourceClaimTemplateName"):
            # As for the pod's own template claims, the pod's status must name the claim first (the
            # kubelet finds it there); the pod's update brings it back.
            recorded = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
            if recorded.get(entry.get("name")) != name:
                return WaitForClaims([(ns, f"<pod {meta(pod).get('uid', '')} entry {entry.get('name')}>")], f"waiting for resource claim of entry {entry.get('name')}")
        claim = self.cache.claim(ns, name)
        if claim is None:
            return WaitForClaims([(ns, name)], f"waiting for resourceclaim {name!r} to be created")
        claim_meta = meta(claim)
        if claim_meta.get("deletionTimestamp"):
            return f'resourceclaim "{name}" is being deleted'
        if group_claim.get("resourceClaimTemplateName") and not podgroups.owned_by_pod_group(claim, pod):
            return f"ResourceClaim {ns}/{name} was not created for PodGroup {group_name} (PodGroup is not owner)"
        uid = claim_meta.get("uid", "")
        allocating = self.cache.allocating_pod(uid)
        groups = self.cache.groups
        if allocating is not None and allocating != meta(pod).get("uid", ""):
            if groups is None or allocating not in groups.member_uids(ns, group_name):
                return WaitForClaims([(ns, name)], f"resource claim {ns}/{name} is in the process of being allocated")
            # Another pod of the group is writing the allocation: the group shares it.
            claim = {**claim, "status": {**(claim.get("status") or {}), "allocation": self.cache.effective_allocation(uid)}}
        out.claims.append(claim)
        out.entry_names[uid] = entry.get("name", "")
        out.group_refs[uid] = podgroups.group_reference(group)
        if (claim.get("status") or {}).get("allocation"):
            out.allocated.append(claim)
        else:
            out.unallocated.append(claim)
        return None

    # --- PreFilter ---

    def pre_filter(self, state: CycleState, pod: Obj) -> Status | None:
        dra = dra_state(state)
        resolved = dra.claims
        for claim in resolved.unallocated:
            unusable = self._unusable_request(claim)
            if unusable is not None:
                return Status.unresolvable(unusable, plugin=NAME)
        dra.selectors = [(c["status"]["allocation"].get("nodeSelector")) for c in resolved.allocated]
        if self.features.extended_resource and names_extended_resources(pod):
            dra.extended = extended_requests(pod, self.cache.resource_classes())
            if dra.extended:
                dra.stale = self.cache.special_claim_of(meta(pod).get("uid", ""))
        if resolved.unallocated or dra.extended:
            dra.allocator = self.allocator()
        if self.features.node_allocatable_resources:
            shared = self._shared_mapping_claim(pod, resolved)
            if shared is not None:
                return Status.unresolvable(shared, plugin=NAME)
        node_allocatable = self.features.node_allocatable_resources and resolved.claims
        if not dra.selectors and dra.allocator is None and not node_allocatable and dra.stale is None:
            return SKIP
        return None

    def _unusable_request(self, claim: Obj) -> str | None:
        """Upstream's PreFilter checks of a claim to allocate: every request's class exists (the
        pod waits, Unschedulable, until a DeviceClass event brings it back), subrequests only
        with DRAPrioritizedList, a known request type. What no node can serve otherwise is the
        allocator's to report (an Error)."""
        ref = "/".join(object_key(claim))
        classes = self._index.classes
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            name = request.get("name", "")
            if request.get("exactly") is not None:
                wanted = [(name, request["exactly"].get("deviceClassName") or "")]
            elif request.get("firstAvailable"):
                if not self.features.prioritized_list:
                    return f"resource claim {ref}, request {name}: has subrequests, but the {Gate.DRAPrioritizedList} feature is disabled"
                wanted = [(f"{name}/{sub.get('name', '')}", sub.get("deviceClassName") or "") for sub in request["firstAvailable"]]
            else:
                return f"resource claim {ref}, request {name}: unknown request type"
            for request_name, class_name in wanted:
                if class_name and class_name not in classes:
                    return f"request {request_name}: device class {class_name} does not exist"
        return None

    # --- Filter ---

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        dra: DRAState = state.data[NAME]
        if dra.stale is not None:
            # Upstream's Filter for a special claim from an earlier attempt: PostFilter deletes it.
            return _STALE
        for selector in dra.selectors:
            if not node_selector_matches(selector, node):
                return _NOT_ON_NODE
        allocator = dra.allocator
        outcome: Allocated | None = None
        special: SpecialClaim | None = None
        if allocator is not None:
            if dra.extended:
                claims, special = dra.claims_for(pod, self.cache.allocatable(node), self.cache.resource_classes())
            else:
                claims = dra.claims.unallocated
            if claims:
                nominated = self._nominated_on
                if nominated and node["metadata"]["name"] in nominated:
                    # Other preemptors' promised devices on this node count as taken.
                    held = self.cache.nominated_for(node["metadata"]["name"], meta(pod).get("uid", ""), pod_priority(pod))
                    if any(n.allocations for n in held):
                        allocator = self.allocator(self.cache.allocated_state().changed(add=[a for n in held for a in n.allocations]))
                try:
                    found = allocator.allocate(node, claims)
                except AllocationError as exc:
                    return Status.as_error(exc, plugin=NAME)
                if type(found) is not Allocated:
                    assert isinstance(found, Unschedulable)
                    # Upstream's per-node reason is the short form; the details go to the debug log.
                    if log.isEnabledFor(logging.DEBUG):
                        log.debug("claims do not fit", extra={"pod": "/".join(object_key(pod)), "node": node["metadata"]["name"], "why": found.message})
                    return self._status(found.reason)
                outcome = found
        if self._node_allocatable and dra.claims.claims:
            statuses = self._node_allocatable_statuses(pod, dra.claims, outcome)
            short = self._node_allocatable_misfit(node, pod, statuses) if statuses else None
            if short is not None:
                return self._status(short)
            if statuses:
                state.result = NodeResult(outcome, special, statuses)
                return None
        # Always set: the cycle reads it for every node this filter, the last, lets through.
        state.result = NodeResult(outcome, special, []) if special is not None else outcome
        return None

    def node_filter(self, state: CycleState) -> Callable[[CycleState, Obj, Obj], Status | None]:
        """What the cycle calls per node this attempt: :meth:`filter`, or, for the common pod whose
        claims are all to be allocated (nothing allocated before, no extended resources, no
        leftover special claim, node allocatable resources off), the same check with only the
        allocation in it."""
        dra: DRAState = state.data[NAME]
        if dra.stale is None and not dra.selectors and not dra.extended and not self._node_allocatable and dra.allocator is not None and dra.claims.unallocated:
            return self._allocate_only
        return self.filter

    def _allocate_only(self, state: CycleState, pod: Obj, node: Obj) -> Status | None:
        """:meth:`filter` for a pod whose claims are only to be allocated (see :meth:`node_filter`)."""
        dra: DRAState = state.data[NAME]
        allocator = dra.allocator
        assert allocator is not None
        nominated = self._nominated_on
        if nominated and node["metadata"]["name"] in nominated:
            return self.filter(state, pod, node)
        try:
            found = allocator.allocate(node, dra.claims.unallocated)
        except AllocationError as exc:
            return Status.as_error(exc, plugin=NAME)
        if type(found) is not Allocated:
            assert isinstance(found, Unschedulable)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("claims do not fit", extra={"pod": "/".join(object_key(pod)), "node": node["metadata"]["name"], "why": found.message})
            return self._status(found.reason)
        state.result = found
        return None

    def _status(self, reason: str) -> Status:
        """The status of a per-node reason: devices (with DRAPreemption) and node resources may be
        freed by preemption; upstream v1.37 marks device shortages unresolvable otherwise."""
        status = self._statuses.get(reason)
        if status is None:
            may_free = resources_may_free(reason) or (self.features.dra_preemption and reason == CANNOT_ALLOCATE)
            status = Status.unschedulable(reason, plugin=NAME) if may_free else Status.unresolvable(reason, plugin=NAME)
            self._statuses[reason] = status
        return status

    def explain(self, state: CycleState, pod: Obj, node: Obj, context: ExplainContext) -> list[Reason]:
        """Allocated claims held by other nodes; when nothing else keeps the node out, the device reasons."""
        dra = dra_state(state)
        reasons = [
            Reason(CLAIM_ON_OTHER_NODE, REASON_CLAIM_NOT_ON_NODE, "/".join(object_key(claim)), details=["the claim is allocated with devices of other nodes"])
            for claim in dra.claims.allocated
            if not node_selector_matches((claim.get("status") or {}).get("allocation", {}).get("nodeSelector"), node)
        ]
        if reasons or context.earlier or context.explain_devices is None or dra.allocator is None:
            return reasons
        needed = needed_on_node(dra.extended, self.cache.allocatable(node)) if dra.extended else {}
        mapping = self.cache.resource_classes() if needed else {}
        to_allocate = [*dra.claims.unallocated, special_claim(pod, needed, mapping).claim] if needed else dra.claims.unallocated
        return context.explain_devices(node, to_allocate) if to_allocate else []

    # --- Score: the cycle's node order ---

    def node_order(self, state: CycleState, node: Obj, result: NodeOutcome) -> int:
        """Free devices left on the node after this allocation (lower is better: pack devices).

        Pods without claims to allocate spread instead: the score is the node's pod count
        (upstream's default LeastAllocated leans the same way), so they do not pile onto the first
        node by name and block its devices with the pods limit.
        """
        if result is None:
            return self._node_pods.get(node["metadata"]["name"], 0)
        outcome = result if type(result) is Allocated else result.outcome  # type: ignore[union-attr]
        if outcome is None:
            return self._node_pods.get(node["metadata"]["name"], 0)
        if outcome.free_left is not None:
            return outcome.free_left
        allocator: Allocator = state.data[NAME].allocator
        return len(allocator.free_candidates(self._index.node_view(node))) - outcome.exclusive_devices

    # --- the placement ---

    def placement(self, state: CycleState, pod: Obj, node: str, result: NodeOutcome, requests: Resources) -> Placement:
        """What the binder writes for the pod on ``node`` (``requests``: what the pod charges without claims)."""
        dra: DRAState | None = state.data.get(NAME)
        if dra is None:
            placement = Placement(node=node, claims=[], allocations={}, requests=requests, statuses=[], state=state)
            state.write(PLACEMENT, placement)
            return placement
        resolved = dra.claims
        outcome, special, statuses = outcome_parts(result)
        allocations = outcome.allocations if outcome is not None else []
        allocated_claims = [*resolved.unallocated, special.claim] if special is not None else resolved.unallocated if outcome is not None else []
        placement = Placement(
            node=node,
            claims=[*resolved.claims, special.claim] if special is not None else resolved.claims,
            allocations=dict(zip((meta(c).get("uid", "") for c in allocated_claims), allocations, strict=True)),
            requests=_requests_with(pod, statuses) if statuses else requests,
            statuses=statuses,
            group_refs=resolved.group_refs,
            gang=resolved.gang,
            extended=special,
            state=state,
        )
        state.write(PLACEMENT, placement)  # what Reserve takes
        return placement

    # --- KEP-5517 node allocatable resources (DRANodeAllocatableResources) ---

    def _shared_mapping_claim(self, pod: Obj, claims: PodClaims) -> str | None:
        """Why the pod may not use an allocated claim: its devices map capacity into node
        allocatable, which is charged once, so such a claim serves one pod only."""
        pod_uid = meta(pod).get("uid", "")
        for claim in claims.allocated:
            others = [r for r in (claim.get("status") or {}).get("reservedFor") or [] if is_pod_reference(r) and r.get("uid") != pod_uid]
            if others and has_node_allocatable_mapping(claim["status"]["allocation"], self._index):
                return f"resourceclaim {meta(claim).get('name')} maps node allocatable resources and is already in use by pod {others[0].get('name')}"
        return None

    def _node_allocatable_statuses(self, pod: Obj, claims: PodClaims, outcome: Allocated | None) -> list[Obj]:
        """The pod's ``status.nodeAllocatableResourceClaimStatuses`` for this node's allocation."""
        new = dict(zip((meta(c).get("uid", "") for c in claims.unallocated), outcome.allocations, strict=True)) if outcome else {}
        statuses = []
        for claim in claims.claims:
            uid = meta(claim).get("uid", "")
            allocation = new.get(uid) or (claim.get("status") or {}).get("allocation")
            containers = _claim_containers(pod, claims.entry_names.get(uid, ""))
            entry = node_allocatable_claim_status(meta(claim).get("name", ""), allocation, self._index, containers)
            if entry is not None:
                statuses.append(entry)
        return statuses

    def _node_allocatable_misfit(self, node: Obj, pod: Obj, statuses: list[Obj]) -> str | None:
        """Nodes must declare the feature, and fit the pod's requests plus what its claims charge."""
        if NODE_ALLOCATABLE_FEATURE not in ((node.get("status") or {}).get("declaredFeatures") or []):
            return REASON_FEATURE_NOT_DECLARED
        short = self.cache.insufficient(meta(node).get("name", ""), node, _requests_with(pod, statuses))
        return short[0] if short else None
