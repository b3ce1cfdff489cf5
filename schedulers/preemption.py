"""Preemption: upstream's DefaultPreemption PostFilter, with the device rules of KEP-5690.

When no node fits a pod, this looks for a node where removing pods of lower priority makes it
fit, and names those pods (the victims). Like upstream:

1. *Eligibility*: a pod with ``preemptionPolicy: Never`` never preempts; a pod nominated on a
   node where pods it preempted are still terminating waits for them (and, for devices, until
   their claims are deallocated) instead of preempting again.
2. *Candidates*: only nodes whose status is Unschedulable, a reason removing pods can fix (cpu,
   memory, pod slots, host ports, pod anti-affinity, a topology spread skew; devices with
   DRAPreemption). On each, every pod of lower priority is removed (the filters that read placed
   pods are asked without them, upstream's RemovePod); if the pod still does not fit, the node is out. Otherwise victims are reprieved one by one, most
   important first (higher priority, then longer running), as long as the pod still fits: what
   remains are the victims. At most 10% of the nodes (at least 100) are tried.
3. *Choice*: the node whose most important victim has the lowest priority, then the lowest
   sum of priorities, then the fewest victims, then the latest start of its most important
   victims, then the first.

Devices (KEP-5690, DRAPreemption): removing a victim releases its claims only when every pod in
their ``reservedFor`` is a victim too (a claim shared with a pod that stays keeps its devices),
nothing but pods reserves them (a claim reserved for a workload is never released), and all
their devices are local to the node. The pod's own claims are then allocated against the
devices that remain; the result is held for it (a nomination) until it is bound.

The cycle's failure says which nodes may be helped; this decides, and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube.dra.pods import Resources, add_resources, pod_priority
from schedulers.allocator import Allocated, AllocationError, Unschedulable
from schedulers.cache import Nomination, Obj, is_pod_reference, meta
from schedulers.cycle import SchedulingCycle
from schedulers.framework import NOT_HELPFUL, Code, CycleState, ScheduleFailure, Status, histogram_message
from schedulers.plugins.dynamicresources import dra_state
from schedulers.plugins.noderesources import insufficient, pod_fit, served_by_devices

log = logging.getLogger("scheduler")

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
# Ours: KEP-5690 defers further preemption while victims' claims are still allocated.
NOT_ELIGIBLE_RELEASING = "not eligible due to claims of preempted pods on the nominated node still being deallocated."
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
_INT32_OFFSET = 2**31  # makes every priority non-negative before summing, as upstream does


@dataclass
class Preempt:
    """Preempt ``victims`` on ``nomination.node``; ``message`` is the pod's FailedScheduling text."""

    victims: list[Obj]
    nomination: Nomination
    message: str


@dataclass
class NoPreemption:
    """Preemption cannot help; ``clear_nomination``: the pod's nominatedNodeName must go."""

    message: str
    clear_nomination: bool = False


@dataclass
class _Victim:
    pod: Obj
    uid: str
    requests: Resources
    priority: int
    started: str
    claims: list[Obj] = field(default_factory=list)  # its claims that have an allocation


@dataclass
class _Candidate:
    node: str
    victims: list[_Victim]  # most important first
    allocations: list[Mapping[str, Any]]
    released: set[str]


def _started(pod: Obj) -> str:
    """When the pod started (RFC 3339, compares as text): its startTime, else its creation."""
    return str((pod.get("status") or {}).get("startTime") or meta(pod).get("creationTimestamp") or "")


def terminating_by_preemption(pod: Mapping[str, Any]) -> bool:
    """Being deleted because a scheduler preempted it (upstream's podTerminatingByPreemption)."""
    if not meta(pod).get("deletionTimestamp"):
        return False
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == REASON_PREEMPTION_BY_SCHEDULER
    return False


