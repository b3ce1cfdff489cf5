"""The cluster's devices and claims as people look at them, from the API objects alone.

:func:`device_rows` turns ResourceSlices (newest generation of each pool), DeviceTaintRules,
ResourceClaims and Pods into one row per device: where it is, what it is, how much of it is
used and by whom, its taints and health, and one state that sums it up (the dashboard's colour):

* ``unhealthy``: a pod using it reports it Unhealthy (the kubelet's allocatedResourcesStatus);
* ``tainted``: a NoSchedule or NoExecute taint (from the slice or a DeviceTaintRule);
* ``allocated``: a claim holds it exclusively;
* ``shared``: claims hold shares of it (consumable capacity), ``usage`` says how full it is;
* ``blocked``: free, but the shared counters it draws on are used up by other devices;
* ``free``.

:func:`claim_rows` does the same for ResourceClaims (state, devices, who reserved them, node).
``kubectl dra devices`` and ``kubectl dra claims`` print these; the dashboard draws them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

from kube.dra.devicetaints import rule_selects
from kube.objects import Obj
from kube.quantity import Quantity, parse_quantity_or_none

DeviceKey = tuple[str, str, str]  # driver, pool, device

STATES = ("free", "shared", "blocked", "allocated", "tainted", "unhealthy")
_BLOCKING = ("NoSchedule", "NoExecute")
MAX_SHOWN_ATTRIBUTES = 3
LONG_VALUE = 24  # attribute values longer than this (UUIDs) are left out of the summary
# The event reason of the kubelet when it cannot prepare a pod's devices (NodePrepareResources failed).
FAILED_PREPARE_REASON = "FailedPrepareDynamicResources"


@dataclass
class DeviceRow:
    node: str  # the node the device is on; "" for devices reachable from several nodes
    driver: str
    pool: str
    device: str
    slice: str
    state: str = "free"
    attributes: dict[str, str] = field(default_factory=dict)
    capacity: dict[str, str] = field(default_factory=dict)  # name -> "used/total"
    usage: float = 0.0  # the fullest capacity, 0..1 (1 when allocated exclusively)
    claims: list[str] = field(default_factory=list)  # namespace/name of the claims holding it
    pods: list[str] = field(default_factory=list)  # namespace/name of the pods those claims are reserved for
    taints: list[str] = field(default_factory=list)  # key=value:Effect
    health: str = ""  # Healthy, Unhealthy, Unknown, or "" when nobody reports
    admin: list[str] = field(default_factory=list)  # claims with admin access to it
    nodes: str = ""  # for devices without a node: which nodes reach it

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ClaimRow:
    namespace: str
    name: str
    state: str  # pending, allocated, allocated,reserved, deleting
    devices: list[str]  # driver/pool/device
    reserved_for: list[str]  # pods (namespace/name) or other consumers (resource/name)
    node: str
    created: str
    requests: list[str] = field(default_factory=list)  # "gpu: 1 x gpu.example.com"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _typed(attr: Any) -> str:
    if not isinstance(attr, Mapping):
        return ""
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            return str(attr[kind]).lower() if kind == "bool" else str(attr[kind])
    for kind in ("strings", "ints", "bools", "versions"):
        if kind in attr:
            return ",".join(str(v) for v in attr[kind])
    return ""


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def newest_slices(slices: Iterable[Obj]) -> list[Obj]:
    """The slices of each pool's newest generation (older ones are being replaced)."""
    newest: dict[tuple[str, str], int] = {}
    items = list(slices)
    for s in items:
        spec = s.get("spec") or {}
        pool = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
        newest[pool] = max(newest.get(pool, 0), int((spec.get("pool") or {}).get("generation") or 0))
    return [
        s for s in items
        if int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0)
        == newest[((s.get("spec") or {}).get("driver", ""), ((s.get("spec") or {}).get("pool") or {}).get("name", ""))]
    ]  # fmt: skip


