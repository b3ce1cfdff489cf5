"""The scheduling cycle: which node a pod goes to, or why none fits, from the cache alone.

Like upstream's framework with the DynamicResources plugin:

1. *PreEnqueue/PreFilter*: resolve the pod's claims (template claims via
   ``pod.status.resourceClaimStatuses``). A claim that does not exist yet, or that another pod
   is allocating right now, makes the pod wait (without retries) until that claim shows up or
   changes.
2. *Filter*: nodes in a rotating order (upstream's ``nextStartNodeIndex``), checking node
   selector/affinity, taints, cpu/memory/pods fit, that allocated claims' node selectors match,
   and finally the allocator for the unallocated claims. The search stops after
   ``nodes_to_find`` feasible nodes (100, upstream's minimum for percentageOfNodesToScore).
   Work that repeats across cycles is kept: a node's successful device search for the same
   claim specs (``SearchCache``, valid while that node's pools, the classes and the allocated
   state are unchanged) and its cpu/memory/pods verdict for the same requests.
3. *Score*: fewest free devices left on the node after the allocation (packs devices, so big
   requests still find empty nodes); ties by node name. Pods without claims to allocate score by
   the node's pod count instead (spread).

The cycle writes nothing and changes no cache state: it returns a :class:`Placement`, a
:class:`ScheduleFailure` or :class:`WaitForClaims`, and the scheduler hands that on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube import podgroups
from kube.informer import object_key
from kube.labels import node_selector_matches
from kube.pods import Resources, add_resources, pod_priority, pod_requests
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
from schedulers.cache import Key, Nomination, Obj, RequestsKey, SchedulerCache, is_pod_reference, meta
from schedulers.extended import STALE_CLAIM, SpecialClaim, extended_requests, needed_on_node, served_by_devices, special_claim
from schedulers.plugins.noderesources import (
    REASON_AFFINITY,
    fit_error_message,
    insufficient,
    matches_node_selector_and_affinity,
    resources_may_free,
    untolerated_taint,
)
from schedulers.podgroups import wait_key

log = logging.getLogger("scheduler")

REASON_CLAIM_NOT_ON_NODE = "resourceclaim not available on the node"
DEFAULT_NODES_TO_FIND = 100
DEFAULT_FILTER_TIMEOUT = 10.0  # upstream's DynamicResources filterTimeout
NODE_ALLOCATABLE_FEATURE = "DRANodeAllocatableResources"
REASON_FEATURE_NOT_DECLARED = f"node(s) did not declare the {NODE_ALLOCATABLE_FEATURE} feature"


@dataclass
class Placement:
    """The chosen node, and what the binder writes to bind the pod there."""

    node: str
    claims: list[Obj]  # every claim of the pod, in the order of its spec
    allocations: dict[str, Mapping[str, Any]]  # claim uid -> new allocation, for claims allocated in this cycle
    requests: Resources  # what the pod charges the node
    statuses: list[Obj]  # the pod's status.nodeAllocatableResourceClaimStatuses (KEP-5517), may be empty
    # KEP-5729: claim uid -> the PodGroup reference the claim is reserved for instead of the pod.
    group_refs: dict[str, Obj] = field(default_factory=dict)
    # (namespace, group, minCount) of a gang pod: it waits at Permit until its gang is placed.
    gang: tuple[str, str, int] | None = None
    # Extended resources served by devices: the special claim to create (in ``claims``, allocated in
    # ``allocations`` under its stand-in uid) and the pod's request mappings.
    extended: SpecialClaim | None = None


@dataclass
class ScheduleFailure:
    """No node fits; ``message`` is the PodScheduled condition's and the event's text (as it reads
    when preemption cannot help; preemption may replace its last part)."""

    message: str
    reason: str = "Unschedulable"
    # Allocated claims that pin the pod to nodes that do not fit (upstream's PostFilter frees them).
    pinning_claims: list[Obj] = field(default_factory=list)
    # The filter's part of the message (upstream's FitError without the PostFilter's text).
    fit_message: str = ""
    # Nodes that failed only for reasons removing pods can fix (upstream's Unschedulable, not
    # UnschedulableAndUnresolvable): where preemption looks.
    potential: list[str] = field(default_factory=list)
    # Every node's reason, for the preemption message of the nodes it could not use.
    node_reasons: dict[str, str] = field(default_factory=dict)
    # A special claim an earlier attempt left behind: deleted, then the pod is tried afresh.
    stale_extended_claim: Obj | None = None


@dataclass
class WaitForClaims:
    """The pod waits (without retries) for these claims to appear or change."""

    claims: list[Key]
    why: str


@dataclass
class PodClaims:
    """The pod's claims split into allocated (with node selectors) and to-be-allocated ones."""

    claims: list[Obj] = field(default_factory=list)
    allocated: list[Obj] = field(default_factory=list)
    unallocated: list[Obj] = field(default_factory=list)
    entry_names: dict[str, str] = field(default_factory=dict)  # claim uid -> the pod's claim entry name
    group_refs: dict[str, Obj] = field(default_factory=dict)  # claim uid -> PodGroup reference (group claims)
    gang: tuple[str, str, int] | None = None


