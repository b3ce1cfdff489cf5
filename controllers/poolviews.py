"""The two summaries a ResourcePoolStatusRequest answer carries for a complete pool, besides its
device counts (upstream's alpha "views" of v1.37):

- ``partitionSummary``: partitionable devices (they consume shared counters) grouped by the value
  of a partition type attribute, the one their own slice names (``partitionTypeAttribute``, gate
  DRAPartitionableDevicesType) or, when no slice of the pool names one, the request's
  ``defaultPartitionTypeAttribute``. Per (attribute, type): how many devices there are, and how
  many more of that type alone would still fit in the counters the allocated devices leave. Taints
  play no part here, as upstream: a tainted device still counts.
- ``shareableSummary``: devices that allow multiple allocations (DRAConsumableCapacity), counted as
  fully available (no claim uses them) or partially available (some claim does), and per capacity
  name the pool's total, what allocations consume and what remains.

A pool whose data cannot be summarised gets a ``validationError`` instead of the summaries (a
device missing its partition type, devices of one type with different costs, a pool naming a
partition attribute but publishing no counters, more than 32 entries); its counts stay valid.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from kube.errors import go_quote
from kube.objects import Obj
from kube.quantity import ZERO, Quantity, parse_quantity_or_none

MAX_SUMMARY_ITEMS = 32
PARTITION_TYPE_MISSING = "PartitionTypeMissing:"
PARTITION_COST_MISMATCH = "PartitionCostMismatch:"
PARTITION_SUMMARY_OVER_CAP = "PartitionSummaryOverCap:"
SHAREABLE_OVER_CAP = "ShareableSummaryOverCap:"

# counter set name -> counter name -> amount
Counters = dict[str, dict[str, Quantity]]
# What one device consumes: (counter set, {counter: amount}) in the order the device lists them.
Cost = list[tuple[str, dict[str, Quantity]]]


def _amounts(counters: object) -> dict[str, Quantity]:
    """``{name: {"value": q}}`` as quantities (entries that are not quantities are left out)."""
    amounts: dict[str, Quantity] = {}
    for name, counter in (counters or {}).items() if isinstance(counters, Mapping) else ():
        value = parse_quantity_or_none(counter.get("value")) if isinstance(counter, Mapping) else None
        if value is not None:
            amounts[str(name)] = value
    return amounts


@dataclass
class DeviceRecord:
    """What the summaries read of one device of the pool."""

    name: str
    # The grouping attribute: its slice's partitionTypeAttribute, or the request's default; "" for none.
    partition_attribute: str
    cost: Cost
    shareable: bool
    capacity: dict[str, Quantity]
    attributes: Mapping[str, Obj]
    # The device's value of partition_attribute, None when it has no string value for it.
    partition_type: str | None = None


def slice_devices(slice_spec: Obj) -> list[DeviceRecord]:
    """The records of one slice's devices, each with the slice's own partition type attribute."""
    attribute = str(slice_spec.get("partitionTypeAttribute") or "")
    records = []
    for device in slice_spec.get("devices") or []:
        cost: Cost = [
            (str(entry.get("counterSet") or ""), _amounts(entry.get("counters")))
            for entry in device.get("consumesCounters") or []
            if isinstance(entry, Mapping)
        ]
        capacity = {str(name): q for name, q in _amounts(device.get("capacity")).items()}
        records.append(
            DeviceRecord(
                name=str(device.get("name") or ""),
                partition_attribute=attribute,
                cost=cost,
                shareable=device.get("allowMultipleAllocations") is True,
                capacity=capacity,
                attributes=device.get("attributes") or {},
            )
        )
    return records


def slice_counters(slice_spec: Obj) -> Counters:
    """The counter sets one slice shares (``sharedCounters``)."""
    return {str(s.get("name") or ""): _amounts(s.get("counters")) for s in slice_spec.get("sharedCounters") or [] if isinstance(s, Mapping)}


def _string_attribute(driver: str, attributes: Mapping[str, Obj], name: str) -> str | None:
    """A device's string value of the fully qualified attribute ``name``. An attribute in the
    driver's own domain may also be written without it; the qualified spelling wins."""
    value = attributes.get(name)
    if value is None and name.startswith(driver + "/"):
        value = attributes.get(name[len(driver) + 1 :])
    text = value.get("string") if isinstance(value, Mapping) else None
    return text if isinstance(text, str) else None


def resolve_partition_types(driver: str, devices: list[DeviceRecord], default_attribute: str | None) -> None:
    """Give each device its grouping attribute and its partition type. The request's default
    applies only to a pool none of whose slices names an attribute (for drivers that do not)."""
    pool_declares = any(d.partition_attribute for d in devices)
    for device in devices:
        if not device.partition_attribute:
            if pool_declares or not default_attribute:
                continue
            device.partition_attribute = default_attribute
        device.partition_type = _string_attribute(driver, device.attributes, device.partition_attribute)


@dataclass
class PoolViews:
    partition_summary: list[Obj] = field(default_factory=list)
    shareable_summary: Obj | None = None
    validation_error: str = ""


