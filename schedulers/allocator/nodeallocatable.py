"""KEP-5517: what allocated devices charge a pod in node allocatable resources (cpu, memory, ...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, cast

from kube.apitypes import AllocationResult
from kube.dra.pods import claim_status_amounts
from kube.quantity import DECIMAL_SI, Quantity
from schedulers.allocator.claims import from_fraction
from schedulers.allocator.devices import as_quantity
from schedulers.allocator.index import ResourceIndex


def node_allocatable_claim_status(
    claim_name: str,
    claim_allocation: Mapping[str, Any] | None,
    slices: ResourceIndex | Iterable[Mapping[str, Any]],
    containers: Sequence[str],
) -> dict[str, Any] | None:
    """The pod's ``status.nodeAllocatableResourceClaimStatuses`` entry for one allocated claim.

    Per allocated device's ``nodeAllocatableResources``: ``mapping`` gives
    consumedCapacity[capacityKey] (the capacity value for an exclusive device) x capacityMultiplier,
    or deviceMultiplier per device; ``overhead`` gives perPod and perContainer (charged per
    referencing container, see ``kube.dra.pods.claim_status_amounts``). Admin-access results are
    not charged. None when no allocated device declares node allocatable resources.
    """
    allocation = cast("AllocationResult | None", claim_allocation)  # typed from here on (kube/apitypes.pyi)
    if not allocation:
        return None
    lookup = slices.device if isinstance(slices, ResourceIndex) else ResourceIndex(slices).device
    mapping: dict[str, Fraction] = {}
    per_pod: dict[str, Fraction] = {}
    per_container: dict[str, Fraction] = {}
    formats: dict[str, str] = {}
    found = False
    for r in (allocation.get("devices") or {}).get("results") or []:
        if r.get("adminAccess"):
            continue
        dev = lookup((r.get("driver", ""), r.get("pool", ""), r.get("device", "")))
        if dev is None:
            continue
        for resource, spec in (dev.node_allocatable).items():
            found = True
            mapped = spec.get("mapping") or {}
            if mapped.get("capacityKey"):
                key = mapped["capacityKey"]
                consumed = (r.get("consumedCapacity") or {}).get(key)
                base = as_quantity(consumed) if consumed is not None else dev.capacity.get(key)
                if base is not None:
                    amount = base.as_fraction() * as_quantity(mapped.get("capacityMultiplier", "1")).as_fraction()
                    mapping[resource] = mapping.get(resource, Fraction(0)) + amount
                    formats.setdefault(resource, base.format)
            elif mapped.get("deviceMultiplier") is not None:
                multiplier = as_quantity(mapped["deviceMultiplier"])
                mapping[resource] = mapping.get(resource, Fraction(0)) + multiplier.as_fraction()
                formats.setdefault(resource, multiplier.format)
            overhead = spec.get("overhead") or {}
            for key, totals in (("perPod", per_pod), ("perContainer", per_container)):
                if overhead.get(key) is not None:
                    q = as_quantity(overhead[key])
                    totals[resource] = totals.get(resource, Fraction(0)) + q.as_fraction()
                    formats.setdefault(resource, q.format)
    if not found:
        return None

    def text(resource: str, value: Fraction) -> str:
        return from_fraction(value, formats.get(resource, DECIMAL_SI)).canonical()

    entry: dict[str, Any] = {"resourceClaimName": claim_name}
    if containers:
        entry["containers"] = list(containers)
    if mapping:
        entry["mapping"] = [{"name": k, "quantity": text(k, v)} for k, v in sorted(mapping.items())]
    overhead_entries = []
    for resource in sorted(set(per_pod) | set(per_container)):
        item: dict[str, Any] = {"name": resource}
        if resource in per_pod:
            item["perPod"] = text(resource, per_pod[resource])
        if resource in per_container:
            item["perContainer"] = text(resource, per_container[resource])
        overhead_entries.append(item)
    if overhead_entries:
        entry["overhead"] = overhead_entries
    return entry


def node_allocatable_demand(
    claim_allocation: Mapping[str, Any] | None,
    slices: ResourceIndex | Iterable[Mapping[str, Any]],
    containers_referencing: int,
) -> dict[str, Quantity]:
    """Node-allocatable amounts (cpu, memory, ...) a pod is charged for one allocated claim."""
    entry = node_allocatable_claim_status("claim", claim_allocation, slices, [f"c{i}" for i in range(containers_referencing)])
    if entry is None:
        return {}
    return {k: from_fraction(v) for k, v in claim_status_amounts(entry).items()}


def has_node_allocatable_mapping(claim_allocation: Mapping[str, Any] | None, index: ResourceIndex) -> bool:
    """Whether an allocated device maps capacity into node allocatable (such claims are not shared by pods)."""
    entry = node_allocatable_claim_status("claim", claim_allocation, index, [])
    return bool(entry and entry.get("mapping"))
