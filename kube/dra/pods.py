"""Pod facts computed the same way by the server and the workers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, TypeVar

from kube.objects import Obj
from kube.quantity import BINARY_SI, ZERO, Quantity, QuantityError, parse_quantity_or_none
from kube.timeutil import parse_time

Resources = dict[str, Fraction]
# The two number types resource amounts are added up in: exact fractions (what fits where), and
# quantities (what quota records, in upstream's spelling).
Amount = TypeVar("Amount", Fraction, Quantity)

# Resources pods may request as a whole (spec.resources, PodLevelResources), besides hugepages-*.
POD_LEVEL_RESOURCES = ("cpu", "memory")
HUGEPAGES_PREFIX = "hugepages-"


def _quantity_equal(a: Any, b: Any) -> bool:
    qa, qb = parse_quantity_or_none(a), parse_quantity_or_none(b)
    return qa is not None and qb is not None and qa == qb


def qos_class(pod: Obj) -> str:
    """Guaranteed, Burstable or BestEffort, from cpu/memory requests and limits (upstream's GetPodQOS)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return "BestEffort"
    containers = [c for key in ("initContainers", "containers") if isinstance(spec.get(key), list) for c in spec[key] if isinstance(c, dict)]
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources")
        resources = resources if isinstance(resources, dict) else {}
        raw_requests = resources.get("requests")
        raw_limits = resources.get("limits")
        requests = {k: v for k, v in raw_requests.items() if k in ("cpu", "memory")} if isinstance(raw_requests, dict) else {}
        limits = {k: v for k, v in raw_limits.items() if k in ("cpu", "memory")} if isinstance(raw_limits, dict) else {}
        if requests or limits:
            any_set = True
        if set(limits) != {"cpu", "memory"}:
            guaranteed = False
        for name, value in requests.items():
            if name not in limits or not _quantity_equal(value, limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_priority(pod: Mapping[str, Any]) -> int:
    """``spec.priority``, 0 when unset (upstream's PodPriority)."""
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def quantity_fraction(value: Any) -> Fraction:
    """A quantity as an exact fraction; malformed or missing values count as 0."""
    try:
        return Quantity.parse(value).as_fraction()
    except (QuantityError, ValueError, TypeError):
        return Fraction(0)


def claim_status_amounts(entry: Mapping[str, Any]) -> Resources:
    """What one ``status.nodeAllocatableResourceClaimStatuses`` entry charges the pod (KEP-5517).

    Mapped amounts count once; overhead is perPod + perContainer x the containers that reference
    the claim.
    """
    containers = len(entry.get("containers") or [])
    total: Resources = {}
    for mapped in entry.get("mapping") or []:
        name = mapped.get("name", "")
        total[name] = total.get(name, Fraction(0)) + quantity_fraction(mapped.get("quantity"))
    for overhead in entry.get("overhead") or []:
        name = overhead.get("name", "")
        amount = quantity_fraction(overhead.get("perPod")) + quantity_fraction(overhead.get("perContainer")) * containers
        total[name] = total.get(name, Fraction(0)) + amount
    return total


def add_resources(total: dict[str, Amount], more: Mapping[str, Amount]) -> dict[str, Amount]:
    """``total`` plus ``more``, in place; returns ``total``."""
    for name, amount in more.items():
        total[name] = total[name] + amount if name in total else amount
    return total


def _max_resources(total: dict[str, Amount], other: Mapping[str, Amount]) -> None:
    for name, amount in other.items():
        if name not in total or amount > total[name]:
            total[name] = amount


def quantity_or_zero(value: Any) -> Quantity:
    """A quantity as written; malformed or missing values count as 0."""
    return parse_quantity_or_none(value) or ZERO


def _resource_list(raw: Any, parse: Callable[[Any], Amount]) -> dict[str, Amount]:
    return {name: parse(value) for name, value in raw.items()} if isinstance(raw, dict) else {}


def _pod_level_resource(name: str) -> bool:
    """cpu, memory and hugepages-* may be set for the whole pod (PodLevelResources)."""
    return name in POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def pod_level_resources(pod: Mapping[str, Any], kind: str) -> Resources:
    """``spec.resources.<kind>`` (requests or limits), only the resources pod-level resources support."""
    return _pod_level(pod, kind, quantity_fraction)


def _pod_level(pod: Mapping[str, Any], kind: str, parse: Callable[[Any], Amount]) -> dict[str, Amount]:
    raw = ((pod.get("spec") or {}).get("resources") or {}).get(kind) or {}
    return {name: value for name, value in _resource_list(raw, parse).items() if _pod_level_resource(name)}


def _all_containers(spec: Mapping[str, Any]) -> list[Obj]:
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or [] if isinstance(c, dict)]


def _claim_statuses(pod: Mapping[str, Any]) -> list[Obj]:
    return [e for e in (pod.get("status") or {}).get("nodeAllocatableResourceClaimStatuses") or [] if isinstance(e, dict)]


def _dra_amounts(pod: Mapping[str, Any]) -> tuple[Resources, dict[str, Resources]]:
    """What the pod's claims charge (KEP-5517), split as upstream's PodRequests uses it.

    The first part is charged for the pod's whole life: mapped amounts and perPod overhead (once
    per claim however many containers use it), plus perContainer overhead of references to
    containers the spec does not have. The second maps a container name to the perContainer
    overhead it pays, which counts like that container's own requests (so an ordinary init
    container's share only counts while it runs).
    """
    fixed: Resources = {}
    per_container: dict[str, Resources] = {}
    names = [c.get("name", "") for c in _all_containers(pod.get("spec") or {})]
    for entry in _claim_statuses(pod):
        for mapped in entry.get("mapping") or []:
            add_resources(fixed, {mapped.get("name", ""): quantity_fraction(mapped.get("quantity"))})
        refs = set(entry.get("containers") or [])
        known = [n for n in names if n in refs]
        for overhead in entry.get("overhead") or []:
            name = overhead.get("name", "")
            if overhead.get("perPod") is not None:
                add_resources(fixed, {name: quantity_fraction(overhead["perPod"])})
            if overhead.get("perContainer") is not None:
                amount = quantity_fraction(overhead["perContainer"])
                for container in known:
                    add_resources(per_container.setdefault(container, {}), {name: amount})
                if len(refs) > len(known):
                    add_resources(fixed, {name: amount * (len(refs) - len(known))})
    return fixed, per_container


def _aggregate(spec: Mapping[str, Any], kind: str, per_container: Mapping[str, Mapping[str, Amount]], parse: Callable[[Any], Amount]) -> dict[str, Amount]:
    """Containers summed, at least the peak of the init containers (KEP-753 sidecar rules): a
    restartable init container (``restartPolicy: Always``) runs beside everything after it, so it
    counts in the sum and on top of every later init container; an ordinary one runs alone."""
    total: dict[str, Amount] = {}
    for c in spec.get("containers") or []:
        add_resources(total, _resource_list((c.get("resources") or {}).get(kind), parse))
        add_resources(total, per_container.get(c.get("name", ""), {}))
    sidecars: dict[str, Amount] = {}
    init_peak: dict[str, Amount] = {}
    for c in spec.get("initContainers") or []:
        own = add_resources(_resource_list((c.get("resources") or {}).get(kind), parse), per_container.get(c.get("name", ""), {}))
        if c.get("restartPolicy") == "Always":
            add_resources(total, own)
            add_resources(sidecars, own)
            _max_resources(init_peak, sidecars)
        else:
            _max_resources(init_peak, add_resources(own, sidecars))
    _max_resources(total, init_peak)
    return total


def pod_requests(pod: Mapping[str, Any], *, node_allocatable: bool = True, overhead: bool = True) -> Resources:
    """A pod's effective requests, the way upstream's PodRequests computes them.

    The containers' requests summed, at least the largest init container (sidecar rules above),
    plus what the pod's claims charge through node allocatable resources
    (``status.nodeAllocatableResourceClaimStatuses``, written by the scheduler before binding;
    ``node_allocatable=False`` leaves them out, as components with DRANodeAllocatableResources
    off do). Pod-level requests (``spec.resources``) replace all that for the resources they name.
    Finally the pod overhead (``spec.overhead``) unless ``overhead=False``.
    """
    fixed, per_container = _dra_amounts(pod) if node_allocatable else ({}, {})
    return _requests(pod, fixed, per_container, overhead, quantity_fraction)


def pod_limits(pod: Mapping[str, Any], *, node_allocatable: bool = True, overhead: bool = True) -> Resources:
    """A pod's effective limits (upstream's PodLimits), with what its claims charge added only to
    resources some container declares a limit for (no limit means unlimited; hugepages always
    count). Pod-level limits replace the result for the resources they name; the pod overhead is
    added to the limits that are set."""
    fixed, per_container = _dra_amounts(pod) if node_allocatable else ({}, {})
    return _limits(pod, fixed, per_container, overhead, quantity_fraction)


def pod_request_quantities(pod: Mapping[str, Any]) -> dict[str, Quantity]:
    """``pod_requests`` as resource quota charges them (no node allocatable amounts, the overhead
    included), each a Quantity added up as upstream adds them, so that a sum keeps the suffix
    family of what it sums (``2Gi``, ``1500m``, ``3G``)."""
    return _requests(pod, {}, {}, True, quantity_or_zero)


def pod_limit_quantities(pod: Mapping[str, Any]) -> dict[str, Quantity]:
    """``pod_limits`` as resource quota charges them (see ``pod_request_quantities``)."""
    return _limits(pod, {}, {}, True, quantity_or_zero)


def _requests(
    pod: Mapping[str, Any], fixed: Mapping[str, Amount], per_container: Mapping[str, Mapping[str, Amount]], overhead: bool, parse: Callable[[Any], Amount]
) -> dict[str, Amount]:  # fmt: skip
    spec = pod.get("spec") or {}
    total = add_resources(_aggregate(spec, "requests", per_container, parse), fixed)
    total.update(_pod_level(pod, "requests", parse))
    if overhead:
        add_resources(total, _resource_list(spec.get("overhead"), parse))
    return total


def _limits(
    pod: Mapping[str, Any], fixed: Mapping[str, Amount], per_container: Mapping[str, Mapping[str, Amount]], overhead: bool, parse: Callable[[Any], Amount]
) -> dict[str, Amount]:  # fmt: skip
    spec = pod.get("spec") or {}
    declared = {name for c in _all_containers(spec) for name in (c.get("resources") or {}).get("limits") or {}}

    def limited(amounts: Mapping[str, Amount]) -> dict[str, Amount]:
        return {k: v for k, v in amounts.items() if k in declared or k.startswith(HUGEPAGES_PREFIX)}

    total = add_resources(_aggregate(spec, "limits", {k: limited(v) for k, v in per_container.items()}, parse), limited(fixed))
    if _pod_level(pod, "requests", parse) or _pod_level(pod, "limits", parse):
        total.update(_pod_level(pod, "limits", parse))
    if overhead:
        for name, amount in _resource_list(spec.get("overhead"), parse).items():
            if total.get(name):
                total[name] = total[name] + amount
    return total


def container_claim_amounts(pod: Mapping[str, Any], container: str) -> Resources:
    """Everything the claims a container references charge (mapped + perPod + its perContainer
    overhead): what the kubelet adds to that container's limits (KEP-5517 cgroup enforcement)."""
    total: Resources = {}
    for entry in _claim_statuses(pod):
        if container not in (entry.get("containers") or []):
            continue
        for mapped in entry.get("mapping") or []:
            add_resources(total, {mapped.get("name", ""): quantity_fraction(mapped.get("quantity"))})
        for overhead in entry.get("overhead") or []:
            amount = quantity_fraction(overhead.get("perPod")) + quantity_fraction(overhead.get("perContainer"))
            add_resources(total, {overhead.get("name", ""): amount})
    return total


def resource_list(amounts: Mapping[str, Fraction]) -> dict[str, str]:
    """Amounts as an API ResourceList: cpu in DecimalSI (``1500m``), whole byte counts in BinarySI (``1536Mi``)."""
    out: dict[str, str] = {}
    for name, amount in sorted(amounts.items()):
        scale = 0
        value = amount
        while value.denominator != 1 and scale < 9:
            value *= 10
            scale += 1
        quantity = Quantity.from_scaled(-(-value.numerator // value.denominator), -scale)
        if name != "cpu" and amount.denominator == 1:
            quantity = quantity.with_format(BINARY_SI)
        out[name] = quantity.canonical()
    return out


# ---- pod state (what controllers count: upstream's pkg/api/v1/pod and controller_utils) -----------

TERMINAL_PHASES = ("Succeeded", "Failed")


def pod_condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The pod's status condition of type ``kind``, if it has one."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's Ready condition is True (IsPodReady)."""
    condition = pod_condition(pod, "Ready")
    return condition is not None and condition.get("status") == "True"


def ready_since(pod: Mapping[str, Any]) -> str:
    """When a ready pod became ready (its Ready condition's lastTransitionTime; "" when not ready or unknown)."""
    condition = pod_condition(pod, "Ready")
    if condition is None or condition.get("status") != "True":
        return ""
    return str(condition.get("lastTransitionTime") or "")


def is_pod_available(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> bool:
    """IsPodAvailable: ready for at least ``min_ready_seconds`` at ``now`` (a Unix time)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = _unix(ready_since(pod))
    return since is not None and since + min_ready_seconds <= now


def seconds_until_available(pod: Mapping[str, Any], min_ready_seconds: int, now: float) -> float | None:
    """How long until a ready pod counts as available (None when it is not ready, or already is)."""
    if min_ready_seconds <= 0 or not is_pod_ready(pod):
        return None
    since = _unix(ready_since(pod))
    if since is None:
        return None
    left = since + min_ready_seconds - now
    return left if left > 0 else None


def is_pod_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_pod_active(pod: Mapping[str, Any]) -> bool:
    """Not finished and not being deleted (IsPodActive)."""
    return not is_pod_terminal(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


def is_pod_terminating(pod: Mapping[str, Any]) -> bool:
    """Being deleted but not finished (IsPodTerminating)."""
    return not is_pod_terminal(pod) and bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _unix(timestamp: str) -> float | None:
    parsed = parse_time(timestamp) if timestamp else None
    return parsed.timestamp() if parsed is not None else None


def merge_label_keys(selector: Mapping[str, Any] | None, labels: Mapping[str, str], match: Sequence[str], mismatch: Sequence[str]) -> Mapping[str, Any] | None:
    """A pod affinity term's ``labelSelector`` with ``key In (value)`` for each of
    ``matchLabelKeys`` and ``key NotIn (value)`` for each of ``mismatchLabelKeys`` that the pod
    has a label for (KEP-3633). A missing selector selects nothing and stays missing."""
    if not isinstance(selector, Mapping) or (not match and not mismatch):
        return selector
    extra = [
        {"key": key, "operator": operator, "values": [labels[key]]}
        for keys, operator in ((match, "In"), (mismatch, "NotIn"))
        for key in keys
        if isinstance(key, str) and key in labels
    ]
    if not extra:
        return selector
    expressions = selector.get("matchExpressions")
    return {**selector, "matchExpressions": [*(expressions if isinstance(expressions, list) else []), *extra]}


def _spec_field_and_labels(pod: Obj, field: str) -> tuple[Any, dict[str, str]]:
    """``spec.<field>`` of a pod as sent (anything, or None) and its labels ({} when malformed)."""
    spec = pod.get("spec")
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return (spec.get(field) if isinstance(spec, dict) else None), (labels if isinstance(labels, dict) else {})


def merge_topology_spread_label_keys(pod: Obj) -> None:
    """What kube-apiserver does to a pod it creates when MatchLabelKeysInPodTopologySpread and its
    SelectorMerge are on: each spread constraint's ``matchLabelKeys`` become ``key In (value)``
    requirements of its ``labelSelector`` with the pod's label values; the key list stays, and a
    constraint without a selector (which selects nothing) is left alone."""
    constraints, labels = _spec_field_and_labels(pod, "topologySpreadConstraints")
    if not isinstance(constraints, list):
        return
    for constraint in constraints:
        if not isinstance(constraint, dict):
            continue
        match = constraint.get("matchLabelKeys") or []
        if isinstance(constraint.get("labelSelector"), dict) and isinstance(match, list):
            constraint["labelSelector"] = merge_label_keys(constraint["labelSelector"], labels, match, [])


def merge_pod_affinity_label_keys(pod: Obj) -> None:
    """What kube-apiserver does to a pod it creates (MatchLabelKeysInPodAffinity, GA): every pod
    affinity and anti-affinity term, required and preferred, gets its ``matchLabelKeys`` and
    ``mismatchLabelKeys`` merged into its ``labelSelector`` with the pod's label values; the key
    lists stay. Malformed parts are left for validation."""
    affinity, labels = _spec_field_and_labels(pod, "affinity")
    if not isinstance(affinity, dict):
        return
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind)
        if not isinstance(terms, dict):
            continue
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution")
        preferred = terms.get("preferredDuringSchedulingIgnoredDuringExecution")
        found = [t for t in required if isinstance(t, dict)] if isinstance(required, list) else []
        if isinstance(preferred, list):
            found += [w["podAffinityTerm"] for w in preferred if isinstance(w, dict) and isinstance(w.get("podAffinityTerm"), dict)]
        for term in found:
            match, mismatch = term.get("matchLabelKeys") or [], term.get("mismatchLabelKeys") or []
            if isinstance(term.get("labelSelector"), dict) and isinstance(match, list) and isinstance(mismatch, list):
                term["labelSelector"] = merge_label_keys(term["labelSelector"], labels, match, mismatch)