def _node_local(allocation: Mapping[str, Any], node: str) -> bool:
    """Whether every device of the allocation is on ``node`` (its selector names exactly that node)."""
    terms = ((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms")) or []
    if len(terms) != 1 or terms[0].get("matchExpressions"):
        return False
    fields = terms[0].get("matchFields") or []
    return len(fields) == 1 and fields[0].get("key") == "metadata.name" and fields[0].get("operator") == "In" and fields[0].get("values") == [node]


class Preemption:
    """Decides preemptions for pods the cycle could not place; see the module docstring."""

    def __init__(self, cycle: SchedulingCycle) -> None:
        self.cycle = cycle
        self.cache = cycle.cache
        self._offset = 0

    def post_filter(self, pod: Obj, failure: ScheduleFailure) -> Preempt | NoPreemption:
        """What to do for ``pod``, which ``failure`` says no node fits."""
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        total = len(self.cache.node_names())
        if spec.get("preemptionPolicy") == "Never":
            return NoPreemption(f"{failure.fit_message} preemption: {NOT_ELIGIBLE_NEVER}")
        nominated = status.get("nominatedNodeName") or ""
        if nominated and (nominated not in failure.node_statuses or failure.node_statuses[nominated].code == Code.UNSCHEDULABLE):
            waiting = self._still_settling(pod, nominated)
            if waiting is not None:
                return NoPreemption(f"{failure.fit_message} preemption: {waiting}")
        attempt = self.cycle.prepare(pod)
        if not failure.potential or not isinstance(attempt, CycleState):
            return NoPreemption(self._fit_error(failure, total, {}), clear_nomination=bool(nominated))
        candidates, statuses = self._dry_run(pod, attempt, failure.potential)
        if not candidates:
            return NoPreemption(self._fit_error(failure, total, statuses), clear_nomination=bool(nominated))
        best = _pick_one(candidates)
        nomination = Nomination(
            pod=(meta(pod).get("namespace", ""), meta(pod).get("name", "")),
            node=best.node,
            priority=pod_fit(attempt).priority,
            requests=pod_fit(attempt).requests,
            allocations=best.allocations,
            victim_claims=best.released,
        )
        log.info("preempting", extra={"pod": "/".join(nomination.pod), "node": best.node, "victims": [meta(v.pod).get("name") for v in best.victims]})
        return Preempt([v.pod for v in best.victims], nomination, failure.fit_message)

    @staticmethod
    def _fit_error(failure: ScheduleFailure, total: int, statuses: Mapping[str, str]) -> str:
        """The failure with upstream's PostFilter part: each node's dry-run reason, the rest not helpful."""
        reasons = [*statuses.values(), *[NOT_HELPFUL] * (total - len(statuses))]
        return f"{failure.fit_message} preemption: {histogram_message(total, reasons)}"

    def _still_settling(self, pod: Obj, node: str) -> str | None:
        """Why a nominated pod must wait for its earlier preemption instead of preempting again."""
        priority = pod_priority(pod)
        for other, _requests in self.cache.pods_on(node):
            if pod_priority(other) < priority and terminating_by_preemption(other):
                return NOT_ELIGIBLE_TERMINATING
        nomination = self.cache.nominations.get(meta(pod).get("uid", ""))
        if nomination is not None and nomination.node == node and self.cache.claims_still_allocated(nomination.victim_claims):
            return NOT_ELIGIBLE_RELEASING
        return None

    # --- dry run ---

    def _dry_run(self, pod: Obj, attempt: CycleState, potential: list[str]) -> tuple[list[_Candidate], dict[str, str]]:
        """Candidates from the potential nodes (starting at a moving offset), and why the others failed."""
        total = len(self.cache.node_names())
        wanted = min(len(potential), max(total * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE))
        start = self._offset % len(potential)
        self._offset += 1
        candidates: list[_Candidate] = []
        statuses: dict[str, str] = {}
        for i in range(len(potential)):
            name = potential[(start + i) % len(potential)]
            node = self.cache.nodes.get("", name)
            if node is None:
                continue
            found = self._select_victims(pod, attempt, node)
            if isinstance(found, str):
                statuses[name] = found
                continue
            candidates.append(found)
            if len(candidates) >= wanted:
                break
        return candidates, statuses

    def _victims_on(self, pod: Obj, node: str, priority: int) -> list[_Victim]:
        victims = []
        for other, requests in self.cache.pods_on(node):
            other_priority = pod_priority(other)
            key = (meta(other).get("namespace", ""), meta(other).get("name", ""))
            if other_priority >= priority or self.cache.is_binding(key):
                continue  # only lower priorities; pods being bound are left to their binding
            allocated = [c for c in self._claims_of(other) if self.cache.allocation_of(meta(c).get("uid", "")) is not None]
            victims.append(_Victim(other, meta(other).get("uid", ""), requests, other_priority, _started(other), allocated))
        # Most important first: higher priority, then the one that has run longer (upstream's MoreImportantPod).
        victims.sort(key=lambda v: (-v.priority, v.started))
        return victims

    def _claims_of(self, pod: Obj) -> list[Obj]:
        namespace = meta(pod).get("namespace", "")
        generated = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        names = {entry.get("resourceClaimName") or generated.get(entry.get("name")) for entry in (pod.get("spec") or {}).get("resourceClaims") or []}
        extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        claims = []
        for name in sorted(n for n in (*names, extended) if n):
            claim = self.cache.claim(namespace, name)
            if claim is not None:
                claims.append(claim)
        return claims

    def _releasable(self, victims: Iterable[_Victim], node: str) -> list[tuple[str, str, frozenset[str] | None]]:
        """Per victim's claim whose devices are all on ``node``: (victim uid, claim uid, the pod
        uids it is reserved for, or None when something other than pods reserves it). Worked out
        once per node; :meth:`_released` then only compares uids."""
        if not self.cache.features.dra_preemption:
            return []
        found = []
        for victim in victims:
            for claim in victim.claims:
                uid = meta(claim).get("uid", "")
                allocation = self.cache.allocation_of(uid)
                if allocation is None or not _node_local(allocation, node):
                    continue
                consumers = (claim.get("status") or {}).get("reservedFor") or []
                pods = frozenset(str(r.get("uid")) for r in consumers) if all(is_pod_reference(r) for r in consumers) else None
                found.append((victim.uid, uid, pods))
        return found

    @staticmethod
    def _released(removed: set[str], releasable: list[tuple[str, str, frozenset[str] | None]]) -> set[str]:
        """Claims of removed victims whose devices removing them frees (see the module docstring)."""
        return {claim for victim, claim, pods in releasable if victim in removed and pods is not None and pods <= removed}

    def _select_victims(self, pod: Obj, attempt: CycleState, node: Obj) -> _Candidate | str:
        """The fewest pods to remove from ``node`` so that the pod fits, or why none will do."""
        name = meta(node).get("name", "")
        fit = pod_fit(attempt)
        dra = dra_state(attempt)
        victims = self._victims_on(pod, name, fit.priority)
        if not victims:
            return NO_VICTIMS
        used, count = self.cache.node_usage(name)
        held = self.cache.nominated_for(name, fit.uid, fit.priority)
        for nomination in held:
            used = add_resources(dict(used), nomination.requests)
        held_allocations = [a for n in held for a in n.allocations]
        allocatable = self.cache.allocatable(node)
        base = self.cache.allocated_state()
        releasable = self._releasable(victims, name)

        def fits(removed: set[str]) -> tuple[str | None, list[Mapping[str, Any]], set[str]]:
            remaining = dict(used)
            for victim in victims:
                if victim.uid in removed:
                    for resource, amount in victim.requests.items():
                        remaining[resource] = remaining.get(resource, 0) - amount
            short = insufficient(fit.requests, remaining, count + len(held) - len(removed), allocatable)
            if short and fit.extended:
                short = served_by_devices(short, fit.extended, allocatable)
            if short:
                return short[0], [], set()
            placement = self._placement_filters(pod, attempt, node, [v.pod for v in victims if v.uid in removed])
            if placement is not None:
                return placement.reasons[0], [], set()
            released = self._released(removed, releasable)
            claims, _ = dra.claims_for(pod, allocatable, self.cache.resource_classes())
            if not claims:
                return None, [], released
            gone = [a for uid in released if (a := self.cache.allocation_of(uid)) is not None]
            allocator = self.cycle.allocator(base.changed(add=held_allocations, remove=gone))
            try:
                outcome = allocator.allocate(node, claims)
            except AllocationError as exc:
                return str(exc), [], set()
            if isinstance(outcome, Unschedulable):
                return outcome.reason, [], set()
            assert isinstance(outcome, Allocated)
            allocations: list[Mapping[str, Any]] = list(outcome.allocations)
            return None, allocations, released

        removed = {v.uid for v in victims}
        reason, allocations, released = fits(removed)
        if reason is not None:
            return reason
        chosen: list[_Victim] = []
        for victim in victims:  # most important first: the ones most worth keeping
            removed.discard(victim.uid)
            reason, kept_allocations, kept_released = fits(removed)
            if reason is None:
                allocations, released = kept_allocations, kept_released
                continue
            removed.add(victim.uid)
            chosen.append(victim)
        return _Candidate(name, chosen, allocations, released)


    def _placement_filters(self, pod: Obj, attempt: CycleState, node: Obj, removed: list[Obj]) -> Status | None:
        """The verdict on ``node``, with ``removed`` gone from it, of the filters that read the
        placed pods (host ports, topology spread, pod affinity: upstream's RemovePod, then the
        filters): a victim may stand in the way of those, not only of resources. As in the cycle,
        the node must pass both with and without the pods nominated to it."""
        active = [p for p in self.cycle.placed_pods_filters if any(p is f for f in attempt.filters)]
        if not active:
            return None
        trial = attempt.copy()
        for plugin in active:
            plugin.without(trial, [(victim, node) for victim in removed])
        passes = [trial]
        nominated = self.cycle.nominated_pods(pod, node) if meta(node).get("name", "") in self.cache.nominated_on else []
        if nominated:
            with_nominated = trial.copy()
            for plugin in active:
                plugin.adding(with_nominated, nominated)
            passes.insert(0, with_nominated)
        for state in passes:
            for plugin in active:
                status = plugin.filter(state, pod, node)
                if status is not None:
                    return status
        return None


def _pick_one(candidates: list[_Candidate]) -> _Candidate:
    """Upstream's pickOneNodeForPreemption without PDBs (none are served here)."""

    def highest(c: _Candidate) -> int:
        return c.victims[0].priority

    def total(c: _Candidate) -> int:
        return sum(v.priority + _INT32_OFFSET for v in c.victims)

    def earliest_of_highest(c: _Candidate) -> str:
        top = highest(c)
        return min(v.started for v in c.victims if v.priority == top)

    remaining = candidates
    for score in (lambda c: -highest(c), lambda c: -total(c), lambda c: -len(c.victims)):
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
        if len(remaining) == 1:
            return remaining[0]
    latest = max(earliest_of_highest(c) for c in remaining)
    return next(c for c in remaining if earliest_of_highest(c) == latest)
