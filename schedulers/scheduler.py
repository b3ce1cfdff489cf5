"""The scheduler: informers, a sequential decision loop, and concurrent binding tasks.

One scheduling cycle per pod, like upstream's framework with the DynamicResources plugin:

1. *PreEnqueue/PreFilter*: resolve the pod's claims (template claims via
   ``pod.status.resourceClaimStatuses``). A claim that does not exist yet, or that another pod
   is allocating right now, parks the pod in the queue's ``waiting`` state (no retries) until
   that claim shows up or changes.
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
4. *Reserve*: the new allocations go into the in-flight map and the allocated-device state at
   once, and the pod's requests are charged to the node, so the next cycle (which starts before
   this pod's writes land) cannot hand out the same devices or cpu.
5. *PreBind/Bind* (an asyncio task per pod, so writes of different pods overlap): per claim
   write ``status.allocation`` + ``reservedFor`` with the claim's resourceVersion (re-read and
   retry on 409) and add the ``delete-protection`` finalizer, then POST ``pods/binding``. Any failure
   undoes the reservation (in memory, and reservedFor on the server) and retries the pod with
   backoff.

Written claims go into an assume cache (newer resourceVersion wins over the informer) so a claim
just written is seen as allocated before its watch event arrives.

Crash safety: claim writes happen before the binding, so a new leader may find a pending pod
whose claims are already allocated and reserved for it. Its cycle then sees allocated claims,
whose node selector only admits the node of their devices, and binds the pod there without
writing them again. If that node no longer fits, the claims reserved for nobody but this pod are
deallocated (upstream's PostFilter) and the pod is tried again from scratch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import httpx

from kube.client import KubeClient, record_event, resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.labels import node_selector_matches
from kube.pods import Resources, pod_requests
from kube.timeutil import now_rfc3339
from schedulers.allocator import (
    Allocated,
    AllocatedState,
    AllocationError,
    Allocator,
    AllocatorFeatures,
    ResourceIndex,
    SearchCache,
    Unschedulable,
    has_node_allocatable_mapping,
    node_allocatable_claim_status,
)
from schedulers.nodefit import (
    REASON_AFFINITY,
    fit_error_message,
    insufficient,
    matches_node_selector_and_affinity,
    node_allocatable,
    untolerated_taint,
)
from schedulers.queue import SchedulingQueue

log = logging.getLogger("scheduler")

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)

RESOURCE = "resource.k8s.io"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize
REASON_CLAIM_NOT_ON_NODE = "resourceclaim not available on the node"
CLAIM_WRITE_ATTEMPTS = 10
DEFAULT_NODES_TO_FIND = 100
DEFAULT_FILTER_TIMEOUT = 10.0  # upstream's DynamicResources filterTimeout
NODE_ALLOCATABLE_FEATURE = "DRANodeAllocatableResources"
REASON_FEATURE_NOT_DECLARED = f"node(s) did not declare the {NODE_ALLOCATABLE_FEATURE} feature"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> Key:
    meta = _meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _rv(obj: Mapping[str, Any] | None) -> int:
    try:
        return int(_meta(obj or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _device_ids(allocation: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return sorted((r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results)


def _reserved_uids(claim: Mapping[str, Any]) -> set[str]:
    return {r.get("uid", "") for r in (claim.get("status") or {}).get("reservedFor") or []}


def _is_pod_reference(ref: Mapping[str, Any]) -> bool:
    return not ref.get("apiGroup") and ref.get("resource") == "pods"


def _claim_containers(pod: Mapping[str, Any], entry_name: str) -> list[str]:
    """Names of the pod's containers (init first) whose resources.claims name this pod claim entry."""
    spec = pod.get("spec") or {}
    return [
        c.get("name", "")
        for key in ("initContainers", "containers")
        for c in spec.get(key) or []
        if any(r.get("name") == entry_name for r in (c.get("resources") or {}).get("claims") or [])
    ]


class _NamespaceLabels(Mapping[str, Mapping[str, str]]):
    """Namespace name -> labels, read from the namespace informer (the allocator's view)."""

    def __init__(self, namespaces: Informer) -> None:
        self._namespaces = namespaces

    def __getitem__(self, name: str) -> Mapping[str, str]:
        namespace = self._namespaces.get("", name)
        if namespace is None:
            raise KeyError(name)
        return _meta(namespace).get("labels") or {}

    def __iter__(self) -> Iterator[str]:
        keys = self._namespaces.keys()
        return (name for _, name in keys)

    def __len__(self) -> int:
        return len(self._namespaces.keys())


class _Wait:
    """The pod waits (without retries) for these claims to appear or change."""

    def __init__(self, claims: Iterable[Key], why: str) -> None:
        self.claims = list(claims)
        self.why = why


@dataclass
class _PodClaims:
    """The pod's claims split into allocated (with node selectors) and to-be-allocated ones."""

    claims: list[Obj] = field(default_factory=list)
    allocated: list[Obj] = field(default_factory=list)
    unallocated: list[Obj] = field(default_factory=list)
    entry_names: dict[str, str] = field(default_factory=dict)  # claim uid -> the pod's claim entry name


