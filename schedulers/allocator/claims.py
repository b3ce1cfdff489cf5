"""Claims prepared for a search (requests, subrequests, constraints) and the per-device checks on them:
attribute values, taints, capacity request policies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kube.apitypes import DeviceClass, DeviceToleration, ResourceClaim
from kube.cel import CompiledSelector
from kube.dra.tolerations import tolerations_tolerate
from kube.quantity import DECIMAL_SI, Quantity
from schedulers.allocator.devices import Device, as_quantity

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(eq=False)
class PreparedRequest:
    """A request without subrequests, or one subrequest."""

    name: str  # "req" or "req/sub"
    claim_ref: str
    parent: str  # top-level request name
    sub: str  # subrequest name or ""
    class_name: str
    class_obj: DeviceClass
    class_selectors: list[CompiledSelector]
    selectors: list[CompiledSelector]
    admin: bool
    all_mode: bool
    count: int
    tolerations: list[DeviceToleration]
    capacity: dict[str, Quantity]
    subrequests: list[PreparedRequest] = field(default_factory=list)
    match: dict[Device, bool] = field(default_factory=dict)


@dataclass(eq=False)
class Constraint:
    requests: frozenset[str]
    attribute: str
    distinct: bool
    values: list[Any] = field(default_factory=list)  # one entry per device in scope (LIFO)

    def applies(self, req: PreparedRequest) -> bool:
        return not self.requests or req.parent in self.requests or (bool(req.sub) and req.name in self.requests)

    def admits(self, value: frozenset[Any] | None) -> bool:
        """Whether a device with this attribute value can join the devices taken so far."""
        if value is None:
            return False
        if self.distinct:
            return all(not (value & other) for other in self.values)
        return not self.values or bool(value & self.values[-1])


@dataclass(eq=False)
class PreparedClaim:
    obj: ResourceClaim
    ref: str  # namespace/name
    requests: list[PreparedRequest]
    constraints: list[tuple[frozenset[str], str, bool]]
    has_config: bool = True
    # The fewest results the claim can take; None when an "All" request makes it node dependent.
    fewest: int | None = None


def claim_reference(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")


def attribute_value(device: Device, name: str, lists: bool) -> frozenset[Any] | None:
    """Value of a fully qualified attribute as a set of typed values (scalars: one element)."""
    attr = device.attributes.get(name)
    if attr is None:
        domain, _, short = name.partition("/")
        if domain == device.driver:
            attr = device.attributes.get(short)
    if not isinstance(attr, Mapping):
        return None
    for kind in ("int", "bool", "string", "version"):
        if attr.get(kind) is not None:
            return frozenset({(kind, attr[kind])})
    if lists:
        for kind in ("ints", "bools", "strings", "versions"):
            if attr.get(kind):
                return frozenset((kind[:-1], v) for v in attr[kind])
    return None


def untolerated(device: Device, req: PreparedRequest) -> bool:
    return any(t.get("effect") in _BLOCKING_EFFECTS and not tolerations_tolerate(req.tolerations, t) for t in device.taints)


def round_to_policy(requested: Quantity, policy: Mapping[str, Any]) -> Quantity | None:
    """Apply a requestPolicy to a requested amount; None if the device cannot serve it."""
    valid_range = policy.get("validRange")
    if valid_range:
        low = as_quantity(valid_range.get("min", "0"))
        value = max(requested, low)
        if valid_range.get("step"):
            step = as_quantity(valid_range["step"]).as_fraction()
            if step > 0:
                steps = -(-(value.as_fraction() - low.as_fraction()) // step)
                value = from_fraction(low.as_fraction() + steps * step, requested.format)
        if valid_range.get("max") is not None and value > as_quantity(valid_range["max"]):
            return None
        return value
    valid_values = policy.get("validValues")
    if valid_values:
        for v in sorted((as_quantity(x) for x in valid_values), key=lambda q: q.as_fraction()):
            if v >= requested:
                return v
        return None
    return requested


def from_fraction(value: Fraction, fmt: str = DECIMAL_SI) -> Quantity:
    """An exact Quantity for a decimal fraction, rounded up at nano precision otherwise."""
    scale = 0
    while value.denominator != 1 and scale < 9:
        value *= 10
        scale += 1
    whole = -(-value.numerator // value.denominator)
    return Quantity.from_scaled(whole, -scale).with_format(fmt)


def share_consumption(device: Device, req: PreparedRequest) -> dict[str, Quantity] | None:
    """Capacity a shared device gives to ``req`` (all capacities), or None if it cannot."""
    if any(k not in device.capacity for k in req.capacity):
        return None
    out: dict[str, Quantity] = {}
    for key, total in device.capacity.items():
        policy = device.policies.get(key) or {}
        if key in req.capacity:
            amount = round_to_policy(req.capacity[key], policy)
            if amount is None:
                return None
        elif policy.get("default") is not None:
            amount = as_quantity(policy["default"])
        else:
            amount = total
        out[key] = amount
    return out


class NotAdmin(Exception):
    """Admin access in a namespace without the admin-access label (unschedulable)."""
