"""Why a pod does not fit: per node, per claim and per request, from the scheduler's cache and allocator.

The scheduler writes one line per failed attempt (``0/500 nodes are available: 500 cannot
allocate all claims``). This module says what is behind it, with the same rules that decided:

* :class:`DeviceExplainer` takes an :class:`~schedulers.allocator.Allocator` (the one the
  scheduling cycle builds) and one node. The allocator's ``allocate`` gives the verdict; only when
  it fails are the allocator's own per-device checks (selectors, in-use, taints, capacity,
  counters, constraints) asked again, device by device, to say which of them keeps each request
  from enough devices: no device of the class, a selector that is false (with the attribute
  values of a few devices), devices taken (by which claims), taints not tolerated, capacity or
  shared counters exhausted (requested vs left), a constraint no candidates satisfy, each
  alternative of a prioritized list in order, admin access not allowed, the filter timeout.
* :class:`Explainer` does a whole pod against a :class:`~schedulers.cache.SchedulerCache`: the
  pod's state (bound, gated, waiting for claims, broken claim or class), then every node's
  filters (node selector and affinity, taints, cpu/memory/pods, where allocated claims live)
  and device reasons, grouped by identical reasons ("430 nodes: every gpu.example.com device
  taken"), bounded in groups, examples and time.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from kube.dra.tolerations import tolerations_tolerate
from kube.features import Gate
from kube.informer import object_key
from kube.quantity import Quantity
from schedulers.allocator import (
    ADMIN_ACCESS_LABEL,
    TIMED_OUT,
    Allocated,
    AllocationError,
    Allocator,
    Device,
    DeviceID,
    NodeView,
    NotAdmin,
    PreparedClaim,
    PreparedRequest,
    Search,
    attribute_value,
    from_fraction,
    round_to_policy,
    share_consumption,
)
from schedulers.cache import Obj, SchedulerCache, is_pod_reference, meta
from schedulers.cycle import SchedulingCycle
from schedulers.framework import CycleState, ExplainContext, Reason, Status, WaitForClaims
from schedulers.plugins import dynamicresources, nodeaffinity, noderesources, tainttoleration

# Reason kinds (CamelCase like Kubernetes reasons); the tests hold one case per kind.
NODE_SELECTOR = nodeaffinity.KIND
NODE_TAINT = tainttoleration.KIND
NODE_RESOURCES = noderesources.KIND
CLAIM_ON_OTHER_NODE = dynamicresources.CLAIM_ON_OTHER_NODE
NO_DEVICE_OF_CLASS = "NoDeviceOfClass"
SELECTOR_FALSE = "SelectorFalse"
DEVICES_TAKEN = "DevicesTaken"
TAINT_NOT_TOLERATED = "DeviceTaintNotTolerated"
CAPACITY_EXHAUSTED = "CapacityExhausted"
COUNTERS_EXHAUSTED = "CountersExhausted"
NOT_ENOUGH_DEVICES = "NotEnoughDevices"
CONSTRAINT_UNSATISFIABLE = "ConstraintUnsatisfiable"
REQUESTS_COMPETE = "RequestsCompete"
NO_ALTERNATIVE = "NoAlternativeFits"
ADMIN_ACCESS_NOT_ALLOWED = "AdminAccessNotAllowed"
FILTER_TIMEOUT = "FilterTimeout"
POOL_INVALID = "PoolInvalid"
POOL_INCOMPLETE = "PoolIncomplete"
BINDING_CONDITIONS_OFF = "BindingConditionsDisabled"
NO_COMBINATION = "NoCombination"
NOT_EXAMINED = "NotExamined"

# Pod states of an explanation.
BOUND, GATED, OTHER_SCHEDULER, TERMINATING, FINISHED = "Bound", "Gated", "OtherScheduler", "Terminating", "Finished"
BINDING, WAITING_FOR_CLAIMS, ERROR = "Binding", "WaitingForClaims", "Error"
UNSCHEDULABLE, SCHEDULABLE, NO_NODES = "Unschedulable", "Schedulable", "NoNodes"

_BLOCKING = ("NoSchedule", "NoExecute")
# device.attributes["domain"].name, device.attributes["domain"]["name"], the same for capacity.
_REFERENCE = re.compile(r'device\.(attributes|capacity)\[\s*"([^"]*)"\s*\](?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*"([^"]*)"\s*\])')


@dataclass(frozen=True)
class ExplainLimits:
    """How big and how slow an explanation may get."""

    seconds: float = 2.0  # the whole pod; nodes not reached by then are counted as not examined
    groups: int = 10  # node groups shown; the rest are counted
    examples: int = 3  # devices, claims or values named per fact
    nodes_per_group: int = 5  # node names shown per group


def _bounded(items: Sequence[str], limit: int) -> str:
    """``a, b, c (+4 more)``."""
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _typed_value(attr: Any) -> str:
    """An attribute's value as CEL would show it (the typed field of the attribute)."""
    if not isinstance(attr, Mapping):
        return "<none>"
    for kind in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions"):
        if kind in attr:
            return str(attr[kind]).lower() if kind == "bool" else str(attr[kind])
    return "<none>"


