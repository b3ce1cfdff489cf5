"""What-if capacity: how many more pods like this one fit, where, and with which devices.

The answer comes from the scheduler's own cycle (:class:`~schedulers.cycle.SchedulingCycle`: its
node filters, allocator and scoring) run against a cache that is a *private copy* of the live
one (:mod:`schedulers.whatifserver` forks the scheduler process for each question, so the copy
costs nothing to make and nothing the copy does reaches the live scheduler or the API server).

:class:`WhatIf` changes that copy the way informer events would (its informers' ``apply``, driven
to completion synchronously, so every handler of the cache runs exactly as for a watch event):

* the changes asked about first: nodes removed (their slices and pods go with them), nodes added
  (a Node and its ResourceSlices, from a device profile or a ResourceSlice manifest), pods removed
  (their template claims deleted, the other claims no longer reserved for them, and deallocated
  once nobody reserves them, as the resource claim controller does);
* then copies of the pod, one after another, as the scheduler would place them: each copy's
  claims from templates are created (owned by the copy, named in its status) before its cycle;
  claims the pod names exist once and are shared by every copy (allocated by the first, then
  reserved by each); a placed copy is bound and its claims allocated and reserved in the copy, so
  the next cycle sees what the last one took.

When a copy does not fit (or the answer stops at its maximum or its deadline), the next copy is
explained (:class:`~schedulers.explain.Explainer`, the words of ``kubectl dra why``) and each node
that took no copy gets its first reason.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from kube.informer import Informer, object_key
from schedulers.cache import Key, Obj, SchedulerCache, meta
from schedulers.cycle import NodeFilter, NodeScore, NodeVerdict, SchedulingCycle
from schedulers.explain import NOT_EXAMINED, SCHEDULABLE, UNSCHEDULABLE, Explainer, ExplainLimits
from schedulers.framework import CycleState, Placement, ScheduleFailure, WaitForClaims
from schedulers.plugins.dynamicresources import NodeOutcome, dra_state
from schedulers.plugins.noderesources import pod_fit

RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize: consumers one claim may have
DEFAULT_ALLOCATABLE = {"cpu": "32", "memory": "256Gi", "pods": "110"}  # the kubelet simulator's nodes
STOPPED_AT_MAX = "fits more copies: the answer stops at {max} copies"
STOPPED_AT_DEADLINE = "not examined: the answer ran out of time ({seconds:g}s)"


@dataclass
class Changes:
    """What the question changes before placing anything."""

    remove_nodes: list[str] = field(default_factory=list)
    add_nodes: list[tuple[Obj, list[Obj]]] = field(default_factory=list)  # (Node, its ResourceSlices)
    add_slices: list[Obj] = field(default_factory=list)  # ResourceSlices of nodes that exist, or of no node
    remove_pods: list[Key] = field(default_factory=list)


@dataclass
class Placed:
    """One placed copy: its node and the devices of its claims (``driver/pool/device``)."""

    pod: str
    node: str
    devices: list[str]


@dataclass
class Outcome:
    """Copies placed in order; the copy that did not fit (or would have come next), and why the
    placing stopped (empty: a copy did not fit)."""

    placed: list[Placed]
    next_pod: Obj | None
    stopped: str = ""
    failure: str = ""  # the cycle's message for the copy that did not fit


def devices_of(allocation: Mapping[str, Any] | None) -> list[str]:
    """``driver/pool/device`` of every result of an allocation (admin access included)."""
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return [f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}" for r in results]


def template_claim(template: Mapping[str, Any], pod: Mapping[str, Any], entry: str, name: str, uid: str) -> Obj:
    """The claim the resource claim controller would create from ``template`` for the pod's entry."""
    pod_meta = meta(pod)
    spec = template.get("spec") or {}
    labels = (spec.get("metadata") or {}).get("labels")
    claim_meta: Obj = {
        "name": name,
        "namespace": pod_meta.get("namespace", ""),
        "uid": uid,
        "annotations": {"resource.kubernetes.io/pod-claim-name": entry},
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_meta.get("name", ""),
                "uid": pod_meta.get("uid", ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if labels:
        claim_meta["labels"] = dict(labels)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": claim_meta, "spec": spec.get("spec") or {}}


def _node_local(allocation: Mapping[str, Any] | None, node: str) -> bool:
    """Whether an allocation is pinned to exactly ``node`` (its devices are that node's own)."""
    terms = ((allocation or {}).get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    fields = [f for t in terms for f in t.get("matchFields") or []] if len(terms) == 1 and not terms[0].get("matchExpressions") else []
    return len(fields) == 1 and fields[0].get("key") == "metadata.name" and fields[0].get("values") == [node]


class _Verdicts:
    """The cycle's per-node filter and score, remembered between copies of one pod.

    Copies whose claims all come from templates are the same pod to every node: a node's verdict
    (first failing filter, or the allocation and score) changes only when a copy is placed on it.
    So the cycle's own node filter and score (:meth:`SchedulingCycle.replace_node_checks`) run once per node and again after a placement
    there; everything else (node order, the feasible-node limit, the choice) is the cycle's as it
    is. The memory is dropped whenever that reasoning does not hold: the copy names existing
    claims, needs extended resources, or a placement took devices not local to its node.
    """

    def __init__(self, cycle: SchedulingCycle) -> None:
        self._signature: Any = None
        self._state: CycleState | None = None
        self._filtered: dict[str, NodeVerdict] = {}
        self._scores: dict[str, int] = {}
        self._cycle = cycle
        self._filter: NodeFilter
        self._score: NodeScore
        self._filter, self._score = cycle.replace_node_checks(self.filter, self.score)  # this copy's cycle only

    def filter(self, state: CycleState, pod: Obj, node: Obj) -> NodeVerdict:
        if state is not self._state:  # a new cycle: is it the same pod to the nodes?
            self._state = state
            signature = self._shape(self._cycle, state)
            if signature is None or signature != self._signature:
                self.forget_all()
                self._signature = signature
        signature = self._signature
        if signature is None:
            return self._filter(state, pod, node)
        name = meta(node).get("name", "")
        known = self._filtered.get(name)
        if known is None:
            known = self._filter(state, pod, node)
            if known[0] is not None and known[0].is_error:
                return known
            self._filtered[name] = known
        return known

    def score(self, state: CycleState, node: Obj, result: NodeOutcome) -> int:
        if self._signature is None:
            return self._score(state, node, result)
        name = meta(node).get("name", "")
        known = self._scores.get(name)
        if known is None:
            known = self._scores[name] = self._score(state, node, result)
        return known

    @staticmethod
    def _shape(cycle: SchedulingCycle, state: CycleState) -> Any:
        if cycle.depends_on_placements(state):
            return None  # pod affinity or topology spread: a placement changes other nodes' verdicts
        claims = dra_state(state).claims
        if claims.allocated or dra_state(state).extended or len(claims.unallocated) != len(claims.claims) or claims.group_refs or claims.gang:
            return None
        return (pod_fit(state).key, tuple(orjson.dumps(c.get("spec"), option=orjson.OPT_SORT_KEYS) for c in claims.unallocated))

    def replay(self, cycle: SchedulingCycle, pod: Obj) -> Placement | None:
        """The cycle's choice for ``pod``, walking the nodes as the cycle does but asking its node
        filter and score only for nodes without a remembered verdict (None: let the cycle
        itself decide, e.g. when no node fits, so that its message is the cycle's).

        The walk is the cycle's: from its rotating start, nodes that fail skipped, stopping after
        ``nodes_to_find`` feasible ones, the lowest (score, name) chosen, the start moved on by the
        nodes visited. tests/schedulers/test_whatif.py checks that every copy lands where the
        cycle alone would put it.
        """
        if self._signature is None or cycle.features.node_allocatable_resources:
            return None
        state = cycle.prepare(pod)
        if not isinstance(state, CycleState) or self._shape(cycle, state) != self._signature:
            return None
        self._state = state  # the same pod to the nodes: what is remembered holds
        names = cycle.cache.node_names()
        count = len(names)
        if not count:
            return None
        start = cycle.walk_start(count)
        filtered, scores, get_node = self._filtered, self._scores, cycle.cache.nodes.get
        best: tuple[int, str, NodeOutcome] | None = None
        feasible = processed = 0
        for i in range(count):
            processed += 1
            name = names[(start + i) % count]
            known = filtered.get(name)
            node = None
            if known is None:
                node = get_node("", name)
                if node is None:
                    continue
                known = self.filter(state, pod, node)
                if known[0] is not None and known[0].is_error:
                    return None
            if known[0] is not None:
                continue
            score = scores.get(name)
            if score is None:
                node = node or get_node("", name)
                if node is None:
                    continue
                score = self.score(state, node, known[1])
            feasible += 1
            if best is None or (score, name) < (best[0], best[1]):
                best = (score, name, known[1])
            if feasible >= cycle.nodes_to_find:
                break
        if best is None:
            return None  # no node fits: the cycle says so in its words
        cycle.walked(start, processed, count)
        return cycle.dynamic_resources.placement(state, pod, best[1], best[2], pod_fit(state).requests)

    def placed(self, node: str, allocations: Iterable[Mapping[str, Any] | None]) -> None:
        """A copy went to ``node``: its verdict is stale (every node's, if devices elsewhere were taken)."""
        self._filtered.pop(node, None)
        self._scores.pop(node, None)
        if not all(_node_local(a, node) for a in allocations):
            self.forget_all()

    def forget_all(self) -> None:
        self._filtered.clear()
        self._scores.clear()


def apply_event(informer: Informer, kind: str, obj: Obj) -> None:
    """Apply a watch event (``ADDED``, ``MODIFIED``, ``DELETED``) to ``informer`` now, handlers
    included: the cache's handlers are plain functions, so the informer's coroutine never waits."""
    step = informer.apply({"type": kind, "object": obj})
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()
    raise RuntimeError("an informer handler waited; the what-if copy applies events synchronously")


class WhatIf:
    """Questions against ``cache`` and ``cycle``, which this object changes: give it a copy."""

    def __init__(
        self, cache: SchedulerCache, cycle: SchedulingCycle, *, seconds: float = 10.0, deadline: float | None = None, token: str = "whatif"
    ) -> None:
        """``seconds``: the answer's time; ``deadline`` (``time.monotonic()``) when it ends, if it
        started before this object (the question waited for a turn), else ``seconds`` from now."""
        self.cache = cache
        self.cycle = cycle
        self.seconds = seconds
        self.deadline = deadline if deadline is not None else time.monotonic() + seconds
        self.token = token
        self._versions = itertools.count(10**15)  # newer than anything the informers hold
        if cycle.filter_timeout is not None:
            cycle.filter_timeout = min(cycle.filter_timeout, seconds)
        else:
            cycle.filter_timeout = seconds
        self._verdicts = _Verdicts(cycle)

    # --- events on the copy ---

    def _event(self, informer: Informer, kind: str, obj: Obj) -> None:
        if kind != "DELETED":
            obj = {**obj, "metadata": {**meta(obj), "resourceVersion": str(next(self._versions))}}
        apply_event(informer, kind, obj)

    def apply(self, changes: Changes) -> None:
        """Remove and add nodes, remove pods (the caller checked that they exist)."""
        cache = self.cache
        for key in changes.remove_pods:
            pod = cache.pods.get(*key)
            if pod is not None:
                self.remove_pod(pod)
        for name in changes.remove_nodes:
            self.remove_node(name)
        for node, slices in changes.add_nodes:
            self._event(cache.nodes, "ADDED", node)
            for obj in slices:
                self._event(cache.slices, "ADDED", obj)
        for obj in changes.add_slices:
            self._event(cache.slices, "ADDED", obj)

    def remove_node(self, name: str) -> None:
        """The node, its slices and the pods bound to it go (their claims as for :meth:`remove_pod`)."""
        cache = self.cache
        for pod, _ in cache.pods_on(name):
            self.remove_pod(pod)
        keys = cache.slices.keys()
        for key in keys:
            obj = cache.slices.peek(*key)
            if obj is not None and (obj.get("spec") or {}).get("nodeName") == name:
                self._event(cache.slices, "DELETED", obj)
        node = cache.nodes.get("", name)
        if node is not None:
            self._event(cache.nodes, "DELETED", node)

    def remove_pod(self, pod: Obj) -> list[Obj]:
        """The pod goes; its template claims are deleted, its other claims no longer reserved for it
        (and deallocated when nobody else reserves them). Returns its claims as they were."""
        cache = self.cache
        uid = meta(pod).get("uid", "")
        claims = self.claims_of(pod)
        self._event(cache.pods, "DELETED", pod)
        for claim in claims:
            owned = any(o.get("uid") == uid and o.get("controller") for o in meta(claim).get("ownerReferences") or [])
            if owned:
                self._event(cache.claims, "DELETED", claim)
                continue
            status = dict(claim.get("status") or {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            status["reservedFor"] = reserved
            if not reserved:
                status.pop("reservedFor")
                status.pop("allocation", None)
            self._event(cache.claims, "MODIFIED", {**claim, "status": status})
        return claims

    def claims_of(self, pod: Obj) -> list[Obj]:
        """The pod's claims the cache knows (named ones, and template ones its status names)."""
        ns, _ = object_key(pod)
        recorded = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        out = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = entry.get("resourceClaimName") or recorded.get(entry.get("name"))
            claim = self.cache.claim(ns, name) if name else None
            if claim is not None:
                out.append(claim)
        return out

    # --- placing copies ---

    def _bind(self, pod: Obj, placement: Placement) -> Placed:
        """What the binder writes, applied to the copy: claims allocated and reserved, the pod bound."""
        pod_meta = meta(pod)
        ref = {"resource": "pods", "name": pod_meta.get("name", ""), "uid": pod_meta.get("uid", "")}
        devices: list[str] = []
        for claim in placement.claims:
            uid = meta(claim).get("uid", "")
            status = dict(claim.get("status") or {})
            allocation = placement.allocations.get(uid) or status.get("allocation")
            status["allocation"] = allocation
            status["reservedFor"] = [*(status.get("reservedFor") or []), placement.group_refs.get(uid) or ref]
            claim_meta = dict(meta(claim))
            if placement.extended is not None and claim is placement.extended.claim:
                claim_meta["name"] = f"{pod_meta.get('name', '')}-extended-resources"
            self._event(self.cache.claims, "MODIFIED", {**claim, "metadata": claim_meta, "status": status})
            devices += devices_of(allocation)
        status = {**(pod.get("status") or {}), "phase": "Pending"}
        if placement.statuses:
            status["nodeAllocatableResourceClaimStatuses"] = placement.statuses
        self._event(self.cache.pods, "ADDED", {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": placement.node}, "status": status})
        return Placed("/".join(object_key(pod)), placement.node, devices)

    def _full_claim(self, pod: Obj) -> str:
        """Why a claim the pod names takes no more consumers ("" when none is full)."""
        for claim in self.claims_of(pod):
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if len(reserved) >= RESERVED_FOR_MAX:
                return f"resourceclaim {meta(claim).get('name', '')} is reserved for {len(reserved)} consumers, the most a claim takes"
        return ""

    def copy_of(self, pod: Obj, index: int, templates: Mapping[str, Obj]) -> Obj:
        """Copy ``index`` of the pod, pending, with its template claims created in the cache."""
        pod_meta = meta(pod)
        namespace = pod_meta.get("namespace", "")
        base = pod_meta.get("name") or (pod_meta.get("generateName") or "pod").rstrip("-")
        name = f"{base}-{self.token}-{index}"
        uid = f"{self.token}-{index}-{base}"
        spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in ("nodeName", "schedulingGates")}
        copy: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {**{k: v for k, v in pod_meta.items() if k in ("labels", "annotations")}, "name": name, "namespace": namespace, "uid": uid},
            "spec": spec,
            "status": {"phase": "Pending"},
        }  # fmt: skip
        statuses = []
        for entry in spec.get("resourceClaims") or []:
            template = entry.get("resourceClaimTemplateName")
            if entry.get("resourceClaimName") or not template:
                continue
            claim_name = f"{name}-{entry.get('name', '')}"
            claim = template_claim(templates[template], copy, entry.get("name", ""), claim_name, f"{uid}-{entry.get('name', '')}")
            self._event(self.cache.claims, "ADDED", claim)
            statuses.append({"name": entry.get("name", ""), "resourceClaimName": claim_name})
        if statuses:
            copy["status"]["resourceClaimStatuses"] = statuses
        return copy

    def place(self, pods: Iterable[Obj], *, limit: int | None = None) -> Outcome:
        """Schedule ``pods`` one after another (each bound in the copy before the next), until one
        does not fit, ``limit`` are placed, or the deadline passes."""
        placed: list[Placed] = []
        for pod in pods:
            if limit is not None and len(placed) >= limit:
                return Outcome(placed, pod, "max")
            if time.monotonic() >= self.deadline:
                return Outcome(placed, pod, "deadline")
            full = self._full_claim(pod)
            if full:
                return Outcome(placed, pod, failure=full)
            result = self._verdicts.replay(self.cycle, pod) or self.cycle.schedule(pod)
            if isinstance(result, Placement):
                placed.append(self._bind(pod, result))
                self._verdicts.placed(result.node, result.allocations.values())
                continue
            if isinstance(result, ScheduleFailure):
                return Outcome(placed, pod, failure=result.message)
            assert isinstance(result, WaitForClaims)
            return Outcome(placed, pod, failure=result.why)
        return Outcome(placed, None)

    # --- reasons ---

    def explain(self, pod: Obj) -> tuple[dict[str, str], str, list[str], str]:
        """Per node, the first reason the pod does not fit there; the explanation's message when it
        names no nodes (the pod's own state); the nodes that would take it; the message."""
        left = max(0.2, self.deadline - time.monotonic())
        limits = ExplainLimits(seconds=left, groups=10**9, nodes_per_group=10**9)
        result = Explainer(self.cache, self.cycle, limits).explain(pod)
        reasons: dict[str, str] = {}
        stopped = ""  # the explanation ran out of time before the nodes no group names
        for group in result.get("groups") or []:
            first = (group.get("reasons") or [{}])[0]
            for name in group.get("nodes") or []:
                reasons[name] = first.get("message", "")
            if not group.get("nodes") and first.get("kind") == NOT_EXAMINED:
                stopped = first.get("message", "")
        fitting: list[str] = []
        if result.get("state") == SCHEDULABLE:
            fitting = list((result.get("nodes") or {}).get("fitting") or [])
        if stopped:
            examined = set(fitting)
            reasons.update({n: stopped for n in self.cache.node_names() if n not in reasons and n not in examined})
        message = str(result.get("message", ""))
        named = result.get("state") in (SCHEDULABLE, UNSCHEDULABLE) and result.get("groups") is not None
        return reasons, "" if named else message, fitting, message

    # --- the questions ---

    def fit(self, pod: Obj, templates: Mapping[str, Obj], max_copies: int) -> dict[str, Any]:
        """How many copies of ``pod`` fit: ``{"total", "nodes", "unfit"}`` (see the module docstring)."""
        copies = (self.copy_of(pod, i, templates) for i in itertools.count())
        outcome = self.place(copies, limit=max_copies)
        by_node: dict[str, list[list[str]]] = {}
        for copy in outcome.placed:
            by_node.setdefault(copy.node, []).append(copy.devices)
        unfit: list[dict[str, str]] = []
        if outcome.next_pod is not None:
            reasons, general, fitting, _ = self.explain(outcome.next_pod)
            for name in self.cache.node_names():
                if name in by_node:
                    continue
                if outcome.stopped == "max" and name in fitting:
                    reason = STOPPED_AT_MAX.format(max=max_copies)
                elif outcome.stopped == "deadline" and name in fitting:
                    reason = STOPPED_AT_DEADLINE.format(seconds=self.seconds)
                else:
                    reason = reasons.get(name) or general or outcome.failure or "not examined: the answer ran out of time"
                unfit.append({"name": name, "reason": reason})
        nodes = [{"name": name, "count": len(devs), "devices": devs} for name, devs in sorted(by_node.items())]
        return {"total": len(outcome.placed), "nodes": nodes, "unfit": unfit}

    def drain(self, node: str) -> dict[str, Any]:
        """Where each pod with claims on ``node`` would go if the node went now, in the order the
        scheduler would take them (priority, then name), and which would not fit."""
        cache = self.cache
        leaving = sorted(
            (p for p, _ in cache.pods_on(node) if (p.get("spec") or {}).get("resourceClaims")),
            key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0), object_key(p)),
        )
        replacements: list[tuple[Obj, Obj]] = []
        for pod in leaving:
            claims = self.remove_pod(pod)
            replacements.append((pod, self._replacement(pod, claims)))
        self.remove_node(node)
        rows: list[dict[str, Any]] = []
        for original, replacement in replacements:
            row: dict[str, Any] = {"pod": "/".join(object_key(original))}
            outcome = self.place([replacement])
            if outcome.placed:
                row.update(node=outcome.placed[0].node, devices=outcome.placed[0].devices)
            elif outcome.stopped == "deadline":
                row["reason"] = STOPPED_AT_DEADLINE.format(seconds=self.seconds)
            else:
                reasons, _, _, message = self.explain(replacement)
                row["reason"] = message or outcome.failure  # kubectl dra why's summary
                if reasons:
                    row["nodes"] = dict(sorted(reasons.items()))
            rows.append(row)
        placed = sum(1 for r in rows if "node" in r)
        return {"node": node, "total": len(rows), "placed": placed, "pods": rows}

    def _replacement(self, pod: Obj, claims: Sequence[Obj]) -> Obj:
        """The pod as its controller would create it again: pending, its template claims made anew
        with the same specs (the claims it names are reused)."""
        pod_meta = meta(pod)
        name = pod_meta.get("name", "")
        uid = f"{self.token}-{pod_meta.get('uid', '')}"
        spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
        copy: Obj = {
            "apiVersion": "v1", "kind": "Pod", "metadata": {**pod_meta, "uid": uid, "resourceVersion": ""}, "spec": spec,
            "status": {"phase": "Pending"},
        }  # fmt: skip
        by_name = {meta(c).get("name", ""): c for c in claims}
        recorded = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        statuses = []
        for entry in spec.get("resourceClaims") or []:
            if entry.get("resourceClaimName") or not entry.get("resourceClaimTemplateName"):
                continue
            old = by_name.get(recorded.get(entry.get("name")) or "")
            if old is None:
                continue
            claim_name = f"{name}-{entry.get('name', '')}-{self.token}"
            fresh = template_claim(
                {"spec": {"spec": old.get("spec") or {}}}, copy, entry.get("name", ""), claim_name, f"{uid}-{entry.get('name', '')}"
            )
            self._event(self.cache.claims, "ADDED", fresh)
            statuses.append({"name": entry.get("name", ""), "resourceClaimName": claim_name})
        if statuses:
            copy["status"]["resourceClaimStatuses"] = statuses
        return copy


__all__ = ["Changes", "Outcome", "Placed", "WhatIf", "apply_event", "devices_of", "template_claim"]
