"""Resource lists (``{"requests.cpu": Quantity("2")}``) and the arithmetic quota does on them, with
upstream's rules: sums keep the suffix family of their first non-zero term, a comparison only
looks at names both sides have, and printed lists are sorted by name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kube.quantity import ZERO, Quantity, parse_quantity_or_none

ResourceList = dict[str, Quantity]


def parse_list(raw: Any) -> ResourceList:
    """A ResourceList of the API (name -> quantity string); values that do not parse are left out."""
    if not isinstance(raw, dict):
        return {}
    out: ResourceList = {}
    for name, value in raw.items():
        quantity = parse_quantity_or_none(value)
        if quantity is not None:
            out[str(name)] = quantity
    return out


def to_api(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """The list as the API writes it: canonical quantities, sorted by name."""
    return {name: resources[name].canonical() for name in sorted(resources)}


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """Every name of either list, the amounts of both added."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out[name] + amount if name in out else amount
    return out


def subtract_non_negative(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``a - b`` for every name of either list, no amount below zero."""
    out: ResourceList = {}
    for name, amount in a.items():
        left = amount - b[name] if name in b else amount
        out[name] = left if left.sign > 0 else ZERO
    for name in b:
        out.setdefault(name, ZERO)
    return out


def mask(resources: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    """Only the entries named."""
    wanted = set(names)
    return {name: amount for name, amount in resources.items() if name in wanted}


def less_than_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> tuple[bool, list[str]]:
    """Whether every amount of ``a`` that ``b`` also names is at most ``b``'s, and the names that are not."""
    over = [name for name, limit in b.items() if name in a and a[name] > limit]
    return not over, over


def equals(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    """The same names with equal amounts (spelling aside)."""
    return a.keys() == b.keys() and all(a[name] == b[name] for name in a)


def negative(resources: Mapping[str, Quantity]) -> list[str]:
    return [name for name, amount in resources.items() if amount.sign < 0]


def remove_zeros(resources: Mapping[str, Quantity]) -> ResourceList:
    return {name: amount for name, amount in resources.items() if not amount.is_zero()}


def pretty(resources: Mapping[str, Quantity]) -> str:
    """``a=1,b=2Gi``: how quota's messages print a list."""
    return ",".join(f"{name}={resources[name].canonical()}" for name in sorted(resources))


def pretty_names(names: Iterable[str]) -> str:
    return ",".join(sorted(names))


def object_count_name(group: str, resource: str) -> str:
    """``count/<resource>`` for core, ``count/<resource>.<group>`` otherwise: the name a quota
    limits the number of objects of a resource by."""
    return f"count/{resource}.{group}" if group else f"count/{resource}"