def _device_attribute(dev: Device, domain: str, name: str) -> str:
    attr = dev.attributes.get(f"{domain}/{name}")
    if attr is None and domain == dev.driver:
        attr = dev.attributes.get(name)
    return _typed_value(attr)


def _device_capacity(dev: Device, domain: str, name: str) -> str:
    value = dev.capacity.get(f"{domain}/{name}") if domain and domain != dev.driver else dev.capacity.get(name)
    return value.canonical() if value is not None else "<none>"


def selector_values(expression: str, dev: Device) -> str:
    """The values of what ``expression`` reads from the device (``memory=40Gi, model=A``)."""
    parts: list[str] = []
    seen: set[str] = set()
    for match in _REFERENCE.finditer(expression):
        which, domain, dotted, indexed = match.groups()
        name = dotted or indexed or ""
        label = name if domain == dev.driver else f"{domain}/{name}"
        if label in seen:
            continue
        seen.add(label)
        value = _device_attribute(dev, domain, name) if which == "attributes" else _device_capacity(dev, domain, name)
        parts.append(f"{label}={value}")
    if not parts and "device.driver" in expression:
        parts.append(f"driver={dev.driver}")
    if not parts:
        parts = [f"{k}={_typed_value(v)}" for k, v in list(dev.attributes.items())[:3]]
    return ", ".join(parts) or "no attributes"


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


@dataclass
class _RequestFit:
    """One request (or subrequest) against one node's devices, with nothing else taken yet."""

    reasons: list[Reason]
    usable: list[Device]
    need: int
    request: PreparedRequest