class _PodFit:
    """What one cycle's node filters need from the pod, worked out once instead of per node."""

    __slots__ = ("constrained", "key", "requests")

    def __init__(self, pod: Obj, requests: Resources) -> None:
        spec = pod.get("spec") or {}
        self.requests = requests
        # Exact integers, so comparing with a cached key costs no Fraction arithmetic.
        self.key = tuple(sorted((k, v.numerator, v.denominator) for k, v in requests.items()))
        self.constrained = bool(spec.get("nodeSelector")) or bool((spec.get("affinity") or {}).get("nodeAffinity"))


@dataclass
class SchedulerStats:
    """Counters for logs and tests."""

    attempts: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    bind_failures: int = 0


class Scheduler:
    """Schedules pods of one scheduler name; run one instance per leadership term."""

    def __init__(
        self,
        client: KubeClient,
        *,
        scheduler_name: str = "default-scheduler",
        features: AllocatorFeatures | None = None,
        nodes_to_find: int = DEFAULT_NODES_TO_FIND,
        watch_timeout_seconds: int | None = None,
        filter_timeout: float | None = DEFAULT_FILTER_TIMEOUT,
    ) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.features = features or AllocatorFeatures()
        self.nodes_to_find = max(1, nodes_to_find)
        self.filter_timeout = filter_timeout
        self.stats = SchedulerStats()
        self.queue: SchedulingQueue[Key, Key] = SchedulingQueue()
        self.index = ResourceIndex(features=self.features)
        self._search_cache = SearchCache()  # successful searches per node, reused across cycles

        def informer(group: str, plural: str) -> Informer:
            version = "v1"
            return Informer(client, resource_path(group, version, plural), name=plural, watch_timeout_seconds=watch_timeout_seconds)

        self.pods = informer("", "pods")
        self.nodes = informer("", "nodes")
        self.claims = informer(RESOURCE, "resourceclaims")
        self.slices = informer(RESOURCE, "resourceslices")
        self.classes = informer(RESOURCE, "deviceclasses")
        self.taint_rules = informer(RESOURCE, "devicetaintrules")
        # Admin access is only for namespaces with the admin-access label, checked again at allocation.
        self.namespaces = informer("", "namespaces")
        self.informers = [self.pods, self.nodes, self.claims, self.slices, self.classes, self.taint_rules, self.namespaces]
        self._namespace_labels = _NamespaceLabels(self.namespaces)

        # Node accounting: pod uid -> (node, requests), for bound and assumed pods.
        self._pod_usage: dict[str, tuple[str, Resources]] = {}
        self._node_used: dict[str, Resources] = {}
        self._node_pods: dict[str, int] = {}
        self._node_names: list[str] | None = None
        self._node_allocatable: dict[str, tuple[Obj, Resources]] = {}
        # node -> (allocatable, requests key, NodeResourcesFit reasons): most nodes a cycle visits
        # did not change since the last pod with the same requests, so the Fraction sums are reused.
        self._fit_cache: dict[str, tuple[Resources, tuple[tuple[str, int, int], ...], list[str]]] = {}
        self._next_start = 0

        # Claims: written-but-not-yet-watched versions, in-flight allocations, effective allocations.
        self._assumed_claims: dict[Key, Obj] = {}
        self._in_flight: dict[str, Obj] = {}  # claim uid -> claim with the allocation being written
        self._in_flight_owner: dict[str, str] = {}  # claim uid -> pod uid
        self._claim_keys: dict[str, Key] = {}  # claim uid -> key
        self._allocations: dict[str, Mapping[str, Any]] = {}  # claim uid -> effective allocation
        self._state: AllocatedState | None = None

        self._binding: dict[Key, str] = {}  # pods with a binding task -> pod uid
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reported: dict[str, str] = {}  # pod uid -> last FailedScheduling message
        self._wire()

    # ------------------------------------------------------------------ event handlers

    def _wire(self) -> None:
        self.pods.on_add(self._pod_added)
        self.pods.on_update(self._pod_updated)
        self.pods.on_delete(self._pod_deleted)
        self.nodes.on_add(self._node_added)
        self.nodes.on_update(self._node_updated)
        self.nodes.on_delete(self._node_deleted)
        self.claims.on_add(self._claim_added)
        self.claims.on_update(self._claim_updated)
        self.claims.on_delete(self._claim_deleted)
        self.slices.on_add(lambda s: self._slice_set(s))
        self.slices.on_update(lambda _old, s: self._slice_set(s))
        self.slices.on_delete(lambda s: self.index.remove_slice(_meta(s).get("name", "")))
        self.classes.on_add(lambda c: self._class_set(c))
        self.classes.on_update(lambda _old, c: self._class_set(c))
        self.classes.on_delete(lambda c: self.index.remove_class(_meta(c).get("name", "")))
        self.taint_rules.on_add(lambda r: self._rule_set(r))
        self.taint_rules.on_update(lambda _old, r: self._rule_set(r))
        self.taint_rules.on_delete(self._rule_deleted)
        self.namespaces.on_update(self._namespace_updated)

    def wants(self, pod: Mapping[str, Any]) -> bool:
        """A pod this scheduler should place: pending, ours, not gated, not being deleted."""
        spec = pod.get("spec") or {}
        return (
            not spec.get("nodeName")
            and (spec.get("schedulerName") or "default-scheduler") == self.scheduler_name
            and not spec.get("schedulingGates")
            and not _meta(pod).get("deletionTimestamp")
            and not _terminal(pod)
        )

    def _pod_added(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self._account_bound(pod)
        elif self.wants(pod):
            self.queue.add(_key(pod))

    def _pod_updated(self, old: Obj, pod: Obj) -> None:
        key = _key(pod)
        if (pod.get("spec") or {}).get("nodeName"):
            self.queue.delete(key)
            was_counted = _meta(pod).get("uid", "") in self._pod_usage
            self._account_bound(pod)
            if was_counted and _terminal(pod) and not _terminal(old):
                self.queue.move_all()  # a pod leaving frees cpu/memory/pods
            return
        if not self.wants(pod):
            self.queue.delete(key)
            return
        if key in self._binding:
            return  # our own binding is under way; its outcome decides
        if not self.wants(old) or self._relevant_change(old, pod):
            self.queue.add(key)

    @staticmethod
    def _relevant_change(old: Obj, new: Obj) -> bool:
        # Our own PodScheduled condition writes must not trigger another attempt.
        return (
            old.get("spec") != new.get("spec")
            or _meta(old).get("labels") != _meta(new).get("labels")
            or (old.get("status") or {}).get("resourceClaimStatuses") != (new.get("status") or {}).get("resourceClaimStatuses")
        )

    def _pod_deleted(self, pod: Obj) -> None:
        self.queue.delete(_key(pod))
        uid = _meta(pod).get("uid", "")
        self._reported.pop(uid, None)
        if self._release(uid):
            self.queue.move_all()

    def _account_bound(self, pod: Obj) -> None:
        uid = _meta(pod).get("uid", "")
        if _terminal(pod):
            self._release(uid)
        elif uid not in self._pod_usage:
            # What the pod's claims charge counts only while the gate is on, as upstream's PodRequests.
            requests = pod_requests(pod, node_allocatable=self.features.node_allocatable_resources)
            self._charge(uid, (pod.get("spec") or {}).get("nodeName", ""), requests)

    def _charge(self, uid: str, node: str, requests: Resources) -> None:
        self._pod_usage[uid] = (node, requests)
        self._fit_cache.pop(node, None)
        used = self._node_used.setdefault(node, {})
        for name, amount in requests.items():
            used[name] = used.get(name, Fraction(0)) + amount
        self._node_pods[node] = self._node_pods.get(node, 0) + 1

    def _release(self, uid: str) -> bool:
        entry = self._pod_usage.pop(uid, None)
        if entry is None:
            return False
        node, requests = entry
        self._fit_cache.pop(node, None)
        used = self._node_used.get(node, {})
        for name, amount in requests.items():
            used[name] = used.get(name, Fraction(0)) - amount
        self._node_pods[node] = self._node_pods.get(node, 1) - 1
        return True

    def _node_added(self, node: Obj) -> None:
        self._node_names = None
        self.queue.move_all()

    def _node_updated(self, old: Obj, node: Obj) -> None:
        o_spec, n_spec = old.get("spec") or {}, node.get("spec") or {}
        if (
            _meta(old).get("labels") != _meta(node).get("labels")
            or o_spec.get("taints") != n_spec.get("taints")
            or o_spec.get("unschedulable") != n_spec.get("unschedulable")
            or (old.get("status") or {}).get("allocatable") != (node.get("status") or {}).get("allocatable")
        ):
            self.queue.move_all()

    def _node_deleted(self, node: Obj) -> None:
        self._node_names = None
        self._node_allocatable.pop(_meta(node).get("name", ""), None)
        self._search_cache.discard(_meta(node).get("name", ""))

    def _slice_set(self, obj: Obj) -> None:
        self.index.set_slice(obj)
        self.queue.move_all()

    def _class_set(self, obj: Obj) -> None:
        self.index.set_class(obj)
        self.queue.move_all()

    def _rule_set(self, obj: Obj) -> None:
        self.index.set_taint_rule(obj)
        self.queue.move_all()

    def _namespace_updated(self, old: Obj, namespace: Obj) -> None:
        if _meta(old).get("labels") != _meta(namespace).get("labels"):
            self.queue.move_all()  # the admin-access label may allow a claim now

    def _rule_deleted(self, obj: Obj) -> None:
        self.index.remove_taint_rule(_meta(obj).get("name", ""))
        self.queue.move_all()  # untainted devices may fit now

    # --- claims and the allocated-device state ---

    def _claim_added(self, claim: Obj) -> None:
        self._claim_keys[_meta(claim).get("uid", "")] = _key(claim)
        self._refresh(claim)
        self.queue.claim_ready(_key(claim))

    def _claim_updated(self, old: Obj, claim: Obj) -> None:
        key = _key(claim)
        self._claim_keys[_meta(claim).get("uid", "")] = key
        assumed = self._assumed_claims.get(key)
        if assumed is not None and (_rv(claim) >= _rv(assumed) or _meta(assumed).get("uid") != _meta(claim).get("uid")):
            del self._assumed_claims[key]
        self._refresh(claim)
        o_status, n_status = old.get("status") or {}, claim.get("status") or {}
        freed = (o_status.get("allocation") and not n_status.get("allocation")) or len(n_status.get("reservedFor") or []) < len(
            o_status.get("reservedFor") or []
        )
        if freed:
            self.queue.move_all()
        self.queue.claim_ready(key)

    def _claim_deleted(self, claim: Obj) -> None:
        key = _key(claim)
        uid = _meta(claim).get("uid", "")
        self._assumed_claims.pop(key, None)
        self._claim_keys.pop(uid, None)
        self._refresh(claim, gone=True)
        if (claim.get("status") or {}).get("allocation"):
            self.queue.move_all()

    def claim(self, namespace: str, name: str) -> Obj | None:
        """The newest known version of a claim: the informer's, or one this scheduler just wrote."""
        informed = self.claims.get(namespace, name)
        assumed = self._assumed_claims.get((namespace, name))
        if assumed is not None and (informed is None or _rv(assumed) > _rv(informed)):
            return assumed
        return informed

    def _refresh(self, claim: Mapping[str, Any], gone: bool = False) -> None:
        """Recompute one claim's effective allocation (in-flight, else newest known version)."""
        uid = _meta(claim).get("uid", "")
        if uid in self._in_flight:
            allocation = (self._in_flight[uid].get("status") or {}).get("allocation")
        elif gone:
            allocation = None
        else:
            current = self.claim(*_key(claim))
            allocation = (current or {}).get("status", {}).get("allocation") if current else None
        old = self._allocations.get(uid)
        if allocation:
            self._allocations[uid] = allocation
        else:
            self._allocations.pop(uid, None)
        if old == allocation or (not old and not allocation):
            return
        if not old and self._state is not None:
            self._state.add_allocation(allocation)  # only adds: cheap incremental update
        else:
            self._state = None  # something was freed or changed: rebuild lazily

    def allocated_state(self) -> AllocatedState:
        """Devices taken by allocated claims (informer + assumed) and in-flight allocations."""
        if self._state is None:
            state = AllocatedState()
            for allocation in self._allocations.values():
                state.add_allocation(allocation)
            self._state = state
        return self._state

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Sync the informers, then schedule until cancelled."""
        for inf in self.informers:
            inf.start()
        try:
            for inf in self.informers:
                await inf.wait_synced()
            log.info("caches synced", extra={"pods": len(self.pods.keys()), "nodes": len(self.nodes.keys()), "claims": len(self.claims.keys())})
            flusher = asyncio.create_task(self._flush_loop())
            try:
                await self._loop()
            finally:
                flusher.cancel()
        finally:
            for task in list(self._tasks):
                task.cancel()
            for task in list(self._tasks):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            for inf in self.informers:
                await inf.stop()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(30)
            self.queue.flush()

    async def _loop(self) -> None:
        while True:
            key = await self.queue.pop()
            try:
                self.schedule_one(key)
            except Exception:
                log.exception("scheduling attempt failed", extra={"pod": "/".join(key)})
                self.queue.retry(key)
            # Let informer events and binding tasks progress between cycles.
            await asyncio.sleep(0)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ one cycle

    def _resolve_claims(self, pod: Obj) -> _PodClaims | _Wait | str:
        """The pod's claims, a reason to wait for some of them, or an unschedulable message."""
        ns, _ = _key(pod)
        pod_uid = _meta(pod).get("uid", "")
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        out = _PodClaims()
        waiting: list[Key] = []
        why = ""
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
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
            claim = self.claim(ns, name)
            if claim is None:
                waiting.append((ns, name))
                why = f"waiting for resourceclaim {name!r} to be created"
                continue
            meta = _meta(claim)
            if meta.get("deletionTimestamp"):
                return f'resourceclaim "{name}" is being deleted'
            if template and not any(o.get("uid") == pod_uid and o.get("controller") for o in meta.get("ownerReferences") or []):
                return f'ResourceClaim {ns}/{name} was not created for pod {_meta(pod).get("name")} (pod is not owner)'
            uid = meta.get("uid", "")
            if uid in self._in_flight and self._in_flight_owner.get(uid) != pod_uid:
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
            return _Wait(waiting, why)
        return out

    def node_names(self) -> list[str]:
        """Node names, sorted (the rotation below starts at a moving offset)."""
        if self._node_names is None:
            keys = self.nodes.keys()
            self._node_names = sorted(name for _, name in keys)
        return self._node_names

    def schedule_one(self, key: Key) -> None:
        """One scheduling cycle for ``key``; writes are left to a binding task."""
        pod = self.pods.get(*key)
        if pod is None or not self.wants(pod):
            self.queue.delete(key)
            return
        if key in self._binding:
            self.queue.done(key)
            return
        self.stats.attempts += 1
        resolved = self._resolve_claims(pod)
        if isinstance(resolved, _Wait):
            log.debug("pod waits for claims", extra={"pod": "/".join(key), "why": resolved.why})
            self.queue.wait_for(key, resolved.claims)
            return
        names = self.node_names()
        if isinstance(resolved, str):
            self._unschedulable(pod, f"0/{len(names)} nodes are available: {resolved}.")
            return
        # Claim charges are added per node (they depend on the devices chosen); entries an earlier,
        # failed attempt wrote into the pod status must not count.
        requests = pod_requests(pod, node_allocatable=False)
        fit = _PodFit(pod, requests)
        allocator: Allocator | None = None
        if resolved.unallocated:
            allocator = Allocator(
                self.index,
                self.allocated_state(),
                self.features,
                namespace_labels=self._namespace_labels,
                timeout=self.filter_timeout,
                cache=self._search_cache,
            )
        selectors = [(c["status"]["allocation"].get("nodeSelector")) for c in resolved.allocated]
        if self.features.node_allocatable_resources:
            shared = self._shared_mapping_claim(pod, resolved)
            if shared is not None:
                self._unschedulable(pod, f"0/{len(names)} nodes are available: {shared}.")
                return
        reasons: dict[str, int] = {}
        best: tuple[int, str, Allocated | None, list[Obj]] | None = None
        feasible = 0
        n = len(names)
        start = self._next_start % n if n else 0
        processed = 0
        claim_mismatch = False
        for i in range(n):
            processed += 1
            name = names[(start + i) % n]
            node = self.nodes.get("", name)
            if node is None:
                continue
            reason, outcome = self._filter(pod, node, fit, selectors, allocator, resolved)
            if isinstance(reason, AllocationError):
                # Upstream's Filter returns an Error status for a broken claim or class, which
                # aborts the cycle with reason SchedulerError. It then retries on a backoff; the
                # pod waits here for a claim, class or slice event instead, which upstream's own
                # comment names as the nicer behaviour.
                self._unschedulable(pod, f'running "DynamicResources" filter plugin: {reason}', reason="SchedulerError")
                return
            if reason is not None:
                claim_mismatch = claim_mismatch or reason == REASON_CLAIM_NOT_ON_NODE
                reasons[reason] = reasons.get(reason, 0) + 1
                continue
            statuses: list[Obj] = []
            if self.features.node_allocatable_resources and resolved.claims:
                statuses = self._node_allocatable_statuses(pod, resolved, outcome)
                short = self._node_allocatable_misfit(node, pod, statuses) if statuses else None
                if short is not None:
                    reasons[short] = reasons.get(short, 0) + 1
                    continue
            feasible += 1
            score = self._score(node, allocator, outcome)
            if best is None or (score, name) < (best[0], best[1]):
                best = (score, name, outcome, statuses)
            if feasible >= self.nodes_to_find:
                break
        self._next_start = (start + processed) % n if n else 0
        if best is None:
            if claim_mismatch:
                self._deallocate_stale(pod, resolved)
            self._unschedulable(pod, fit_error_message(n, reasons))
            return
        self._reserve(pod, best[1], resolved, best[2], best[3])

    def _filter(
        self,
        pod: Obj,
        node: Obj,
        fit: _PodFit,
        selectors: list[Any],
        allocator: Allocator | None,
        claims: _PodClaims,
    ) -> tuple[str | AllocationError | None, Allocated | None]:
        """The first reason ``node`` does not fit (or None, with the allocation result)."""
        if fit.constrained and not matches_node_selector_and_affinity(pod, node):
            return REASON_AFFINITY, None
        node_spec = node.get("spec") or {}
        if node_spec.get("taints") or node_spec.get("unschedulable"):
            taint = untolerated_taint(pod, node)
            if taint is not None:
                return taint, None
        name = _meta(node).get("name", "")
        short = self._insufficient(name, node, fit)
        if short:
            return short[0], None
        for selector in selectors:
            if not node_selector_matches(selector, node):
                return REASON_CLAIM_NOT_ON_NODE, None
        if allocator is None:
            return None, None
        try:
            outcome = allocator.allocate(node, claims.unallocated)
        except AllocationError as exc:
            return exc, None
        if isinstance(outcome, Unschedulable):
            # Upstream's per-node reason is the short form; the details go to the debug log.
            if log.isEnabledFor(logging.DEBUG):
                log.debug("claims do not fit", extra={"pod": "/".join(_key(pod)), "node": name, "why": outcome.message})
            return outcome.reason, None
        return None, outcome

    # --- KEP-5517 node allocatable resources (DRANodeAllocatableResources) ---

    def _shared_mapping_claim(self, pod: Obj, claims: _PodClaims) -> str | None:
        """Why the pod may not use an allocated claim: its devices map capacity into node
        allocatable, which is charged once, so such a claim serves one pod only."""
        pod_uid = _meta(pod).get("uid", "")
        for claim in claims.allocated:
            others = [r for r in (claim.get("status") or {}).get("reservedFor") or [] if _is_pod_reference(r) and r.get("uid") != pod_uid]
            if others and has_node_allocatable_mapping(claim["status"]["allocation"], self.index):
                return f"resourceclaim {_meta(claim).get('name')} maps node allocatable resources and is already in use by pod {others[0].get('name')}"
        return None

    def _node_allocatable_statuses(self, pod: Obj, claims: _PodClaims, outcome: Allocated | None) -> list[Obj]:
        """The pod's ``status.nodeAllocatableResourceClaimStatuses`` for this node's allocation."""
        new = dict(zip((_meta(c).get("uid", "") for c in claims.unallocated), outcome.allocations, strict=True)) if outcome else {}
        statuses = []
        for claim in claims.claims:
            uid = _meta(claim).get("uid", "")
            allocation = new.get(uid) or (claim.get("status") or {}).get("allocation")
            containers = _claim_containers(pod, claims.entry_names.get(uid, ""))
            entry = node_allocatable_claim_status(_meta(claim).get("name", ""), allocation, self.index, containers)
            if entry is not None:
                statuses.append(entry)
        return statuses

    @staticmethod
    def _requests_with(pod: Obj, statuses: list[Obj]) -> Resources:
        """The pod's requests once ``statuses`` are its node-allocatable claim statuses (the one shared rule)."""
        return pod_requests({**pod, "status": {**(pod.get("status") or {}), "nodeAllocatableResourceClaimStatuses": statuses}})

    def _node_allocatable_misfit(self, node: Obj, pod: Obj, statuses: list[Obj]) -> str | None:
        """Nodes must declare the feature, and fit the pod's requests plus what its claims charge."""
        if NODE_ALLOCATABLE_FEATURE not in ((node.get("status") or {}).get("declaredFeatures") or []):
            return REASON_FEATURE_NOT_DECLARED
        total = self._requests_with(pod, statuses)
        name = _meta(node).get("name", "")
        short = insufficient(total, self._node_used.get(name, {}), self._node_pods.get(name, 0), self._allocatable(node))
        return short[0] if short else None

    def _insufficient(self, name: str, node: Obj, fit: _PodFit) -> list[str]:
        """NodeResourcesFit reasons for the pod's own requests on ``node`` (cached until the node's usage changes)."""
        allocatable = self._allocatable(node)
        cached = self._fit_cache.get(name)
        if cached is not None and cached[0] is allocatable and cached[1] == fit.key:
            return cached[2]
        short = insufficient(fit.requests, self._node_used.get(name, {}), self._node_pods.get(name, 0), allocatable)
        self._fit_cache[name] = (allocatable, fit.key, short)
        return short

    def _allocatable(self, node: Obj) -> Resources:
        """The node's allocatable resources, parsed once per node object the informer holds."""
        name = _meta(node).get("name", "")
        cached = self._node_allocatable.get(name)
        if cached is None or cached[0] is not node:
            cached = (node, node_allocatable(node))
            self._node_allocatable[name] = cached
        return cached[1]

    def _score(self, node: Obj, allocator: Allocator | None, outcome: Allocated | None) -> int:
        """Free devices left on the node after this allocation (lower is better: pack devices).

        Pods without claims to allocate spread instead: the score is the node's pod count
        (upstream's default LeastAllocated leans the same way), so they do not pile onto the first
        node by name and block its devices with the pods limit.
        """
        if allocator is None or outcome is None:
            return self._node_pods.get(_meta(node).get("name", ""), 0)
        if outcome.free_left is not None:
            return outcome.free_left
        return len(allocator.free_candidates(self.index.node_view(node))) - outcome.exclusive_devices

    def _reserve(self, pod: Obj, node_name: str, claims: _PodClaims, outcome: Allocated | None, statuses: list[Obj]) -> None:
        """Take the devices and node resources in memory, then start the binding task."""
        key = _key(pod)
        pod_uid = _meta(pod).get("uid", "")
        to_write: list[tuple[Obj, Mapping[str, Any] | None]] = []
        allocations = outcome.allocations if outcome is not None else []
        unallocated_uids = {_meta(c).get("uid") for c in claims.unallocated}
        by_uid = dict(zip((_meta(c).get("uid", "") for c in claims.unallocated), allocations, strict=True))
        for claim in claims.claims:
            uid = _meta(claim).get("uid", "")
            if uid in unallocated_uids:
                allocation = by_uid[uid]
                self._in_flight[uid] = {**claim, "status": {**(claim.get("status") or {}), "allocation": allocation}}
                self._in_flight_owner[uid] = pod_uid
                self._claim_keys[uid] = _key(claim)
                self._refresh(claim)
                to_write.append((claim, allocation))
            elif pod_uid not in _reserved_uids(claim):
                to_write.append((claim, None))
        self._charge(pod_uid, node_name, self._requests_with(pod, statuses) if statuses else pod_requests(pod, node_allocatable=False))
        self._binding[key] = pod_uid
        self.queue.done(key)
        self._spawn(self._bind(pod, node_name, to_write, statuses))

    def _unreserve(self, pod: Obj, claims: list[tuple[Obj, Mapping[str, Any] | None]]) -> None:
        pod_uid = _meta(pod).get("uid", "")
        for claim, allocation in claims:
            uid = _meta(claim).get("uid", "")
            if allocation is not None and self._in_flight_owner.get(uid) == pod_uid:
                self._in_flight.pop(uid, None)
                self._in_flight_owner.pop(uid, None)
                current = self.claim(*_key(claim))
                self._refresh(current or claim, gone=current is None)
                self.queue.claim_ready(_key(claim))
        self._release(pod_uid)
        self._binding.pop(_key(pod), None)

    # ------------------------------------------------------------------ writes

    def _claim_path(self, claim: Mapping[str, Any], subresource: str | None = None) -> str:
        ns, name = _key(claim)
        return resource_path(RESOURCE, "v1", "resourceclaims", ns, name, subresource)

    async def _bind(self, pod: Obj, node_name: str, claims: list[tuple[Obj, Mapping[str, Any] | None]], statuses: list[Obj]) -> None:
        """PreBind (claim status writes, the pod's node-allocatable claim statuses) and Bind; undo everything on failure."""
        key = _key(pod)
        ns, name = key
        written: list[Obj] = []
        try:
            for claim, allocation in claims:
                written.append(await self._write_claim(pod, claim, allocation))
            if statuses or (pod.get("status") or {}).get("nodeAllocatableResourceClaimStatuses"):
                # Merge patch replaces the whole list: a retried pod drops what an earlier attempt wrote.
                patch = {"status": {"nodeAllocatableResourceClaimStatuses": statuses or None}}
                await self.client.patch(resource_path("", "v1", "pods", ns, name, "status"), patch, patch_type="merge")
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns}, "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
            await self.client.post_raw(resource_path("", "v1", "pods", ns, name, "binding"), binding)
        except asyncio.CancelledError:
            # Leadership ended mid-write; the next leader finishes or undoes it (see module docstring).
            self._unreserve(pod, claims)
            raise
        except (ApiError, httpx.HTTPError, OSError, _BindFailure) as exc:
            self.stats.bind_failures += 1
            log.warning("binding failed", extra={"pod": f"{ns}/{name}", "node": node_name, "error": str(exc)})
            self._unreserve(pod, claims)
            for claim in written:
                with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
                    await self._drop_reservation(pod, claim)
            if self.pods.get(ns, name) is not None:
                self.queue.retry(key)
            return
        self._binding.pop(key, None)
        self.queue.succeeded(key)
        self.stats.scheduled += 1
        log.info("scheduled", extra={"pod": f"{ns}/{name}", "node": node_name, "claims": len(claims)})
        self._spawn(self._event(pod, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node_name}"))

    async def _write_claim(self, pod: Obj, claim: Obj, allocation: Mapping[str, Any] | None) -> Obj:
        """Add the finalizer, then allocation (if new) + this pod in reservedFor; retry on conflict."""
        pod_meta = _meta(pod)
        entry = {"resource": "pods", "name": pod_meta.get("name", ""), "uid": pod_meta.get("uid", "")}
        uid = _meta(claim).get("uid", "")
        obj: Obj = self.claim(*_key(claim)) or claim
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            meta = _meta(obj)
            if meta.get("uid") != uid:
                raise _BindFailure(f"claim {'/'.join(_key(claim))} was replaced")
            if meta.get("deletionTimestamp"):
                raise _BindFailure(f"claim {'/'.join(_key(claim))} is being deleted")
            status = obj.get("status") or {}
            current = status.get("allocation")
            if allocation is not None and current and _device_ids(current) != _device_ids(allocation):
                raise _BindFailure(f"claim {'/'.join(_key(claim))} got allocated elsewhere")
            if allocation is None and not current:
                raise _BindFailure(f"claim {'/'.join(_key(claim))} was deallocated")
            reserved = list(status.get("reservedFor") or [])
            workload = (obj.get("spec") or {}).get("reservedFor") if self.features.reserved_for_workloads else None
            if entry["uid"] in {r.get("uid") for r in reserved} or (
                # KEP-5194: a claim reserved for a workload serves any pod; pods are not listed.
                self.features.reserved_for_workloads and any(not _is_pod_reference(r) for r in reserved)
            ):
                self._claim_written(obj)
                return await self._protect(obj)
            if len(reserved) >= RESERVED_FOR_MAX:
                raise _BindFailure(f"claim {'/'.join(_key(claim))} is reserved for {RESERVED_FOR_MAX} consumers already")
            new_allocation = current or allocation
            new_reserved = [*reserved, entry]
            if workload and not reserved:
                # The first pod reserves the claim for the workload the creator named, not for itself.
                new_allocation = {**(new_allocation or {}), "reservedForAnyPod": True}
                new_reserved = [workload]
            try:
                new_status = {**status, "allocation": new_allocation, "reservedFor": new_reserved}
                obj = await self.client.update(self._claim_path(obj, "status"), {**obj, "status": new_status})
            except ApiError as exc:
                if exc.code != 409:
                    raise
                obj = await self.client.get(self._claim_path(claim))
                continue
            self._claim_written(obj)
            return await self._protect(obj)
        raise _BindFailure(f"claim {'/'.join(_key(claim))}: too many conflicts")

    async def _protect(self, obj: Obj) -> Obj:
        """Add the delete-protection finalizer to a claim that is allocated and reserved.

        Upstream adds it before the status write and removes it again in Unreserve; here it
        comes after, so a failed attempt never leaves the finalizer on an unallocated claim (the
        controller only removes it with a deallocation of its own). A claim deleted in between
        makes this write fail, and the pod is retried.
        """
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            meta = _meta(obj)
            finalizers = list(meta.get("finalizers") or [])
            if DELETE_PROTECTION_FINALIZER in finalizers:
                return obj
            if meta.get("deletionTimestamp"):
                raise _BindFailure(f"claim {'/'.join(_key(obj))} is being deleted")
            try:
                obj = await self.client.update(self._claim_path(obj), {**obj, "metadata": {**meta, "finalizers": [*finalizers, DELETE_PROTECTION_FINALIZER]}})
            except ApiError as exc:
                if exc.code != 409:
                    raise
                obj = await self.client.get(self._claim_path(obj))
                continue
            self._claim_written(obj)
            return obj
        raise _BindFailure(f"claim {'/'.join(_key(obj))}: too many conflicts")

    def _claim_written(self, obj: Obj) -> None:
        """Put a written claim into the assume cache and end its in-flight state."""
        key = _key(obj)
        uid = _meta(obj).get("uid", "")
        informed = self.claims.get(*key)
        if informed is None or _rv(obj) > _rv(informed):
            self._assumed_claims[key] = obj
        self._in_flight.pop(uid, None)
        self._in_flight_owner.pop(uid, None)
        self._refresh(obj)
        self.queue.claim_ready(key)

    async def _drop_reservation(self, pod: Obj, claim: Obj) -> None:
        """Undo: remove the pod from reservedFor; deallocate when nobody else reserves the claim."""
        pod_uid = _meta(pod).get("uid", "")
        for _ in range(CLAIM_WRITE_ATTEMPTS):
            try:
                obj = await self.client.get(self._claim_path(claim))
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
                written = await self.client.update(self._claim_path(obj, "status"), {**obj, "status": status})
            except ApiError as exc:
                if exc.code == 409:
                    continue
                raise
            self._claim_written(written)
            return

    def _deallocate_stale(self, pod: Obj, claims: _PodClaims) -> None:
        """PostFilter: free allocated claims that pin the pod to unfit nodes and serve only it."""
        pod_uid = _meta(pod).get("uid", "")
        for claim in claims.allocated:
            if _reserved_uids(claim) <= {pod_uid}:
                log.info("deallocating claim that pins an unschedulable pod", extra={"claim": "/".join(_key(claim)), "pod": "/".join(_key(pod))})
                self._spawn(self._deallocate(claim))

    async def _deallocate(self, claim: Obj) -> None:
        with contextlib.suppress(ApiError, httpx.HTTPError, OSError):
            obj = await self.client.get(self._claim_path(claim))
            status = {k: v for k, v in (obj.get("status") or {}).items() if k not in ("allocation", "reservedFor", "devices")}
            written = await self.client.update(self._claim_path(obj, "status"), {**obj, "status": status})
            self._claim_written(written)

    # ------------------------------------------------------------------ reporting

    def _unschedulable(self, pod: Obj, message: str, reason: str = "Unschedulable") -> None:
        """Park the pod and record why (condition + event, only when the message changes)."""
        key = _key(pod)
        self.stats.unschedulable += 1
        self.queue.unschedulable(key)
        uid = _meta(pod).get("uid", "")
        log.info("pod unschedulable", extra={"pod": "/".join(key), "why": message})
        if self._reported.get(uid) == message:
            return
        self._reported[uid] = message
        self._spawn(self._report(pod, message, reason))

    async def _report(self, pod: Obj, message: str, reason: str) -> None:
        ns, name = _key(pod)
        condition = {
            "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": now_rfc3339(),
        }
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                condition["lastTransitionTime"] = c.get("lastTransitionTime") or condition["lastTransitionTime"]
        try:
            await self.client.patch(resource_path("", "v1", "pods", ns, name, "status"), {"status": {"conditions": [condition]}}, patch_type="strategic")
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.info("could not update pod condition", extra={"pod": f"{ns}/{name}", "error": str(exc)})
        await self._event(pod, "Warning", "FailedScheduling", message)

    async def _event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        try:
            await record_event(self.client, {"apiVersion": "v1", "kind": "Pod", **pod}, reason, message, type_, component=self.scheduler_name)
        except (ApiError, httpx.HTTPError, OSError) as exc:
            log.info("could not record event", extra={"pod": "/".join(_key(pod)), "error": str(exc)})


class _BindFailure(Exception):
    """A PreBind check failed (claim changed under us); the pod is retried."""