class _PodFit:
    """What one cycle's node filters need from the pod, worked out once instead of per node."""

    __slots__ = ("constrained", "key", "priority", "requests", "uid")

    def __init__(self, pod: Obj, requests: Resources) -> None:
        spec = pod.get("spec") or {}
        self.requests = requests
        self.uid: str = meta(pod).get("uid", "")
        self.priority = pod_priority(pod)
        # Exact integers, so comparing with a cached key costs no Fraction arithmetic.
        self.key: RequestsKey = tuple(sorted((k, v.numerator, v.denominator) for k, v in requests.items()))
        self.constrained = bool(spec.get("nodeSelector")) or bool((spec.get("affinity") or {}).get("nodeAffinity"))


@dataclass
class Attempt:
    """What a cycle works out about the pod before looking at nodes (preemption reuses it)."""

    claims: PodClaims
    fit: _PodFit
    selectors: list[Any]  # node selectors of the pod's allocated claims
    extended: dict[str, int] = field(default_factory=dict)  # extended resources some class serves with devices
    _special: dict[frozenset[tuple[str, int]], tuple[list[Obj], SpecialClaim]] = field(default_factory=dict)

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


NodeVerdict = tuple[str | AllocationError | None, Allocated | None, list[Obj], SpecialClaim | None]
NodeFilter = Callable[[Obj, Obj, "_PodFit", list[Any], Allocator | None, "Attempt"], NodeVerdict]
NodeScore = Callable[[Obj, Allocator | None, Allocated | None], int]