def pool_views(driver: str, pool: str, devices: list[DeviceRecord], counters: Counters, in_use: Set[str], consumed: Mapping[str, Quantity]) -> PoolViews:
    """Both summaries of one complete pool whose devices already have their partition types
    (``resolve_partition_types``); ``in_use`` names the devices some claim holds (admin access
    aside) and ``consumed`` sums the capacity those allocations consume."""
    views = PoolViews()
    if any(d.partition_attribute for d in devices):
        if not counters:
            views.validation_error = f"{PARTITION_TYPE_MISSING} pool {driver}/{pool} declares partitionTypeAttribute but publishes no sharedCounters"
        else:
            views.partition_summary, views.validation_error = _partition_summary(driver, pool, devices, counters, in_use)
    shareable, shareable_error = _shareable_summary(driver, pool, devices, in_use, consumed)
    views.validation_error = views.validation_error or shareable_error
    if not shareable_error:
        views.shareable_summary = shareable
    if views.validation_error:
        views.partition_summary = []
    return views


def _cost_key(cost: Cost) -> tuple[str, ...]:
    return tuple(sorted(f"{counter_set}/{name}={amount.canonical()}" for counter_set, amounts in cost for name, amount in amounts.items()))


def _partition_summary(driver: str, pool: str, devices: list[DeviceRecord], counters: Counters, in_use: Set[str]) -> tuple[list[Obj], str]:
    totals: dict[tuple[str, str], int] = {}
    costs: dict[tuple[str, str], tuple[str, ...]] = {}
    free: dict[tuple[str, str], list[DeviceRecord]] = {}
    for device in devices:
        if not device.cost or not device.partition_attribute:
            continue  # not a partition, or no attribute to group it by
        if device.partition_type is None:
            return [], (
                f"{PARTITION_TYPE_MISSING} device {go_quote(device.name)} in pool {driver}/{pool} "
                f"does not carry partition type attribute {go_quote(device.partition_attribute)}"
            )
        group = (device.partition_attribute, device.partition_type)
        key = _cost_key(device.cost)
        if costs.setdefault(group, key) != key:
            return [], f"{PARTITION_COST_MISMATCH} devices of partition type {go_quote(device.partition_type)} in pool {driver}/{pool} consume different counters"
        totals[group] = totals.get(group, 0) + 1
        if device.name not in in_use:
            free.setdefault(group, []).append(device)
    # What the allocated devices leave; each type is measured alone against it.
    left = {name: dict(amounts) for name, amounts in counters.items()}
    for device in devices:
        if device.name in in_use:
            _deduct(device.cost, left)
    summary = []
    for (attribute, partition_type), total in sorted(totals.items()):
        room = {name: dict(amounts) for name, amounts in left.items()}
        allocatable = 0
        for device in free.get((attribute, partition_type), []):
            if _fits(device.cost, room):
                allocatable += 1
                _deduct(device.cost, room)
        summary.append({"attribute": attribute, "type": partition_type, "total": total, "allocatable": allocatable})
    if len(summary) > MAX_SUMMARY_ITEMS:
        return [], f"{PARTITION_SUMMARY_OVER_CAP} pool {driver}/{pool} has {len(summary)} partition types, exceeding the maximum of {MAX_SUMMARY_ITEMS}"
    return summary, ""


def _fits(cost: Cost, room: Counters) -> bool:
    for counter_set, amounts in cost:
        have = room.get(counter_set, {})
        for name, amount in amounts.items():
            if name not in have or have[name] < amount:
                return False
    return True


def _deduct(cost: Cost, room: Counters) -> None:
    for counter_set, amounts in cost:
        have = room.get(counter_set)
        if have is None:
            continue
        for name, amount in amounts.items():
            if name in have:
                have[name] = have[name] - amount


def _shareable_summary(driver: str, pool: str, devices: list[DeviceRecord], in_use: Set[str], consumed: Mapping[str, Quantity]) -> tuple[Obj | None, str]:
    shareable = [d for d in devices if d.shareable]
    if not shareable:
        return None, ""
    partially = sum(1 for d in shareable if d.name in in_use)
    totals: dict[str, Quantity] = {}
    for device in shareable:
        for name, amount in device.capacity.items():
            totals[name] = totals.get(name, ZERO) + amount
    if len(totals) > MAX_SUMMARY_ITEMS:
        return None, f"{SHAREABLE_OVER_CAP} pool {driver}/{pool} has {len(totals)} shareable capacity keys, exceeding the maximum of {MAX_SUMMARY_ITEMS}"
    capacity = []
    for name in sorted(totals):
        total = totals[name]
        used = consumed.get(name, ZERO)
        left = total - used
        capacity.append({"name": name, "total": total.canonical(), "consumed": used.canonical(), "available": (left if left.sign >= 0 else ZERO).canonical()})
    summary: Obj = {"fullyAvailableDevices": len(shareable) - partially, "partiallyAvailableDevices": partially}
    if capacity:
        summary["capacity"] = capacity
    return summary, ""
