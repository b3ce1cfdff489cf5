"""Device taint eviction: delete pods whose allocated devices carry a NoExecute taint they do not tolerate.

The behaviour follows upstream's devicetainteviction controller (KEP-5055, v1.37):

- A taint comes from a device in a ResourceSlice (only slices of the pool's newest generation
  count) or from a DeviceTaintRule whose selector (driver, pool, device) matches an allocated
  device; rules apply even when no slice publishes the device any more.
- Only ``NoExecute`` taints evict. A taint is tolerated by a toleration in the allocation result
  of that device (``status.allocation.devices.results[].tolerations``) whose effect is
  ``NoExecute`` and which matches by key/operator/value. Without ``tolerationSeconds`` it is
  tolerated forever; otherwise the pod goes at ``timeAdded + min(tolerationSeconds)`` (negative
  counts as 0). An untolerated taint evicts at ``timeAdded``. A pod goes at the earliest time
  of any taint on any device of any of its claims; every change of taints, rules or claims
  re-evaluates that time, and when no taint is left the eviction is cancelled.
- Affected pods are scheduled pods that reference an allocated claim (``spec.resourceClaims``,
  generated names from ``status.resourceClaimStatuses``; a generated claim must be owned by
  the pod) and use it: listed in ``status.reservedFor``, or the claim is reserved for a
  non-pod consumer (a workload). They are found through an index of pods by claim.
- Eviction = Event ``DeviceTaintManagerEviction`` "Marking for deletion" on the pod, the
  ``DisruptionTarget`` condition (reason ``DeletionByDeviceTaintManager``), then a delete
  with a UID precondition. A cancelled eviction records "Cancelling deletion".
- Each DeviceTaintRule gets an ``EvictionInProgress`` condition in its status: the first
  time at once, later at most once per status period (upstream: 10 s), with upstream's
  reasons and messages (pods pending in how many namespaces, pods evicted since the
  controller started; for ``effect: None`` what NoExecute would do).

Feature gates as upstream: the controller runs only with DRADeviceTaints (kube-controller-manager
also needs DynamicResourceAllocation, which is locked on); DeviceTaintRules are watched and
applied only with DRADeviceTaintRules.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from controllers.objects import pod_claim_names
from kube.client import KubeClient, record_event, resource_path
from kube.dra.devicetaints import rule_selects as rule_matches
from kube.dra.tolerations import tolerates
from kube.errors import ApiError
from kube.indexer import Index
from kube.informer import Informer
from kube.objects import Obj
from kube.objects import meta as _meta
from kube.timeutil import now_rfc3339, parse_time
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("device-taint-eviction-controller")

ObjectKey = tuple[str, str]
PoolID = tuple[str, str]  # (driver, pool)
# A work item: ("pod", namespace, name, uid) or ("rule", "", name, uid).
Item = tuple[str, str, str, str]
# Why a pod is evicted: ("rule", name, uid) or ("slice", slice name, device, taint index).
Reason = tuple[str, ...]

COMPONENT = "device-taint-eviction-controller"
RESOURCE_GROUP = "resource.k8s.io"
NO_EXECUTE = "NoExecute"
CONDITION_TYPE = "EvictionInProgress"
DEFAULT_RULE_STATUS_PERIOD = 10.0  # upstream's ruleStatusPeriod


def _epoch(timestamp: Any) -> float:
    """Seconds since the epoch of an RFC 3339 time; a missing or broken one counts as long ago."""
    parsed = parse_time(timestamp) if isinstance(timestamp, str) else None
    return parsed.timestamp() if parsed is not None else 0.0


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many.format(count)


@dataclass(frozen=True)
class Eviction:
    """When a pod (or every pod of a claim) must go, and every taint that says so."""

    when: float
    reasons: frozenset[Reason]

    def merge(self, other: Eviction | None) -> Eviction:
        if other is None:
            return self
        return Eviction(min(self.when, other.when), self.reasons | other.reasons)

    def rule_uids(self) -> set[str]:
        return {r[2] for r in self.reasons if r[0] == "rule"}


@dataclass
class _Allocated:
    claim: Obj
    eviction: Eviction | None


class DeviceTaintEvictionController:
    """Event handlers compute eviction times without blocking; workers do the API calls."""

    def __init__(
        self,
        client: KubeClient,
        *,
        pods: Informer,
        claims: Informer,
        pods_by_claim: Index[ObjectKey],
        rules_enabled: bool = True,
        workers: int = 2,
        rule_status_period: float = DEFAULT_RULE_STATUS_PERIOD,
        watch_timeout_seconds: int | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        self.rule_status_period = rule_status_period
        self.pods = pods
        self.claims = claims
        self.pods_by_claim = pods_by_claim
        kw: Any = {"watch_timeout_seconds": watch_timeout_seconds}
        self.slices = Informer(client, resource_path(RESOURCE_GROUP, "v1", "resourceslices"), name="resourceslices", **kw)
        # Upstream does not even watch DeviceTaintRules while DRADeviceTaintRules is off.
        self.rules: Informer | None = (
            Informer(client, resource_path(RESOURCE_GROUP, "v1", "devicetaintrules"), name="devicetaintrules", **kw) if rules_enabled else None
        )
        self.queue: WorkQueue[Item] = WorkQueue()
        # (driver, pool) -> slice name -> slice.
        self._pools: dict[PoolID, dict[str, Obj]] = {}
        # Allocated claims and their eviction, plus which claims use devices of which pool.
        self._allocated: dict[ObjectKey, _Allocated] = {}
        self._claims_by_pool: dict[PoolID, set[ObjectKey]] = {}
        # Rules with effect NoExecute (the only ones that evict), by name; every rule by UID.
        self._evicting_rules: dict[str, Obj] = {}
        self._rules_by_uid: dict[str, Obj] = {}
        # (namespace, name, uid) of a pod -> when and why it must go.
        self._evict_at: dict[tuple[str, str, str], Eviction] = {}
        # Pods evicted because of a rule since this controller started, by rule UID.
        self._evicted_by_rule: dict[str, int] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._wire()

    @property
    def informers(self) -> list[Informer]:
        """The informers this controller reads (pods and claims are shared with the claim controller)."""
        return [self.pods, self.claims, self.slices, *([self.rules] if self.rules is not None else [])]

    # ---- event handlers (never block) -------------------------------------------------

    def _wire(self) -> None:
        self.pods.on_add(lambda pod: self._pod_changed(None, pod))
        self.pods.on_update(self._pod_changed)
        self.pods.on_delete(self._pod_deleted)
        self.claims.on_add(lambda claim: self._claim_changed(None, claim))
        self.claims.on_update(self._claim_changed)
        self.claims.on_delete(lambda claim: self._claim_changed(claim, None))
        self.slices.on_add(lambda s: self._slice_changed(None, s))
        self.slices.on_update(self._slice_changed)
        self.slices.on_delete(lambda s: self._slice_changed(s, None))
        if self.rules is not None:
            self.rules.on_add(lambda r: self._rule_changed(None, r))
            self.rules.on_update(self._rule_changed)
            self.rules.on_delete(lambda r: self._rule_changed(r, None))

    def _pod_changed(self, old: Obj | None, new: Obj) -> None:
        # Pods change often (status, conditions, our own DisruptionTarget): only what decides
        # eviction makes us look again.
        if old is not None and all(
            _dig(old, *path) == _dig(new, *path)
            for path in (("spec", "nodeName"), ("status", "resourceClaimStatuses"), ("status", "phase"), ("metadata", "uid"))
        ):
            return
        self._handle_pod(new)

    def _pod_deleted(self, pod: Obj) -> None:
        meta = _meta(pod)
        # Gone: nothing left to do, and no event about it.
        self._evict_at.pop((meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")), None)

    def _claim_changed(self, old: Obj | None, new: Obj | None) -> None:
        claim = new if new is not None else old
        assert claim is not None
        meta = _meta(claim)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        allocated = new is not None and bool((new.get("status") or {}).get("allocation"))
        previous = self._allocated.get(key)
        before = previous.eviction if previous is not None else None
        if not allocated:
            if previous is not None:
                self._forget_claim(key, previous.claim)
        else:
            assert new is not None
            same_allocation = previous is not None and _meta(previous.claim).get("uid") == meta.get("uid") and (
                (previous.claim.get("status") or {}).get("allocation") == (new.get("status") or {}).get("allocation")
            )
            if previous is not None and not same_allocation:
                self._forget_claim(key, previous.claim)
            if same_allocation and previous is not None:
                previous.claim = new  # the allocation is immutable: the eviction time stays
            else:
                self._allocated[key] = _Allocated(new, self._claim_eviction(new))
                for pool in _claim_pools(new):
                    self._claims_by_pool.setdefault(pool, set()).add(key)
        entry = self._allocated.get(key)
        if before is None and (entry is None or entry.eviction is None):
            return  # a claim without evicting taints, before and after, decides no pod's eviction
        # reservedFor may have changed: look at every pod using the claim.
        self._handle_pods_of(key)

    def _forget_claim(self, key: ObjectKey, claim: Obj) -> None:
        self._allocated.pop(key, None)
        for pool in _claim_pools(claim):
            members = self._claims_by_pool.get(pool)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._claims_by_pool[pool]

    def _slice_changed(self, old: Obj | None, new: Obj | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        spec = obj.get("spec") or {}
        pool_id = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        pool = self._pools.setdefault(pool_id, {})
        before = _tainted_devices(pool)
        if old is not None:
            pool.pop(_meta(old).get("name", ""), None)
        if new is not None:
            pool[_meta(new).get("name", "")] = new
        if not pool:
            del self._pools[pool_id]
        after = _tainted_devices(pool)
        changed = {d for d in before.keys() | after.keys() if before.get(d) != after.get(d)}
        if changed:
            self._reevaluate(k for k in self._claims_by_pool.get(pool_id, ()) if _uses_device(self._allocated[k].claim, pool_id, changed))

    def _rule_changed(self, old: Obj | None, new: Obj | None) -> None:
        rule = new if new is not None else old
        assert rule is not None
        meta = _meta(rule)
        if old is not None:
            self._rules_by_uid.pop(str(_meta(old).get("uid") or ""), None)
        if new is not None:
            self._rules_by_uid[str(meta.get("uid") or "")] = new
        if new is None:
            self._evicted_by_rule.pop(str(meta.get("uid") or ""), None)
            self._evicting_rules.pop(meta.get("name", ""), None)
        elif ((new.get("spec") or {}).get("taint") or {}).get("effect") == NO_EXECUTE:
            self._evicting_rules[meta.get("name", "")] = new
        else:
            self._evicting_rules.pop(meta.get("name", ""), None)
        same_spec = old is not None and new is not None and _meta(old).get("uid") == _meta(new).get("uid") and old.get("spec") == new.get("spec")
        if new is not None and not same_spec:
            # Status once per new rule and per spec change (for effect None that is the only update).
            self._queue_rule(new)
        if same_spec:
            return
        # Rule changes are rare: re-evaluate the claims the old or new selector covers.
        touched = [r for r in (old, new) if r is not None]
        self._reevaluate(
            key
            for key, entry in list(self._allocated.items())
            if any(rule_matches(r, *device) for r in touched for device in _claim_devices(entry.claim))
        )

    def _reevaluate(self, keys: Iterable[ObjectKey]) -> None:
        for key in list(keys):
            entry = self._allocated.get(key)
            if entry is None:
                continue
            eviction = self._claim_eviction(entry.claim)
            if eviction != entry.eviction:
                entry.eviction = eviction
                self._handle_pods_of(key)

    def _handle_pods_of(self, claim_key: ObjectKey) -> None:
        for pod in self.pods_by_claim.get(claim_key):
            self._handle_pod(pod)

    def _handle_pod(self, pod: Obj) -> None:
        meta = _meta(pod)
        ref = (str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or ""))
        if meta.get("deletionTimestamp"):
            # Already on its way out: no new eviction (one already due still finishes and counts,
            # as upstream counts it).
            return
        eviction = self._pod_eviction(pod)
        if eviction is None:
            if self._evict_at.pop(ref, None) is not None:
                log.info("cancelled pod eviction", extra={"pod": f"{ref[0]}/{ref[1]}"})
                self._spawn(self._event(ref, "Cancelling deletion"))
            return
        if self._evict_at.get(ref) == eviction:
            return  # already scheduled; its work item stays queued until it is done or cancelled
        log.info("pod is going to be evicted", extra={"pod": f"{ref[0]}/{ref[1]}", "in": round(eviction.when - time.time(), 3), "reasons": sorted(map("/".join, eviction.reasons))})
        self._evict_at[ref] = eviction
        self.queue.add_after(("pod", *ref), max(0.0, eviction.when - time.time()))
        # A rule is evicting: its status may need an update.
        for rule in self._rules(eviction.rule_uids()):
            self._queue_rule(rule)

    def _queue_rule(self, rule: Obj) -> None:
        meta = _meta(rule)
        self.queue.add(("rule", "", str(meta.get("name") or ""), str(meta.get("uid") or "")))

    def _rules(self, uids: Iterable[str]) -> list[Obj]:
        return [self._rules_by_uid[uid] for uid in uids if uid in self._rules_by_uid]

    # ---- computing eviction times ---------------------------------------------------

    def _device(self, pool_id: PoolID, name: str) -> tuple[str, Obj] | None:
        """(slice name, device) of a device in the pool's newest generation."""
        pool = self._pools.get(pool_id)
        if not pool:
            return None
        newest = _max_generation(pool)
        for slice_name, obj in pool.items():
            spec = obj.get("spec") or {}
            if _generation(spec) != newest:
                continue
            for device in spec.get("devices") or []:
                if device.get("name") == name:
                    return slice_name, device
        return None

    def _claim_eviction(self, claim: Obj, simulate: Obj | None = None) -> Eviction | None:
        """Earliest time any untolerated NoExecute taint on the claim's devices evicts, None if none.

        ``simulate`` is a rule to treat as NoExecute on top of the real ones (the None-effect preview).
        """
        rules = list(self._evicting_rules.values())
        if simulate is not None:
            rules.append(simulate)
        result: Eviction | None = None
        for res in _results(claim):
            driver, pool, device_name = str(res.get("driver") or ""), str(res.get("pool") or ""), str(res.get("device") or "")
            taints: list[tuple[Reason, Obj]] = []
            found = self._device((driver, pool), device_name)
            if found is not None:
                slice_name, device = found
                for index, taint in enumerate(device.get("taints") or []):
                    if taint.get("effect") == NO_EXECUTE:
                        taints.append((("slice", slice_name, device_name, str(index)), taint))
            for rule in rules:
                if rule_matches(rule, driver, pool, device_name):
                    rmeta = _meta(rule)
                    taint = (rule.get("spec") or {}).get("taint") or {}
                    taints.append((("rule", str(rmeta.get("name") or ""), str(rmeta.get("uid") or "")), {**taint, "effect": NO_EXECUTE}))
            tolerations = [t for t in res.get("tolerations") or [] if t.get("effect") == NO_EXECUTE]
            for reason, taint in taints:
                matching = [t for t in tolerations if tolerates(t, taint)]
                if any(t.get("tolerationSeconds") is None for t in matching):
                    continue  # tolerated forever
                when = _epoch(taint.get("timeAdded"))
                if matching:
                    when += max(0, min(int(t["tolerationSeconds"]) for t in matching))
                result = Eviction(when, frozenset({reason})).merge(result)
        return result

    def _pod_uses(self, pod: Obj, claim: Obj) -> bool:
        """The pod is scheduled and is (one of) the claim's consumers."""
        if not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        uid = _meta(pod).get("uid")
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if any(r.get("uid") == uid for r in reserved):
            return True
        # A claim reserved for a workload (not for pods one by one) is used by the pods that reference it.
        return any(not (r.get("resource") == "pods" and not r.get("apiGroup")) for r in reserved)

    def _pod_eviction(self, pod: Obj) -> Eviction | None:
        meta = _meta(pod)
        namespace = str(meta.get("namespace") or "")
        generated = {s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        result: Eviction | None = None
        for name in pod_claim_names(pod):
            entry = self._allocated.get((namespace, name))
            if entry is None or entry.eviction is None:
                continue
            if name in generated and not _controlled_by(entry.claim, str(meta.get("uid") or "")):
                continue  # a claim of that name that was not generated for this pod
            if not self._pod_uses(pod, entry.claim):
                continue
            result = entry.eviction.merge(result)
        return result

    # ---- workers --------------------------------------------------------------------

    async def process(self) -> None:
        """Process evictions and rule status updates until cancelled (the informers must have synced)."""
        log.info("caches synced, processing", extra={"rules": self.rules is not None})
        try:
            await self.queue.run(self._sync, self.workers, log_failures(log))
        finally:
            for task in list(self._background):
                task.cancel()

    async def _sync(self, item: Item) -> bool:
        kind, namespace, name, uid = item
        if kind == "pod":
            return await self._maybe_delete_pod(namespace, name, uid)
        return await self._maybe_update_rule_status(name, uid)

    async def _maybe_delete_pod(self, namespace: str, name: str, uid: str) -> bool:
        ref = (namespace, name, uid)
        eviction = self._evict_at.get(ref)
        if eviction is None:
            return True  # cancelled meanwhile
        delay = eviction.when - time.time()
        if delay > 0:
            self.queue.add_after(("pod", *ref), delay)  # the time moved
            return True
        path = resource_path("", "v1", "pods", namespace, name)
        try:
            pod = await self.client.get(path)
        except ApiError as exc:
            if exc.code != 404:
                raise
            self._evict_at.pop(ref, None)
            return True
        if _meta(pod).get("uid") != uid:
            self._evict_at.pop(ref, None)  # replaced by another pod of the same name
            return True
        if not _meta(pod).get("deletionTimestamp"):
            await self._event(ref, "Marking for deletion")
            await self._add_disruption_condition(path, pod)
            try:
                await self.client.delete(path, preconditions={"uid": uid}, missing_ok=True)
            except ApiError as exc:
                if exc.code != 409:  # 409: UID precondition, the pod was replaced: the retry sees that
                    raise
                return False
        log.info("evicted pod", extra={"pod": f"{namespace}/{name}", "latency": round(time.time() - eviction.when, 3)})
        self._evict_at.pop(ref, None)
        for rule in self._rules(eviction.rule_uids()):
            rule_uid = str(_meta(rule).get("uid"))
            self._evicted_by_rule[rule_uid] = self._evicted_by_rule.get(rule_uid, 0) + 1
            # Not at once: the rule status reads the caches, which have not seen the deletion yet.
            self.queue.add_after(("rule", "", str(_meta(rule).get("name")), rule_uid), self.rule_status_period)
        return True

    async def _add_disruption_condition(self, path: str, pod: Obj) -> None:
        """Set DisruptionTarget=True as upstream does before deleting (conflicts: re-read, retry)."""
        for _attempt in range(5):
            status = dict(pod.get("status") or {})
            conditions = [dict(c) for c in status.get("conditions") or []]
            wanted = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByDeviceTaintManager", "message": "Device Taint manager: deleting due to NoExecute taint"}
            existing = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
            if existing is not None and all(existing.get(k) == v for k, v in wanted.items()):
                return
            now = now_rfc3339()
            if existing is None:
                conditions.append({**wanted, "lastTransitionTime": now})
            else:
                changed = existing.get("status") != "True"
                existing.update(wanted)
                if changed:
                    existing["lastTransitionTime"] = now
            try:
                await self.client.update(f"{path}/status", {**pod, "status": {**status, "conditions": conditions}})
                return
            except ApiError as exc:
                if exc.code != 409:
                    raise
            pod = await self.client.get(path)
            if _meta(pod).get("deletionTimestamp"):
                return

    async def _event(self, ref: tuple[str, str, str], message: str) -> None:
        namespace, name, uid = ref
        involved = {"kind": "Pod", "apiVersion": "v1", "metadata": {"namespace": namespace, "name": name, "uid": uid}}
        try:
            await record_event(self.client, involved, "DeviceTaintManagerEviction", message, "Normal", COMPONENT)
        except (ApiError, httpx.TransportError, OSError) as exc:
            log.warning("could not record event", extra={"pod": f"{namespace}/{name}", "error": str(exc)})

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- DeviceTaintRule status ----------------------------------------------------

    async def _maybe_update_rule_status(self, name: str, uid: str) -> bool:
        if self.rules is None:
            return True
        rule = self.rules.get("", name)
        if rule is None or _meta(rule).get("uid") != uid:
            return True  # deleted or replaced
        meta = _meta(rule)
        generation = meta.get("generation")
        existing = next((c for c in (rule.get("status") or {}).get("conditions") or [] if c.get("type") == CONDITION_TYPE), None)
        if existing is not None and existing.get("observedGeneration") == generation:
            # At most one update per period while the spec is unchanged (counting pods may be expensive).
            since = time.time() - _epoch(existing.get("lastTransitionTime"))
            if since < self.rule_status_period:
                self.queue.add_after(("rule", "", name, uid), self.rule_status_period - since)
                return True
        condition = self._rule_condition(rule)
        if existing is not None and all(existing.get(k) == condition[k] for k in condition):
            return True
        condition["lastTransitionTime"] = now_rfc3339()
        body = {
            "apiVersion": f"{RESOURCE_GROUP}/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name, "uid": uid},
            "status": {"conditions": [condition]},
        }
        path = resource_path(RESOURCE_GROUP, "v1", "devicetaintrules", None, name, "status")
        try:
            await self.client.patch(path, body, patch_type="apply", field_manager=COMPONENT, force=True)
        except ApiError as exc:
            if exc.code in (404, 409):  # gone or replaced (the UID is a precondition)
                return True
            raise
        log.info("updated rule status", extra={"rule": name, "reason": condition["reason"], "text": condition["message"]})
        return True

    def _rule_condition(self, rule: Obj) -> dict[str, Any]:
        """The EvictionInProgress condition (without lastTransitionTime), worded as upstream words it."""
        effect = ((rule.get("spec") or {}).get("taint") or {}).get("effect")
        uid = str(_meta(rule).get("uid") or "")
        status, message = "False", ""
        if effect == NO_EXECUTE:
            pending, namespaces = self._pending_pods(rule, simulate=False)
            if pending:
                status, reason = "True", "PodsPendingEviction"
                message = _plural(pending, "1 pod needs to be evicted in ", "{} pods need to be evicted in ")
                message += _plural(namespaces, "1 namespace.", "{} different namespaces.")
            elif self._evicted_by_rule.get(uid):
                reason = "Completed"
            else:
                reason = "NotStarted"
        elif effect == "None":
            reason = "NoEffect"
            pending, namespaces = self._pending_pods(rule, simulate=True)
            published, allocated = self._selected_devices(rule)
            message = _plural(published, "1 published device selected. ", "{} published devices selected. ")
            message += _plural(allocated, "1 allocated device selected. ", "{} allocated devices selected. ")
            message += _plural(pending, "1 pod would be evicted in ", "{} pods would be evicted in ")
            message += _plural(namespaces, "1 namespace ", "{} different namespaces ")
            message += "if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update."
        else:
            reason = "OtherEffect"
            message = "Eviction only happens for the NoExecute effect."
        evicted = self._evicted_by_rule.get(uid, 0)
        if evicted:
            message += (" " if message else "") + _plural(evicted, "1 pod ", "{} pods ") + "evicted since starting the controller."
        return {
            "type": CONDITION_TYPE,
            "status": status,
            "reason": reason,
            "message": message,
            "observedGeneration": _meta(rule).get("generation"),
        }

    def _pending_pods(self, rule: Obj, *, simulate: bool) -> tuple[int, int]:
        """(pods not being deleted that this rule evicts or would evict, their namespaces)."""
        uid = _meta(rule).get("uid")
        spec = rule.get("spec") or {}
        simulated = {**rule, "spec": {**spec, "taint": {**(spec.get("taint") or {}), "effect": NO_EXECUTE}}}
        pods: set[tuple[str, str]] = set()
        for key, entry in self._allocated.items():
            if not any(rule_matches(rule, *device) for device in _claim_devices(entry.claim)):
                continue
            eviction = self._claim_eviction(entry.claim, simulated) if simulate else entry.eviction
            if eviction is None or uid not in eviction.rule_uids():
                continue
            for pod in self.pods_by_claim.get(key):
                if not _meta(pod).get("deletionTimestamp") and self._pod_counts_for(pod, entry.claim):
                    pods.add((key[0], str(_meta(pod).get("name"))))
        return len(pods), len({ns for ns, _ in pods})

    def _pod_counts_for(self, pod: Obj, claim: Obj) -> bool:
        uid = str(_meta(pod).get("uid") or "")
        name = _meta(claim).get("name")
        generated = {s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        if name in generated and not _controlled_by(claim, uid):
            return False
        return self._pod_uses(pod, claim)

    def _selected_devices(self, rule: Obj) -> tuple[int, int]:
        """(devices in slices of the newest pool generations, allocated devices) the rule's selector matches."""
        published = 0
        for (driver, pool_name), pool in self._pools.items():
            newest = _max_generation(pool)
            for obj in pool.values():
                spec = obj.get("spec") or {}
                if _generation(spec) == newest:
                    published += sum(1 for d in spec.get("devices") or [] if rule_matches(rule, driver, pool_name, str(d.get("name") or "")))
        allocated = sum(1 for entry in self._allocated.values() for device in _claim_devices(entry.claim) if rule_matches(rule, *device))
        return published, allocated


# ---- helpers over plain objects ------------------------------------------------------


def _dig(obj: Obj, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)  # type: ignore[assignment]
    return obj


def _results(claim: Obj) -> list[Obj]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[Obj] = (allocation.get("devices") or {}).get("results") or []
    return results


def _claim_devices(claim: Obj) -> list[tuple[str, str, str]]:
    return [(str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or "")) for r in _results(claim)]


def _claim_pools(claim: Obj) -> set[PoolID]:
    return {(driver, pool) for driver, pool, _ in _claim_devices(claim)}


def _uses_device(claim: Obj, pool_id: PoolID, devices: set[str]) -> bool:
    return any((driver, pool) == pool_id and device in devices for driver, pool, device in _claim_devices(claim))


def _controlled_by(claim: Obj, pod_uid: str) -> bool:
    return any(ref.get("controller") and ref.get("uid") == pod_uid for ref in _meta(claim).get("ownerReferences") or [])


def _generation(spec: Obj) -> int:
    try:
        return int((spec.get("pool") or {}).get("generation") or 0)
    except (TypeError, ValueError):
        return 0


def _max_generation(pool: dict[str, Obj]) -> int:
    return max((_generation(obj.get("spec") or {}) for obj in pool.values()), default=0)


def _tainted_devices(pool: dict[str, Obj]) -> dict[str, list[Obj]]:
    """Device name -> its NoExecute taints, over the pool's newest generation."""
    newest = _max_generation(pool)
    found: dict[str, list[Obj]] = {}
    for obj in pool.values():
        spec = obj.get("spec") or {}
        if _generation(spec) != newest:
            continue
        for device in spec.get("devices") or []:
            taints = [t for t in device.get("taints") or [] if t.get("effect") == NO_EXECUTE]
            if taints:
                found.setdefault(str(device.get("name") or ""), []).extend(taints)
    return found