class SchedulingCycle:
    """Filter and score the nodes for one pod at a time; see the module docstring."""

    def __init__(
        self,
        cache: SchedulerCache,
        *,
        nodes_to_find: int = DEFAULT_NODES_TO_FIND,
        filter_timeout: float | None = DEFAULT_FILTER_TIMEOUT,
    ) -> None:
        self.cache = cache
        self.features = cache.features
        self.nodes_to_find = max(1, nodes_to_find)
        self.filter_timeout = filter_timeout
        self._next_start = 0
        # What the per-node code reads, bound once: the cache's live index, pod counts and fit check.
        self._index = cache.index
        self._node_pods = cache.node_pods
        self._insufficient = cache.insufficient
        self._nominated_on = cache.nominated_on
        # The per-node checks a walk calls (replace_node_checks may put others in their place).
        self._filter: NodeFilter = self._node_filter
        self._score: NodeScore = self._node_score

    def replace_node_checks(self, node_filter: NodeFilter, node_score: NodeScore) -> tuple[NodeFilter, NodeScore]:
        """Walk the nodes of this cycle with ``node_filter`` and ``node_score`` instead of its own
        (a what-if copy that remembers verdicts between copies of a pod); returns the two they
        replace, which they may call."""
        replaced = self._filter, self._score
        self._filter, self._score = node_filter, node_score
        return replaced

    def walk_start(self, count: int) -> int:
        """Where the next walk over ``count`` nodes starts (the rotating start, in node order)."""
        return self._next_start % count if count else 0

    def walked(self, start: int, visited: int, count: int) -> None:
        """A walk from ``start`` visited ``visited`` of ``count`` nodes: the next one starts after them."""
        self._next_start = (start + visited) % count if count else 0

    def prepare(self, pod: Obj) -> Attempt | ScheduleFailure | WaitForClaims:
        """The pod's claims and requests, or why no node can be looked at (yet)."""
        resolved = self.resolve_claims(pod)
        if isinstance(resolved, WaitForClaims):
            return resolved
        if isinstance(resolved, str):
            return ScheduleFailure(f"0/{len(self.cache.node_names())} nodes are available: {resolved}.")
        # Claim charges are added per node (they depend on the devices chosen); entries an earlier,
        # failed attempt wrote into the pod status must not count.
        fit = _PodFit(pod, pod_requests(pod, node_allocatable=False))
        selectors = [(c["status"]["allocation"].get("nodeSelector")) for c in resolved.allocated]
        extended: dict[str, int] = {}
        if self.features.extended_resource and any("/" in name for name in fit.requests):
            extended = extended_requests(pod, self.cache.resource_classes())
            stale = self.cache.special_claim_of(fit.uid) if extended else None
            if stale is not None:
                n = len(self.cache.node_names())
                return ScheduleFailure(fit_error_message(n, {STALE_CLAIM: n}), stale_extended_claim=stale)
        return Attempt(resolved, fit, selectors, extended)

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

    def schedule(self, pod: Obj) -> Placement | ScheduleFailure | WaitForClaims:
        """One cycle: the node the pod should go to, why none fits, or which claims it waits for."""
        attempt = self.prepare(pod)
        if not isinstance(attempt, Attempt):
            return attempt
        names = self.cache.node_names()
        resolved, fit, selectors = attempt.claims, attempt.fit, attempt.selectors
        requests = fit.requests
        allocator = self.allocator() if resolved.unallocated or attempt.extended else None
        if self.features.node_allocatable_resources:
            shared = self._shared_mapping_claim(pod, resolved)
            if shared is not None:
                return ScheduleFailure(f"0/{len(names)} nodes are available: {shared}.")
        reasons: dict[str, int] = {}
        node_reasons: dict[str, str] = {}
        best: tuple[int, str, Allocated | None, list[Obj], list[Obj], SpecialClaim | None] | None = None
        feasible = 0
        n = len(names)
        start = self.walk_start(n)
        processed = 0
        claim_mismatch = False
        get_node = self.cache.nodes.get
        for i in range(n):
            processed += 1
            name = names[(start + i) % n]
            node = get_node("", name)
            if node is None:
                continue
            reason, outcome, allocated_claims, special = self._filter(pod, node, fit, selectors, allocator, attempt)
            if isinstance(reason, AllocationError):
                # Upstream's Filter returns an Error status for a broken claim or class, which
                # aborts the cycle with reason SchedulerError. It then retries on a backoff; the
                # pod waits here for a claim, class or slice event instead, which upstream's own
                # comment names as the nicer behaviour.
                return ScheduleFailure(f'running "DynamicResources" filter plugin: {reason}', reason="SchedulerError")
            if reason is not None:
                claim_mismatch = claim_mismatch or reason == REASON_CLAIM_NOT_ON_NODE
                reasons[reason] = reasons.get(reason, 0) + 1
                node_reasons[name] = reason
                continue
            statuses: list[Obj] = []
            if self.features.node_allocatable_resources and resolved.claims:
                statuses = self._node_allocatable_statuses(pod, resolved, outcome)
                short = self._node_allocatable_misfit(node, pod, statuses) if statuses else None
                if short is not None:
                    reasons[short] = reasons.get(short, 0) + 1
                    node_reasons[name] = short
                    continue
            feasible += 1
            score = self._score(node, allocator, outcome)
            if best is None or (score, name) < (best[0], best[1]):
                best = (score, name, outcome, statuses, allocated_claims, special)
            if feasible >= self.nodes_to_find:
                break
        self.walked(start, processed, n)
        if best is None:
            return ScheduleFailure(
                fit_error_message(n, reasons),
                pinning_claims=resolved.allocated if claim_mismatch else [],
                fit_message=fit_error_message(n, reasons, preemption=False),
                potential=[name for name, reason in node_reasons.items() if self.preemption_may_help(reason)],
                node_reasons=node_reasons,
            )
        _, node_name, outcome, statuses, allocated_claims, special = best
        allocations = outcome.allocations if outcome is not None else []
        return Placement(
            node=node_name,
            claims=[*resolved.claims, special.claim] if special is not None else resolved.claims,
            allocations=dict(zip((meta(c).get("uid", "") for c in allocated_claims), allocations, strict=True)),
            requests=_requests_with(pod, statuses) if statuses else requests,
            statuses=statuses,
            group_refs=resolved.group_refs,
            gang=resolved.gang,
            extended=special,
        )

    def preemption_may_help(self, reason: str) -> bool:
        """Whether removing lower-priority pods from a node that failed for ``reason`` may make room:
        cpu, memory and pod slots, and with DRAPreemption devices (upstream v1.37's DynamicResources
        marks device shortages unresolvable, so preemption never looks at those nodes)."""
        return resources_may_free(reason) or (self.features.dra_preemption and reason == CANNOT_ALLOCATE)

    def resolve_claims(self, pod: Obj) -> PodClaims | WaitForClaims | str:
        """The pod's claims, a reason to wait for some of them, or an unschedulable message."""
        ns, _ = object_key(pod)
        pod_uid = meta(pod).get("uid", "")
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        out = PodClaims()
        waiting: list[Key] = []
        why = ""
        group = self._pod_group(pod, out)
        if isinstance(group, WaitForClaims):
            return group
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
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

    def _group_claim(self, pod: Obj, entry: Obj, group: Obj, group_claim: Obj, out: PodClaims) -> WaitForClaims | str | None:
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

    def _node_filter(
        self,
        pod: Obj,
        node: Obj,
        fit: _PodFit,
        selectors: list[Any],
        allocator: Allocator | None,
        attempt: Attempt,
    ) -> tuple[str | AllocationError | None, Allocated | None, list[Obj], SpecialClaim | None]:
        """The first reason ``node`` does not fit (or None, with the allocation result, the claims
        it is for, and the special claim among them)."""
        if fit.constrained and not matches_node_selector_and_affinity(pod, node):
            return REASON_AFFINITY, None, [], None
        node_spec = node.get("spec") or {}
        if node_spec.get("taints") or node_spec.get("unschedulable"):
            taint = untolerated_taint(pod, node)
            if taint is not None:
                return taint, None, [], None
        name = meta(node).get("name", "")
        held: list[Nomination] = self.cache.nominated_for(name, fit.uid, fit.priority) if name in self._nominated_on else []
        if held:
            # Other preemptors' promised cpu, memory, pod slots and devices on this node count as taken.
            used, count = self.cache.node_usage(name)
            for nomination in held:
                used = add_resources(dict(used), nomination.requests)
            short = insufficient(fit.requests, used, count + len(held), self.cache.allocatable(node))
            if allocator is not None and any(n.allocations for n in held):
                allocator = self.allocator(self.cache.allocated_state().changed(add=[a for n in held for a in n.allocations]))
        else:
            short = self._insufficient(name, node, fit.requests, fit.key)
        if short and attempt.extended:
            short = served_by_devices(short, attempt.extended, self.cache.allocatable(node))
        if short:
            return short[0], None, [], None
        for selector in selectors:
            if not node_selector_matches(selector, node):
                return REASON_CLAIM_NOT_ON_NODE, None, [], None
        if allocator is None:
            return None, None, [], None
        claims, special = attempt.claims_for(pod, self.cache.allocatable(node), self.cache.resource_classes()) if attempt.extended else (attempt.claims.unallocated, None)
        if not claims:
            return None, None, [], None
        try:
            outcome = allocator.allocate(node, claims)
        except AllocationError as exc:
            return exc, None, [], None
        if isinstance(outcome, Unschedulable):
            # Upstream's per-node reason is the short form; the details go to the debug log.
            if log.isEnabledFor(logging.DEBUG):
                log.debug("claims do not fit", extra={"pod": "/".join(object_key(pod)), "node": name, "why": outcome.message})
            return outcome.reason, None, [], None
        return None, outcome, claims, special

    def _node_score(self, node: Obj, allocator: Allocator | None, outcome: Allocated | None) -> int:
        """Free devices left on the node after this allocation (lower is better: pack devices).

        Pods without claims to allocate spread instead: the score is the node's pod count
        (upstream's default LeastAllocated leans the same way), so they do not pile onto the first
        node by name and block its devices with the pods limit.
        """
        if allocator is None or outcome is None:
            return self._node_pods.get(meta(node).get("name", ""), 0)
        if outcome.free_left is not None:
            return outcome.free_left
        return len(allocator.free_candidates(self._index.node_view(node))) - outcome.exclusive_devices

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
        short = self._insufficient(meta(node).get("name", ""), node, _requests_with(pod, statuses))
        return short[0] if short else None