def _node_scope(spec: Mapping[str, Any], dev: Mapping[str, Any]) -> tuple[str, str]:
    """(node, which nodes) of a device: its node, or "" and a description of the nodes that reach it."""
    if spec.get("perDeviceNodeSelection"):
        if dev.get("nodeName"):
            return str(dev["nodeName"]), ""
        return "", "all nodes" if dev.get("allNodes") else "nodes matching a selector"
    if spec.get("nodeName"):
        return str(spec["nodeName"]), ""
    return "", "all nodes" if spec.get("allNodes") else "nodes matching a selector"


def _container_statuses(pod: Obj) -> list[Obj]:
    status = pod.get("status") or {}
    return list(status.get("containerStatuses") or []) + list(status.get("initContainerStatuses") or [])


def reports_device_health(pod: Obj | None) -> bool:
    """Whether a kubelet reports the health of the pod's devices (all a pod adds to the device rows)."""
    return pod is not None and any(c.get("allocatedResourcesStatus") for c in _container_statuses(pod))


def _health(pods: Iterable[Obj], claims_by_ref: Mapping[str, Obj]) -> dict[DeviceKey, str]:
    """Device health as the kubelets report it in the status of the pods using the devices."""
    by_id: dict[str, DeviceKey] = {}
    for claim in claims_by_ref.values():
        for entry in (claim.get("status") or {}).get("devices") or []:
            key = (entry.get("driver", ""), entry.get("pool", ""), entry.get("device", ""))
            by_id["/".join(key)] = key
            for cdi in (entry.get("data") or {}).get("cdiDeviceIDs") or []:
                by_id[str(cdi)] = key
    health: dict[DeviceKey, str] = {}
    worst = {"Unhealthy": 2, "Unknown": 1, "Healthy": 0}
    for pod in pods:
        for container in _container_statuses(pod):
            for entry in container.get("allocatedResourcesStatus") or []:
                for resource in entry.get("resources") or []:
                    rid = str(resource.get("resourceID") or "")
                    key = by_id.get(rid) or (tuple(rid.split("/", 2)) if rid.count("/") >= 2 else None)  # type: ignore[assignment]
                    if key is None:
                        continue
                    value = str(resource.get("health") or "Unknown")
                    if worst.get(value, 1) >= worst.get(health.get(key, "Healthy"), 0):
                        health[key] = value
    return health


def _consumers(claim: Obj) -> list[str]:
    namespace = (claim.get("metadata") or {}).get("namespace", "")
    out = []
    for ref in (claim.get("status") or {}).get("reservedFor") or []:
        if not ref.get("apiGroup") and ref.get("resource") == "pods":
            out.append(f"{namespace}/{ref.get('name', '')}")
        else:
            out.append(f"{ref.get('resource', '')}/{ref.get('name', '')}")
    return out


def _results(claim: Obj) -> list[Obj]:
    return list((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])


def claim_pools(claim: Obj | None) -> set[tuple[str, str]]:
    """(driver, pool) of every device a claim holds or reports on: the device rows it shows in."""
    if claim is None:
        return set()
    entries = _results(claim) + list((claim.get("status") or {}).get("devices") or [])
    return {(e.get("driver", ""), e.get("pool", "")) for e in entries}


def slice_pool(resource_slice: Obj) -> tuple[str, str]:
    spec = resource_slice.get("spec") or {}
    return spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")


def _quantity(value: Any) -> Quantity | None:
    if isinstance(value, Mapping):
        value = value.get("value")
    return parse_quantity_or_none(value) if value is not None else None


