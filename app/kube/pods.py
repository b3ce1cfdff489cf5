"""Pod facts computed the same way by the server and the workers."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from app.kube.quantity import Quantity, QuantityError, parse_quantity_or_none

Obj = dict[str, Any]
Resources = dict[str, Fraction]


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


def add_resources(total: Resources, more: Mapping[str, Fraction]) -> Resources:
    """``total`` plus ``more``, in place; returns ``total``."""
    for name, amount in more.items():
        total[name] = total.get(name, Fraction(0)) + amount
    return total


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """Effective requests like upstream's PodRequests: max(sum of containers, largest init
    container) + overhead + what the pod's claims charge through node allocatable resources
    (``status.nodeAllocatableResourceClaimStatuses``, written by the scheduler before binding).
    """
    spec = pod.get("spec") or {}
    total: Resources = {}
    for c in spec.get("containers") or []:
        add_resources(total, {name: quantity_fraction(v) for name, v in ((c.get("resources") or {}).get("requests") or {}).items()})
    for c in spec.get("initContainers") or []:
        for name, value in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, Fraction(0)), quantity_fraction(value))
    add_resources(total, {name: quantity_fraction(v) for name, v in (spec.get("overhead") or {}).items()})
    for entry in (pod.get("status") or {}).get("nodeAllocatableResourceClaimStatuses") or []:
        add_resources(total, claim_status_amounts(entry))
    return total