class DeviceExplainer:
    """Device reasons for a pod's unallocated claims on one node, with an allocator's rules.

    ``users`` names the claims holding each allocated device; ``claim_name`` may hide some of
    them (claims of namespaces the asking user may not see).
    """

    def __init__(
        self,
        allocator: Allocator,
        users: Mapping[DeviceID, Sequence[str]] | None = None,
        *,
        examples: int = 3,
        claim_name: Callable[[str], str] = lambda ref: ref,
    ) -> None:
        self.allocator = allocator
        self.features = allocator.features
        self.users = users or {}
        self.examples = examples
        self.claim_name = claim_name

    def explain(self, node: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> list[Reason]:
        """Why ``claims`` cannot be allocated on ``node``; empty when they can.

        Raises :class:`AllocationError` like the allocator (broken claims or classes).
        """
        outcome = self.allocator.allocate(node, claims)
        if isinstance(outcome, Allocated):
            return []
        if outcome.reason == TIMED_OUT:
            timeout = self.allocator.timeout
            after = f" after {timeout:g}s" if timeout is not None else ""
            return [Reason(FILTER_TIMEOUT, f"the device search timed out{after} (the scheduler's filter timeout)")]
        try:
            probe = self.allocator.probe(node, claims)
        except NotAdmin:
            return self._admin_not_allowed(claims)
        view, prepared = probe.view, probe.claims
        invalid = [p for p in view.pools if p.invalid]
        if invalid:
            return [Reason(POOL_INVALID, "invalid resource pools on the node", details=[f"{p.id[0]}/{p.id[1]}: {p.invalid}" for p in invalid])]
        reasons: list[Reason] = []
        chosen: list[tuple[int, PreparedClaim, _RequestFit]] = []
        for ci, claim in enumerate(prepared):
            for top in claim.requests:
                if not top.subrequests:
                    fit = self._request(probe, ci, claim, top, view)
                    reasons.extend(fit.reasons)
                    chosen.append((ci, claim, fit))
                    continue
                fits = [self._request(probe, ci, claim, sub, view) for sub in top.subrequests]
                first = next((f for f in fits if not f.reasons), None)
                if first is None:
                    alternatives = [r for f in fits for r in f.reasons]
                    reasons.append(Reason(
                        NO_ALTERNATIVE, f"none of the {len(fits)} alternatives fits (tried in order)", claim.ref, top.name,
                        details=[f"{f.request.name}: {'; '.join(r.summary for r in f.reasons)}" for f in fits], alternatives=alternatives,
                    ))  # fmt: skip
                else:
                    chosen.append((ci, claim, first))
        if not reasons:
            reasons = self._combinations(probe, chosen) or [Reason(NO_COMBINATION, outcome.message.split(": ", 1)[-1])]
        incomplete = [p for p in view.pools if p.incomplete]
        if incomplete:
            reasons.append(Reason(
                POOL_INCOMPLETE, "resource pools being updated on the node are not used",
                details=[f"{p.id[0]}/{p.id[1]}: {_plural(len(p.devices), 'device')} published so far" for p in incomplete],
            ))  # fmt: skip
        return reasons

    # --- one request ---

    def _request(self, probe: Search, ci: int, claim: PreparedClaim, req: PreparedRequest, view: NodeView) -> _RequestFit:
        """Sort the node's devices by the first check that keeps ``req`` from them."""
        allocator, features = self.allocator, self.features
        candidates = view.candidates
        binding_off: list[Device] = []
        not_of_class: list[Device] = []
        selector_false: dict[int, list[Device]] = {}
        matching: list[Device] = []
        for dev in candidates:
            try:
                selectable = allocator.selectable(req, dev)
            except AllocationError:
                # The allocator (as upstream's) asks no selector of a device in use: the device is
                # taken, whatever its selectors would say; on a free one the error is the answer.
                if not probe.in_use(ci, req, dev):
                    raise
                selectable = True
            if selectable:
                matching.append(dev)
            elif dev.binding_conditions and not features.binding_conditions:
                binding_off.append(dev)
            elif not all(dev.evaluate(s) for s in req.class_selectors):
                not_of_class.append(dev)
            else:
                index = next(i for i, s in enumerate(req.selectors) if not dev.evaluate(s))
                selector_false.setdefault(index, []).append(dev)
        where = (claim.ref, req.name)
        if not matching:
            reasons: list[Reason] = []
            if binding_off:
                reasons.append(Reason(
                    BINDING_CONDITIONS_OFF, f"devices with binding conditions are not used ({Gate.DRADeviceBindingConditions} is off)", *where,
                    details=[_bounded([d.name for d in binding_off], self.examples)],
                ))  # fmt: skip
            if selector_false:
                reasons.extend(self._selector_reasons(req, selector_false, where))
            elif not binding_off:
                reasons.append(self._no_device_of_class(req, candidates, not_of_class, view, where))
            return _RequestFit(reasons, [], 0, req)
        need = probe.need(req)
        taken: list[Device] = []
        tainted: dict[str, list[Device]] = {}
        capacity: list[Device] = []
        counters: list[Device] = []
        lacking: list[Device] = []
        usable: list[Device] = []
        for dev in matching:
            if probe.in_use(ci, req, dev):
                taken.append(dev)
                continue
            blocking = [t for t in dev.taints if t.get("effect") in _BLOCKING and not tolerations_tolerate(req.tolerations, t)] if features.device_taints else []
            if blocking:
                tainted.setdefault(_taint_text(blocking[0]), []).append(dev)
                continue
            if probe.can_take(ci, req, dev):
                usable.append(dev)
            elif features.consumable_capacity and (probe.shared(dev) or req.capacity) and probe.capacity_for(dev, req) is False:
                capacity.append(dev)
            elif dev.consumes:
                counters.append(dev)
            else:
                lacking.append(dev)
        if len(usable) >= need and need > 0:
            if not any(d.consumes for d in usable) or probe.counters_suffice(usable, need):
                return _RequestFit([], usable, need, req)
            return _RequestFit([Reason(
                COUNTERS_EXHAUSTED, f"shared counters do not cover {need} devices together", *where,
                details=[f"{_bounded([d.name for d in usable], self.examples)} are free, their counters are not enough for {need}"], devices=[d.id for d in usable],
            )], usable, need, req)  # fmt: skip
        reasons = []
        cls = req.class_name
        if taken:
            summary = f"every {cls} device is taken" if len(taken) == len(matching) else f"{cls} devices are taken by other claims"
            reasons.append(Reason(DEVICES_TAKEN, summary, *where, details=[self._taken_by(taken)], devices=[d.id for d in taken]))
        for taint, devices in tainted.items():
            reasons.append(Reason(
                TAINT_NOT_TOLERATED, f"device taint {taint} is not tolerated", *where, details=[_bounded([d.name for d in devices], self.examples)], devices=[d.id for d in devices]
            ))  # fmt: skip
        if capacity:
            reasons.append(self._capacity_reason(probe, req, capacity, where))
        if counters:
            reasons.append(self._counters_reason(probe, counters, where))
        if lacking:
            attrs = sorted({con.attribute for con in probe.constraints[ci] if con.applies(req)})
            reasons.append(Reason(
                CONSTRAINT_UNSATISFIABLE, f"devices lack the constrained attribute {', '.join(attrs)}", *where,
                details=[_bounded([d.name for d in lacking], self.examples)],
            ))  # fmt: skip
        if len(usable) + len(taken) + len(capacity) + len(counters) + len(lacking) + sum(map(len, tainted.values())) < need or not reasons:
            mode = "all matching devices" if req.all_mode else _plural(need, f"{cls} device")
            reasons.append(Reason(
                NOT_ENOUGH_DEVICES, f"needs {mode}", *where,
                details=[f"{len(matching)} match on the node, {len(usable)} usable" + (f": {_bounded([d.name for d in usable], self.examples)}" if usable else "")],
            ))  # fmt: skip
        elif usable:
            reasons[0].details.append(f"{len(usable)} of {len(matching)} matching devices usable: {_bounded([d.name for d in usable], self.examples)}")
        if selector_false:
            reasons.extend(self._selector_reasons(req, selector_false, where))
        return _RequestFit(reasons, usable, need, req)

    def _no_device_of_class(self, req: PreparedRequest, candidates: list[Device], others: list[Device], view: NodeView, where: tuple[str, str]) -> Reason:
        summary = f"no device of class {req.class_name} on the node"
        if not candidates:
            pools = [p for p in view.pools if p.devices]
            detail = "the node has no published devices" if not pools else "the node's resource pools are not usable"
            return Reason(NO_DEVICE_OF_CLASS, summary, *where, details=[detail])
        by_driver: dict[str, int] = {}
        for dev in others:
            by_driver[dev.driver] = by_driver.get(dev.driver, 0) + 1
        expressions = [s.expression for s in req.class_selectors]
        counts = ", ".join(f"{_plural(n, 'device')} of {d}" for d, n in sorted(by_driver.items()))
        details = [f"the node has {counts}"]
        if expressions:
            details.append(f"class {req.class_name} selects `{' && '.join(expressions)}`")
        return Reason(NO_DEVICE_OF_CLASS, summary, *where, details=details)

    def _selector_reasons(self, req: PreparedRequest, failing: dict[int, list[Device]], where: tuple[str, str]) -> list[Reason]:
        reasons = []
        for index, devices in sorted(failing.items()):
            expression = req.selectors[index].expression
            by_values: dict[str, list[str]] = {}
            for dev in devices:
                by_values.setdefault(selector_values(expression, dev), []).append(dev.name)
            details = [
                f"{_plural(len(names), 'device')} ({_bounded(names, self.examples)}) with {values}"
                for values, names in list(by_values.items())[: self.examples]
            ]
            if len(by_values) > self.examples:
                details.append(f"(+{len(by_values) - self.examples} more kinds of values)")
            reasons.append(Reason(SELECTOR_FALSE, f"selector `{expression}` is false", *where, details=details))
        return reasons

    def _taken_by(self, devices: list[Device]) -> str:
        """``gpu-0, gpu-1 by default/a (pod p); gpu-2 by default/b``: devices grouped by who holds them."""
        by_holder: dict[str, list[str]] = {}
        for dev in devices:
            holders = [self.claim_name(u) for u in self.users.get(dev.id, ())] or ["a claim being allocated"]
            by_holder.setdefault(", ".join(dict.fromkeys(holders)), []).append(dev.name)
        items = [f"{_bounded(names, self.examples)} by {holder}" for holder, names in by_holder.items()]
        return "; ".join(items[: self.examples]) + (f"; (+{len(items) - self.examples} more claims)" if len(items) > self.examples else "")

    def _capacity_reason(self, probe: Search, req: PreparedRequest, devices: list[Device], where: tuple[str, str]) -> Reason:
        items = []
        keys: set[str] = set()
        for dev in devices:
            if not probe.shared(dev):
                short = [k for k, amount in req.capacity.items() if k not in dev.capacity or amount > dev.capacity[k]]
                keys.update(short)
                items.append(f"{dev.name}: " + ", ".join(
                    f"requests {req.capacity[k].canonical()} {k}, has {dev.capacity[k].canonical() if k in dev.capacity else 'none'}" for k in short
                ))  # fmt: skip
                continue
            consumed = share_consumption(dev, req)
            if consumed is None:
                missing = [k for k in req.capacity if k not in dev.capacity]
                bad = [k for k in req.capacity if k in dev.capacity and round_to_policy(req.capacity[k], dev.policies.get(k) or {}) is None]
                keys.update(missing + bad)
                facts = [f"has no {k}" for k in missing] + [f"request {req.capacity[k].canonical()} {k} is outside its request policy" for k in bad]
                items.append(f"{dev.name}: {', '.join(facts)}")
                continue
            taken = probe.allocated.capacity.get(dev.id) or {}
            facts = []
            for key, amount in consumed.items():
                left = dev.capacity[key] - taken.get(key, Quantity(0))
                if amount > left:
                    keys.add(key)
                    facts.append(f"requests {amount.canonical()} {key}, {left.canonical()} of {dev.capacity[key].canonical()} left")
            items.append(f"{dev.name}: {', '.join(facts)}")
        return Reason(
            CAPACITY_EXHAUSTED, f"not enough {', '.join(sorted(keys)) or 'capacity'} left on the devices", *where, details=items[: self.examples], devices=[d.id for d in devices]
        )  # fmt: skip

    def _counters_reason(self, probe: Search, devices: list[Device], where: tuple[str, str]) -> Reason:
        if not self.features.partitionable_devices:
            return Reason(COUNTERS_EXHAUSTED, f"partitionable devices are off ({Gate.DRAPartitionableDevices})", *where)
        items = []
        for dev in devices:
            available = self.allocator.available_counters((dev.driver, dev.pool))
            facts = []
            for set_name, counters in dev.consumes:
                for counter, amount in counters.items():
                    left = available.get((set_name, counter), Fraction(0))
                    if left < amount.as_fraction():
                        facts.append(f"{set_name}/{counter} needs {amount.canonical()}, {from_fraction(left, amount.format).canonical()} left")
            items.append(f"{dev.name}: {', '.join(facts)}")
        return Reason(COUNTERS_EXHAUSTED, "shared counters of the devices are used up by other devices", *where, details=items[: self.examples], devices=[d.id for d in devices])

    # --- requests together ---

    def _combinations(self, probe: Search, chosen: list[tuple[int, PreparedClaim, _RequestFit]]) -> list[Reason]:
        """Every request could be served alone: constraints or competition for the same devices."""
        lists = self.features.list_attributes
        reasons: list[Reason] = []
        for ci, claim in enumerate(probe.claims):
            for con in probe.constraints[ci]:
                fits = [f for c, _, f in chosen if c == ci and con.applies(f.request)]
                if len(fits) == 0:
                    continue
                total = sum(f.need for f in fits)
                devices = {d.id: d for f in fits for d in f.usable}
                values = {dev_id: attribute_value(d, con.attribute, lists) for dev_id, d in devices.items()}
                if any(v is not None and len(v) != 1 for v in values.values()):
                    continue  # list attributes intersect in ways counting does not capture
                groups: dict[Any, set[DeviceID]] = {}
                for dev_id, value in values.items():
                    if value is not None:
                        groups.setdefault(next(iter(value)), set()).add(dev_id)
                if con.distinct:
                    ok = len(groups) >= total
                    summary = f"distinctAttribute {con.attribute}: fewer different values than the {total} devices needed"
                else:
                    ok = any(
                        len(ids) >= total and all(sum(1 for d in f.usable if d.id in ids) >= f.need for f in fits) for ids in groups.values()
                    )
                    summary = f"matchAttribute {con.attribute}: no value is shared by the {total} devices needed"
                if ok:
                    continue
                names = [f"{d.name} ({_value_text(values[d.id])})" for d in devices.values()]
                reasons.append(Reason(
                    CONSTRAINT_UNSATISFIABLE, summary, claim.ref,
                    details=[f"requests {', '.join(f.request.name for f in fits)}; candidates: {_bounded(names, self.examples * 2)}"],
                ))  # fmt: skip
        if reasons:
            return reasons
        exclusive = [(claim, f) for _, claim, f in chosen if not f.request.admin and not any(probe.shared(d) for d in f.usable)]
        union = {d.id: d for _, f in exclusive for d in f.usable}
        total = sum(f.need for _, f in exclusive)
        if len(exclusive) > 1 and total > len(union):
            needs = [f"claim {claim.ref} request {f.request.name} ({f.need})" for claim, f in exclusive]
            return [Reason(
                REQUESTS_COMPETE, f"the pod's requests need {total} devices together, fewer are free for them",
                details=[f"needs: {_bounded(needs, self.examples)}", f"{len(union)} usable: {_bounded([d.name for d in union.values()], self.examples)}"],
            )]  # fmt: skip
        if len(chosen) > 1:
            # Shares of one device, admin access within one claim: each alone fits, not all at once.
            uses = [f"claim {claim.ref} request {f.request.name}: {_bounded([d.name for d in f.usable], self.examples)}" for _, claim, f in chosen]
            return [Reason(REQUESTS_COMPETE, "the pod's requests cannot all be served at once by the usable devices", details=uses[: self.examples])]
        return []

    def _admin_not_allowed(self, claims: Sequence[Mapping[str, Any]]) -> list[Reason]:
        labels = self.allocator.namespace_labels or {}
        reasons = []
        for c in claims:
            namespace = (c.get("metadata") or {}).get("namespace", "")
            if (labels.get(namespace) or {}).get(ADMIN_ACCESS_LABEL) == "true":
                continue
            ref = f"{namespace}/{(c.get('metadata') or {}).get('name', '')}"
            for top in ((c.get("spec") or {}).get("devices") or {}).get("requests") or []:
                for name, body in [(top.get("name", ""), top.get("exactly") or {})] + [
                    (f"{top.get('name', '')}/{s.get('name', '')}", s) for s in top.get("firstAvailable") or []
                ]:
                    if body.get("adminAccess"):
                        reasons.append(Reason(
                            ADMIN_ACCESS_NOT_ALLOWED, f"admin access is not allowed in namespace {namespace}", ref, name,
                            details=[f'the namespace needs the label {ADMIN_ACCESS_LABEL}="true"'],
                        ))  # fmt: skip
        return reasons


def _value_text(value: frozenset[Any] | None) -> str:
    if value is None:
        return "no value"
    return ", ".join(f'"{v[1]}"' if v[0] in ("string", "version") else str(v[1]).lower() if v[0] == "bool" else str(v[1]) for v in sorted(value, key=str))


# --- a whole pod --------------------------------------------------------------------------------


def allocated_devices(allocation: Mapping[str, Any] | None) -> list[DeviceID]:
    """The devices an allocation holds (admin access holds none)."""
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return [(r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results if not r.get("adminAccess")]


def device_users(claims: Iterable[Mapping[str, Any]]) -> dict[DeviceID, list[str]]:
    """Device -> the claims whose allocation holds it, shares included: ``namespace/name (pod p)``."""
    users: dict[DeviceID, list[str]] = {}
    for claim in claims:
        pods = [r.get("name", "") for r in (claim.get("status") or {}).get("reservedFor") or [] if is_pod_reference(r)]
        label = "/".join(object_key(dict(claim))) + (f" (pod {', '.join(pods)})" if pods else "")
        for dev_id in allocated_devices((claim.get("status") or {}).get("allocation")):
            users.setdefault(dev_id, []).append(label)
    return users


class Explainer:
    """Explanations of pods against one scheduler's cache and cycle (the leader's)."""

    def __init__(self, cache: SchedulerCache, cycle: SchedulingCycle, limits: ExplainLimits | None = None) -> None:
        self.cache = cache
        self.cycle = cycle
        self.limits = limits or ExplainLimits()

    def explain(self, pod: Obj, *, can_see_namespace: Callable[[str], bool] = lambda _ns: True) -> dict[str, Any]:
        """The explanation of ``pod`` (a JSON-ready dict), all at once."""
        steps = self._steps(pod, can_see_namespace)
        while (result := _advance(steps)) is None:
            pass
        return result

    async def explain_async(self, pod: Obj, *, can_see_namespace: Callable[[str], bool] = lambda _ns: True, slice_seconds: float = 0.02) -> dict[str, Any]:
        """``explain``, giving the event loop (the scheduler) a turn every ``slice_seconds``."""
        steps = self._steps(pod, can_see_namespace)
        turn = time.monotonic() + slice_seconds
        while (result := _advance(steps)) is None:
            if time.monotonic() >= turn:
                await asyncio.sleep(0)
                turn = time.monotonic() + slice_seconds
        return result

    def _steps(self, pod: Obj, can_see_namespace: Callable[[str], bool]) -> Generator[None, None, dict[str, Any]]:
        """The explanation, yielding between nodes (generator; its return value is the result)."""
        started = time.monotonic()
        limits = self.limits
        pod_meta = meta(pod)
        spec = pod.get("spec") or {}
        namespace = pod_meta.get("namespace", "")
        out: dict[str, Any] = {"pod": f"{namespace}/{pod_meta.get('name', '')}", "uid": pod_meta.get("uid", "")}
        condition = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if condition is not None and condition.get("message"):
            out["schedulerMessage"] = condition["message"]

        def finish(state: str, message: str, **extra: Any) -> dict[str, Any]:
            out.update(state=state, message=message, **extra)
            out["elapsedSeconds"] = round(time.monotonic() - started, 3)
            return out

        if spec.get("nodeName"):
            return finish(BOUND, f"the pod is bound to node {spec['nodeName']}", node=spec["nodeName"])
        if pod_meta.get("deletionTimestamp"):
            return finish(TERMINATING, "the pod is being deleted")
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return finish(FINISHED, f"the pod has finished ({pod['status']['phase']})")
        wanted = spec.get("schedulerName") or "default-scheduler"
        if not self.cache.follows(wanted):
            this = ", ".join(repr(n) for n in sorted(self.cache.followed))
            return finish(OTHER_SCHEDULER, f"the pod asks for scheduler {wanted!r}; this is {this}")
        gates = [g.get("name", "") for g in spec.get("schedulingGates") or []]
        if gates:
            return finish(GATED, f"the pod is not considered for scheduling until its scheduling gates are removed: {', '.join(gates)}")
        if self.cache.is_binding(object_key(pod)):
            return finish(BINDING, "the scheduler has placed the pod and is binding it now")

        state = self.cycle.begin(pod)
        if isinstance(state, WaitForClaims):
            waiting = [name for _, name in state.claims if not name.startswith("<")]
            return finish(WAITING_FOR_CLAIMS, state.why, waitingFor=waiting)
        names = self.cache.node_names()
        if isinstance(state, Status):
            return finish(ERROR if state.is_error else UNSCHEDULABLE, state.message, nodes={"total": len(names)})
        resolved = dynamicresources.dra_state(state).claims
        out["claims"] = [self._claim_summary(c, resolved.entry_names.get(meta(c).get("uid", ""), "")) for c in resolved.claims]
        if not resolved.claims:
            out["note"] = "the pod has no resource claims; only node filters apply"
        if not names:
            return finish(NO_NODES, "no nodes available to schedule pods", nodes={"total": 0})

        def claim_name(ref: str) -> str:
            return ref if can_see_namespace(ref.split("/", 1)[0]) else "a claim in another namespace"

        # The cycle's allocator (DynamicResources' PreFilter made it when something is to be
        # allocated, the extended resources' special claim included) says which devices keep it out.
        allocator = dynamicresources.dra_state(state).allocator
        explain_devices: Callable[[Obj, list[Obj]], list[Reason]] | None = None
        filter_timeout = self.cycle.filter_timeout
        left = limits.seconds
        if allocator is not None:
            claims = self.cache.claims.list()
            users = device_users(claims)
            refs = {meta(c).get("uid", ""): "/".join(object_key(c)) for c in claims}
            for uid, allocation in self.cache.in_flight_allocations().items():
                for dev_id in allocated_devices(allocation):
                    users.setdefault(dev_id, []).append(refs.get(uid, "a claim being allocated"))
            devices = DeviceExplainer(allocator, users, examples=limits.examples, claim_name=claim_name)
            try:
                allocator.prepare(resolved.unallocated)
            except AllocationError as exc:
                return finish(ERROR, str(exc), nodes={"total": len(names)})
            except NotAdmin:
                pass  # per node, like the scheduler

            def explain_devices(node: Obj, to_allocate: list[Obj]) -> list[Reason]:
                assert allocator is not None
                allocator.timeout = min(filter_timeout, left) if filter_timeout is not None else left
                reasons = devices.explain(node, to_allocate)
                if reasons and reasons[0].kind == FILTER_TIMEOUT and (filter_timeout is None or left < filter_timeout):
                    reasons = [Reason(NOT_EXAMINED, "not examined: the explanation ran out of time")]
                return reasons

        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        fits: list[str] = []
        examined = 0
        not_examined = 0
        for name in names:
            left = limits.seconds - (time.monotonic() - started)
            if left <= 0:
                not_examined += 1
                continue
            node = self.cache.nodes.get("", name)
            if node is None:
                continue
            examined += 1
            try:
                reasons = self.node_reasons(state, pod, node, explain_devices)
                # As the cycle: where pods are nominated (preemptors waiting), the node must also
                # pass with them counted as placed.
                nominated = self.cycle.nominated_state(state, pod, node) if name in self.cache.nominated_on else None
                if nominated is not None:
                    seen = {r.key for r in reasons}
                    reasons += [r for r in self.node_reasons(nominated, pod, node, explain_devices) if r.key not in seen]
            except AllocationError as exc:
                return finish(ERROR, f"node {name}: {exc}", nodes={"total": len(names)})
            if not reasons:
                fits.append(name)
            else:
                key = tuple(r.key for r in reasons)
                group = groups.get(key)
                if group is None:
                    groups[key] = group = {"count": 0, "nodes": [], "named": []}
                group["count"] += 1
                if len(group["nodes"]) < limits.nodes_per_group:
                    group["nodes"].append(name)
                    group["named"].append(reasons)  # each node's own facts
            yield
        if not_examined:
            groups[("not examined",)] = {
                "count": not_examined, "nodes": [],
                "named": [[Reason(NOT_EXAMINED, f"not examined: the explanation stops after {limits.seconds:g}s")]],
            }  # fmt: skip
        ordered = sorted(groups.values(), key=lambda g: -g["count"])
        shown = ordered[: limits.groups]
        for g in shown:
            g["reasons"] = group_reasons(g["nodes"], g["named"])
        rendered = [{"count": g["count"], "nodes": g["nodes"], "reasons": [r.to_dict() for r in g["reasons"]]} for g in shown]
        nodes: dict[str, Any] = {"total": len(names), "examined": examined, "fit": len(fits)}
        if fits:
            nodes["fitting"] = fits[: limits.nodes_per_group]
        extra: dict[str, Any] = {"nodes": nodes, "groups": rendered}
        if len(ordered) > len(shown):
            extra["moreGroups"] = {"groups": len(ordered) - len(shown), "nodes": sum(g["count"] for g in ordered[len(shown):])}
        if fits:
            return finish(SCHEDULABLE, f"{len(fits)}/{len(names)} nodes fit now ({_bounded(fits, limits.nodes_per_group)}); the scheduler places the pod on its next attempt", **extra)
        parts = [f"{g['count']} {'node' if g['count'] == 1 else 'nodes'}: {'; '.join(r.text() for r in g['reasons'])}" for g in shown]
        return finish(UNSCHEDULABLE, f"0/{len(names)} nodes fit. " + ". ".join(parts[:3]) + ("." if parts else ""), **extra)

    @staticmethod
    def node_reasons(state: CycleState, pod: Obj, node: Obj, explain_devices: Callable[[Obj, list[Obj]], list[Reason]] | None = None) -> list[Reason]:
        """Every reason of every filter the cycle runs for the pod against ``node`` (the cycle
        stops at the first); the device search only where nothing else keeps the node out."""
        reasons: list[Reason] = []
        for plugin in state.filters:
            reasons += plugin.explain(state, pod, node, ExplainContext(reasons, explain_devices))
        return reasons

    def _claim_summary(self, claim: Obj, entry: str) -> dict[str, Any]:
        allocation = (claim.get("status") or {}).get("allocation")
        requests = []
        for top in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            bodies = [(top.get("name", ""), top.get("exactly") or {})] if top.get("exactly") else [
                (f"{top.get('name', '')}/{s.get('name', '')}", s) for s in top.get("firstAvailable") or []
            ]
            for request_name, body in bodies:
                item: dict[str, Any] = {"name": request_name, "deviceClassName": body.get("deviceClassName", "")}
                if (body.get("allocationMode") or "ExactCount") == "All":
                    item["allocationMode"] = "All"
                else:
                    item["count"] = int(body.get("count") or 1)
                selectors = [s.get("cel", {}).get("expression", "") for s in body.get("selectors") or []]
                if selectors:
                    item["selectors"] = selectors
                if body.get("adminAccess"):
                    item["adminAccess"] = True
                requests.append(item)
        out: dict[str, Any] = {"name": "/".join(object_key(claim)), "entry": entry, "allocated": bool(allocation), "requests": requests}
        if allocation:
            out["devices"] = [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in (allocation.get("devices") or {}).get("results") or []]
        return out


def group_reasons(nodes: Sequence[str], named: Sequence[Sequence[Reason]]) -> list[Reason]:
    """The reasons of a group of nodes (same kinds and summaries) with the facts of each node
    named: details that differ are told apart by node (``gpu-0`` of one node is not ``gpu-0`` of
    another), devices are those of all of them."""

    def merged(same: list[Reason]) -> Reason:
        first = same[0]
        alike = all(r.details == first.details for r in same)
        details = list(first.details) if alike else [f"{node}: {d}" for node, r in zip(nodes, same, strict=True) for d in r.details]
        alternatives = [merged([r.alternatives[i] for r in same]) for i in range(len(first.alternatives))]
        devices = list(dict.fromkeys(d for r in same for d in r.devices))
        return replace(first, details=details, alternatives=alternatives, devices=devices)

    return [merged([reasons[i] for reasons in named]) for i in range(len(named[0]))]


def _advance(steps: Generator[None, None, dict[str, Any]]) -> dict[str, Any] | None:
    """One step of an explanation: its result once it is done, else None."""
    try:
        next(steps)
    except StopIteration as done:
        result: dict[str, Any] = done.value
        return result
    return None


__all__ = ["DeviceExplainer", "ExplainLimits", "Explainer", "Reason", "allocated_devices", "device_users", "selector_values"]