def device_rows(slices: Iterable[Obj], claims: Iterable[Obj], pods: Iterable[Obj] = (), taint_rules: Iterable[Obj] = ()) -> list[DeviceRow]:
    """One row per published device (see the module docstring), ordered by node, driver, pool, device."""
    rules = list(taint_rules)
    claims_by_ref = {_ref(c): c for c in claims}
    exclusive: dict[DeviceKey, list[str]] = {}
    shares: dict[DeviceKey, list[tuple[str, dict[str, Quantity]]]] = {}
    admin: dict[DeviceKey, list[str]] = {}
    for ref, claim in claims_by_ref.items():
        for r in _results(claim):
            key = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            if r.get("adminAccess"):
                admin.setdefault(key, []).append(ref)
            elif r.get("shareID"):
                consumed = {k: q for k, v in (r.get("consumedCapacity") or {}).items() if (q := _quantity(v)) is not None}
                shares.setdefault(key, []).append((ref, consumed))
            else:
                exclusive.setdefault(key, []).append(ref)
    pods_list = list(pods)
    health = _health(pods_list, claims_by_ref)
    rows: list[DeviceRow] = []
    counters: dict[tuple[str, str], dict[tuple[str, str], Fraction]] = {}  # pool -> (set, counter) -> left
    consumers: dict[tuple[str, str], list[tuple[DeviceRow, list[tuple[str, str, Fraction]]]]] = {}
    for s in newest_slices(slices):
        spec = s.get("spec") or {}
        driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
        left = counters.setdefault((driver, pool), {})
        for counter_set in spec.get("sharedCounters") or []:
            for name, value in (counter_set.get("counters") or {}).items():
                q = _quantity(value)
                left[(counter_set.get("name", ""), name)] = q.as_fraction() if q is not None else Fraction(0)
        for dev in spec.get("devices") or []:
            node, scope = _node_scope(spec, dev)
            row = DeviceRow(node, driver, pool, dev.get("name", ""), (s.get("metadata") or {}).get("name", ""), nodes=scope)
            key = row.key
            attrs = {name: _typed(value) for name, value in sorted((dev.get("attributes") or {}).items())}
            row.attributes = attrs
            taints = list(dev.get("taints") or []) + [(r.get("spec") or {}).get("taint") or {} for r in rules if rule_selects(r, driver, pool, row.device)]
            row.taints = [_taint_text(t) for t in taints]
            row.claims = list(exclusive.get(key, [])) + [ref for ref, _ in shares.get(key, [])]
            row.admin = list(admin.get(key, []))
            row.pods = sorted({p for ref in row.claims for p in _consumers(claims_by_ref[ref])})
            row.health = health.get(key, "")
            used: dict[str, Quantity] = {}
            for _, consumed in shares.get(key, []):
                for k, q in consumed.items():
                    used[k] = used.get(k, Quantity(0)) + q
            fullest = 0.0
            for name, value in sorted((dev.get("capacity") or {}).items()):
                total = _quantity(value)
                if total is None:
                    continue
                taken = total if key in exclusive else used.get(name, Quantity(0))
                row.capacity[name] = f"{taken.canonical() if taken.as_fraction() else '0'}/{total.canonical()}"
                if total.as_fraction() > 0:
                    fullest = max(fullest, float(taken.as_fraction() / total.as_fraction()))
            row.usage = 1.0 if key in exclusive else (fullest if key in shares else 0.0)
            if key in exclusive:
                row.state = "allocated"
            elif key in shares:
                row.state = "shared"
            needs = [
                (c.get("counterSet", ""), name, q.as_fraction())
                for c in dev.get("consumesCounters") or [] for name, value in (c.get("counters") or {}).items() if (q := _quantity(value)) is not None
            ]  # fmt: skip
            if needs:
                consumers.setdefault((driver, pool), []).append((row, needs))
            if any(t.get("effect") in _BLOCKING for t in taints):
                row.state = "tainted"
            if row.health == "Unhealthy":
                row.state = "unhealthy"
            rows.append(row)
    # Shared counters: what allocated devices draw is gone for the free ones.
    for pool, devices in consumers.items():
        left = counters.get(pool, {})
        for row, needs in devices:
            if row.claims:
                for set_name, name, amount in needs:
                    left[(set_name, name)] = left.get((set_name, name), Fraction(0)) - amount
        for row, needs in devices:
            if row.state == "free" and any(left.get((set_name, name), Fraction(0)) < amount for set_name, name, amount in needs):
                row.state = "blocked"
    rows.sort(key=lambda r: (r.node == "", r.node, r.driver, r.pool, _natural(r.device)))
    return rows


def _natural(name: str) -> tuple[Any, ...]:
    """gpu-2 before gpu-10."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1, name)


def key_attributes(attributes: Mapping[str, str], limit: int = MAX_SHOWN_ATTRIBUTES) -> str:
    """A few attributes worth a table column (short values only)."""
    shown = [f"{k.rsplit('/', 1)[-1]}={v}" for k, v in attributes.items() if v and len(v) <= LONG_VALUE]
    return ",".join(shown[:limit])


def claim_node(claim: Obj, pods_by_ref: Mapping[str, Obj]) -> str:
    """The node a claim's devices are on (its allocation's node selector), else its pods' node."""
    selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or []:
        for field_req in term.get("matchFields") or []:
            if field_req.get("key") == "metadata.name" and field_req.get("operator") == "In" and len(field_req.get("values") or []) == 1:
                return str(field_req["values"][0])
    for ref in _consumers(claim):
        node = ((pods_by_ref.get(ref) or {}).get("spec") or {}).get("nodeName")
        if node:
            return str(node)
    return ""


def claim_rows(claims: Iterable[Obj], pods: Iterable[Obj] = ()) -> list[ClaimRow]:
    """One row per claim, ordered by namespace and name."""
    pods_by_ref = {_ref(p): p for p in pods}
    rows = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        allocation = status.get("allocation")
        reserved = _consumers(claim)
        if meta.get("deletionTimestamp"):
            state = "deleting"
        elif allocation:
            state = "allocated,reserved" if reserved else "allocated"
        else:
            state = "pending"
        devices = [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in ((allocation or {}).get("devices") or {}).get("results") or []]
        requests = []
        for top in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            body = top.get("exactly") or {}
            if top.get("firstAvailable"):
                requests.append(f"{top.get('name')}: first of {', '.join(s.get('deviceClassName', '') for s in top['firstAvailable'])}")
            elif (body.get("allocationMode") or "ExactCount") == "All":
                requests.append(f"{top.get('name')}: all {body.get('deviceClassName', '')}")
            else:
                requests.append(f"{top.get('name')}: {int(body.get('count') or 1)} x {body.get('deviceClassName', '')}")
        rows.append(ClaimRow(
            meta.get("namespace", ""), meta.get("name", ""), state, devices, reserved, claim_node(claim, pods_by_ref),
            str(meta.get("creationTimestamp") or ""), requests,
        ))  # fmt: skip
    rows.sort(key=lambda r: (r.namespace, r.name))
    return rows


def pending_pods(pods: Iterable[Obj]) -> list[Obj]:
    """Pods the scheduler has not placed yet (not bound, not finished, not being deleted), oldest first."""
    out = [
        p for p in pods
        if not (p.get("spec") or {}).get("nodeName")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]  # fmt: skip
    out.sort(key=lambda p: (str((p.get("metadata") or {}).get("creationTimestamp") or ""), _ref(p)))
    return out


def waits_on_its_node(pod: Obj) -> bool:
    """Whether a pod is bound to a node but not started there (its containers being created)."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase", "Pending") == "Pending" and not (
        pod.get("metadata") or {}
    ).get("deletionTimestamp")


def _event_time(event: Obj) -> str:
    series = event.get("series") or {}
    return str(series.get("lastObservedTime") or event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {}).get("creationTimestamp") or "")


def preparation_failures(pod: Obj, events: Iterable[Obj]) -> list[dict[str, Any]]:
    """The kubelet's reports that it could not prepare the pod's devices (NodePrepareResources
    failed), newest first: reason, message, how often and when last."""
    uid = (pod.get("metadata") or {}).get("uid", "")
    failures = [
        e for e in events
        if e.get("reason") == FAILED_PREPARE_REASON and (e.get("involvedObject") or {}).get("uid") in (uid, None, "")
    ]  # fmt: skip
    failures.sort(key=_event_time, reverse=True)
    return [
        {"type": e.get("type", ""), "reason": e.get("reason", ""), "message": e.get("message", ""),
         "count": int((e.get("series") or {}).get("count") or e.get("count") or 1), "lastTimestamp": _event_time(e)}
        for e in failures
    ]  # fmt: skip


def scheduling_message(pod: Obj) -> tuple[str, str]:
    """(reason, message) of the pod's PodScheduled condition, or why there is none."""
    if (pod.get("spec") or {}).get("schedulingGates"):
        return "SchedulingGated", "waiting for scheduling gates: " + ", ".join(g.get("name", "") for g in pod["spec"]["schedulingGates"])
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
            return str(condition.get("reason") or ""), str(condition.get("message") or "")
    return "", "not tried yet"
